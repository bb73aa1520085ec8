"""``python -m gtalib.book ...``: the main job (same options as ``gtalib book``)."""

import sys

from gtalib.book.job import main

sys.exit(main())
