#!/usr/bin/env python
"""How close the book's wall-time prediction comes to the wall time it then measures.

Usage (from the repo root):

    .venv/bin/python benchmarks/budget_prediction.py --preset ci              # about 3 minutes
    .venv/bin/python benchmarks/budget_prediction.py --preset cpu --budget 15  # about 15 minutes
    .venv/bin/python benchmarks/budget_prediction.py --preset cpu --budget 30 --only gating_ablation

Builds the book at ``--preset`` end to end (``gtalib.book.pipeline.job.build_book``: corpus, training
through the embedded Dask cluster, notebooks, HTML) into a temporary copy of ``book/`` and an
empty temporary run store, with the budget given (``--only``: those notebooks, and only the runs
they read, as ``gtalib book --only`` does: the gating page's 1,000-step runs alone; no HTML then,
since the other pages' links cannot resolve), and records what the job predicted before it
trained (:mod:`gtalib.book.pipeline.budget`: a short timed calibration of every step shape,
then each run's steps at its shape's seconds per step, with its evaluations and setup) against
what it then measured, for the training and for the whole job. Each call adds one row to
``budget_prediction.json`` (date, machine kind, commit, versions, load average) and rewrites
``budget_prediction.md`` from all rows. Not a timed test: a measurement.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def _row(preset: str, seeds: int, jobs: int, budget_min: float | None, only=None) -> dict:
    import lightning
    import torch

    from gtalib.book.pipeline.job import build_book
    from gtalib.training.machine import cpu_info

    with tempfile.TemporaryDirectory(prefix="gtalib-budget-") as tmp:
        book_dir = Path(tmp) / "book"
        shutil.copytree(REPO / "book", book_dir,
                        ignore=shutil.ignore_patterns("_build", "generated"))
        # the code that predicts: the commit when the build starts, not when it ends
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                                text=True).stdout.strip()
        load_before = os.getloadavg()
        # a book of some pages only has links to the others that do not resolve: no HTML then
        s = build_book(preset, seeds, jobs=jobs, threads=1, run_dir=Path(tmp) / "runs",
                       book_dir=book_dir, budget_min=budget_min, notebooks=only,
                       html=only is None)
    cpu = cpu_info()
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu": f"{cpu['model_name']} (family {cpu['family']}, model {cpu['model']})",
        "logical_cpus": os.cpu_count(), "commit": commit, "torch": torch.__version__,
        "lightning": lightning.__version__, "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "preset": preset, "only": only, "seeds": seeds, "jobs": jobs, "budget_min": budget_min,
        "runs_trained": s["runs_trained"], "runs_read": s["runs_read"],
        "calibration_s": round(s["calibration_s"], 1),
        "predicted_train_s": round(s["predicted_train_s"], 1), "train_s": round(s["train_s"], 1),
        "predicted_total_s": round(s["predicted_total_s"], 1), "total_s": round(s["total_s"], 1),
        # per configuration family: the job's last lines (gtalib.book.pipeline.budget.family_times)
        "families": [{k: (round(v, 1) if isinstance(v, float) else v) for k, v in f.items()}
                     for f in s.get("families", [])],
        "configurations": [{k: (round(v, 2) if isinstance(v, float) else v)
                            for k, v in f.items()} for f in s.get("configurations", [])],
        # the deadline (gtalib.book.pipeline.pace): runs dropped for pace, taken back of them
        **{k: s[k] for k in ("runs_dropped", "runs_taken_back") if k in s},
    }


def _preset(row: dict) -> str:
    """A row's preset, and the notebooks it was limited to (``--only``)."""
    return row["preset"] + (f" ({', '.join(row['only'])} only)" if row.get("only") else "")


def markdown(rows: list[dict]) -> str:
    from gtalib.book.pipeline.budget import CONFIG_TOLERANCE

    tol = f"±{CONFIG_TOLERANCE * 100:.0f} %"
    lines = [
        "# The book's wall-time prediction against the measured wall time",
        "",
        "Each row: one `gtalib book` from an empty run store (`benchmarks/budget_prediction.py"
        " --preset P [--budget M]`), its prediction printed before it trained (a short timed "
        "calibration of every step shape, then each run's steps at its shape's seconds per step, "
        "with its evaluations and setup: `gtalib/book/pipeline/budget.py`; rows before "
        "2026-12-06 20:00 scaled each run's recorded core-seconds instead) against what it "
        "measured. Rows before 2026-12-07 00:30 measured the training with the cluster's start "
        "and the calibration, which its prediction leaves out (about 2 minutes at `cpu` since "
        "2026-12-06 23:00); later rows measure the training alone. *ratio* = measured / predicted: above 1, the job took longer than it said. "
        "Load average (1 min) before and after: the machine may be shared.",
        "",
        "| date (UTC) | CPU | commit | preset | jobs | budget | runs trained / read | "
        "training predicted → measured (s) | ratio | whole job predicted → measured (s) | "
        "ratio | load before / after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        budget = "none" if r["budget_min"] is None else f"{r['budget_min']:g} min"
        lines.append(
            f"| {r['date'][:16].replace('T', ' ')} | {r['cpu']} | {r['commit'][:7]} | "
            f"{_preset(r)} ({r['seeds']} seeds) | {r['jobs']} | "
            f"{budget} | "
            f"{r['runs_trained']} / {r['runs_read']} | {r['predicted_train_s']:.0f} → "
            f"{r['train_s']:.0f} | {r['train_s'] / r['predicted_train_s']:.2f} | "
            f"{r['predicted_total_s']:.0f} → {r['total_s']:.0f} | "
            f"{r['total_s'] / r['predicted_total_s']:.2f} | {r['load_before'][0]} / "
            f"{r['load_after'][0]} |")
    lines += ["", "## Per configuration family", "",
              "The same builds, each family's runs "
              "(`gtalib.book.pipeline.calibration.family`) on one worker: the sum of their predicted "
              "seconds against the sum of their measured wall times (their cards), as the job's "
              "last lines print them. Rows recorded before the per-family calibration have none.",
              "", "| date (UTC) | CPU | commit | preset | family | runs | predicted → measured (s) "
              "| ratio |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for f in r.get("families", []):
            lines.append(
                f"| {r['date'][:16].replace('T', ' ')} | {r['cpu']} | {r['commit'][:7]} | "
                f"{_preset(r)} | {f['family']} | {f['runs']} | {f['predicted_s']:.0f} → "
                f"{f['measured_s']:.0f} | {f['measured_s'] / f['predicted_s']:.2f} |")
    lines += ["", "## Per configuration", "",
              "The same builds, per configuration (a configuration's runs differ in seed and data "
              "order only, which its recorded cost leaves out: "
              "`gtalib.training.record_costs.config_key`): how many configurations' measured "
              f"seconds came within {tol} of their predicted seconds, and the lowest and highest "
              "ratio (measured / predicted); each configuration's seconds are in "
              "`budget_prediction.json`. Rows recorded before 2026-12-06 07:30 have none.",
              "", f"| date (UTC) | CPU | commit | preset | configurations | within {tol} | "
              "ratios |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        ratios = [c["measured_s"] / c["predicted_s"] for c in r.get("configurations", [])
                  if c["predicted_s"] > 0]
        if ratios:
            lines.append(
                f"| {r['date'][:16].replace('T', ' ')} | {r['cpu']} | {r['commit'][:7]} | "
                f"{_preset(r)} | {len(ratios)} | "
                f"{sum(abs(x - 1) <= CONFIG_TOLERANCE for x in ratios)} | "
                f"{min(ratios):.2f}–{max(ratios):.2f} |")
    paced = [r for r in rows if "runs_dropped" in r and r["budget_min"] is not None]
    lines += [] if not paced else ["", "## The deadline", "",
              "The same builds with a budget, since the deadline reads the pace per step shape "
              "and takes dropped runs back (`gtalib/book/pipeline/pace.py`): the runs it dropped "
              "as not fitting at the pace measured so far, how many of them it took back when "
              "they fitted again, and the minutes of the budget the whole job left (the job's "
              "last lines).", "",
              "| date (UTC) | CPU | commit | preset | budget | runs dropped / taken back | "
              "minutes left |", "|---|---|---|---|---|---|---|"]
    for r in paced:
        lines.append(
            f"| {r['date'][:16].replace('T', ' ')} | {r['cpu']} | {r['commit'][:7]} | "
            f"{_preset(r)} | {r['budget_min']:g} min | {r['runs_dropped']} / "
            f"{r['runs_taken_back']} | {r['budget_min'] - r['total_s'] / 60:.1f} |")
    lines += ["", f"Versions: torch {rows[-1]['torch']}, Lightning {rows[-1]['lightning']}. The "
              "default book's own predictions from fresh clones, beside the measured times: "
              "`benchmarks/book_wall_time.md`.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="ci")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--budget", default="none", help="minutes, or none")
    p.add_argument("--only", default=None,
                   help="comma-separated notebooks, as gtalib book --only (default: all)")
    args = p.parse_args(argv)
    budget_min = None if args.budget == "none" else float(args.budget)
    out = HERE / "budget_prediction.json"
    rows = json.loads(out.read_text()) if out.exists() else []
    rows.append(_row(args.preset, args.seeds, args.jobs, budget_min,
                     args.only.split(",") if args.only else None))
    out.write_text(json.dumps(rows, indent=2) + "\n")
    (HERE / "budget_prediction.md").write_text(markdown(rows))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
