"""Recorded runs: finished runs kept in the repository as small bundles, so the book can show
runs too expensive for its default job (the scale ladder, the default book's most expensive
runs, GPU runs), and anyone can re-train one and check it against its record.

A bundle is ``<record_dir>/<run_id>/`` (default ``book/recorded/``, or ``$GTALIB_RECORD_DIR``)::

    spec.json     the RunSpec, as in the run store (the run id is its hash)
    metrics.csv   the per-step metrics, as in the run store
    card.json     the run card: versions, git commit, device, threads, wall time
    record.json   when and where it was recorded: UTC date, machine (CPU model, logical CPUs,
                  platform), the recording checkout's commit, library versions, the command
                  that re-trains and checks it

No checkpoint is kept. A bundle is written atomically (a temporary folder renamed into place),
so a half-written bundle never exists under its run id.

``gtalib record add RUN_FOLDER...`` records finished runs; ``gtalib record check [RUN_ID...]``
re-trains each one in a temporary store with the thread count its card names and compares every
metrics cell: equal bit for bit, or within ``tolerance`` (absolute, nats) when asked, else it
reports the run and the first differing step and column.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gtalib import runs as store

REPO = Path(__file__).resolve().parents[1]
#: Files copied from a finished run folder into its bundle.
BUNDLE_FILES = ("spec.json", "metrics.csv", "card.json")
#: Default tolerance of :func:`check_record` when the re-trained curve is not bit-identical: none.
#: A check on a machine whose CPU kernels differ from the recording one may pass a tolerance
#: (``--tolerance``); it is then stated in the report.
DEFAULT_TOLERANCE = 0.0


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


def record_run(run_folder, record_dir=None) -> Path:
    """Copy the finished run ``run_folder`` into a bundle under ``record_dir``; return its path.

    An existing bundle of the same run id is replaced only if its ``metrics.csv`` differs (the
    record keeps its first date otherwise).

    Raises:
        RunIncompleteError / RunCorruptError: the run is not finished or its files are corrupt
            (from :func:`gtalib.runs.load_metrics`).
    """
    run_folder = Path(run_folder)
    store.load_metrics(run_folder)  # refuses unfinished or corrupt runs
    spec = store.load_spec(run_folder)
    record_dir = Path(record_dir) if record_dir is not None else default_record_dir()
    dest = record_dir / spec.run_id
    if (dest / "metrics.csv").is_file() and \
            (dest / "metrics.csv").read_bytes() == (run_folder / "metrics.csv").read_bytes():
        return dest
    record_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.run_id}.", dir=record_dir))
    for name in BUNDLE_FILES:
        shutil.copy2(run_folder / name, tmp / name)
    record = {
        "run_id": spec.run_id,
        "describe": spec.describe(),
        "recorded_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "recording_commit": store.git_commit(),
        "versions": versions(),
        "check_command": f"gtalib record check {spec.run_id}",
    }
    (tmp / "record.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(tmp, dest)
    return dest


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
    (:func:`gtalib.runs.read_metrics`).

    Raises:
        RunCorruptError: unreadable, mistyped or truncated ``metrics.csv`` (names the file).
    """
    return store.read_metrics(folder)


def load_record_info(folder) -> dict:
    """``record.json`` of a bundle (when and where it was recorded)."""
    return store._read_json(Path(folder) / "record.json")


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


@dataclass
class CheckResult:
    """Outcome of :func:`check_record`.

    Attributes:
        run_id: the run. identical: every metrics cell equal bit for bit.
        max_abs_diff: largest |recorded − re-trained| over the loss columns (nats).
        first_diff: ``(step, column, recorded, retrained)`` of the first cell off by more than
            the tolerance, or ``None``. ok: no such cell.
    """

    run_id: str
    identical: bool
    max_abs_diff: float
    tolerance: float
    first_diff: tuple | None

    @property
    def ok(self) -> bool:
        return self.first_diff is None

    def message(self) -> str:
        if self.identical:
            return f"{self.run_id}: re-trained curve is bit-identical to the record"
        if self.ok:
            return (f"{self.run_id}: re-trained curve within tolerance {self.tolerance:g} nats "
                    f"(max |Δ| = {self.max_abs_diff:.3g}), not bit-identical")
        step, col, a, b = self.first_diff
        return (f"{self.run_id}: MISMATCH from step {step}, column {col}: recorded {a!r}, "
                f"re-trained {b!r} (max |Δ| = {self.max_abs_diff:.3g} nats, tolerance "
                f"{self.tolerance:g})")


def compare_metrics(run_id: str, recorded, retrained, tolerance: float = DEFAULT_TOLERANCE) -> CheckResult:
    """Compare two metrics frames of the same run cell by cell (loss columns within ``tolerance``
    nats, the others exactly); see :class:`CheckResult`.

    Raises:
        ValueError: ``tolerance`` negative.
    """
    import numpy as np

    if not tolerance >= 0:
        raise ValueError(f"tolerance must be >= 0 nats, got {tolerance!r}")
    cols = [c for c in recorded.columns if c in retrained.columns]
    if list(recorded.columns) != list(retrained.columns) or len(recorded) != len(retrained):
        return CheckResult(run_id, False, float("inf"), tolerance,
                           (None, "shape", list(recorded.columns), list(retrained.columns)))
    identical = recorded.equals(retrained)
    worst, first = 0.0, None
    for i in range(len(recorded)):
        for c in cols:
            a, b = recorded[c].iloc[i], retrained[c].iloc[i]
            if (isinstance(a, float) and np.isnan(a)) and (isinstance(b, float) and np.isnan(b)):
                continue
            d = abs(float(a) - float(b))
            worst = max(worst, d)
            limit = tolerance if "loss" in c else 0.0
            if first is None and not d <= limit:
                first = (int(recorded["step"].iloc[i]), c, float(a), float(b))
    return CheckResult(run_id, identical, worst, tolerance, first)


def check_record(folder, tolerance: float = DEFAULT_TOLERANCE, work_dir=None,
                 accelerator: str = "cpu", log=print) -> CheckResult:
    """Re-train the bundle's run from scratch in a temporary store, with the thread count of its
    card, and compare its metrics with the record (:func:`compare_metrics`).

    Args:
        work_dir: where to train (default a temporary folder, deleted afterwards).
    """
    import torch

    folder = Path(folder)
    spec = store.load_spec(folder)
    recorded = load_record_metrics(folder)
    card = store.load_card(folder)
    threads = card.get("threads")
    old_threads = torch.get_num_threads()
    tmp = Path(work_dir) if work_dir is not None else Path(tempfile.mkdtemp(prefix="gtalib-check-"))
    log(f"re-training {spec.run_id} ({spec.describe()}) with {threads} thread(s) ...")
    try:
        if threads:
            torch.set_num_threads(int(threads))
        path = store.ensure_run(spec, tmp, accelerator=accelerator)
        retrained = store.load_metrics(path)
    finally:
        torch.set_num_threads(old_threads)
        if work_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return compare_metrics(spec.run_id, recorded, retrained, tolerance)


# ---------------------------------------------------------------------------------------------
# CLI: gtalib record {add,list,check}


def add_cli(subparsers) -> argparse.ArgumentParser:
    """Register ``gtalib record`` on an argparse ``subparsers`` object (:mod:`gtalib.cli`)."""
    p = subparsers.add_parser("record", help="recorded runs: add, list, re-train and check",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="record_command", metavar="ACTION", required=True)
    a = sub.add_parser("add", help="record finished runs (run folders of a run store)")
    a.add_argument("runs", nargs="+", help="run folders, e.g. runs/<run_id>")
    a.add_argument("--record-dir", default=None, help="default $GTALIB_RECORD_DIR or book/recorded")
    a.set_defaults(func=_cli_add)
    ls = sub.add_parser("list", help="list the recorded runs")
    ls.add_argument("--record-dir", default=None)
    ls.set_defaults(func=_cli_list)
    c = sub.add_parser("check", help="re-train recorded runs and compare them with the record")
    c.add_argument("run_ids", nargs="*", help="run ids (default: all; see `gtalib record list`)")
    c.add_argument("--record-dir", default=None)
    c.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                   help="allowed |Δ| in nats on the loss columns (default 0: bit-identical)")
    c.set_defaults(func=_cli_check)
    return p


def _cli_add(args) -> int:
    bad = 0
    for r in args.runs:
        try:
            print(record_run(r, args.record_dir))
        except (store.RunIncompleteError, FileNotFoundError) as exc:  # unfinished, corrupt, absent
            print(f"not recorded: {exc}")
            bad += 1
    return 1 if bad else 0


def _cli_list(args) -> int:
    rows = [("run_id", "n_layer", "d_model", "run", "recorded")]
    for folder in list_records(args.record_dir):
        spec = store.load_spec(folder)
        rows.append((folder.name, str(spec.model.n_layer), str(spec.model.d_model), spec.describe(),
                     record_label(load_record_info(folder))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    try:
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
        sys.stdout.flush()
    except BrokenPipeError:  # the reader stopped early (`| head`): not an error of the listing
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
    return 0


def _cli_check(args) -> int:
    if not args.tolerance >= 0:  # before hours of re-training
        raise ValueError(f"--tolerance must be >= 0 nats, got {args.tolerance!r}")
    record_dir = Path(args.record_dir) if args.record_dir else default_record_dir()
    folders = [record_dir / rid for rid in args.run_ids] if args.run_ids else list_records(record_dir)
    if not folders:
        raise ValueError(f"--record-dir {record_dir}: no recorded run there")
    missing = [f.name for f in folders if not (f / "record.json").is_file()]
    if missing:
        raise ValueError(f"no recorded run {', '.join(missing)} in {record_dir} "
                         f"(see `gtalib record list`)")
    bad = 0
    for folder in folders:
        res = check_record(folder, args.tolerance)
        print(res.message(), flush=True)
        bad += not res.ok
    print(f"recorded runs checked: {len(folders) - bad} match, {bad} mismatch")
    return 1 if bad else 0

