#!/usr/bin/env python
"""Speed-up of the book's training from ``--jobs 1`` to ``--jobs 2`` through the embedded Dask
cluster, and what the scheduler itself costs per run: does ``--jobs N`` use N cores?

Usage (from the repo root, on an otherwise idle machine; about 4 minutes on 2 cores):

    .venv/bin/python benchmarks/jobs_speedup.py            # writes jobs_speedup.{json,md}

The same runs (four ``cpu``-preset configurations, seed 0, shortened to ``--steps`` steps) are
trained three times through ``gtalib.book.schedule.train_all``, each time into a fresh temporary run
store: ``jobs=1`` with as many torch threads as cores (intra-op threads over every core), ``jobs=1``
with one thread, and ``jobs=2`` with one thread per worker process (what ``make book`` uses), each
through a fresh embedded ``LocalCluster`` (started and closed inside the timing). The scheduler's
own cost: the start and close of a two-worker ``LocalCluster``, and the round trip of
:data:`NOOP_TASKS` tasks that do nothing, submitted and collected as ``train_all`` does
(``client.submit`` with a priority, ``distributed.as_completed``), per task in milliseconds.
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

from gtalib.training import records, runs
from gtalib.book.schedule import train_all
from gtalib.book.plan import make_plan

HERE = Path(__file__).resolve().parent
LABELS = ("MHA zero init", "GQA zero init", "MLA zero init", "TPA zero init")
NOOP_TASKS = 200
#: The last measurement through the process pool that the Dask cluster replaced (commit b1871aa,
#: 2026-11-30, AMD EPYC family 26 model 2, 60 steps, the same 4 runs): wall seconds per setting.
POOL = {"date": "2026-11-30", "commit": "b1871aa", "cpu": "AMD EPYC (family 26, model 2)",
        "wall_s": {"1 job, 2 threads": 68.6, "1 job, 1 thread": 119.8, "2 jobs, 1 thread": 65.4},
        "speedup": 1.83}


def _noop(i: int) -> int:
    return i


def scheduler_overhead() -> dict:
    """Seconds to start and close a 2-worker LocalCluster, and ms per no-op task round trip."""
    from distributed import as_completed

    from gtalib.book.schedule import open_cluster

    t0 = time.perf_counter()
    with open_cluster(None, None, 2, None) as (client, _):
        started = time.perf_counter() - t0
        client.submit(_noop, -1, pure=False).result()  # warm: functions shipped once
        t0 = time.perf_counter()
        futs = [client.submit(_noop, i, pure=False, priority=NOOP_TASKS - i)
                for i in range(NOOP_TASKS)]
        for f in as_completed(futs):
            f.result()
        per_task = (time.perf_counter() - t0) / NOOP_TASKS
        t0 = time.perf_counter()  # the close: leaving open_cluster
    closed = time.perf_counter() - t0
    return {"cluster_start_s": round(started, 2), "cluster_close_s": round(closed, 2),
            "ms_per_task": round(1000 * per_task, 2), "tasks": NOOP_TASKS}


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
    cores = len(os.sched_getaffinity(0))
    out["scheduler"] = scheduler_overhead()
    for jobs, threads in ((1, cores), (1, 1), (2, 1)):
        with tempfile.TemporaryDirectory(prefix="gtalib-jobs-") as store:
            c0, t0 = _cpu_seconds(), time.perf_counter()
            failures = train_all(specs, store, jobs=jobs, threads=threads, log=lambda *_: None)
            wall, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
        if failures:
            raise RuntimeError(f"jobs={jobs}: runs failed: {failures}")
        out["settings"].append({
            "jobs": jobs, "threads": threads,
            "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "cores_busy": round(cpu / wall, 2)})
    _, one, two = (s["wall_s"] for s in out["settings"])
    out["speedup"] = round(one / two, 2)
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return out


def markdown(r: dict) -> str:
    m = r["machine"]
    pool = list(POOL["wall_s"].values())
    rows = "\n".join(f"| {s['jobs']} | {s['threads']} | {s['wall_s']} | {s['cpu_s']} | "
                      f"{s['cores_busy']} | {p} |" for s, p in zip(r["settings"], pool))
    sch = r["scheduler"]
    return f"""# Training with `--jobs 1` and `--jobs 2` through the Dask scheduler

Recorded {r['date_utc']} by `benchmarks/jobs_speedup.py --steps {r['steps']}` on {m['cpu']}
({m['logical_cpus']} logical CPUs), commit {r['git_commit']}, torch {r['versions']['torch']},
Lightning {r['versions']['lightning']}. Load average (1/5/15 min) before: {r['load_average_before']},
after: {r['load_average_after']}.

The same {len(r['runs'])} runs ({', '.join(r['runs'])}; `cpu` preset, seed 0, {r['steps']} steps)
trained into a fresh run store each time, through a fresh embedded Dask `LocalCluster` of
`jobs` one-thread worker processes (its start and close inside the timing). Threads: torch threads
per training run (`gtalib book --threads`; `--jobs 2` uses one each). Cores busy = CPU seconds /
wall seconds (of this process and its finished children). The last column is the same
measurement through the process pool that the cluster replaced ({POOL['date']}, commit
{POOL['commit']}, {POOL['cpu']}: another CPU kind, so compare the speed-ups, not the seconds).

| jobs | threads | wall (s) | CPU (s) | cores busy | pool wall (s) |
|---:|---|---:|---:|---:|---:|
{rows}

**The scheduler's own cost.** A two-worker `LocalCluster` starts in {sch['cluster_start_s']} s
and closes in {sch['cluster_close_s']} s; a task that does nothing makes the round trip
(`client.submit`, `as_completed`, result) in **{sch['ms_per_task']} ms** ({sch['tasks']} tasks,
two workers): per run, next to 100–1,500 s of training, a cost below one part in 10,000.

Speed-up from 1 to 2 jobs at one thread per process: **{r['speedup']}×** (the pool:
{POOL['speedup']}×). One process with a thread per core already spreads each step over the cores
(intra-op parallelism), so against it two one-thread processes gain
{r['settings'][0]['wall_s'] / r['settings'][2]['wall_s']:.2f}×.
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
