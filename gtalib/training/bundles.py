"""A finished run as files in memory, to hand it from a machine that trained it to one whose run
store it belongs in (a cluster worker that cannot see the reader's run store; ``gtalib book
--cluster``).

:func:`export_run` reads a finished run's result files (``spec.json``, ``metrics.csv``,
``card.json``, ``probes.json`` when present, ``DONE``; no checkpoint, no logs) as bytes;
:func:`import_run` writes them into a run store atomically (a temporary folder beside the run's,
then one rename) and checks them as the store checks any run (folder name = spec hash, every
metrics cell of its type, through :func:`gtalib.training.runs.load_metrics`), so a bundle that
does not check out is never read as done.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from gtalib.training.runs import RunCorruptError, is_done, load_metrics, load_spec

#: The files of a finished run that make its result; the rest (checkpoints, logs) stays behind.
RESULT_FILES = ("spec.json", "metrics.csv", "card.json", "DONE")
OPTIONAL_FILES = ("probes.json",)


def export_run(path) -> dict[str, bytes]:
    """The result files of the finished run folder ``path``: file name → bytes.

    Raises:
        RunIncompleteError: ``path`` has no ``DONE``; RunCorruptError: its files do not check
            out (:func:`gtalib.training.runs.load_metrics`).
    """
    path = Path(path)
    load_metrics(path)  # no DONE, or corrupt: raises before anything is handed on
    files = {n: (path / n).read_bytes() for n in RESULT_FILES}
    files.update({n: (path / n).read_bytes() for n in OPTIONAL_FILES if (path / n).is_file()})
    return files


def import_run(files: dict[str, bytes], run_dir) -> Path:
    """Write an exported run into the store ``run_dir`` and return its folder.

    The run id is read from the bundle's own ``spec.json`` (the hash of the spec), written into
    ``run_dir/.<run_id>.import-<pid>/`` and renamed into place in one step, then read back
    checked. A run the store already has finished is left as it is (the same spec gives the
    same run; the local one wins).

    Raises:
        ValueError: the bundle lacks a result file, or names a file outside them.
        RunCorruptError: the files do not check out (nothing is left in the store).
    """
    missing = [n for n in RESULT_FILES if n not in files]
    extra = sorted(set(files) - set(RESULT_FILES) - set(OPTIONAL_FILES))
    if missing or extra:
        raise ValueError(f"a run bundle holds {', '.join(RESULT_FILES)} (and optionally "
                         f"{', '.join(OPTIONAL_FILES)}); missing {missing}, unexpected {extra}")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = run_dir / f".import-{os.getpid()}-{id(files):x}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        run_id = load_spec(tmp).run_id
        dest = run_dir / run_id
        if is_done(dest):
            return dest
        shutil.rmtree(dest, ignore_errors=True)  # an unfinished local attempt: the bundle wins
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    try:
        load_metrics(dest)
    except RunCorruptError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return dest
