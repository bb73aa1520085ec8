"""Training cost of every variant at the ``cpu`` preset under Lightning, to size the book's runs.

For each variant, one short run (``--steps`` optimizer steps, default 60, one evaluation at the
end) through the real path (``gtalib.training.train.ensure_run`` on the default byte-level corpus) in this
one long-lived process, measuring:

* step time: median interval between consecutive training steps without evaluation
  (optimizer step included), in wall and in process-CPU time; tokens/s = ``batch_size * seq_len``
  / wall step time;
* evaluation time: one pass over the fixed held-out windows of every source;
* the wall and CPU time of the whole short run (Trainer and data set-up, output files included);
* peak resident memory of the process during the run (``VmHWM`` after resetting it through
  ``/proc/self/clear_refs``), and the increase over the resident memory before the run;
* predicted seconds of a full ``cpu``-preset run: the short run + the remaining steps + the
  remaining evaluations (wall, and process CPU: on a shared machine the CPU seconds of a
  1-thread run are the better estimate of the idle wall time);
* FLOPs of one training step, forward + backward of the whole model on one
  ``(batch_size, seq_len)`` batch, counted by ``torch.utils.flop_counter.FlopCounterMode`` with
  attention counted as PyTorch's unfused attention at the variants' own widths
  (``gtalib/model/flops.py``; matrix products and attention at 2·m·n·k per GEMM, the backward's two GEMMs per forward one; the optimizer
  and elementwise ops are not counted), and the achieved FLOP/s (FLOPs / wall step time) as a
  ratio to MHA's.

``--full VARIANT`` also times one complete ``cpu``-preset run of that variant to check the
prediction. Usage::

    .venv/bin/python benchmarks/train_cpu.py [--threads 2] [--steps 60] [--full mla] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback

from gtalib.model.config import VARIANTS
from gtalib.model.flops import step_flops
from gtalib.model.gpt import GPT
from gtalib.model.presets import PRESETS, model_config
from gtalib.training.config import train_config
from gtalib.training.runs import RunSpec, cpu_model, data_spec, git_commit
from gtalib.training.train import ensure_run
from gtalib.training.loop import StepRecorder


def _status_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak_rss() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # Linux: reset VmHWM to the current RSS
    except OSError:
        pass


class StepTimer(Callback):
    """Wall and process-CPU clock at the start of each training step."""

    def __init__(self):
        self.wall, self.cpu = [], []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.wall.append(time.perf_counter())
        self.cpu.append(time.process_time())


_eval_times: list[tuple[float, float]] = []
_orig_evaluate = StepRecorder.evaluate


def _timed_evaluate(self, trainer, pl_module):
    w, c = time.perf_counter(), time.process_time()
    out = _orig_evaluate(self, trainer, pl_module)
    _eval_times.append((time.perf_counter() - w, time.process_time() - c))
    return out


StepRecorder.evaluate = _timed_evaluate  # benchmark-only instrumentation


def _median_gap(t: list[float]) -> float:
    return statistics.median(b - a for a, b in zip(t[2:], t[3:]))  # skip warm-up steps


def measure(variant: str, steps: int, run_dir: Path) -> dict:
    full = train_config("cpu")
    train = full.replace(max_steps=steps, warmup_steps=max(1, steps // 10), eval_every=steps,
                         checkpoint_every=steps)
    spec = RunSpec(model_config("cpu", variant), train, data_spec(train), seed=0)
    timer = StepTimer()
    _eval_times.clear()
    rss0 = _status_kb("VmRSS")
    _reset_peak_rss()
    w0, c0 = time.perf_counter(), time.process_time()
    ensure_run(spec, run_dir, callbacks=[timer])
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    peak = _status_kb("VmHWM")
    step_w, step_c = _median_gap(timer.wall), _median_gap(timer.cpu)
    (ev_w, ev_c), = _eval_times
    n_evals = -(-full.max_steps // full.eval_every)
    more = full.max_steps - steps
    return {
        "variant": variant,
        "params": GPT(spec.model).num_params(),
        "step_ms": step_w * 1e3,
        "step_cpu_ms": step_c * 1e3,
        "tokens_per_s": train.tokens_per_step / step_w,
        "eval_s": ev_w,
        "peak_rss_mb": peak / 1024,
        "rss_increase_mb": (peak - rss0) / 1024,
        "run_s": wall,
        "predicted_run_s": wall + more * step_w + (n_evals - 1) * ev_w,
        "predicted_cpu_s": cpu + more * step_c + (n_evals - 1) * ev_c,
        "gflop_step": step_flops(spec.model, train.batch_size, train.seq_len) / 1e9,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--variants", nargs="*", default=list(VARIANTS))
    ap.add_argument("--full", default=None, help="also time one full cpu-preset run of this variant")
    ap.add_argument("--out", default=None, help="write the markdown report here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    load0 = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for v in args.variants:
            rows.append(measure(v, args.steps, Path(tmp) / "short"))
            r = rows[-1]
            print(f"{v:7s} {r['step_ms']:6.1f} ms/step ({r['step_cpu_ms']:6.1f} CPU) "
                  f"{r['tokens_per_s']:8.0f} tok/s eval {r['eval_s']:.2f} s peak {r['peak_rss_mb']:.0f} MB "
                  f"-> predicted {r['predicted_run_s']:.1f} s ({r['predicted_cpu_s']:.1f} CPU s)", flush=True)
        full_line = ""
        if args.full:
            cfg = train_config("cpu")
            spec = RunSpec(model_config("cpu", args.full), cfg, data_spec(cfg), seed=0)
            t0, c0 = time.perf_counter(), time.process_time()
            ensure_run(spec, Path(tmp) / "full")
            full_s, full_c = time.perf_counter() - t0, time.process_time() - c0
            r = next(r for r in rows if r["variant"] == args.full)
            full_line = (f"Full `cpu`-preset run of `{args.full}` ({cfg.max_steps} steps): "
                         f"**{full_s:.1f} s** wall ({full_c:.1f} s process CPU) measured vs "
                         f"{r['predicted_run_s']:.1f} s wall ({r['predicted_cpu_s']:.1f} s CPU) predicted.")
            print(full_line)
    load1 = os.getloadavg()
    cpu = cpu_model()
    cfg = train_config("cpu")
    lines = [
        "# Training cost per variant, `cpu` preset, under Lightning",
        "",
        f"Recorded {dt.date.today().isoformat()} by `benchmarks/train_cpu.py --threads {args.threads} "
        f"--steps {args.steps}` (torch {torch.__version__}, {torch.get_num_threads()} thread(s), fp32).",
        f"Machine: {cpu}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}.",
        f"Load average (1/5/15 min) before: {load0[0]:.2f}/{load0[1]:.2f}/{load0[2]:.2f}, after: "
        f"{load1[0]:.2f}/{load1[1]:.2f}/{load1[2]:.2f}; commit {git_commit()}. Model: "
        f"{PRESETS['cpu']['n_layer']} layers, d_model {PRESETS['cpu']['d_model']}.",
        "",
        f"Preset: {cfg.batch_size} × {cfg.seq_len} = {cfg.tokens_per_step} tokens/step, "
        f"{cfg.max_steps} steps, evaluation every {cfg.eval_every} steps on {cfg.eval_windows} "
        f"windows per source. Each variant: a {args.steps}-step run through `ensure_run` in one "
        f"long-lived process (set-up, one evaluation, output files included); ms/step is the "
        f"median wall time of a step, CPU ms/step the process CPU time of one (all threads); "
        f"predicted = that run + {cfg.max_steps - args.steps} more steps + the other evaluations, "
        f"in wall seconds and in process-CPU seconds. On a busy machine the wall numbers are "
        f"inflated by waiting for a core; with 1 thread the CPU seconds approximate the idle wall time.",
        "",
        "| variant | params | ms/step | CPU ms/step | tokens/s | eval (s) | peak RSS (MB) | Δ RSS (MB) | short run (s) | predicted run (s) | predicted CPU (s) | GFLOP/step | FLOP/s vs MHA |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    mha = next((r for r in rows if r["variant"] == "mha"), None)
    for r in rows:
        rate = r["gflop_step"] / r["step_ms"]
        ratio = f"{rate / (mha['gflop_step'] / mha['step_ms']):.2f}" if mha else "n/a"
        lines.append(f"| {r['variant']} | {r['params']:,} | {r['step_ms']:.1f} | {r['step_cpu_ms']:.1f} | "
                     f"{r['tokens_per_s']:,.0f} | {r['eval_s']:.2f} | {r['peak_rss_mb']:.0f} | "
                     f"{r['rss_increase_mb']:.0f} | {r['run_s']:.1f} | {r['predicted_run_s']:.1f} | "
                     f"{r['predicted_cpu_s']:.1f} | {r['gflop_step']:.1f} | {ratio} |")
    total, total_c = sum(r["predicted_run_s"] for r in rows), sum(r["predicted_cpu_s"] for r in rows)
    lines += ["", f"Sum of predicted runs over these {len(rows)} variants: {total:.0f} s wall, "
                  f"{total_c:.0f} s CPU (mean {total / len(rows):.1f} s / {total_c / len(rows):.1f} s per run).", ""]
    if full_line:
        lines += [full_line, ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
