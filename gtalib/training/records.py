"""Recorded runs: finished runs kept in the repository as small bundles, so the book can show
runs too expensive for its default job (the scale ladder, the default book's most expensive
runs, GPU runs), and anyone can re-train one and check it against its record.

A bundle is ``<record_dir>/<run_id>/`` (default ``book/recorded/``, or ``$GTALIB_RECORD_DIR``)::

    spec.json     the RunSpec, as in the run store (the run id is its hash)
    metrics.csv   the per-step metrics, as in the run store
    card.json     the run card: versions, git commit, device, threads, machine kind, wall time
    probes.json   the gate probes of the final weights (gtalib.training.probes), when the run has them
    record.json   when and where it was recorded: UTC date, machine (CPU model, logical CPUs,
                  platform), the recording checkout's commit, library versions, the command
                  that re-trains and checks it, ``machine_kind``: the kind of the machine
                  that trained the run, from its card (null if the card has none: unknown),
                  and ``reproduced_on`` (when any): other kinds on which a re-training gave
                  every metrics cell bit for bit, each with when and at which commit

No checkpoint is kept. A bundle is written atomically (a temporary folder renamed into place),
so a half-written bundle never exists under its run id.

``gtalib record add RUN_FOLDER...`` records finished runs; ``gtalib record check [RUN_ID...]``
re-trains each one in a temporary store with the thread count its card names and compares every
metrics cell with the record. fp32 training on a CPU is bit-reproducible only on the same kind of
machine (:mod:`gtalib.training.machine`: oneMKL picks GEMM kernels by CPU vendor and instruction set,
ATen dispatches its kernels by CPU capability, the thread count sets the reduction order), so the
check compares this machine's kind (with the card's thread count) with the kind of the machine
that trained the record and reports exactly one of three outcomes:

* **bit-identical**: every metrics cell equal. Required when the kinds are the same: anything else
  is a mismatch ("same machine kind, bit-identity required").
* **within the cross-machine envelope**: the kinds differ, or the record's is unknown (bundles
  made before kinds were kept), and every cell is within :data:`CROSS_MACHINE_ENVELOPE`
  (:class:`Envelope`: |Δ train_loss| agrees to rounding over the first steps, then within a
  looser bound; |Δ val_loss| bounded at every evaluation; ``step``, ``tokens`` and ``lr`` always
  exact). Its numbers are measured across CPU kinds in ``benchmarks/cross_cpu.md``
  (``docs/cross_cpu.md``).
* **mismatch**: naming the run, the first step and column outside the bound, the recorded and
  re-trained values and the bound.

The command prints one line per run and a summary, and exits with 1 on any mismatch.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import platform
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from gtalib.training import runs as store
from gtalib.training.train import ensure_run

REPO = Path(__file__).resolve().parents[2]
#: Files copied from a finished run folder into its bundle.
BUNDLE_FILES = ("spec.json", "metrics.csv", "card.json")
#: Copied too when the run has them: the gate probes of its final weights (:mod:`gtalib.training.probes`).
OPTIONAL_BUNDLE_FILES = ("probes.json",)


def default_record_dir() -> Path:
    """``$GTALIB_RECORD_DIR`` or ``<repo>/book/recorded``."""
    return Path(os.environ.get("GTALIB_RECORD_DIR", REPO / "book" / "recorded"))


def machine() -> dict:
    """This machine for a record: CPU model, logical CPUs, GPU name (or None), platform."""
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu": store.cpu_model(), "logical_cpus": os.cpu_count(), "gpu": gpu,
            "platform": platform.platform()}


def versions() -> dict:
    """Versions of torch, Lightning, gtalib and Python (what a recorded result depends on)."""
    import lightning
    import torch

    import gtalib

    return {"torch": torch.__version__, "lightning": lightning.__version__,
            "gtalib": gtalib.__version__, "python": platform.python_version()}


def record_run(run_folder, record_dir=None, replace: bool = False) -> Path:
    """Copy the finished run ``run_folder`` into a bundle under ``record_dir``; return its path.

    An existing bundle of the same run id whose ``metrics.csv`` differs (a re-training on another
    machine kind, say) is replaced only with ``replace=True``, never by default. With
    equal metrics (a bit-identical re-training) the record keeps its first date and only gains
    what it lacked: the optional files (``probes.json``) and the kind of the machine that
    reproduced it: as its ``machine_kind`` where the bundle predates machine kinds
    (``machine_kind_source`` says so), else in ``reproduced_on`` when that kind is new to it
    (:func:`bit_identical_kinds`).

    Raises:
        RunIncompleteError / RunCorruptError: the run is not finished or its files are corrupt
            (from :func:`gtalib.training.runs.load_metrics` and :func:`gtalib.training.runs.load_card`).
        FileExistsError: a bundle of this run id holds other metrics and ``replace`` is false.
    """
    run_folder = Path(run_folder)
    store.load_metrics(run_folder)  # refuses unfinished or corrupt runs
    spec = store.load_spec(run_folder)
    # the machine that TRAINED the run (its card), not this one; None when the card predates
    # machine kinds: the check then treats the kind as unknown
    trained_on = store.load_card(run_folder).get("machine_kind")
    record_dir = Path(record_dir) if record_dir is not None else default_record_dir()
    dest = record_dir / spec.run_id
    if (dest / "metrics.csv").is_file() and \
            (dest / "metrics.csv").read_bytes() == (run_folder / "metrics.csv").read_bytes():
        _complete_bundle(dest, run_folder, trained_on)
        return dest
    if (dest / "metrics.csv").is_file() and not replace:
        raise FileExistsError(
            f"{dest} records run {spec.run_id} with other metrics than {run_folder} (trained "
            f"on another machine kind, or not the same run); kept as it is: pass --replace "
            f"(replace=True) to overwrite it")
    record_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.run_id}.", dir=record_dir))
    for name in BUNDLE_FILES:
        shutil.copy2(run_folder / name, tmp / name)
    for name in OPTIONAL_BUNDLE_FILES:
        if (run_folder / name).is_file():
            shutil.copy2(run_folder / name, tmp / name)
    record = {
        "run_id": spec.run_id,
        "describe": spec.describe(),
        "recorded_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "machine_kind": trained_on,
        "recording_commit": store.git_commit(),
        "versions": versions(),
        "check_command": f"gtalib record check {spec.run_id}",
    }
    (tmp / "record.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(tmp, dest)
    return dest


def _complete_bundle(dest: Path, run_folder: Path, trained_on: dict | None) -> None:
    """Add to the bundle ``dest`` the optional files it lacks and ``trained_on``, the kind of the
    machine that trained the run in ``run_folder`` (whose metrics are bit-identical): as the
    record's kind if that is unknown, else as a kind it was reproduced on, if new."""
    for name in OPTIONAL_BUNDLE_FILES:
        if (run_folder / name).is_file() and not (dest / name).is_file():
            store.write_atomic(dest / name, (run_folder / name).read_bytes())
    record = json.loads((dest / "record.json").read_text())
    known = [record.get("machine_kind"),
             *(r["machine_kind"] for r in record.get("reproduced_on", ()))]
    if trained_on is None or trained_on in known:
        return
    card = store.load_card(run_folder)
    where = (f"bit-identical re-training finished {card.get('finished_utc', '?')[:19]} UTC "
             f"at commit {str(card.get('git_commit', '?'))[:12]}")
    if record.get("machine_kind") is None:
        record["machine_kind"], record["machine_kind_source"] = trained_on, where
    else:
        record.setdefault("reproduced_on", []).append({"machine_kind": trained_on, "source": where})
    store.write_atomic(dest / "record.json", json.dumps(record, indent=2, sort_keys=True) + "\n")


def find_record(spec, record_dir=None) -> Path | None:
    """The bundle of ``spec`` (by run id) if one exists and its ``spec.json`` is this spec."""
    record_dir = Path(record_dir) if record_dir is not None else default_record_dir()
    folder = record_dir / spec.run_id
    if not (folder / "record.json").is_file():
        return None
    if store.load_spec(folder).hash_payload() != spec.hash_payload():
        raise store.RunCorruptError(f"{folder}/spec.json does not describe run {spec.run_id}")
    return folder


def load_record_metrics(folder):
    """The metrics of a bundle, every cell checked like a run store's
    (:func:`gtalib.training.runs.read_metrics`).

    Raises:
        RunCorruptError: unreadable, mistyped or truncated ``metrics.csv`` (names the file).
    """
    return store.read_metrics(folder)


def load_record_info(folder) -> dict:
    """``record.json`` of a bundle (when and where it was recorded)."""
    return store.read_json(Path(folder) / "record.json")


def record_label(info: dict) -> str:
    """One-line provenance of a bundle: ``"recorded 2026-11-30 on <CPU> (2 logical CPUs)"``."""
    m = info.get("machine", {})
    where = m.get("gpu") or f"{m.get('cpu', '?')} ({m.get('logical_cpus', '?')} logical CPUs)"
    return f"recorded {info.get('recorded_utc', '?')[:10]} on {where}"


def list_records(record_dir=None) -> list[Path]:
    """Every bundle folder under ``record_dir`` (sorted by run id)."""
    record_dir = Path(record_dir) if record_dir is not None else default_record_dir()
    if not record_dir.is_dir():
        return []
    return sorted(p for p in record_dir.iterdir() if (p / "record.json").is_file())


#: Columns that must match exactly on every machine: a difference there is a different run.
EXACT_COLUMNS = ("step", "tokens", "lr")


def is_loss_column(column: str) -> bool:
    """Whether ``column`` of ``metrics.csv`` holds a loss in nats: ``train_loss``, ``val_loss``
    or ``val_loss/<source>``."""
    return column in ("train_loss", "val_loss") or column.startswith("val_loss/")


@dataclass(frozen=True)
class Envelope:
    """How far a re-trained curve may lie from its record when it was re-trained on a machine of
    another kind (:mod:`gtalib.training.machine`): the kernels then round differently, the curves start
    equal to rounding and drift apart slowly, while a real change (init, learning rate, gate,
    data order, model formula) moves the loss by far more within the first steps.

    Attributes:
        early_steps: the early window, in steps (steps ``1..early_steps``).
        early_tol: largest |Δ| (nats) of every loss column at a step of the early window
            ("agree to rounding").
        train_tol: largest |Δ train_loss| (nats) at any later step.
        val_tol: largest |Δ| (nats) of ``val_loss`` and of every ``val_loss/<source>`` at every
            later evaluation step, the final one included.

    The columns ``step``, ``tokens`` and ``lr`` must match exactly (:data:`EXACT_COLUMNS`).

    Raises:
        ValueError: ``early_steps`` not a non-negative integer, or a tolerance not a finite
            number >= 0 (the message names the field).
    """

    early_steps: int
    early_tol: float
    train_tol: float
    val_tol: float

    def __post_init__(self):
        if not isinstance(self.early_steps, int) or isinstance(self.early_steps, bool) \
                or self.early_steps < 0:
            raise ValueError(f"Envelope.early_steps must be an integer >= 0 (steps), "
                             f"got {self.early_steps!r}")
        for name in ("early_tol", "train_tol", "val_tol"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < float("inf"):
                raise ValueError(f"Envelope.{name} must be a finite number >= 0 (nats), got {v!r}")

    def bound(self, step: int, column: str) -> float:
        """The largest allowed |recorded − re-trained| of ``column`` at ``step`` (nats for the
        loss columns, 0 for :data:`EXACT_COLUMNS`).

        Raises:
            ValueError: ``step`` not a positive integer, or ``column`` none of ``step``,
                ``tokens``, ``lr``, ``train_loss``, ``val_loss``, ``val_loss/<source>``.
        """
        if not isinstance(step, int) or isinstance(step, bool) or step < 1:
            raise ValueError(f"step must be a positive integer (a metrics.csv step), got {step!r}")
        if column in EXACT_COLUMNS:
            return 0.0
        if is_loss_column(column):
            if step <= self.early_steps:
                return self.early_tol
            return self.train_tol if column == "train_loss" else self.val_tol
        raise ValueError(f"column must be one of {', '.join(EXACT_COLUMNS)}, train_loss, "
                         f"val_loss, val_loss/<source>; got {column!r}")


#: The envelope a re-trained curve must stay in when this machine's kind differs from the
#: recording one's or is unknown, derived from re-trainings of recorded runs under emulated CPU
#: kinds (``benchmarks/cross_cpu.md``, data in ``benchmarks/cross_cpu/``; the rule and what it can
#: detect: ``docs/cross_cpu.md``): steps 1-10 within 10x the largest |Δ| measured there, later
#: steps within 1.5x the largest measured (one 2-layer MLA run, whose curves drift furthest).
#: ``tests/training/test_records.py`` re-derives these numbers from the data.
CROSS_MACHINE_ENVELOPE = Envelope(early_steps=10, early_tol=1e-5, train_tol=0.6, val_tol=0.4)

#: The outcomes of a check (:class:`CheckResult`).
OUTCOMES = ("bit-identical", "within envelope", "mismatch")


class CellDiff(NamedTuple):
    """One metrics cell of a comparison: its step and column, the recorded and re-trained values
    (NaN for an empty cell) and the bound it is held to (nats for a loss column)."""

    step: int
    column: str
    recorded: float
    retrained: float
    bound: float


@dataclass(frozen=True)
class CheckResult:
    """Outcome of comparing a re-trained run with its record (:func:`compare_metrics`,
    :func:`check_record`).

    Attributes:
        run_id: the run.
        outcome: one of :data:`OUTCOMES`: ``"bit-identical"`` (every metrics cell equal),
            ``"within envelope"`` (not identical, every cell within its bound) or ``"mismatch"``.
        max_abs_diff: largest |recorded − re-trained| (nats) of each loss column, in column order
            (empty when the frames' columns or rows differ).
        first_diff: for a mismatch, the first cell (in step order, then column order) outside its
            bound; for ``within envelope``, the first cell that differs at all; ``None`` when
            bit-identical or when the columns or rows differ.
        reason: which bound applied and why: from :func:`compare_metrics` ``"bit-identity
            required"`` or ``"cross-machine envelope"``; from :func:`check_record` ``"same machine
            kind, bit-identity required"``, ``"machine kind differs: <key>: <recorded> ->
            <here>; ..."`` or ``"machine kind of the record unknown"``; followed by the columns
            or rows that differ when they do.
    """

    run_id: str
    outcome: str
    max_abs_diff: dict
    first_diff: CellDiff | None
    reason: str

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {self.outcome!r}")

    @property
    def ok(self) -> bool:
        """Not a mismatch."""
        return self.outcome != "mismatch"

    def message(self) -> str:
        """One line: the run, the outcome, the reason and the numbers (first differing or
        failing cell with its bound, the largest |Δ| per loss column)."""
        worst = ", ".join(f"{c} {d:.3g}" for c, d in self.max_abs_diff.items())
        worst = f"; max |Δ| (nats): {worst}" if worst else ""
        cell = ""
        if self.first_diff is not None:
            step, col, a, b, bound = self.first_diff
            cmp = ">" if self.outcome == "mismatch" else "<="
            cell = (f" at step {step}, column {col}: recorded {a!r}, re-trained {b!r} "
                    f"(|Δ| {abs(a - b):.3g} {cmp} bound {bound:g})")
        if self.outcome == "bit-identical":
            return f"{self.run_id}: bit-identical, every metrics cell equal ({self.reason})"
        if self.outcome == "within envelope":
            return (f"{self.run_id}: within the cross-machine envelope, not bit-identical "
                    f"({self.reason}); first difference{cell}{worst}")
        return f"{self.run_id}: MISMATCH ({self.reason}){cell}{worst}"


def compare_metrics(run_id: str, recorded, retrained,
                    envelope: Envelope | None = None) -> CheckResult:
    """Compare two metrics frames of the same run (:func:`gtalib.training.runs.load_metrics`) cell by cell.

    Args:
        envelope: the bound of each cell (:meth:`Envelope.bound`); ``None``: every cell must be
            equal (bit-identity required). An empty cell (NaN) must be empty in both frames.

    Returns:
        A :class:`CheckResult` whose ``reason`` names the bound that applied (``"bit-identity
        required"`` or ``"cross-machine envelope"``): ``"bit-identical"`` if every cell is
        equal; else ``"within envelope"`` if an envelope is given and every cell is within its
        bound; else ``"mismatch"`` (also when the columns or the number of rows differ; the
        reason then says which).

    Raises:
        ValueError: ``envelope`` neither an :class:`Envelope` nor ``None``; a column the envelope
            does not know (:meth:`Envelope.bound`).
    """
    import numpy as np

    if envelope is not None and not isinstance(envelope, Envelope):
        raise ValueError(f"envelope must be an Envelope or None (bit-identity required), "
                         f"got {envelope!r}")
    if list(recorded.columns) != list(retrained.columns):
        return CheckResult(run_id, "mismatch", {}, None, f"columns differ: recorded "
                           f"{list(recorded.columns)}, re-trained {list(retrained.columns)}")
    if len(recorded) != len(retrained):
        return CheckResult(run_id, "mismatch", {}, None, f"rows differ: recorded "
                           f"{len(recorded)}, re-trained {len(retrained)}")
    cols, steps = list(recorded.columns), [int(s) for s in recorded["step"]]
    a, b = recorded.to_numpy(dtype=float), retrained.to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        d = np.abs(a - b)
    # both empty: equal; one side empty: outside every bound
    d = np.where(np.isnan(a) & np.isnan(b), 0.0, np.where(np.isnan(d), np.inf, d))
    bounds = np.zeros_like(d) if envelope is None else np.array(
        [[envelope.bound(s, c) for c in cols] for s in steps], dtype=float).reshape(d.shape)
    worst = {c: float(d[:, j].max()) if len(d) else 0.0
             for j, c in enumerate(cols) if is_loss_column(c)}

    def first(mask) -> CellDiff | None:  # first True cell in step order, then column order
        hits = np.argwhere(mask)
        if not len(hits):
            return None
        i, j = hits[0]
        return CellDiff(steps[i], cols[j], float(a[i, j]), float(b[i, j]), float(bounds[i, j]))

    reason = "bit-identity required" if envelope is None else "cross-machine envelope"
    first_diff, outside = first(d > 0), first(d > bounds)
    if first_diff is None:
        return CheckResult(run_id, "bit-identical", worst, None, reason)
    if outside is not None:
        return CheckResult(run_id, "mismatch", worst, outside, reason)
    return CheckResult(run_id, "within envelope", worst, first_diff, reason)


def record_machine_kind(folder) -> dict | None:
    """The machine kind (:func:`gtalib.training.machine.machine_kind`) of the machine that trained a
    bundle's run: ``record.json``'s ``machine_kind``, else ``card.json``'s; ``None`` (unknown)
    for a bundle recorded before kinds were kept."""
    folder = Path(folder)
    return (load_record_info(folder).get("machine_kind")
            or store.load_card(folder).get("machine_kind"))


def bit_identical_kinds(folder) -> list[dict]:
    """Every machine kind known to give a bundle's metrics bit for bit: the kind that trained it
    (:func:`record_machine_kind`) and those its ``reproduced_on`` names (a re-training there was
    recorded with equal metrics, :func:`record_run`); empty when the kind is unknown. Two runs
    sharing one of these are as if trained on one machine, which is what a ΔL pair needs
    (``docs/cross_cpu.md``)."""
    trained = record_machine_kind(folder)
    if trained is None:
        return []
    return [trained] + [r["machine_kind"] for r in load_record_info(folder).get("reproduced_on", ())]


def _check_envelope(envelope) -> None:
    if not isinstance(envelope, Envelope):
        raise ValueError(f"envelope must be an Envelope (e.g. CROSS_MACHINE_ENVELOPE), "
                         f"got {envelope!r}")


def compare_with_record(folder, retrained, here_kind: dict | None,
                        envelope: Envelope = CROSS_MACHINE_ENVELOPE) -> CheckResult:
    """Compare a re-training of a bundle's run with the bundle (:func:`compare_metrics`).

    The machine kind of the re-training (``here_kind``: its card's ``machine_kind``, ``None``
    when unknown) is compared with the record's (:func:`record_machine_kind`): the same kind, or
    one that reproduced the record before (:func:`bit_identical_kinds`), requires a
    bit-identical curve (otherwise: mismatch, "same machine kind, bit-identity required"); a
    different or unknown kind allows ``envelope``.

    Args:
        folder: the bundle. retrained: the re-training's metrics frame
            (:func:`gtalib.training.runs.load_metrics`).
        envelope: the bound across machine kinds (default :data:`CROSS_MACHINE_ENVELOPE`).

    Returns:
        the :class:`CheckResult`, its ``reason`` saying which rule applied and why.

    Raises:
        ValueError: ``envelope`` not an :class:`Envelope`.
        RunCorruptError: a bundle file is unreadable (names the file).
    """
    from gtalib.training.machine import kind_differences, same_kind

    _check_envelope(envelope)
    folder = Path(folder)
    run_id = store.load_spec(folder).run_id
    recorded = load_record_metrics(folder)
    recorded_kind = record_machine_kind(folder)
    if same_kind(recorded_kind, here_kind):
        why, res = ("same machine kind, bit-identity required",
                    compare_metrics(run_id, recorded, retrained, None))
    elif any(same_kind(k, here_kind) for k in bit_identical_kinds(folder)):
        why, res = ("this machine kind reproduced the record before, bit-identity required",
                    compare_metrics(run_id, recorded, retrained, None))
    else:
        why = ("machine kind of the record unknown" if recorded_kind is None else
               "machine kind of the re-training unknown" if here_kind is None else
               f"machine kind differs: {'; '.join(kind_differences(recorded_kind, here_kind))}")
        res = compare_metrics(run_id, recorded, retrained, envelope)
    if res.outcome == "mismatch" and res.first_diff is None:  # columns or rows differ
        why = f"{why}; {res.reason}"
    return dataclasses.replace(res, reason=why)


def check_record(folder, envelope: Envelope = CROSS_MACHINE_ENVELOPE, work_dir=None,
                 accelerator: str = "cpu", log=print) -> CheckResult:
    """Re-train the bundle's run from scratch in a temporary store, with the thread count of its
    card, and compare it with the record (:func:`compare_with_record`: bit-identity on the
    record's machine kind, ``envelope`` across kinds).

    Args:
        envelope: the bound across machine kinds (default :data:`CROSS_MACHINE_ENVELOPE`).
        work_dir: where to train (default a temporary folder, deleted afterwards; a run already
            finished there is compared as it is).
        accelerator: passed to :func:`gtalib.training.train.ensure_run`.

    Raises:
        ValueError: ``envelope`` not an :class:`Envelope`.
        RunCorruptError: a bundle file is unreadable (names the file).
    """
    import torch

    _check_envelope(envelope)
    folder = Path(folder)
    spec = store.load_spec(folder)
    load_record_metrics(folder)  # a corrupt bundle fails before the re-training, not after
    threads = store.load_card(folder).get("threads")
    old_threads = torch.get_num_threads()
    tmp = Path(work_dir) if work_dir is not None else Path(tempfile.mkdtemp(prefix="gtalib-check-"))
    log(f"re-training {spec.run_id} ({spec.describe()}) with {threads} thread(s) ...")
    try:
        if threads:
            torch.set_num_threads(int(threads))
        path = ensure_run(spec, tmp, accelerator=accelerator)
        retrained = store.load_metrics(path)
        here_kind = store.load_card(path).get("machine_kind")
    finally:
        torch.set_num_threads(old_threads)
        if work_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return compare_with_record(folder, retrained, here_kind, envelope)
