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

import copy
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gtalib.model.config import ModelConfig
from gtalib.training.disk import write_file
from gtalib.training.machine import cpu_info
from gtalib.training.config import NON_RESULT_FIELDS, TrainConfig

#: Bump whenever a change to gtalib's model or training math changes the numbers a run produces
#: (the run hash includes it, so stale runs are not reused).
MODEL_MATH_VERSION = 1

#: ModelConfig fields that do not change the result beyond floating-point rounding: which
#: attention implementation computes the same function.
_MODEL_NON_RESULT_FIELDS = frozenset({"attn_impl"})

#: The fields a run id hashes whatever their value: those of ``ModelConfig`` and ``TrainConfig``
#: when the hash was fixed (every run recorded in ``book/recorded/`` was named by them). A field
#: added later is hashed only where its value differs from its default (:meth:`RunSpec.hash_payload`),
#: so an option added with a default value (RoPE on or off, say) leaves every existing run id as
#: it was. Never add a field to these sets: that would move every id.
ALWAYS_HASHED_MODEL_FIELDS = frozenset({
    "variant", "n_layer", "d_model", "n_head", "head_dim", "vocab_size", "block_size",
    "intermediate_size", "n_kv_head", "gqa_group", "kv_lora_rank", "q_lora_rank",
    "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "tpa_q_rank", "tpa_rank", "init",
    "gate", "latent_scale", "head_multiplier", "rope_theta", "init_std"})
ALWAYS_HASHED_TRAIN_FIELDS = frozenset({
    "max_steps", "batch_size", "seq_len", "micro_batch_size", "lr", "min_lr_ratio",
    "warmup_steps", "weight_decay", "beta1", "beta2", "eps", "grad_clip", "eval_every",
    "eval_windows", "data_seed", "precision"})


def _hashed_fields(config, always: frozenset, left_out: frozenset) -> dict:
    """The fields of the dataclass ``config`` that a run id hashes: those in ``always``, and any
    other whose value differs from the field's default; never those in ``left_out``."""
    defaults = {f.name: f.default for f in dataclasses.fields(config)}
    return {k: v for k, v in dataclasses.asdict(config).items()
            if k not in left_out and (k in always or v != defaults[k])}


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


def read_json(file: Path) -> dict:
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
        """JSON-serialisable form (written to ``spec.json``): a copy, so that a caller that edits
        it leaves the spec, and its run id, as they are."""
        return {"model": self.model.to_dict(), "train": self.train.to_dict(),
                "data": copy.deepcopy(self.data),
                "seed": self.seed, "model_math_version": MODEL_MATH_VERSION}

    @classmethod
    def from_dict(cls, d: dict) -> "RunSpec":
        """Inverse of :meth:`to_dict` (``model_math_version`` is ignored)."""
        return cls(ModelConfig(**d["model"]), TrainConfig(**d["train"]), dict(d["data"]), int(d["seed"]))

    def hash_payload(self) -> dict:
        """What the run id hashes: the *resolved* model config (so spelling a derived size out or
        leaving it to the rules gives the same id), the training config without fields that do
        not change the result (checkpoint interval, loader workers), the data identity, the seed
        and :data:`MODEL_MATH_VERSION`. Of either config, a field outside
        :data:`ALWAYS_HASHED_MODEL_FIELDS` / :data:`ALWAYS_HASHED_TRAIN_FIELDS` (one added after
        the hash was fixed) is left out while it has its default value, so adding an option with
        a default keeps every run's id."""
        model = _hashed_fields(self.model.resolved(), ALWAYS_HASHED_MODEL_FIELDS,
                               _MODEL_NON_RESULT_FIELDS)
        train = _hashed_fields(self.train, ALWAYS_HASHED_TRAIN_FIELDS, NON_RESULT_FIELDS)
        return {"model": model, "train": train, "data": self.data, "seed": self.seed,
                "model_math_version": MODEL_MATH_VERSION}

    @property
    def run_id(self) -> str:
        """First 16 hex digits of the sha256 of the canonical JSON of :meth:`hash_payload`."""
        text = json.dumps(self.hash_payload(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """One line for progress output: variant, head count, options, seed (and the data
        order where it is not the default 0).

        Resolved configs fold the double-heads option into ``n_head``, so the head count is shown.
        """
        m = self.model
        opts = [f"n_head={m.n_head}", f"init={m.init}"] + (["gate"] if m.gate else []) \
            + ([] if m.latent_scale else ["no-latent-scale"])
        order = f" data_seed={self.train.data_seed}" if self.train.data_seed else ""
        return f"{m.variant} {' '.join(opts)} seed={self.seed}{order} steps={self.train.max_steps}"


# ---------------------------------------------------------------------------------------------
# Small file helpers


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text, or bytes) to ``path`` via a temporary file of this process,
    ``fsync`` and ``os.replace`` (:func:`gtalib.training.disk.write_file`: a reader sees the old
    file or the new one, whole; a full disk leaves the old one)."""
    write_file(path, data)


def git_commit() -> str | None:
    """HEAD commit of the repository gtalib is imported from, or None outside a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` knows
    (:func:`gtalib.training.machine.cpu_info`)."""
    return cpu_info()["model_name"]


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


def write_metrics(path: Path, history: list[dict], spec: RunSpec) -> None:
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
    write_atomic(path / "metrics.csv", df.to_csv(index=False))


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

    path = Path(path)
    if not is_done(path):
        if not path.is_dir():
            raise RunIncompleteError(f"run folder {path}: no such folder")
        if not (path / "spec.json").is_file():
            raise RunIncompleteError(f"{path} is not a run folder (no spec.json); a run is "
                                     f"<run_dir>/<run_id>, listed by `gtalib runs`")
        raise RunIncompleteError(
            f"run {path} is not finished (no DONE file): `gtalib train` or `gtalib book` "
            f"resumes it from its last checkpoint")
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
    # a file cut short ends inside a row, not after a line end (pandas.to_csv ends every row)
    if file.is_file() and not file.read_bytes().endswith(b"\n"):
        raise _metrics_error(path, "truncated: its last row is cut off (no line end)")
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
    d = read_json(file)
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
    return read_json(Path(path) / "card.json")


def remove_run(path) -> None:
    """Delete a run folder (e.g. to retrain after a data change that kept the same identity)."""
    shutil.rmtree(path, ignore_errors=True)


@dataclass(frozen=True)
class RunState:
    """What :func:`check_store` found in one run folder.

    Attributes:
        run_id: the folder name. path: the folder.
        state: ``"done"`` (finished, files check out), ``"training"`` (no ``DONE``, and a
            process holds its lock: :func:`lock_holder`), ``"incomplete"`` (no ``DONE`` and no
            process training it: interrupted or failed) or ``"corrupt"`` (``DONE`` but a file does not check
            out: :class:`RunCorruptError`).
        detail: for ``training``, which process on which host trains it; for ``incomplete``,
            whether a checkpoint to resume from exists; for ``corrupt``,
            the error (run, file, column, row).
    """

    run_id: str
    path: Path
    state: str
    detail: str = ""


def lock_file(path) -> Path:
    """The lock file of the run folder ``path``: ``<run_id>.lock`` beside it, held
    (``fcntl.flock``) by the process that trains the run (:func:`gtalib.training.train.ensure_run`)
    and naming it ("pid N on HOST since T")."""
    path = Path(path)
    return path.with_name(f"{path.name}.lock")


def holder_text(fd: int) -> str:
    """Who holds (or held) a lock, as its open lock file ``fd`` says: "pid N on HOST since T"."""
    return os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"


def lock_holder(path) -> str | None:
    """Who trains the run folder ``path`` now, as its lock file says ("pid N on HOST since T"),
    or ``None`` when no process holds the lock (a file left by a killed process is not held)."""
    import fcntl

    try:
        fd = os.open(lock_file(path), os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return holder_text(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


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
            holder = lock_holder(path)
            if holder is not None:
                out.append(RunState(path.name, path, "training", f"being trained by {holder}"))
                continue
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
