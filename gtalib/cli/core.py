"""What every ``gtalib`` subcommand shares: the error type, argument types and the rule that turns an
expected error into one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys


class CliError(Exception):
    """A command-line error: printed as ``gtalib <command>: error: <message>``, exit status 2."""


def variant_name(name: str) -> str:
    """An argparse ``type``: a variant's canonical name, or a user's variant by import path
    (``module:Class``), whose class is imported and checked here, so that a bad one is refused in
    one line before anything runs (:func:`gtalib.model.user_variants.variant_class`)."""
    from gtalib.model.config import canonical_variant
    from gtalib.model.user_variants import is_user_variant, variant_class

    try:
        name = canonical_variant(name)
        if is_user_variant(name):
            variant_class(name)
        return name
    except (KeyError, ValueError) as exc:
        raise argparse.ArgumentTypeError(exc.args[0]) from None


def int_at_least(minimum: int, what: str, maximum: int | None = None):
    """An argparse ``type``: the text as an ``int`` >= ``minimum`` (and <= ``maximum`` when
    given), else an error saying ``what`` was expected and what was given (argparse prefixes the
    flag)."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if v < minimum or (maximum is not None and v > maximum):
            raise argparse.ArgumentTypeError(f"expected {what}, got {v}")
        return v

    return parse


positive_int = int_at_least(1, "a positive integer")
non_negative_int = int_at_least(0, "a non-negative integer")


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" to an option's help only where there is a default to show: not for
    required options, flags (default False) or options whose default is decided later (None)."""

    def _get_help_string(self, action):
        if action.required or any(action.default is v for v in (None, False, argparse.SUPPRESS)):
            return action.help
        return super()._get_help_string(action)


def folder(text: str) -> str:
    """A folder option (a run store, a record folder): refused before anything runs when the
    path exists and is not a folder, or does not exist and cannot be created (its nearest
    existing parent is a file or not writable); one that can be created is left to the
    command."""
    import os
    from pathlib import Path

    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"expected a folder, got {text!r}: a file")
    parent = next(p for p in path.absolute().parents if p.exists())
    if not path.exists() and not (parent.is_dir() and os.access(parent, os.W_OK | os.X_OK)):
        why = "a file" if not parent.is_dir() else "not writable"
        raise argparse.ArgumentTypeError(
            f"expected a folder that exists or can be created, got {text!r}: {parent} is {why}")
    return text


def store_folder(text: str) -> str:
    """A folder the command writes (a run store, a data cache, a record folder): as
    :func:`folder`, then tried: made if missing and a file made and removed in it, and what was
    made removed again (the command makes it when it writes), so that a folder that cannot hold
    files (``/proc/runs``, a read-only mount) is refused before anything runs, not after the
    calibration."""
    import os
    import tempfile
    from pathlib import Path

    folder(text)
    path = Path(text).expanduser().absolute()
    made = [p for p in (path, *path.parents) if not p.exists()]  # deepest first
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".gtalib-probe-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise argparse.ArgumentTypeError(
            f"expected a folder that can hold files, got {text!r}: {exc.strerror or exc}") from None
    finally:
        for p in made:
            with contextlib.suppress(OSError):
                p.rmdir()
    return text


#: Environment variables naming folders, each read where its option (the ``args`` attribute)
#: is not given: (variable, attribute, the command writes there).
ENV_FOLDERS = (("GTALIB_RUN_DIR", "run_dir", True), ("GTALIB_DATA_DIR", "data_dir", True),
               ("GTALIB_RECORD_DIR", "record_dir", False))


def check_env_folders(args) -> None:
    """Check the folder variables of :data:`ENV_FOLDERS` that the command reads (its option
    left out) as the option would be checked (:func:`store_folder`, :func:`folder`).

    Raises:
        CliError: naming the variable, its value and what it must be.
    """
    for name, attr, writes in ENV_FOLDERS:
        value = os.environ.get(name)
        if value and hasattr(args, attr) and getattr(args, attr) is None:
            try:
                (store_folder if writes else folder)(value)
            except argparse.ArgumentTypeError as exc:
                raise CliError(f"environment variable {name}: {exc}") from None


def devices(text: str):
    return text if text == "auto" else positive_int(text)


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return v


def add_cluster_args(parser, what: str) -> None:
    """The options that say where runs are trained (Dask distributed; default an embedded
    LocalCluster): ``--jobs``, ``--cluster``, ``--scheduler-file`` and the ``--batch-*`` flags of
    :func:`gtalib.book.pipeline.schedule.batch_cluster`. ``what`` completes the group's title."""
    c = parser.add_argument_group(f"where {what} (Dask distributed; default: an embedded "
                                  "LocalCluster on this machine)")
    c.add_argument("--jobs", type=positive_int, default=None,
                   help="worker processes of the embedded cluster, or batch jobs (default: the "
                        "usable cores, at most one per 1.5 GB of free memory)")
    where = c.add_mutually_exclusive_group()  # each names the cluster
    where.add_argument("--cluster", type=cluster_address, default=None,
                       metavar="tcp://HOST:PORT|slurm|pbs|lsf",
                       help="a running Dask scheduler, or workers submitted as batch jobs through "
                            "dask-jobqueue (its ~/.config/dask/jobqueue.yaml, then the --batch-* "
                            "flags)")
    where.add_argument("--scheduler-file", default=None,
                       help="a running Dask cluster's scheduler file")
    for flag, kind, default, what in BATCH_FLAGS:
        c.add_argument(flag, type=kind, default=None,
                       help=f"{what} (only with a batch --cluster; default {default})")


#: The ``--batch-*`` flags: (flag, type, default, help). Their argparse default is ``None`` so that
#: one given without a batch ``--cluster`` is seen (:func:`batch_options`) rather than ignored.
BATCH_FLAGS = (("--batch-cores", positive_int, 1, "cores per batch job"),
               ("--batch-memory", str, "4GB", "memory per batch job"),
               ("--batch-gpus", non_negative_int, 0, "GPUs per batch job"),
               ("--batch-walltime", str, "02:00:00", "walltime per batch job"),
               ("--batch-account", str, None, "account to charge the batch jobs to"),
               ("--batch-queue", str, None, "queue / partition of the batch jobs"))


def cluster_address(text: str) -> str:
    """``--cluster``: ``tcp://HOST:PORT`` (PORT 1–65535, or none: Dask's 8786) or a batch system
    of :data:`gtalib.book.pipeline.schedule.BATCH_SYSTEMS`, checked before anything runs."""
    if text.startswith("tcp://") and len(text) > len("tcp://"):
        from urllib.parse import urlsplit

        try:  # a port past 65535 would otherwise fail only after Dask's 30 s connect timeout
            port = urlsplit(text).port
        except ValueError:
            port = 0
        if port is None or 1 <= port <= 65535:
            return text
        raise argparse.ArgumentTypeError(
            f"expected tcp://HOST:PORT with a PORT from 1 to 65535, got {text!r}")
    from gtalib.book.pipeline.schedule import BATCH_SYSTEMS  # torch and Dask: only when given

    if text in BATCH_SYSTEMS:
        return text
    raise argparse.ArgumentTypeError(
        f"expected tcp://HOST:PORT or one of {', '.join(BATCH_SYSTEMS)}, got {text!r}")


def batch_options(args) -> dict:
    """The ``--batch-*`` flags as options of :func:`gtalib.book.pipeline.schedule.batch_cluster`,
    the flags not given at their defaults (:data:`BATCH_FLAGS`).

    Raises :class:`CliError` naming the flags if any is given without ``--cluster`` set to a batch
    system (``slurm``, ``pbs``, ``lsf``): elsewhere they would be ignored silently.
    """
    from gtalib.book.pipeline.schedule import BATCH_SYSTEMS  # torch and Dask: only when run

    given = {flag: getattr(args, flag[2:].replace("-", "_")) for flag, *_ in BATCH_FLAGS}
    if args.cluster not in BATCH_SYSTEMS:
        stray = [flag for flag, value in given.items() if value is not None]
        if stray:
            raise CliError(f"{', '.join(stray)} only appl{'y' if len(stray) > 1 else 'ies'} "
                           f"with --cluster slurm, pbs or lsf "
                           f"(got --cluster {args.cluster or 'none: the embedded LocalCluster'})")
    return {flag[len("--batch-"):]: default if given[flag] is None else given[flag]
            for flag, _, default, _ in BATCH_FLAGS}


def expected_error(exc: BaseException) -> BaseException | None:
    """The error to report in one line for ``exc``, or ``None`` if ``exc`` is a bug (whose
    traceback should show).

    Expected are bad input and bad stored state: :class:`CliError`, ``ValueError``, ``KeyError``,
    ``FileNotFoundError``, ``FloatingPointError`` (a diverged run), the run store's errors
    (:class:`gtalib.training.runs.RunIncompleteError` and its subclasses), a full disk
    (:class:`gtalib.training.disk.StoreFullError`) and an unreachable Hugging Face hub
    (:class:`gtalib.data.fineweb.HubUnavailable`, whose message says what to do offline). They are looked for in ``exc``
    and then along its ``__cause__`` chain, so one that a library wrapped (``raise Wrapper from
    err``) is reported with our message; an error raised *while handling* another (implicit
    ``__context__``) is a bug of its own and is not looked through. A full disk met outside the
    run store (the data cache, the book's pages) is expected too: it becomes a
    :class:`CliError` naming the file and the space free.
    """
    from gtalib.data.fineweb import HubUnavailable
    from gtalib.training.disk import StoreFullError, disk_full, format_bytes, free_bytes
    from gtalib.training.runs import RunIncompleteError

    first = exc
    while exc is not None and not isinstance(
            exc, (CliError, ValueError, KeyError, FileNotFoundError, FloatingPointError,
                  RunIncompleteError, StoreFullError, HubUnavailable)):
        exc = exc.__cause__
    full = disk_full(first) if exc is None else None
    if full is not None:
        where = full.filename or "."
        return CliError(f"no space left on the file system of {where} "
                        f"({format_bytes(free_bytes(where))} free): free space and run the same "
                        f"command again")
    return exc


#: The most worker processes or batch jobs of one command, and torch threads per run, that any
#: machine or cluster here is taken to hold (beyond the memory and cores of :func:`check_workers`).
MAX_JOBS, MAX_THREADS = 1024, 1024


def check_workers(args) -> None:
    """Bound ``--jobs`` and ``--threads`` by what will run them: the embedded cluster (no
    ``--cluster``/``--scheduler-file``) by this machine: at most one worker per
    :data:`gtalib.book.pipeline.schedule.RUN_PEAK_RSS` of available memory (more workers than
    cores share them, which the calibration times), threads per run up to its usable cores; a batch cluster by :data:`MAX_JOBS` jobs of :data:`MAX_THREADS`.
    A running cluster keeps its own size (``--jobs`` is not used there).

    Raises:
        CliError: naming the option, the value, the bound and why.
    """
    from gtalib.book.pipeline.schedule import RUN_PEAK_RSS
    from gtalib.training.machine import available_memory, usable_cores

    jobs, threads = getattr(args, "jobs", None), getattr(args, "threads", None)
    embedded = getattr(args, "cluster", None) is None and getattr(
        args, "scheduler_file", None) is None
    free = available_memory() if jobs is not None and embedded else None
    if free is not None:
        most = max(1, free // RUN_PEAK_RSS)
        if jobs > most:
            raise CliError(f"argument --jobs: {jobs} worker processes do not fit this machine's "
                           f"{free / 1e9:.1f} GB of available memory at "
                           f"{RUN_PEAK_RSS / 1e9:.1f} GB each; allowed: 1 to {most}")
    if jobs is not None and jobs > MAX_JOBS:
        raise CliError(f"argument --jobs: expected 1 to {MAX_JOBS} batch jobs, got {jobs}")
    most = usable_cores() if embedded else MAX_THREADS
    if threads is not None and threads > most:
        where = (f"this machine has {most} usable core(s)" if embedded else
                 f"at most {MAX_THREADS} per run")
        raise CliError(f"argument --threads: {threads} torch threads per run: {where}; "
                       f"allowed: 1 to {most}")


def check_scheduler_file(args) -> None:
    """``--scheduler-file``, when given, must be a Dask scheduler file (JSON with the
    scheduler's ``"address"``): read before anything runs
    (:func:`gtalib.book.pipeline.connect.scheduler_address`).

    Raises:
        CliError: naming the option and what the file is not.
    """
    if getattr(args, "scheduler_file", None) is None:
        return
    from gtalib.book.pipeline.connect import scheduler_address  # Dask: only when given

    try:
        scheduler_address(args.scheduler_file)
    except ValueError as exc:
        raise CliError(f"argument --scheduler-file: {exc}") from None


def run_command(args) -> int:
    """Run the handler ``args.func`` of a parsed command line once the folders named by the
    environment (:func:`check_env_folders`), ``--jobs``/``--threads`` (:func:`check_workers`)
    and ``--scheduler-file`` (:func:`check_scheduler_file`) are checked."""
    check_env_folders(args)
    check_workers(args)
    check_scheduler_file(args)
    return args.func(args)


def run_reporting_errors(prog: str, func, *args) -> int:
    """``func(*args)`` as an exit status. An expected error (:func:`expected_error`) is printed
    as ``<prog>: error: <message>`` on stderr, without a traceback, and gives status 2; a reader
    that closed the output early (``| head``) ends the command quietly with status 0; any
    other exception propagates."""
    try:
        status = int(func(*args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below
        return status
    except BrokenPipeError:  # the reader stopped early: not an error of the command
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
    except Exception as exc:  # noqa: BLE001 - sorted by expected_error, bugs re-raised
        err = expected_error(exc)
        if err is None:
            raise
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return 2
