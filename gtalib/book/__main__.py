"""``python -m gtalib.book ...`` = ``gtalib book ...`` (an entry point: the cli layer)."""

import sys

from gtalib.cli import main

sys.exit(main(["book", *sys.argv[1:]]))
