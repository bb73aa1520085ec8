"""Training one run into the run store: :func:`ensure_run` trains a spec if it is not done,
resumes it if it was interrupted, waits while another process trains it, and writes the run's
``metrics.csv``, ``card.json``, gate probes and ``DONE``; :func:`ensure_runs` does so for a list.

The store itself (specs, folders, metrics files, reading them back) is :mod:`gtalib.training.runs`;
this module is the one that writes into it, with the Lightning loop
(:mod:`gtalib.training.loop`) and the probes (:mod:`gtalib.training.probes`).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import platform
import shutil
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path

from gtalib.training.disk import StoreFullError, disk_full, remove_temporary_files
from gtalib.training.machine import machine_kind
from gtalib.training.runs import (RunCorruptError, RunSpec, holder_text, lock_file, read_json, write_atomic, write_metrics,
                                  cpu_model, default_datamodule, git_commit, is_done, load_metrics,
                                  run_path)


def _tells_something(record: logging.LogRecord) -> bool:
    """A log filter: ``False`` for the Lightning lines that tell the reader nothing about the
    run: the advertisement for Lightning's cloud logger that every ``Trainer`` logs unless a
    ``LitLogger`` is configured ("Tip: ... litlogger ...", Lightning 2.6), and the TPU line on a
    machine without TPUs."""
    msg = record.getMessage()
    return not ("litlogger" in msg or msg.startswith("TPU available: False"))


@contextlib.contextmanager
def _quiet_lightning(enabled: bool):
    """Drop Lightning's log lines that tell nothing (:func:`_tells_something`, always), its hint
    to start the run with Slurm's ``srun`` outside a Slurm job (always) and, when ``enabled``,
    its banner lines and advisory warnings (e.g. "few dataloader workers")."""
    # Lightning's rank-zero messages are all logged by this one logger
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    names = ("lightning.pytorch", "lightning.fabric", "lightning")
    levels = {n: logging.getLogger(n).level for n in names}
    rank_zero.addFilter(_tells_something)
    with warnings.catch_warnings():
        # Lightning 2.6.6 calls a torch.utils._pytree API that torch 2.13 deprecates, once per fit.
        warnings.filterwarnings("ignore", message=".*LeafSpec.*is deprecated.*")
        if "SLURM_JOB_ID" not in os.environ:
            # Lightning hints at `srun` wherever the command exists (SLURMEnvironment.detect,
            # asked by every fit that does not resume), though only a process inside a Slurm
            # job could have been started by it
            warnings.filterwarnings("ignore", message="The `srun` command is available on your "
                                                      "system but is not used")
        if enabled:
            from lightning.fabric.utilities.warnings import PossibleUserWarning

            for n in names:
                logging.getLogger(n).setLevel(logging.WARNING)
            warnings.simplefilter("ignore", PossibleUserWarning)
            warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        try:
            yield
        finally:
            rank_zero.removeFilter(_tells_something)
            for n, lvl in levels.items():
                logging.getLogger(n).setLevel(lvl)


def _device_description(trainer) -> str:
    import torch

    if trainer.strategy.root_device.type == "cuda":
        return torch.cuda.get_device_name(trainer.strategy.root_device)
    return f"{cpu_model()} ({os.cpu_count()} logical CPUs)"


def _resume_checkpoint(path: Path) -> Path | None:
    """``checkpoints/last.ckpt`` if present and readable. An unreadable one (checkpoints are
    written atomically, :class:`gtalib.training.loop.AtomicCheckpointIO`, so one written
    otherwise, or damaged since) is set aside as ``last.ckpt.corrupt`` and the run restarts from
    scratch, with a warning.

    The check loads the archive with torch's weights-only unpickler (tensors, containers and
    plain values only; no code from the file runs), as Lightning's resume then does (:func:`fit`).

    Raises:
        RunCorruptError: the checkpoint holds other objects (a pickled callable, a class
            instance): it is left in place untouched and nothing in it was run.
    """
    import pickle

    import torch

    ckpt = path / "checkpoints" / "last.ckpt"
    if not ckpt.exists():
        return None
    if ckpt.is_dir():  # a sharded (FSDP) checkpoint: Lightning validates it when loading
        return ckpt
    try:
        torch.load(ckpt, map_location="cpu", weights_only=True, mmap=True)  # lazy: checks the archive
    except pickle.UnpicklingError as exc:
        reason = str(exc).split("WeightsUnpickler error:", 1)[-1].strip().splitlines()[0]
        raise RunCorruptError(
            f"run {path.name}: {ckpt} holds objects that are not tensors or plain data ({reason}); "
            f"weights-only loading refused it and nothing in it was run. Our checkpoints never "
            f"contain such objects: delete the file (the run restarts from step 0) or the run folder"
        ) from None
    except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint means "start over"
        warnings.warn(f"run {path.name}: unreadable checkpoint {ckpt} ({exc}); restarting the run")
        os.replace(ckpt, ckpt.with_suffix(".ckpt.corrupt"))
        return None
    return ckpt


#: Environment variables through which launchers (torchrun, Lightning's own, SLURM, LSF) give a
#: process its place in a multi-process job; any of them set to other than "0" means the
#: process is not the job's rank 0.
_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "SLURM_PROCID",
                   "JSM_NAMESPACE_RANK")


def _is_rank_zero() -> bool:
    """Whether this process is rank 0 of its job (or not part of a multi-process job)."""
    return all(os.environ.get(v, "0") == "0" for v in _RANK_VARIABLES)


@contextlib.contextmanager
def _training_lock(path: Path):
    """Hold the lock of the run folder ``path`` (``<run_id>.lock`` beside it; ``fcntl.flock``,
    exclusive) for the block, so that two processes never train the same run: a second one
    prints who holds it ("run <id> is being trained by pid N on HOST since T; waiting") and
    waits. The operating system releases the lock when its process ends, however it ends, so a
    killed trainer leaves no stale lock, only its file. The block receives a pair ``(stale,
    waited_for)``: the file's "pid N on HOST since T" of a holder that ended without releasing
    (else ``None``), and that of the holder this process waited for (else ``None``). The file is
    removed on release."""
    import fcntl
    import socket

    file = lock_file(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    waited_for = None
    while True:
        fd = os.open(file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                waited_for = holder_text(fd)
                print(f"run {path.name} is being trained by {waited_for}; waiting", flush=True)
                fcntl.flock(fd, fcntl.LOCK_EX)
            # the holder removes the file on release: a lock on a removed file guards nothing
            with contextlib.suppress(FileNotFoundError):
                if os.path.samestat(os.fstat(fd), os.stat(file)):
                    break
        except BaseException:  # Ctrl-C while waiting
            os.close(fd)
            raise
        os.close(fd)
    try:
        # a file left with content: its holder ended without releasing (killed, power lost)
        stale = holder_text(fd) if os.fstat(fd).st_size else None
        now = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {now}".encode(), 0)
        yield stale, waited_for
    finally:
        file.unlink(missing_ok=True)  # before unlocking: a waiter then sees the file is gone
        os.close(fd)


def ensure_run(spec: RunSpec, run_dir, *, progress: bool = False, datamodule=None,
               data_dir=None, accelerator: str = "cpu", devices: int | str = 1, num_nodes: int = 1,
               strategy: str = "auto", callbacks: list | None = None,
               keep_checkpoint: bool = False, outcome: dict | None = None) -> Path:
    """Make sure the run ``spec`` exists, finished, under ``run_dir``; return its folder.

    Returns at once if ``DONE`` exists; resumes from ``checkpoints/last.ckpt`` if present;
    otherwise trains from scratch (model initialised with ``spec.seed``). On success writes
    ``metrics.csv`` and ``card.json`` atomically, then ``DONE``. Under multi-process strategies
    every process calls this (Lightning relaunches the calling script); only global rank 0
    writes the results.

    Training holds the run's lock (``<run_dir>/<run_id>.lock``), so a second process asking for
    the same run (a notebook and ``gtalib train``, two book builds) prints which process trains
    it and waits, then returns the finished run, or, if that process ended without finishing,
    takes over and resumes from its checkpoint. Only rank 0 of a multi-process job takes the
    lock (environment ``RANK``, ``LOCAL_RANK``, ``NODE_RANK``, ``SLURM_PROCID``, ... unset or
    ``0``): the other ranks are started by it and must not wait for it.

    Args:
        datamodule: object following the data contract of :mod:`gtalib.training.loop`; default
            :func:`default_datamodule` of ``spec`` (corpus read from ``data_dir``).
        accelerator, devices, num_nodes, strategy: passed to the Lightning ``Trainer``
            (``"cpu"``/``"gpu"``/``"auto"``; ``"ddp"`` or ``"fsdp"``; not ``"ddp_spawn"``, whose
            workers cannot hand the metrics history back). They do not enter the
            run hash: a run on several devices equals the one-device run up to rounding.
        progress: show Lightning's progress bar and messages.
        callbacks: extra Lightning callbacks (tests use one to interrupt a run).
        keep_checkpoint: keep ``checkpoints/last.ckpt`` (final weights and optimizer state) once
            the run is done; by default it is deleted (12 bytes per parameter: 5.2 MB at ``ci``,
            19 MB at ``cpu``).
        outcome: a dict that, when given, receives ``"trained_by"``: ``"this process"``,
            ``"already done"``, or the "pid N on HOST since T" of the process this one waited
            for, which trained the run meanwhile.

    A start that fails before the first checkpoint removes the folder it created, so no
    ``spec.json`` without ``DONE`` is left behind; the model and datamodule are built (and so
    validated) before the folder is created.

    A full disk stops the run: what it had written stays as it was (every file of the store,
    checkpoints included, is written atomically, :mod:`gtalib.training.disk`), so the same call
    with space resumes from its last checkpoint.

    Raises:
        StoreFullError: the store's file system is full (``ENOSPC``); the message names the
            store, the space free, the run and the step its kept checkpoint resumes from.
        FloatingPointError: the training loss became NaN/Inf (message names step and run id).
        ValueError: ``spec.json`` already in the folder describes a different spec.
        RunCorruptError: the folder has ``DONE`` but its files are corrupt or truncated, or its
            checkpoint holds objects other than tensors and plain data (never unpickled).
    """
    import lightning as L

    from gtalib.training.loop import LitGPT, fit

    path = run_path(spec, run_dir)
    if outcome is not None:
        outcome["trained_by"] = "already done"
    if is_done(path):
        load_metrics(path)  # a DONE run with truncated/corrupt files raises, never passes as done
        return path
    spec_text = json.dumps(spec.to_dict(), indent=2, sort_keys=True)
    spec_file = path / "spec.json"
    if spec_file.exists() and RunSpec.from_dict(read_json(spec_file)).hash_payload() \
            != spec.hash_payload():
        raise ValueError(f"{spec_file} describes a different run than the spec asked for")
    # DDP ranks other than 0 are started by rank 0, which holds the lock: they must not wait
    lock = _training_lock(path) if _is_rank_zero() else contextlib.nullcontext((None, None))
    try:
        with lock as (stale, waited_for):
            if is_done(path):  # trained meanwhile by the process this one waited for
                load_metrics(path)
                if outcome is not None:
                    outcome["trained_by"] = waited_for or "another process"
                return path
            if stale:
                print(f"run {spec.run_id}: {stale} ended without finishing it; taking over",
                      flush=True)
            if outcome is not None:
                outcome["trained_by"] = "this process"
            started = time.time()
            created = not path.exists()
            remove_temporary_files(path)  # of a write killed half-way (this process holds the lock)
            with _quiet_lightning(not progress):
                ckpt = _resume_checkpoint(path) if not created else None
                L.seed_everything(spec.seed, workers=False, verbose=False)  # model init only
                module = LitGPT(spec.model, spec.train, run_id=spec.run_id)
                dm = datamodule if datamodule is not None else default_datamodule(spec, data_dir)
                path.mkdir(parents=True, exist_ok=True)
                write_atomic(spec_file, spec_text)
                try:
                    trainer = fit(module, dm, path, ckpt_path=ckpt, accelerator=accelerator,
                                  devices=devices, num_nodes=num_nodes, strategy=strategy,
                                  progress=progress, extra_callbacks=callbacks)
                except BaseException:
                    # nothing to resume from: leave no half-made run folder behind
                    if created and not (path / "checkpoints" / "last.ckpt").exists():
                        shutil.rmtree(path, ignore_errors=True)
                    raise
            if not trainer.is_global_zero:
                return path
            write_metrics(path, module.history, spec)
            _write_card(path, spec, module, trainer, started, resumed=ckpt is not None)
            if datamodule is None and trainer.world_size == 1:
                # the gate probes of the final weights on the corpus's fixed held-out batch (a
                # test's own datamodule names no corpus; a sharded model is not whole on one
                # process)
                from gtalib.training.probes import write_probes

                write_probes(path, module.model, spec, data_dir)
            write_atomic(path / "DONE", _dt.datetime.now(_dt.timezone.utc).isoformat() + "\n")
            if not keep_checkpoint:
                shutil.rmtree(path / "checkpoints", ignore_errors=True)
            return path
    except Exception as exc:
        if disk_full(exc) is None:
            raise
        kept = _kept(path)
        raise StoreFullError(run_dir, f"run {spec.run_id} stopped, {kept}: free space (or give a "
                                      f"store on a larger disk) and run the same command again",
                             run_id=spec.run_id, kept=kept) from exc


def _kept(path: Path) -> str:
    """What a run stopped by a full disk kept: the step of its checkpoint, which the next
    training resumes from."""
    ckpt = path / "checkpoints" / "last.ckpt"
    try:
        import torch

        step = torch.load(ckpt, map_location="cpu", weights_only=True, mmap=True)["global_step"]
    except Exception:  # noqa: BLE001 - none yet (or unreadable): the run starts over
        return "no checkpoint yet (it restarts from step 0)"
    return f"its checkpoint of step {step} kept (it resumes from there)"


def _write_card(path: Path, spec: RunSpec, module, trainer, started: float, resumed: bool) -> None:
    import lightning
    import torch

    import gtalib

    last = module.history[-1]
    root = trainer.strategy.root_device
    gpu = torch.cuda.get_device_name(root) if root.type == "cuda" else None
    tokens = spec.train.max_steps * spec.train.tokens_per_step
    card = {
        "run_id": spec.run_id,
        "describe": spec.describe(),
        "versions": {"torch": torch.__version__, "lightning": lightning.__version__,
                     "gtalib": getattr(gtalib, "__version__", _package_version()),
                     "python": platform.python_version()},
        "git_commit": git_commit(),
        "device": _device_description(trainer),
        "accelerator": trainer.strategy.root_device.type,
        "world_size": trainer.world_size,
        "strategy": type(trainer.strategy).__name__,
        "precision": trainer.precision,
        "threads": torch.get_num_threads(),
        # what decides bit-identity with a re-training (gtalib.training.machine; gtalib record check)
        "machine_kind": machine_kind(torch.get_num_threads(), gpu),
        "n_params": module.model.num_params(),
        "tokens": tokens,
        "train_wall_s": round(module.wall_s, 3),
        "wall_time_s": round(time.time() - started, 3),
        "tokens_per_s": round(tokens / module.wall_s, 1) if module.wall_s > 0 else None,
        "resumed": resumed,
        "final_train_loss": last["train_loss"],
        "final_val_loss": last.get("val_loss"),
        "final_val_loss_per_source": {k.split("/", 1)[1]: v for k, v in last.items()
                                      if k.startswith("val_loss/")},
        "finished_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(),
    }
    write_atomic(path / "card.json", json.dumps(card, indent=2, sort_keys=True) + "\n")


def _package_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gtalib")
    except PackageNotFoundError:
        return None


def ensure_runs(specs: Iterable[RunSpec], run_dir, *, progress: bool | Callable[[str], None] = True,
                **kwargs) -> list[Path]:
    """:func:`ensure_run` for each spec in one process (a fresh process costs seconds per run),
    with one progress line per run: which run, how many are left, and an ETA from the mean time
    of the runs trained so far. Duplicate specs are trained once.

    Args:
        progress: ``True`` prints to stdout, a callable receives each line, ``False`` is silent.
        **kwargs: passed to :func:`ensure_run` (``datamodule``, ``accelerator``, ...).

    Returns:
        The run folders, in the order of ``specs``.
    """
    specs = list(specs)
    say = print if progress is True else (progress or (lambda _msg: None))
    todo = {s.run_id for s in specs if not is_done(run_path(s, run_dir))}
    say(f"{len(specs)} runs, {len(todo)} to train, in {run_dir}")
    paths, times, trained = [], [], set()
    for i, spec in enumerate(specs, 1):
        rid = spec.run_id
        if rid not in todo or rid in trained:
            paths.append(run_path(spec, run_dir))
            continue
        t0 = time.perf_counter()
        paths.append(ensure_run(spec, run_dir, **kwargs))
        times.append(time.perf_counter() - t0)
        trained.add(rid)
        left = len(todo) - len(trained)
        eta = left * sum(times) / len(times)
        say(f"[{len(trained)}/{len(todo)}] {rid} {spec.describe()}: {times[-1]:.1f} s; "
            f"{left} left, ETA {eta / 60:.1f} min")
    return paths
