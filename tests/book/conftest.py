"""The book layer's tests, in folders that mirror ``gtalib/book/`` (design, analysis, chapters,
pipeline); ``synthetic`` (a run store with known metrics) is importable from each of them."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
