"""``python -m gtalib ...`` = the ``gtalib`` console script (an entry point: the cli layer)."""

import sys

from gtalib.cli import main

if __name__ == "__main__":
    sys.exit(main())
