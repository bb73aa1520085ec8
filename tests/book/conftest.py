"""The book layer's tests, in folders that mirror ``gtalib/book/`` (design, analysis, chapters,
pipeline); ``synthetic`` (a run store with known metrics) is importable from each of them, and
:func:`built`, the ci book built once per session, serves every test that reads it."""

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """The ci book built into a temporary copy of book/ (the user's book is left alone):
    ``(book folder, the job's summary)``; its executed notebooks are under ``generated/``, its
    HTML under ``_build/html``. Slow (the ci runs are trained into the session's private run
    store, tests/conftest.py): only tests marked ``slow`` ask for it."""
    from gtalib.book.pipeline import job as book

    dst = tmp_path_factory.mktemp("book") / "book"
    shutil.copytree(REPO / "book", dst, ignore=shutil.ignore_patterns("_build", "generated"))
    summary = book.build_book("ci", seeds=2, jobs=2, threads=1, book_dir=dst, log=print)
    return dst, summary
