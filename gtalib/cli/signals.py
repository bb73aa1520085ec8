"""How every ``gtalib`` command ends when it is stopped: Ctrl-C (SIGINT) and SIGTERM (``kill``,
a batch system's stop) each end it with one line on stderr and exit status 130 or 143, after the
code on the way out has run (the cluster closed and its runs cancelled, the finished runs kept,
nothing half-written: runs write atomically), and with the command's own temporary folder
removed (:func:`gtalib.training.tempdirs.own_tmp`, which the embedded workers and the notebook
kernels share). Python's default SIGTERM kills the process at once, leaving all of it behind;
here it is raised in the main thread as :class:`Terminated`, a ``KeyboardInterrupt``, so that
one path serves both.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading

from gtalib.training.tempdirs import own_tmp


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread where Ctrl-C raises ``KeyboardInterrupt``."""


#: Signals received by the running command, in order (``signal.SIGINT``, ``signal.SIGTERM``).
RECEIVED: list[int] = []


def stop_words() -> str:
    """How the command was stopped, for its last line: ``stopped by SIGTERM`` or
    ``interrupted`` (Ctrl-C)."""
    return "stopped by SIGTERM" if signal.SIGTERM in RECEIVED else "interrupted"


def stop_status() -> int:
    """The exit status of a stopped command: 143 after SIGTERM, 130 after Ctrl-C (128 + the
    signal's number, as a shell reports it)."""
    return 128 + (signal.SIGTERM if signal.SIGTERM in RECEIVED else signal.SIGINT)


#: Loggers silenced (but for critical errors) once the command is stopped: closing a cluster
#: whose tasks were cancelled has Dask and asyncio log each task (``AllExit``, cancelled
#: instructions) as if something failed, where nothing did.
QUIET_WHEN_STOPPED = ("asyncio", "distributed", "tornado")


def _stopping(signum) -> None:
    RECEIVED.append(signum)
    for name in QUIET_WHEN_STOPPED:
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _on_sigterm(signum, _frame):
    _stopping(signum)
    # a second SIGTERM while the first is handled (the cluster closing) is not raised again
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


def _on_sigint(signum, frame):
    _stopping(signum)
    signal.default_int_handler(signum, frame)


@contextlib.contextmanager
def command_process():
    """The context of one command: stdout written line by line even into a file or a pipe
    (``--predict > file`` shows each line as it is printed), SIGTERM raised as
    :class:`Terminated`, and the command's own temporary folder
    (:func:`gtalib.training.tempdirs.own_tmp`). Signal handlers are set only in the main
    thread and restored on the way out."""
    with contextlib.suppress(AttributeError, ValueError):  # a replaced stream (pytest's capture)
        sys.stdout.reconfigure(line_buffering=True)
    RECEIVED.clear()
    levels = {name: logging.getLogger(name).level for name in QUIET_WHEN_STOPPED}
    main = threading.current_thread() is threading.main_thread()
    previous = {}
    if main:
        for signum, handler in ((signal.SIGTERM, _on_sigterm), (signal.SIGINT, _on_sigint)):
            if signal.getsignal(signum) is not signal.SIG_IGN:  # ignored by the caller: kept so
                previous[signum] = signal.signal(signum, handler)
    try:
        with own_tmp():
            yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
