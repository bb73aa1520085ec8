"""Helpers of the session guard in tests/conftest.py: snapshots of a folder tree, their
differences, read-only sharing of the user's built data, the default corpus the tests need, and
the session's folders that every pytest-xdist worker shares."""

import contextlib
import os
import warnings
from pathlib import Path

from filelock import FileLock

#: Sub-folders of a data cache whose entries the tests may read but never write.
SHARED_DATA = ("corpora", "archives", "tokenizers")


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """``relative path -> (size, mtime_ns)`` of every file and folder under ``root`` (symlinks not
    followed); empty when ``root`` does not exist."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def changes(before: dict, after: dict) -> list[str]:
    """Paths added, removed or modified between two :func:`snapshot` results."""
    return ([f"added {p}" for p in sorted(after.keys() - before.keys())]
            + [f"removed {p}" for p in sorted(before.keys() - after.keys())]
            + [f"modified {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]])


def share_read_only(user: Path, private: Path) -> None:
    """Symlink each entry of the user's ``corpora/``, ``archives/`` and ``tokenizers/`` into the
    private cache; new files (a download, a corpus built by a test) land in the private cache."""
    for sub in SHARED_DATA:
        (private / sub).mkdir(parents=True, exist_ok=True)
        if (user / sub).is_dir():
            for entry in (user / sub).iterdir():
                if not entry.name.startswith("."):
                    (private / sub / entry.name).symlink_to(entry.resolve())


def ensure_default_corpus(data_dir: Path) -> None:
    """Build the default byte corpus into the private cache ``data_dir`` unless the user's is
    shared there (a symlink, even a broken one, is never built through). A failed build (offline
    on a fresh clone) is a warning: the tests that train then fail, saying the corpus is missing."""
    from gtalib.data.build import build_default, corpus_dir

    if os.path.lexists(corpus_dir("default", "bytes", data_dir)):
        return
    try:
        build_default("bytes", data_dir, log=None)
    except Exception as exc:  # noqa: BLE001 - reported; only the tests that need it fail
        warnings.warn(f"could not build the default byte corpus for the tests: "
                      f"{type(exc).__name__}: {exc}")


@contextlib.contextmanager
def session_folder(tmp_path_factory, name: str):
    """``name``, a folder of this test session that every pytest-xdist worker sees (the workers'
    base temporary folders share one parent; without xdist, the session's own), yielded while
    this process holds its lock: the first worker to enter makes what the folder holds and the
    others, waiting, find it made (``scripts/test.sh`` runs two workers, and each worker
    training the same ``ci`` runs or building the same book doubled their cost)."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    with FileLock(f"{root}.lock"):
        root.mkdir(exist_ok=True)
        yield root
