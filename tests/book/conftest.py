"""The book layer's tests, in folders that mirror ``gtalib/book/`` (design, analysis, chapters,
pipeline); ``synthetic`` (a run store with known metrics) is importable from each of them, and
:func:`built`, the ci book built once per session from a copy of the checkout, serves every
test that reads it."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from store_guard import session_folder

sys.path.insert(0, str(Path(__file__).parent))

REPO = Path(__file__).resolve().parents[2]


def copy_checkout(dst: Path) -> Path:
    """What a clone of this checkout would hold once its changes are committed, copied to
    ``dst``: the files git tracks or would track (no run store, no corpus, no virtual
    environment, no built book)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=REPO, capture_output=True, text=True, check=True).stdout
    for name in filter(None, files.split("\0")):
        if (REPO / name).is_file():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dst / name)
    return dst


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """The ci book as a reader builds it from a fresh clone: ``gtalib book --preset ci --seeds
    2 --jobs 2`` run from a copy of this checkout (:func:`copy_checkout`) with the copy's
    gtalib first on the path, into the copy's own run store (``runs/``, so that the summary
    counts the ci runs the job trained itself), every notebook executed from the copy.
    Returns ``(the copy's book folder, the job's summary)``: its executed notebooks are under
    ``generated/``, its HTML under ``_build/html``, its runs in ``../runs``. Built once per
    session, by the first pytest-xdist worker that asks (``store_guard.session_folder``; the
    other waits for it). Slow: only tests marked ``slow`` ask for it."""
    from gtalib.book.pipeline.job import ensure_mathjax

    with session_folder(tmp_path_factory, "ci_book") as root:
        clone = root / "clone"
        made = clone / "book" / "generated" / "build_summary.json"
        if not made.exists():
            shutil.rmtree(clone, ignore_errors=True)  # a build that failed on the other worker
            copy_checkout(clone)
            # MathJax from npm once, into this checkout's cache, which the clone shares
            ensure_mathjax(book_dir=clone / "book", log=lambda line: None)
            (clone / ".cache").symlink_to(REPO / ".cache", target_is_directory=True)
            env = {**os.environ, "PYTHONPATH": str(clone), "GTALIB_RUN_DIR": str(clone / "runs")}
            where = subprocess.run([sys.executable, "-c", "import gtalib; print(gtalib.__file__)"],
                                   cwd=clone, env=env, capture_output=True, text=True, check=True)
            assert Path(where.stdout.strip()).is_relative_to(clone), where.stdout
            r = subprocess.run([sys.executable, "-m", "gtalib", "book", "--preset", "ci", "--seeds",
                                "2", "--jobs", "2", "--threads", "1"],
                               cwd=clone, env=env, capture_output=True, text=True)
            (root / "build.log").write_text(r.stdout + r.stderr)
            if r.returncode != 0:
                made.unlink(missing_ok=True)  # written before the job's last checks
                pytest.fail(f"the ci book's build failed (exit {r.returncode}):\n"
                            + (r.stdout + r.stderr)[-4000:])
        return clone / "book", json.loads(made.read_text())
