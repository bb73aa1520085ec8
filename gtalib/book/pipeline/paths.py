"""Where the book lives and how a step of its build fails: the repository, the Jupyter Book
source folder (``book/``), the notebooks folder (``notebooks/``) and :class:`BookError`, shared by
every step of the main job (:mod:`gtalib.book.pipeline.job`, :mod:`gtalib.book.pipeline.execute`,
:mod:`gtalib.book.pipeline.snippets`). Reads nothing of the package.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BOOK_DIR = REPO / "book"
NOTEBOOK_DIR = REPO / "notebooks"


class BookError(RuntimeError):
    """A step of the book build failed (message says which and where to look)."""
