"""Shared test setup: single-threaded torch, Triton's CPU interpreter when there is no GPU, and a
private run store and data cache for the whole session.

``TRITON_INTERPRET`` must be set before any module decorates a function with ``@triton.jit``, so it
is set here at import time (pytest imports conftest before collecting test modules). Importing
torch does not import triton.

Tests never touch the user's data: :func:`_private_stores` points ``$GTALIB_RUN_DIR`` and
``$GTALIB_DATA_DIR`` at temporary folders before any test runs (subprocesses inherit them), shares
the user's built corpora, archives and tokenizer files read-only (symlinks, so tests do not
download or rebuild them), and at the end of the session fails if anything in the user's run store
or data cache was added, removed or modified.
"""

import os
from pathlib import Path

import pytest
import torch

from gtalib.data.archives import ENV_DATA_DIR, default_data_dir
from gtalib.runs import ENV_RUN_DIR, default_run_dir

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
torch.set_num_threads(1)

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


@pytest.fixture(scope="session", autouse=True)
def _private_stores(tmp_path_factory):
    user_runs, user_data = default_run_dir().resolve(), default_data_dir()
    before = {user_runs: snapshot(user_runs), user_data: snapshot(user_data)}
    root = tmp_path_factory.mktemp("stores")
    saved = {k: os.environ.get(k) for k in (ENV_RUN_DIR, ENV_DATA_DIR)}
    os.environ[ENV_RUN_DIR] = str(root / "runs")
    os.environ[ENV_DATA_DIR] = str(root / "data_cache")
    share_read_only(user_data, root / "data_cache")
    yield root
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    touched = {str(p): changes(b, snapshot(p)) for p, b in before.items()}
    touched = {p: c for p, c in touched.items() if c}
    assert not touched, f"the tests changed the user's data: {touched}"
