#!/usr/bin/env python
"""Speed-up of the book's training from ``--jobs 1`` to ``--jobs 2``: does ``--jobs N`` use N cores?

Usage (from the repo root, on an otherwise idle machine; about 3 minutes on 2 cores):

    .venv/bin/python benchmarks/jobs_speedup.py            # writes jobs_speedup.{json,md}

The same runs (four ``cpu``-preset configurations, seed 0, shortened to ``--steps`` steps) are
trained three times through ``gtalib.book.schedule.train_all``, each time into a fresh temporary run
store: ``jobs=1`` with torch's default thread count (intra-op threads over every core), ``jobs=1``
with one thread, and ``jobs=2`` with one thread per worker process (what ``make book`` uses).
Recorded per setting: wall seconds, CPU seconds of this process and its children
(``resource.getrusage``), and their ratio (the number of cores kept busy). Speed-up from 1 to 2
jobs = wall(jobs 1, 1 thread) / wall(jobs 2, 1 thread each). Not a timed test: a measurement,
recorded with date, machine, commit, versions and load average.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

from gtalib.training import records, runs
from gtalib.book.schedule import train_all
from gtalib.book.plan import make_plan

HERE = Path(__file__).resolve().parent
LABELS = ("MHA zero init", "GQA zero init", "MLA zero init", "TPA zero init")


def _cpu_seconds() -> float:
    """CPU seconds (user + system) of this process plus its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def measure(steps: int) -> dict:
    plan = make_plan("cpu", 1, max_steps=steps)
    refs = [r for r in plan.runs if r.label in LABELS]
    specs = plan.specs(refs)
    out = {"date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "machine": records.machine(), "versions": records.versions(),
           "git_commit": runs.git_commit(), "runs": [label for label, _ in specs],
           "steps": steps, "load_average_before": [round(x, 2) for x in os.getloadavg()],
           "settings": []}
    default_threads = torch.get_num_threads()
    for jobs, threads in ((1, None), (1, 1), (2, 1)):
        with tempfile.TemporaryDirectory(prefix="gtalib-jobs-") as store:
            torch.set_num_threads(default_threads)
            c0, t0 = _cpu_seconds(), time.perf_counter()
            failures = train_all(specs, store, jobs=jobs, threads=threads, log=lambda *_: None)
            wall, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
        if failures:
            raise RuntimeError(f"jobs={jobs}: runs failed: {failures}")
        out["settings"].append({
            "jobs": jobs, "threads": threads or f"{default_threads} (torch default)",
            "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "cores_busy": round(cpu / wall, 2)})
    _, one, two = (s["wall_s"] for s in out["settings"])
    out["speedup"] = round(one / two, 2)
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return out


def markdown(r: dict) -> str:
    m = r["machine"]
    rows = "\n".join(f"| {s['jobs']} | {s['threads']} | {s['wall_s']} | {s['cpu_s']} | "
                     f"{s['cores_busy']} |" for s in r["settings"])
    return f"""# Training with `--jobs 1` and `--jobs 2`

Recorded {r['date_utc']} by `benchmarks/jobs_speedup.py --steps {r['steps']}` on {m['cpu']}
({m['logical_cpus']} logical CPUs), commit {r['git_commit']}, torch {r['versions']['torch']},
Lightning {r['versions']['lightning']}. Load average (1/5/15 min) before: {r['load_average_before']},
after: {r['load_average_after']}.

The same {len(r['runs'])} runs ({', '.join(r['runs'])}; `cpu` preset, seed 0, {r['steps']} steps)
trained into a fresh run store each time. Threads: torch threads per training process
(`gtalib book --threads`; `--jobs 2` uses one each). Cores busy = CPU seconds / wall seconds.

| jobs | threads | wall (s) | CPU (s) | cores busy |
|---:|---|---:|---:|---:|
{rows}

Speed-up from 1 to 2 jobs at one thread per process: **{r['speedup']}×**. One process with
torch's default threads already spreads each step over the cores (intra-op parallelism), so
against it two one-thread processes gain {r['settings'][0]['wall_s'] / r['settings'][2]['wall_s']:.2f}×.
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=60, help="steps per run (default 60)")
    ap.add_argument("--out", default=str(HERE / "jobs_speedup"),
                    help="output path without extension (.json and .md are written)")
    a = ap.parse_args(argv)
    r = measure(a.steps)
    Path(a.out + ".json").write_text(json.dumps(r, indent=2) + "\n")
    Path(a.out + ".md").write_text(markdown(r))
    print(markdown(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
