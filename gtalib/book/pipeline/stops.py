"""How the job of :mod:`gtalib.book.pipeline.schedule` stops before its runs are all trained:
a lost Dask scheduler (:class:`SchedulerLost`) and a full run store
(:class:`gtalib.training.disk.StoreFullError`), each as one error saying what is kept and what to
do, and Dask closed without its own log lines about it.
"""

from __future__ import annotations

import contextlib
import logging
from concurrent.futures import CancelledError

from gtalib.book.pipeline.paths import BookError
from gtalib.training import runs
from gtalib.training.disk import StoreFullError


class SchedulerLost(BookError):
    """The client lost its Dask scheduler while runs were still to train: the runs that finished
    are in the store, the others are trained by the same command run again."""


def stop_event(marker: str) -> str:
    """The name of the Dask event by which the job, once its store is full, tells every task
    of it (named by the store's ``marker``) to start no further run."""
    return f"gtalib-{marker}-stop"


def store_full(run_dir, todo, full: dict, run: str) -> StoreFullError:
    """The one error of a job whose store filled up: which store and how much is free (``full``:
    a task's ``store_full``), the run that stopped and what it kept, how many runs are done and
    kept, and what to do."""
    done = sum(runs.is_done(runs.run_path(s, run_dir)) for s in todo)
    stopped = f"run {run} stopped, {full['kept']}; " if run else ""
    return StoreFullError(full["store"], f"{stopped}{done} of {len(todo)} runs are done and kept "
                                         f"in {run_dir}, no further run was started: free space "
                                         f"(or give --run-dir on a larger disk) and run the same "
                                         f"command again to train the rest",
                          free=full["free"])


def scheduler_gone(client, error: Exception) -> bool:
    """Whether ``error``, raised by a future's result, means the client lost its scheduler
    (Dask then cancels every future with the reason ``scheduler-connection-lost``)."""
    return isinstance(error, CancelledError) and (
        getattr(error, "reason", None) == "scheduler-connection-lost"
        or client.status not in ("running", "newly-created"))


def scheduler_lost(client, where, todo, run_dir) -> SchedulerLost:
    """The one error of a lost scheduler: which one, how many runs are kept, what to do."""
    done = sum(runs.is_done(runs.run_path(s, run_dir)) for s in todo)
    address = getattr(client.scheduler, "address", None) or where
    return SchedulerLost(f"lost the Dask scheduler {address} after {done} of {len(todo)} runs "
                         f"(kept in {run_dir}); run the same command again to train the other "
                         f"{len(todo) - done}")


@contextlib.contextmanager
def quiet_loggers(*names):
    """Dask's loggers ``distributed.<name>`` silenced (but for critical errors) in the block."""
    loggers = [logging.getLogger(f"distributed.{name}") for name in names]
    levels = [log.level for log in loggers]
    for log in loggers:
        log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for log, level in zip(loggers, levels):
            log.setLevel(level)


@contextlib.contextmanager
def dropped_messages(name: str, *starts: str):
    """Dask's logger ``distributed.<name>`` drops, in the block, the records whose message starts
    with one of ``starts``; its other records pass."""
    log = logging.getLogger(f"distributed.{name}")

    def keep(record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(starts)

    log.addFilter(keep)
    try:
        yield
    finally:
        log.removeFilter(keep)


def quiet_closing(client) -> None:
    """Close a client whose scheduler is gone without Dask's reconnection attempts and their log
    lines: the caller reports the loss once (:class:`SchedulerLost`)."""
    with quiet_loggers("client", "core", "comm", "batched", "utils"), \
            contextlib.suppress(Exception):
        client.close(timeout=5)
