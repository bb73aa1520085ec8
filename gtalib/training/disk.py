"""The run store's disk: how a file of the store is written, what a full disk turns into, and
how much space a run needs.

* :func:`write_file` writes every file of the store, checkpoints included
  (:class:`gtalib.training.loop.AtomicCheckpointIO`): a temporary file in the same folder,
  flushed to the disk, then ``os.replace`` (atomic on POSIX). A write that fails (a full disk)
  or is killed half-way leaves the previous file whole; the half-written temporary file is
  removed by the failed write, or, after a kill, by the next training of the run
  (:func:`remove_temporary_files`).
* A full disk (``OSError`` ``ENOSPC`` or ``EDQUOT`` anywhere in an exception's chain,
  :func:`disk_full`) becomes :class:`StoreFullError`, whose one line names the store and the
  space left on its file system; ``gtalib train`` and ``gtalib book`` end with it (exit 2).
* :func:`run_bytes` predicts what a run takes in the store: its result files (measured from
  its recorded bundles when there are any) and, while it trains, its checkpoint and the
  checkpoint's temporary copy (from the model's size). ``gtalib book`` and ``gtalib train``
  refuse to start when the store's file system has less free (:func:`check_space`).

Imports nothing of gtalib but the model layer's parameter count.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

#: ``errno`` values of a full file system: no space left, disk quota exceeded.
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)

#: Bytes handed to one ``os.write`` call (a checkpoint of the ``paper`` preset is ~35 GB).
WRITE_CHUNK = 1 << 24

#: A row of ``metrics.csv`` (step, tokens, train loss, LR, the evaluations), in bytes, with
#: margin: 70 bytes measured at ``ci`` (1,414 bytes for 20 steps) and 60 at ``cpu`` (14,934 for
#: 250). A run keeps two copies: ``metrics.csv`` and Lightning's ``logs/version_<n>/metrics.csv``.
METRICS_ROW_BYTES = 80
#: ``spec.json``, ``card.json``, ``probes.json`` and ``DONE`` of a run (6.5 kB measured), with
#: margin.
RUN_FILES_BYTES = 8192
#: A checkpoint's bytes besides the tensors (Lightning's loop state, the metrics history):
#: 28 kB measured at ``ci`` (5,172,208 bytes for 428,672 parameters), with margin.
CHECKPOINT_EXTRA_BYTES = 65536


class StoreFullError(RuntimeError):
    """The file system of a run store (or of another folder the job writes) is full.

    Attributes:
        store: the folder that could not be written (the run store; a worker's scratch store).
        free: bytes free on its file system when the error was raised (default: measured now).
        run_id, kept: the run that stopped and what it kept ("its checkpoint of step 10 is
            kept"), when a run stopped.
    """

    def __init__(self, store, message: str = "", lead: str = "no space left in",
                 free: int | None = None, run_id: str | None = None, kept: str | None = None):
        self.store = Path(store)
        self.free = free_bytes(self.store) if free is None else free
        self.run_id, self.kept = run_id, kept
        super().__init__(f"{lead} the run store {self.store} ({format_bytes(self.free)} "
                         f"free on its file system){': ' + message if message else ''}")


def disk_full(exc: BaseException | None) -> OSError | None:
    """The ``OSError`` of a full file system (``errno`` in :data:`DISK_FULL_ERRNOS`) in ``exc``
    or along its ``__cause__`` and ``__context__`` chain (Lightning raises a second error while
    it handles the first, when its loggers too cannot write), else ``None``."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def free_bytes(path) -> int:
    """Bytes free to this user on the file system of ``path`` (of its nearest existing parent
    while it does not exist yet)."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return shutil.disk_usage(p).free


def format_bytes(n: float) -> str:
    """``n`` bytes in kB, MB or GB (powers of 1000, one decimal)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} bytes"


def write_file(path, data: str | bytes | memoryview) -> None:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` atomically and durably: a temporary
    file ``.<name>.<pid>.tmp`` in the same folder (so that the rename never crosses file
    systems), written with ``os.write``, ``fsync``-ed, then ``os.replace``-d over ``path``. A
    reader sees the old file or the new one, whole; a failed write removes its temporary file
    and re-raises.

    Raises:
        OSError: the write failed (``ENOSPC``: the file system is full); ``path`` is untouched.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    view = memoryview(data.encode() if isinstance(data, str) else data).cast("B")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            while view:
                view = view[os.write(fd, view[:WRITE_CHUNK]):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def remove_temporary_files(folder) -> list[Path]:
    """Remove the temporary files :func:`write_file` leaves in ``folder`` and its
    ``checkpoints/`` when its process is killed mid-write; call it only while holding the run's
    lock (no other process writes the folder then). Returns what it removed."""
    removed = []
    for sub in (Path(folder), Path(folder) / "checkpoints"):
        for f in sub.glob(".*.tmp") if sub.is_dir() else ():
            f.unlink(missing_ok=True)
            removed.append(f)
    return removed


def checkpoint_bytes(model) -> int:
    """Bytes of a run's ``checkpoints/last.ckpt``: the fp32 weights and AdamW's two moments
    (3 × 4 bytes per parameter; a ``bf16-mixed`` run keeps fp32 weights too) plus
    :data:`CHECKPOINT_EXTRA_BYTES`. ``model``: a :class:`gtalib.model.config.ModelConfig`."""
    from gtalib.model.params import count_params

    return 12 * count_params(model)["total"] + CHECKPOINT_EXTRA_BYTES


def held_bytes(run_folder) -> int:
    """Bytes of the checkpoint an interrupted run already holds in its folder (0 if none): a
    run that resumes needs that much less (:func:`run_bytes` counts its checkpoint)."""
    ckpt = Path(run_folder) / "checkpoints" / "last.ckpt"
    return ckpt.stat().st_size if ckpt.is_file() else 0


def run_bytes(spec, result_bytes: float | None = None) -> tuple[int, int]:
    """``(kept, while_training)``: the bytes a run keeps in the store once done, and the bytes
    it needs besides while it trains (its checkpoint and the temporary file of the next one:
    2 × :func:`checkpoint_bytes`; the checkpoint is deleted once the run is done; one it holds
    already, :func:`held_bytes`, is part of the space used).

    ``result_bytes``: the run's result files as measured in its configuration's recorded
    bundles (``metrics.csv`` counted twice, for Lightning's log copy); default: estimated from
    the step count (:data:`METRICS_ROW_BYTES` per step, twice, plus :data:`RUN_FILES_BYTES`).
    """
    kept = (int(result_bytes) if result_bytes is not None
            else 2 * METRICS_ROW_BYTES * spec.train.max_steps + RUN_FILES_BYTES)
    return kept, 2 * checkpoint_bytes(spec.model)


def check_space(store, needed: int, what: str, flag: str = "--ignore-disk-space") -> str:
    """The line that says what ``what`` needs in ``store`` and what its file system has free.

    Raises:
        StoreFullError: less than ``needed`` bytes free; the message says to free space, to give
            another store, or ``flag`` to start anyway.
    """
    free = free_bytes(store)
    line = (f"disk: ≈ {format_bytes(needed)} needed in {Path(store)} for {what}, "
            f"{format_bytes(free)} free")
    if needed > free:
        raise StoreFullError(store, f"≈ {format_bytes(needed)} needed for {what}; free space, "
                                    f"give a store on a larger disk (--run-dir), or start anyway "
                                    f"with {flag}", lead="not enough space in", free=free)
    return line
