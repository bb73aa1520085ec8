#!/usr/bin/env python
"""Wall time of the main job (``gtalib book``), recorded in benchmarks/book_wall_time.csv.

Usage (from the repo root; a fresh run store measures the from-scratch time, the same one
again measures the cached rebuild):

    .venv/bin/python benchmarks/book_wall_time.py --preset cpu --seeds 2 --jobs 2 --run-dir /tmp/fresh
    .venv/bin/python benchmarks/book_wall_time.py --preset cpu --seeds 2 --jobs 2 --run-dir /tmp/fresh

Each call appends one row: date, machine, preset, seeds, jobs, runs trained, and the seconds of
each phase (corpus, cluster start and calibration, training, notebooks, HTML, total), as measured by ``gtalib.book.pipeline.job.build_book``.
Not a timed test: a measurement to quote in the README.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import platform
import sys
from pathlib import Path

from gtalib.training import runs
from gtalib.book.pipeline import job as book
from gtalib.book.design.plan import make_plan

OUT = Path(__file__).with_name("book_wall_time.csv")
FIELDS = ("date_utc", "machine", "cpus", "load_1min", "preset", "seeds", "jobs", "threads",
          "runs_needed", "runs_trained", "corpus_s", "calibration_s", "train_s", "notebooks_s",
          "html_s", "total_s")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="cpu")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--run-dir", default=None)
    a = p.parse_args(argv)
    run_dir = book.resolve_run_dir(a.run_dir)
    plan = make_plan(a.preset, a.seeds)
    book.ensure_corpus(plan)
    specs = {spec.run_id for _, spec in plan.specs()}
    todo = sum(not runs.is_done(run_dir / rid) for rid in specs)
    load = os.getloadavg()[0]
    summary = book.build_book(a.preset, a.seeds, jobs=a.jobs, threads=a.threads, run_dir=run_dir)
    row = {"date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
           "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
           "load_1min": f"{load:.1f}", "preset": a.preset, "seeds": a.seeds, "jobs": a.jobs,
           "threads": a.threads or "", "runs_needed": len(specs), "runs_trained": todo,
           **{k: f"{summary.get(k, 0):.1f}" for k in FIELDS if k.endswith("_s")}}
    new = not OUT.exists()
    with OUT.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            w.writeheader()
        w.writerow(row)
    print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
