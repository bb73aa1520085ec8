"""The run store: a run is the hash of its full spec; finished runs are reused, interrupted runs
resumed, nothing half-written is ever read as done.

Layout of ``<run_dir>/<run_id>/``::

    spec.json            the RunSpec (written first)
    checkpoints/last.ckpt  Lightning checkpoint (resume point; holds the metrics history too;
                         deleted once DONE unless ``keep_checkpoint``)
    logs/version_<n>/    Lightning CSVLogger output, one version per attempt (+ tensorboard/)
    metrics.csv          clean per-step metrics, written atomically at the end
    card.json            run card: versions, git commit, device, threads, machine kind
                         (gtalib.training.machine.machine_kind), wall time, tokens/s
    probes.json          gate probes of the final weights (gtalib.training.probes: mean gate, first-token
                         attention share, largest residual activation per layer); runs trained
                         on the default corpus on one device
    DONE                 written last; its presence is what "finished" means

and ``<run_dir>/<run_id>.lock`` beside the folder while a process trains the run ("pid N on
HOST since T"; :func:`ensure_run`).

``metrics.csv`` columns: ``step`` (updates done, 1..max_steps, one row each), ``tokens`` (training
tokens consumed), ``train_loss`` (nats/token of that step's batch), ``lr``, ``val_loss`` (fixed
held-out set, filled on eval steps only) and ``val_loss/<source>`` per data source.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import hashlib
import json
import logging
import os
import platform
import shutil
import subprocess
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from gtalib.model.config import ModelConfig
from gtalib.training.machine import cpu_info, machine_kind
from gtalib.training.config import NON_RESULT_FIELDS, TrainConfig

#: Bump whenever a change to gtalib's model or training math changes the numbers a run produces
#: (the run hash includes it, so stale runs are not reused).
MODEL_MATH_VERSION = 1

#: ModelConfig fields that do not change the result beyond floating-point rounding: which
#: attention implementation computes the same function.
_MODEL_NON_RESULT_FIELDS = frozenset({"attn_impl"})


class RunIncompleteError(RuntimeError):
    """A run folder without ``DONE`` was asked for its results."""


class RunCorruptError(RunIncompleteError, ValueError):
    """A run folder's files are unreadable or inconsistent: ``spec.json``/``card.json`` not valid
    JSON, ``metrics.csv`` with a cell that does not parse to its column's type (a non-finite or
    negative loss, an empty required cell) or not reaching the spec's ``max_steps`` (truncated,
    gaps, no final eval) although ``DONE`` exists, or a checkpoint holding code.

    The message names the run, the file and what is wrong; ``run_id``, ``file``, ``column`` and
    ``row`` (1-based data row of ``metrics.csv``, the header not counted) hold what is known of
    them (else ``None``)."""

    def __init__(self, message: str, *, run_id: str | None = None, file=None,
                 column: str | None = None, row: int | None = None):
        super().__init__(message)
        self.run_id, self.file, self.column, self.row = run_id, file, column, row


def _read_json(file: Path) -> dict:
    """``json.loads`` of ``file``; a corrupt file raises :class:`RunCorruptError` naming it."""
    try:
        return json.loads(Path(file).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunCorruptError(f"{file} is not valid JSON ({exc}); remove the run folder "
                              f"{Path(file).parent} to retrain it") from None


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines a run's result.

    Args:
        model: the model (``intermediate_size`` solved; :func:`gtalib.model.presets.model_config`).
        train: the training settings (:func:`gtalib.training.config.train_config`).
        data: the data identity, a JSON-serialisable dict (``gtalib.data.data_identity()``):
            corpus, its version/hash, tokenizer, splits.
        seed: model-initialisation seed. The data order depends on ``train.data_seed`` only.
    """

    model: ModelConfig
    train: TrainConfig
    data: dict
    seed: int = 0

    def __post_init__(self):
        if not isinstance(self.model, ModelConfig):
            raise ValueError(f"RunSpec.model must be a ModelConfig, got {type(self.model).__name__}")
        if not isinstance(self.train, TrainConfig):
            raise ValueError(f"RunSpec.train must be a TrainConfig, got {type(self.train).__name__}")
        if not isinstance(self.data, dict):
            raise ValueError(f"RunSpec.data must be a dict (data identity), got {type(self.data).__name__}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"RunSpec.seed must be a non-negative integer, got {self.seed!r}")
        if self.model.intermediate_size is None:
            raise ValueError("RunSpec.model.intermediate_size is None: solve it with "
                             "gtalib.model.presets.model_config")

    def to_dict(self) -> dict:
        """JSON-serialisable form (written to ``spec.json``)."""
        return {"model": self.model.to_dict(), "train": self.train.to_dict(), "data": self.data,
                "seed": self.seed, "model_math_version": MODEL_MATH_VERSION}

    @classmethod
    def from_dict(cls, d: dict) -> "RunSpec":
        """Inverse of :meth:`to_dict` (``model_math_version`` is ignored)."""
        return cls(ModelConfig(**d["model"]), TrainConfig(**d["train"]), dict(d["data"]), int(d["seed"]))

    def hash_payload(self) -> dict:
        """What the run id hashes: the *resolved* model config (so spelling a derived size out or
        leaving it to the rules gives the same id), the training config without fields that do
        not change the result (checkpoint interval, loader workers), the data identity, the seed
        and :data:`MODEL_MATH_VERSION`."""
        model = {k: v for k, v in self.model.resolved().to_dict().items()
                 if k not in _MODEL_NON_RESULT_FIELDS}
        train = {k: v for k, v in self.train.to_dict().items() if k not in NON_RESULT_FIELDS}
        return {"model": model, "train": train, "data": self.data, "seed": self.seed,
                "model_math_version": MODEL_MATH_VERSION}

    @property
    def run_id(self) -> str:
        """First 16 hex digits of the sha256 of the canonical JSON of :meth:`hash_payload`."""
        text = json.dumps(self.hash_payload(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """One line for progress output: variant, head count, options, seed.

        Resolved configs fold the double-heads option into ``n_head``, so the head count is shown.
        """
        m = self.model
        opts = [f"n_head={m.n_head}", f"init={m.init}"] + (["gate"] if m.gate else []) \
            + ([] if m.latent_scale else ["no-latent-scale"])
        return f"{m.variant} {' '.join(opts)} seed={self.seed} steps={self.train.max_steps}"


# ---------------------------------------------------------------------------------------------
# Small file helpers


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and ``os.replace`` (atomic on POSIX)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def git_commit() -> str | None:
    """HEAD commit of the repository gtalib is imported from, or None outside a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _device_description(trainer) -> str:
    import torch

    if trainer.strategy.root_device.type == "cuda":
        return torch.cuda.get_device_name(trainer.strategy.root_device)
    return f"{cpu_model()} ({os.cpu_count()} logical CPUs)"


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` knows
    (:func:`gtalib.training.machine.cpu_info`)."""
    return cpu_info()["model_name"]


def _tells_something(record: logging.LogRecord) -> bool:
    """A log filter: ``False`` for the Lightning lines that tell the reader nothing about the
    run: the advertisement for Lightning's cloud logger that every ``Trainer`` logs unless a
    ``LitLogger`` is configured ("Tip: ... litlogger ...", Lightning 2.6), and the TPU line on a
    machine without TPUs."""
    msg = record.getMessage()
    return not ("litlogger" in msg or msg.startswith("TPU available: False"))


@contextlib.contextmanager
def _quiet_lightning(enabled: bool):
    """Drop Lightning's log lines that tell nothing (:func:`_tells_something`, always) and, when
    ``enabled``, its banner lines and advisory warnings (e.g. "few dataloader workers")."""
    # Lightning's rank-zero messages are all logged by this one logger
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    names = ("lightning.pytorch", "lightning.fabric", "lightning")
    levels = {n: logging.getLogger(n).level for n in names}
    rank_zero.addFilter(_tells_something)
    with warnings.catch_warnings():
        # Lightning 2.6.6 calls a torch.utils._pytree API that torch 2.13 deprecates, once per fit.
        warnings.filterwarnings("ignore", message=".*LeafSpec.*is deprecated.*")
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


# ---------------------------------------------------------------------------------------------
# Data


def _val_batch_size(eval_windows: int) -> int:
    """Largest divisor of ``eval_windows`` that is at most 16 (windows per validation pass)."""
    return max(d for d in range(1, min(16, eval_windows) + 1) if eval_windows % d == 0)


def make_datamodule(corpus: str, tokenizer: str, train: TrainConfig, data_dir=None, build: bool = False):
    """A :class:`gtalib.data.TokenDataModule` sized by ``train``: ``seq_len``-token rows,
    ``batch_size`` rows per global batch, ``data_seed`` order, ``eval_windows`` held-out windows
    per source.

    Args:
        corpus: ``"default"`` (registry prose) or a built FineWeb-Edu corpus name.
        tokenizer: ``"bytes"`` or ``"gpt2"``.
        data_dir: data cache (default ``$GTALIB_DATA_DIR`` or ``<repo>/data_cache``).
        build: build the default corpus on ``prepare_data()`` if it is missing.
    """
    from gtalib.data import TokenDataModule

    return TokenDataModule(corpus=corpus, tokenizer=tokenizer, block_size=train.seq_len,
                           batch_size=train.batch_size, data_seed=train.data_seed,
                           val_windows=train.eval_windows,
                           val_batch_size=_val_batch_size(train.eval_windows),
                           data_dir=data_dir, build=build)


def data_spec(train: TrainConfig, corpus: str = "default", tokenizer: str = "bytes",
              data_dir=None) -> dict:
    """The ``data`` of a :class:`RunSpec`: corpus and tokenizer names (to rebuild the datamodule)
    and the built corpus's identity (archive pins, shard sha256s, sampling rule and sizes), so a
    rebuilt or changed corpus gives new run ids.

    Raises:
        FileNotFoundError: the corpus is not built (``gtalib data build``).
    """
    dm = make_datamodule(corpus, tokenizer, train, data_dir)
    return {"corpus": corpus, "tokenizer": tokenizer, "identity": dm.data_identity()}


def default_datamodule(spec: RunSpec, data_dir=None):
    """The datamodule of ``spec.data`` (made by :func:`data_spec`), checked against its identity.

    Raises:
        ValueError: ``spec.data`` lacks ``corpus``/``tokenizer``, or the corpus on disk is not the
            one the spec was made with.
    """
    if not {"corpus", "tokenizer"} <= set(spec.data):
        raise ValueError(f"RunSpec.data needs 'corpus' and 'tokenizer' (see gtalib.training.runs.data_spec); "
                         f"got keys {sorted(spec.data)}")
    dm = make_datamodule(spec.data["corpus"], spec.data["tokenizer"], spec.train, data_dir)
    if "identity" in spec.data and dm.data_identity() != spec.data["identity"]:
        raise ValueError(f"run {spec.run_id}: the corpus {spec.data['corpus']!r} on disk differs from "
                         f"the one this spec was made with (rebuild it or make a new spec)")
    return dm


# ---------------------------------------------------------------------------------------------
# The store


#: Environment variable naming the default run store.
ENV_RUN_DIR = "GTALIB_RUN_DIR"


def default_run_dir() -> Path:
    """The default run store, shared by ``gtalib train``, ``gtalib runs`` and the book:
    ``$GTALIB_RUN_DIR`` if set, else ``runs/`` at the repository root."""
    env = os.environ.get(ENV_RUN_DIR)
    return Path(env).expanduser() if env else Path(__file__).resolve().parents[2] / "runs"


def resolve_run_dir(run_dir=None) -> Path:
    """``run_dir`` (``None``: :func:`default_run_dir`) as an absolute path."""
    return (Path(run_dir).expanduser() if run_dir is not None else default_run_dir()).resolve()


def is_run_id(name: str) -> bool:
    """Whether ``name`` has the shape of a run id (16 lower-case hex digits, :attr:`RunSpec.run_id`)."""
    return len(name) == 16 and all(c in "0123456789abcdef" for c in name)


def run_path(spec: RunSpec, run_dir) -> Path:
    """``run_dir / spec.run_id``."""
    return Path(run_dir) / spec.run_id


def is_done(path) -> bool:
    """Whether the run folder ``path`` holds a finished run (its ``DONE`` file exists)."""
    return (Path(path) / "DONE").exists()


def _resume_checkpoint(path: Path) -> Path | None:
    """``checkpoints/last.ckpt`` if present and readable. An unreadable one (killed while writing
    outside Lightning's atomic save, disk full) is set aside as ``last.ckpt.corrupt`` and the run
    restarts from scratch, with a warning.

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
    killed trainer leaves no stale lock, only its file; the block then receives the file's
    "pid N on HOST since T" of that holder (else ``None``). The file is removed on release."""
    import fcntl
    import socket

    file = path.with_name(f"{path.name}.lock")
    file.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                print(f"run {path.name} is being trained by {_lock_holder(fd)}; waiting", flush=True)
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
        stale = _lock_holder(fd) if os.fstat(fd).st_size else None
        now = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {now}".encode(), 0)
        yield stale
    finally:
        file.unlink(missing_ok=True)  # before unlocking: a waiter then sees the file is gone
        os.close(fd)


def _lock_holder(fd: int) -> str:
    """Who holds (or held) a lock, as its file says: "pid N on HOST since T"."""
    return os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"


def ensure_run(spec: RunSpec, run_dir, *, progress: bool = False, datamodule=None,
               data_dir=None, accelerator: str = "cpu", devices: int | str = 1, num_nodes: int = 1,
               strategy: str = "auto", callbacks: list | None = None,
               keep_checkpoint: bool = False) -> Path:
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
            the run is done; by default it is deleted (a ``cpu``-preset one is ~5 MB).

    A start that fails before the first checkpoint removes the folder it created, so no
    ``spec.json`` without ``DONE`` is left behind; the model and datamodule are built (and so
    validated) before the folder is created.

    Raises:
        FloatingPointError: the training loss became NaN/Inf (message names step and run id).
        ValueError: ``spec.json`` already in the folder describes a different spec.
        RunCorruptError: the folder has ``DONE`` but its files are corrupt or truncated, or its
            checkpoint holds objects other than tensors and plain data (never unpickled).
    """
    import lightning as L

    from gtalib.training.loop import LitGPT, fit

    path = run_path(spec, run_dir)
    if is_done(path):
        load_metrics(path)  # a DONE run with truncated/corrupt files raises, never passes as done
        return path
    spec_text = json.dumps(spec.to_dict(), indent=2, sort_keys=True)
    spec_file = path / "spec.json"
    if spec_file.exists() and RunSpec.from_dict(_read_json(spec_file)).hash_payload() \
            != spec.hash_payload():
        raise ValueError(f"{spec_file} describes a different run than the spec asked for")
    # DDP ranks other than 0 are started by rank 0, which holds the lock: they must not wait
    lock = _training_lock(path) if _is_rank_zero() else contextlib.nullcontext()
    with lock as stale:
        if is_done(path):  # trained meanwhile by the process this one waited for
            load_metrics(path)
            return path
        if stale:
            print(f"run {spec.run_id}: {stale} ended without finishing it; taking over", flush=True)
        started = time.time()
        created = not path.exists()
        with _quiet_lightning(not progress):
            ckpt = _resume_checkpoint(path) if not created else None
            L.seed_everything(spec.seed, workers=False, verbose=False)  # model init only
            module = LitGPT(spec.model, spec.train, run_id=spec.run_id)
            dm = datamodule if datamodule is not None else default_datamodule(spec, data_dir)
            path.mkdir(parents=True, exist_ok=True)
            _write_atomic(spec_file, spec_text)
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
        _write_metrics(path, module.history, spec)
        _write_card(path, spec, module, trainer, started, resumed=ckpt is not None)
        if datamodule is None and trainer.world_size == 1:
            # the gate probes of the final weights on the corpus's fixed held-out batch (a test's
            # own datamodule names no corpus; a sharded model is not whole on one process)
            from gtalib.training.probes import write_probes

            write_probes(path, module.model, spec, data_dir)
        _write_atomic(path / "DONE", _dt.datetime.now(_dt.timezone.utc).isoformat() + "\n")
        if not keep_checkpoint:
            shutil.rmtree(path / "checkpoints", ignore_errors=True)
        return path


def _write_metrics(path: Path, history: list[dict], spec: RunSpec) -> None:
    import pandas as pd

    df = pd.DataFrame(history)
    steps = df["step"].tolist() if len(df) else []
    if steps != list(range(1, spec.train.max_steps + 1)):
        raise RuntimeError(
            f"run {spec.run_id}: metrics history has steps {steps[:3]}...{steps[-3:]} "
            f"(n={len(steps)}), expected 1..{spec.train.max_steps} once each"
        )
    val_cols = sorted(c for c in df.columns if c.startswith("val_loss/"))
    df = df.reindex(columns=["step", "tokens", "train_loss", "val_loss", "lr", *val_cols])
    _write_atomic(path / "metrics.csv", df.to_csv(index=False))


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
    _write_atomic(path / "card.json", json.dumps(card, indent=2, sort_keys=True) + "\n")


def _package_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gtalib")
    except PackageNotFoundError:
        return None


#: ``metrics.csv`` columns that every row fills: integers (``step``, ``tokens``) and finite,
#: non-negative floats (``train_loss``, ``lr``). ``val_loss`` and ``val_loss/<source>`` are filled
#: on eval steps only (every ``eval_every`` steps and the last), with finite non-negative floats.
METRICS_INT_COLUMNS = ("step", "tokens")
METRICS_FLOAT_COLUMNS = ("train_loss", "lr")
METRICS_COLUMNS = ("step", "tokens", "train_loss", "val_loss", "lr")


def _metrics_error(path: Path, what: str, column: str | None = None, row: int | None = None,
                   step=None) -> RunCorruptError:
    where = "" if column is None else f", column {column!r}" + (
        "" if row is None else f", row {row}" + ("" if step is None else f" (step {step})"))
    return RunCorruptError(
        f"run {path.name}: {path / 'metrics.csv'}{where}: {what}; remove the run folder "
        f"(gtalib runs --remove) to retrain it",
        run_id=path.name, file=path / "metrics.csv", column=column, row=row)


def verify_metrics(cells, spec: RunSpec, path) -> None:
    """Check a run's ``metrics.csv``, read as text (``pandas.read_csv(file, dtype=str,
    keep_default_na=False)``), against its spec:

    * the columns :data:`METRICS_COLUMNS` exist;
    * every cell parses to its column's type: ``step``, ``tokens`` integers >= 0 (``step`` > 0);
      ``train_loss``, ``lr``, ``val_loss`` and ``val_loss/<source>`` finite floats >= 0 (losses
      are cross-entropies in nats); ``step``, ``tokens``, ``train_loss``, ``lr`` in every row;
    * steps are exactly ``1..max_steps`` in order (no truncation, gaps or repeats);
    * every eval step (``step % eval_every == 0`` and the last) has its ``val_loss``, and every
      row with a ``val_loss`` has each ``val_loss/<source>`` (the final evaluation is always
      logged; :class:`gtalib.training.config.TrainConfig` ``eval_every``).

    Raises:
        RunCorruptError: naming the run id, the file and, for a bad cell, its column and 1-based
            data row (with the step when it parsed).
    """
    import math

    path = Path(path)
    missing = [c for c in METRICS_COLUMNS if c not in cells.columns]
    if missing:
        raise _metrics_error(path, f"lacks the column(s) {missing} (has {list(cells.columns)})")
    val_cols = ["val_loss", *sorted(c for c in cells.columns if c.startswith("val_loss/"))]
    n, every = spec.train.max_steps, spec.train.eval_every
    steps = []
    for i, rec in enumerate(cells.to_dict("records"), 1):
        step = None
        for col in METRICS_INT_COLUMNS:
            text = rec[col].strip()
            try:
                v = int(text)
            except ValueError:
                raise _metrics_error(path, f"{text!r} is not an integer" if text else
                                     "empty cell (an integer is required)", col, i, step) from None
            if v < (1 if col == "step" else 0):
                raise _metrics_error(path, f"{v} is out of range", col, i, step)
            step = v if col == "step" else step
        steps.append(step)
        for col in (*METRICS_FLOAT_COLUMNS, *val_cols):
            text = rec[col].strip()
            if not text:
                if col in METRICS_FLOAT_COLUMNS:
                    raise _metrics_error(path, "empty cell (a number is required)", col, i, step)
                continue
            try:
                v = float(text)
            except ValueError:
                raise _metrics_error(path, f"{text!r} is not a number", col, i, step) from None
            if not (math.isfinite(v) and v >= 0):
                raise _metrics_error(path, f"{text!r} is not a finite number >= 0", col, i, step)
        if step % every == 0 or step == n:
            if not rec["val_loss"].strip():
                raise _metrics_error(path, f"empty val_loss on an eval step (every {every} steps "
                                     f"and the last)", "val_loss", i, step)
        if rec["val_loss"].strip():
            for col in val_cols[1:]:
                if not rec[col].strip():
                    raise _metrics_error(path, "empty cell on an eval step", col, i, step)
    if not steps or steps[-1] != n:
        last = steps[-1] if steps else None
        raise _metrics_error(path, f"truncated: last step {last}, the spec's max_steps is {n}")
    if steps != list(range(1, n + 1)):
        missing = sorted(set(range(1, n + 1)) - set(steps))
        raise _metrics_error(path, f"steps are not 1..{n} once each ({len(steps)} rows, "
                             f"missing {missing[:5]})", "step")


def load_metrics(path):
    """The per-step metrics of a finished run as a ``pandas.DataFrame`` (columns of the module
    docstring; ``val_loss*`` are NaN off eval steps), every cell checked against the run's
    ``spec.json`` (:func:`verify_metrics`).

    Raises:
        RunIncompleteError: ``path`` has no ``DONE`` (never trained, interrupted, or failed).
        RunCorruptError (a RunIncompleteError): ``DONE`` exists but ``spec.json`` or
            ``metrics.csv`` is unreadable, a cell is not of its column's type, or the metrics do
            not reach ``max_steps``; the message names run, file, column and row.
    """
    import pandas as pd

    path = Path(path)
    if not is_done(path):
        raise RunIncompleteError(
            f"run {path} is not finished (no DONE file); finish it with gtalib.training.runs.ensure_run"
        )
    return read_metrics(path)


def read_metrics(path):
    """:func:`load_metrics` without the ``DONE`` check: the checked metrics of any folder that
    holds a ``spec.json`` and a ``metrics.csv`` (a run folder, or a recorded run's bundle,
    :mod:`gtalib.training.records`).

    Raises:
        RunCorruptError: as :func:`load_metrics`.
    """
    import pandas as pd

    path = Path(path)
    spec = load_spec(path)
    if is_run_id(path.name) and spec.run_id != path.name:  # an edited spec.json, or a moved folder
        raise RunCorruptError(f"run {path.name}: spec.json describes run {spec.run_id}, not the "
                              f"folder's {path.name}; remove the folder to retrain",
                              run_id=path.name, file=path / "spec.json")
    file = path / "metrics.csv"
    try:
        cells = pd.read_csv(file, dtype=str, keep_default_na=False)
    except (OSError, ValueError, pd.errors.ParserError) as exc:  # missing, empty or garbled
        raise RunCorruptError(f"run {path.name}: cannot read {file} ({exc}); remove the run folder "
                              f"(gtalib runs --remove) to retrain it",
                              run_id=path.name, file=file) from None
    verify_metrics(cells, spec, path)
    return pd.read_csv(file)  # the checked text, parsed as it always was (int64 / float64, NaN)


def load_spec(path) -> RunSpec:
    """The :class:`RunSpec` stored in a run folder's ``spec.json``.

    Raises:
        RunCorruptError: ``spec.json`` is not valid JSON or not a spec (message names the file).
        FileNotFoundError: no ``spec.json``.
    """
    file = Path(path) / "spec.json"
    d = _read_json(file)
    try:
        return RunSpec.from_dict(d)
    except (KeyError, TypeError) as exc:
        raise RunCorruptError(f"{file} is not a run spec ({type(exc).__name__}: {exc})") from None


def load_card(path) -> dict:
    """The run card (``card.json``) of a run folder as a dict.

    Raises:
        RunCorruptError: ``card.json`` is not valid JSON (message names the file).
        FileNotFoundError: no ``card.json``.
    """
    return _read_json(Path(path) / "card.json")


def remove_run(path) -> None:
    """Delete a run folder (e.g. to retrain after a data change that kept the same identity)."""
    shutil.rmtree(path, ignore_errors=True)


@dataclass(frozen=True)
class RunState:
    """What :func:`check_store` found in one run folder.

    Attributes:
        run_id: the folder name. path: the folder.
        state: ``"done"`` (finished, files check out), ``"incomplete"`` (no ``DONE``: being
            trained, interrupted or failed) or ``"corrupt"`` (``DONE`` but a file does not check
            out: :class:`RunCorruptError`).
        detail: for ``incomplete``, whether a checkpoint to resume from exists; for ``corrupt``,
            the error (run, file, column, row).
    """

    run_id: str
    path: Path
    state: str
    detail: str = ""


def check_store(run_dir) -> list[RunState]:
    """The state of every run folder under ``run_dir`` (sub-folders named like a run id,
    :func:`is_run_id`; other folders are ignored), sorted by id; a finished run is read fully (:func:`load_metrics`, :func:`load_card` when
    present), so a ``done`` run is one the book can plot.

    Raises:
        FileNotFoundError: ``run_dir`` is not a folder.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run store {run_dir} is not a folder")
    out = []
    # only folders named like a run id: anything else in the folder is not the store's to judge
    # (and never removed by `gtalib runs --remove`)
    for path in sorted(p for p in run_dir.iterdir() if p.is_dir() and is_run_id(p.name)):
        if not is_done(path):
            ckpt = (path / "checkpoints" / "last.ckpt").exists()
            out.append(RunState(path.name, path, "incomplete",
                                "no DONE; resumes from checkpoints/last.ckpt when rerun" if ckpt
                                else "no DONE and no checkpoint: retrained from step 0 when rerun"))
            continue
        try:
            load_metrics(path)
            if (path / "card.json").exists():
                load_card(path)
        except RunCorruptError as exc:
            out.append(RunState(path.name, path, "corrupt", str(exc)))
            continue
        except FileNotFoundError as exc:  # DONE without spec.json
            out.append(RunState(path.name, path, "corrupt", f"run {path.name}: {exc}"))
            continue
        out.append(RunState(path.name, path, "done"))
    return out


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
