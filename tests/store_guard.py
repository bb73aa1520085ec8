"""Helpers of the session guard in tests/conftest.py: snapshots of a folder tree, their
differences, and read-only sharing of the user's built data."""

import os
from pathlib import Path

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
