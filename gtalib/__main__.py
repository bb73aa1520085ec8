"""``python -m gtalib ...`` = the ``gtalib`` console script."""

import sys

from gtalib.cli import main

if __name__ == "__main__":
    sys.exit(main())
