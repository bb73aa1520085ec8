#!/usr/bin/env python
"""How much a calibration's seconds per step move from one fresh process to the next.

Usage (from the repo root; about 2 minutes on two idle cores):

    .venv/bin/python benchmarks/calibration_noise.py --rounds 4

The job times a few optimizer steps of one run per configuration family on every worker at once
(:func:`gtalib.book.pipeline.calibration.time_steps`) and scales every recorded cost by them, so
the spread of that figure between two calibrations of the same run is the least error a
prediction carries. This times ``--rounds`` rounds of ``--workers`` fresh processes at once (as
the job's workers do), each running ``time_steps`` of the ``cpu`` preset's gating runs (seed 0,
no gate) of ``--variants`` with the warm-up cut to one step and :data:`STEPS` steps timed, and
from each process's step times computes two estimators: the mean of the 4 steps after one
warm-up step (the calibration before 2026-12-06) and the median of
:data:`~gtalib.book.pipeline.calibration.CALIBRATION_STEPS` steps after
:data:`~gtalib.book.pipeline.calibration.WARMUP_STEPS` (the calibration now). Their spread over
all processes, max / min − 1, is the table's figure. Each call adds one row per variant to
``calibration_noise.json`` (date, machine kind, commit, versions, load average) and rewrites
``calibration_noise.md``. Not a timed test: a measurement.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
#: Steps each process times after its one warm-up step: enough for both estimators.
STEPS = 12


def _child(spec_json: str) -> None:
    """Print one process's step times (seconds, a JSON list), through the job's own timing."""
    from gtalib.book.pipeline import calibration

    seen = []
    steady = calibration.steady_step_s
    calibration.steady_step_s = lambda times: seen.extend(times) or steady(times)
    calibration.WARMUP_STEPS = 1  # the old estimator reads the steps the new one warms up on
    calibration.time_steps(json.loads(spec_json), threads=1, steps=STEPS)
    print(json.dumps(seen))


def _estimates(times: list[float]) -> tuple[float, float]:
    """``(old, new)``: the mean of the first 4 timed steps, and the median of
    ``CALIBRATION_STEPS`` steps after ``WARMUP_STEPS`` (here counted from the first step)."""
    from gtalib.book.pipeline.calibration import CALIBRATION_STEPS, WARMUP_STEPS

    skip = WARMUP_STEPS - 1  # one warm-up step already ran before `times`
    return (statistics.fmean(times[:4]),
            statistics.median(times[skip:skip + CALIBRATION_STEPS]))


def _rows(variants: list[str], rounds: int, workers: int) -> list[dict]:
    import lightning
    import torch

    from gtalib.book.design.plan import make_plan
    from gtalib.training.machine import cpu_info

    plan = make_plan("cpu", 1, notebooks=["gating_ablation"])
    specs = {plan.spec(r).model.variant: plan.spec(r) for r in plan.runs
             if not plan.spec(r).model.gate}
    unknown = sorted(set(variants) - set(specs))
    if unknown:
        raise SystemExit(f"--variants: {', '.join(unknown)} not among the gating runs' "
                         f"{', '.join(sorted(specs))}")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.strip()
    cpu = cpu_info()
    out = []
    for v in variants:
        load_before = os.getloadavg()
        old, new = [], []
        for _ in range(rounds):
            procs = [subprocess.Popen([sys.executable, __file__, "--child",
                                       json.dumps(specs[v].to_dict())],
                                      stdout=subprocess.PIPE, text=True) for _ in range(workers)]
            for p in procs:
                a, b = _estimates(json.loads(p.communicate()[0]))
                old.append(a)
                new.append(b)
        out.append({
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "cpu": f"{cpu['model_name']} (family {cpu['family']}, model {cpu['model']})",
            "commit": commit, "torch": torch.__version__, "lightning": lightning.__version__,
            "load_before": round(load_before[0], 2), "load_after": round(os.getloadavg()[0], 2),
            "variant": v, "run": specs[v].describe(), "rounds": rounds, "workers": workers,
            "old_s": [round(x, 4) for x in old], "new_s": [round(x, 4) for x in new]})
    return out


def markdown(rows: list[dict]) -> str:
    def spread(xs):
        return f"{min(xs):.3f}–{max(xs):.3f} s ({max(xs) / min(xs) - 1:.0%})"

    lines = [
        "# A calibration's seconds per step, from one fresh process to the next",
        "",
        "Each row: `benchmarks/calibration_noise.py`, *rounds* × *workers* fresh processes "
        "(the workers at once, as the job's calibration runs) timing optimizer steps of one "
        "`cpu` gating run (seed 0, no gate, one thread, random tokens) with the job's own "
        "`time_steps`. *4 after 1, mean*: the calibration before 2026-12-06; *8 after 3, "
        "median*: the calibration now (`gtalib/book/pipeline/calibration.py`). Each cell: "
        "the lowest and highest estimate over the processes, and their spread (max / min − 1). "
        "Load average (1 min) before and after.",
        "",
        "| date (UTC) | CPU | commit | run | rounds × workers | 4 after 1, mean | "
        "8 after 3, median | load before / after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['date'][:16].replace('T', ' ')} | {r['cpu']} | {r['commit'][:7]} | "
                     f"{r['run']} | {r['rounds']} × {r['workers']} | {spread(r['old_s'])} | "
                     f"{spread(r['new_s'])} | {r['load_before']} / {r['load_after']} |")
    lines += ["", f"Versions: torch {rows[-1]['torch']}, Lightning {rows[-1]['lightning']}.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--variants", nargs="+", default=["gqa", "gla-2"])
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.child)
        return 0
    if args.rounds < 1 or args.workers < 1:
        raise SystemExit("--rounds and --workers must be >= 1")
    out = HERE / "calibration_noise.json"
    rows = json.loads(out.read_text()) if out.exists() else []
    rows += _rows(args.variants, args.rounds, args.workers)
    out.write_text(json.dumps(rows, indent=2) + "\n")
    (HERE / "calibration_noise.md").write_text(markdown(rows))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
