#!/usr/bin/env python
"""The book's training on N workers, on paper: the wall time of ``--budget none`` and
``--train-recorded`` at the ``cpu`` preset from the recorded costs, and of the ``gpu`` preset's
book from its FLOPs at stated GPU throughputs.

Usage (from the repo root; a few seconds, trains nothing):

    .venv/bin/python benchmarks/cluster_wall_time.py      # writes cluster_wall_time.md

Each run costs its configuration's recorded core-seconds (median over its bundles,
``gtalib record costs``, as measured on the recording machines; one thread per run), or, at the
``gpu`` preset, where nothing is recorded, ``6 · parameters · tokens`` FLOPs (Kaplan et al. 2020)
at a sustained rate stated in the table. Runs form the tasks that
:func:`gtalib.book.pipeline.schedule.train_all` submits (both arms of every ΔL pair together), and the wall
time on N workers is the longest-first schedule's makespan (:func:`gtalib.book.pipeline.budget.makespan`),
the scheduler's own cost aside (milliseconds per run: ``benchmarks/jobs_speedup.md``).
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import sys
from pathlib import Path

from gtalib.book.design.ladder import ladder_runs

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORKERS = (1, 2, 4, 8, 16, 32, 64)
#: Sustained bf16 training throughputs assumed for one GPU (FLOP/s): 10 % and 40 % of an H100
#: SXM's dense bf16 peak of 989 TFLOP/s (NVIDIA H100 datasheet). Not measured here: the GPU
#: check's ``train`` section measures tokens per second when a GPU is lent.
GPU_RATES = (0.1 * 989e12, 0.4 * 989e12)


def _specs(plan, refs, data=None):
    """Unique RunSpecs of ``refs``; ``data``: a stand-in data identity for a preset whose corpus
    is not built (its runs are costed by FLOPs, which the data does not change)."""
    from gtalib.book.design.run_specs import run_spec

    specs = (plan.spec(r) if data is None else run_spec(r, plan.preset, None, data) for r in refs)
    return list({s.run_id: s for s in specs}.values())


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{seconds / 60:.0f} min"


def _row(what: str, specs, seconds) -> str:
    from gtalib.book.pipeline.budget import groups, makespan

    tasks = [sum(seconds(s) for s in g) for g in groups(specs)]
    cells = [_hours(makespan(tasks, n)) for n in WORKERS]
    return (f"| {what} | {len(specs)} | {len(tasks)} | {_hours(sum(tasks))} | "
            + " | ".join(cells) + f" | {_hours(max(tasks))} |")


def markdown() -> str:
    import torch

    from gtalib.book.chapters import ladder_width as width
    from gtalib.book.design.plan import make_plan
    from gtalib.book.pipeline.calibration import training_flops
    from gtalib.training import record_costs

    costs = record_costs.cost_table()
    # a configuration whose every run was resumed has no per-run time (its card times the last
    # process only); a data order moves no FLOP, so it is costed at its data-order-0 twin
    twin = {(re.sub(r" data_seed=\d+", "", r.run), r.n_layer, r.d_model, r.steps):
            r.core_s_median for r in costs.itertuples() if not r.lower_bound
            and " data_seed=" not in r.run}
    median = {r.key: (twin[(re.sub(r" data_seed=\d+", "", r.run), r.n_layer, r.d_model, r.steps)]
                      if r.lower_bound else r.core_s_median) for r in costs.itertuples()}
    twinned = int(costs["lower_bound"].sum())
    # a width-axis run without a record: the recorded run of the same variant at the preset's
    # width × the FLOPs ratio (gtalib.book.chapters.ladder_width.width_cost)
    cpu = make_plan("cpu", 3)
    wider = {(r.d_model, r.variant): r.core_s for r in width.width_cost(cpu, costs).itertuples()}

    def recorded(spec) -> float:
        key = record_costs.config_key(spec)
        return median[key] if key in median else wider[(spec.model.d_model, spec.model.variant)]

    book = _specs(cpu, cpu.runs)
    everything = _specs(cpu, list(cpu.runs) + list(ladder_runs("cpu")))
    missing = [s.describe() for s in everything if record_costs.config_key(s) not in median
               and (s.model.d_model, s.model.variant) not in wider]
    if missing:
        raise SystemExit(f"no recorded cost for {missing[:3]} ...: record them first")
    # the kinds that trained the recorded runs, as the costs page names them
    cpus = "; ".join(sorted({k.strip() for c in costs["cpu"].dropna() for k in str(c).split(";")}))
    estimated = sum(record_costs.config_key(s) not in median for s in everything)
    gplan = make_plan("gpu", 3)
    gpu = _specs(gplan, gplan.runs, data={"cost-only": "gpu"})
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip()
    head = " | ".join(f"{n} worker{'s' if n > 1 else ''}" for n in WORKERS)
    lines = [
        "# The book's training on N workers, on paper",
        "",
        f"Generated {dt.date.today().isoformat()} at commit {commit} (torch {torch.__version__}) "
        "by `benchmarks/cluster_wall_time.py` from the recorded costs (`docs/recorded_runs.md`: "
        "each configuration's median core-seconds, one thread per run, as measured on the "
        f"recording CPUs, {cpus}) and, for the `gpu` preset, from FLOPs at the "
        "throughputs named. Wall time = the makespan of the longest-first schedule of the "
        "tasks (both arms of every ΔL pair in one task) on N workers; the scheduler's own cost "
        "(milliseconds per run) aside. *Longest task* bounds the wall time however many workers."
        + ("" if not estimated else
           f" The {estimated} runs of the width axis at d 256 not recorded yet are costed at the "
           "recorded run of the same variant at d 128 × their FLOPs ratio "
           "(`gtalib/book/chapters/ladder_width.py::width_cost`).")
        + ("" if not twinned else
           f" {twinned} data-order configuration(s) whose only run was resumed (its card times "
           "the last process only) are costed at the same configuration at data order 0: the "
           "data order moves no FLOP."),
        "",
        f"| what | runs | tasks | core time | {head} | longest task |",
        "|---|---|---|---|" + "---|" * len(WORKERS) + "---|",
        _row(f"`cpu` book, `--budget none` ({len(book)} runs, CPU workers)", book, recorded),
        _row("`cpu` book and ladder, `--train-recorded` (CPU workers)", everything, recorded),
    ]
    for rate in GPU_RATES:
        lines.append(_row(f"`gpu` book, 3 seeds, one GPU per worker at {rate / 1e12:.0f} "
                          "TFLOP/s sustained", gpu, lambda s, r=rate: training_flops(s) / r))
    lines += [
        "",
        f"A `gpu`-preset run is {training_flops(gpu[0]) / 1e15:,.0f} PFLOP "
        f"({gpu[0].train.max_steps:,} steps × {gpu[0].train.tokens_per_step:,} tokens, "
        "≈ 51 M parameters); the rates are 10 % and 40 % of an H100's dense bf16 peak (989 "
        "TFLOP/s), assumed, not measured: a model this small keeps a GPU far from its peak.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    text = markdown()
    (HERE / "cluster_wall_time.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
