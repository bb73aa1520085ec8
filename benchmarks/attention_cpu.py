"""Forward + backward time, FLOPs, FLOP/s and activation memory of one attention layer per
variant, CPU preset.

Usage: ``.venv/bin/python benchmarks/attention_cpu.py [--batch 8] [--rounds 31] [--out PATH]``
(about a minute on one core). Writes a Markdown table (default ``benchmarks/attention_cpu.md``) with
the machine, date, and ratios to MHA measured in the same run.

Method: each variant's attention module at the ``cpu`` preset (``init="normal"``), input
``(batch, block_size, d_model)``; time = median over ``rounds`` of one forward + backward of
``out.square().mean()``; rounds interleave the variants so drift in a shared machine hits all of
them alike. FLOPs: forward + backward, counted analytically from the shape of every matrix
product by ``torch.utils.flop_counter.FlopCounterMode``, attention as PyTorch's unfused
attention at the variant's own head widths (``gtalib/model/flops.py``: the zero columns the
latent family's values are padded with for the fused CPU kernel are not counted); 2·m·n·k per
``(m, k) × (k, n)`` product; an attention call over ``T`` queries and ``S`` keys counts
``2·B·H·T·S·(D_qk + D_v)`` forward, the causal mask saving nothing; the backward counts twice
the forward. For one layer this is, to leading order,
``3 · (2·B·T·P_lin + 2·B·T²·Σ_branches H·(D_qk + D_v))`` with ``P_lin`` the layer's projection
weights; elementwise work (norms, RoPE, softmax) is not counted. Achieved FLOP/s = FLOPs / median
time; the ratios to MHA are medians over rounds of the ratio to MHA's time in the same round.
Memory = bytes of the tensors autograd saves for backward (distinct storages, counted
through ``torch.autograd.graph.saved_tensors_hooks``): deterministic and the part of peak memory
that differs between variants; the CPU allocator has no peak counter.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import torch

from gtalib.model.attention import build_attention
from gtalib.model.config import VARIANTS
from gtalib.model.flops import count_flops
from gtalib.model.presets import model_config
from gtalib.training.runs import cpu_model


def commit() -> str:
    """Short commit of the checkout (``+dirty`` when it has uncommitted changes)."""
    root = Path(__file__).resolve().parents[1]
    try:
        rev = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=root, text=True).strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", ".",  # not our own output
                                ":!benchmarks/attention_cpu.md"], cwd=root).returncode != 0
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def saved_bytes(module, x) -> int:
    storages = {}

    def pack(t):
        s = t.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        module(x).square().mean()
    return sum(storages.values())


def fwd_bwd_flops(module, x) -> int:
    """FLOPs of one forward + backward of ``module(x).square().mean()`` (see module docstring)."""
    flops = count_flops(lambda: module(x).square().mean().backward())
    module.zero_grad(set_to_none=True)
    return flops


def kernel_ms(module, x, reps: int = 5) -> float:
    """Milliseconds per forward + backward inside PyTorch's fused CPU attention kernel (its
    forward and backward ops' self time under ``torch.profiler``, mean of ``reps``)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(reps):
            module(x).square().mean().backward()
    module.zero_grad(set_to_none=True)
    us = sum(e.self_cpu_time_total for e in prof.key_averages()
             if e.key.startswith("aten::_scaled_dot_product_flash_attention_for_cpu"))
    return us / reps / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".md")))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    mods = {v: build_attention(model_config("cpu", v, init="normal")) for v in VARIANTS}
    cfg = mods["mha"].cfg
    x = torch.randn(args.batch, cfg.block_size, cfg.d_model, requires_grad=True)
    times = {v: [] for v in VARIANTS}
    for r in range(args.rounds + 2):  # two warm-up rounds
        for v, m in mods.items():
            t0 = time.perf_counter()
            m(x).square().mean().backward()
            dt = time.perf_counter() - t0
            if r >= 2:
                times[v].append(dt)
    med = {v: statistics.median(t) * 1e3 for v, t in times.items()}
    # × MHA from the same round's MHA time, then the median over rounds: drift of a shared
    # machine between rounds cancels
    rel = {v: statistics.median(a / b for a, b in zip(times[v], times["mha"])) for v in VARIANTS}
    mem = {v: saved_bytes(m, x) / 2**20 for v, m in mods.items()}
    flops = {v: fwd_bwd_flops(m, x) for v, m in mods.items()}
    kern = {v: kernel_ms(m, x) for v, m in mods.items()}
    rate = {v: flops[v] / med[v] * 1e3 for v in VARIANTS}  # FLOP/s
    rate_rel = {v: flops[v] / flops["mha"] / rel[v] for v in VARIANTS}  # FLOP/s × MHA, per round
    rows = [
        f"| {v.upper()} | {med[v]:.2f} | {rel[v]:.2f} | {kern[v]:.2f} | "
        f"{flops[v] / 1e9:.3f} | "
        f"{flops[v] / flops['mha']:.2f} | {rate[v] / 1e9:.1f} | {rate_rel[v]:.2f} | "
        f"{mem[v]:.2f} | {mem[v] / mem['mha']:.2f} | {sum(p.numel() for p in mods[v].parameters()):,} |"
        for v in VARIANTS
    ]
    # Time each variant may take to reach 0.8× MHA's FLOP/s (MHA's median time scaled by the FLOP
    # ratio), against what its kernels take alone
    short = [f"{v.upper()}: {flops[v] / flops['mha'] / 0.8 * med['mha']:.1f} ms "
             f"allowed, of which its attention kernels take {kern[v]:.1f} ms"
             for v in VARIANTS if rate_rel[v] < 0.8]
    text = "\n".join([
        "# Attention forward + backward on CPU (cpu preset)",
        "",
        f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}; load average during "
        f"the run {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} logical CPUs; commit {commit()}",
        f"- machine: {cpu_model()}, {os.cpu_count()} logical CPUs, "
        f"torch {torch.__version__}, 1 thread, {platform.platform()}",
        f"- input: batch {args.batch} × {cfg.block_size} tokens × d_model {cfg.d_model}; "
        f"{cfg.n_head} heads × {cfg.head_dim}; median of {args.rounds} interleaved rounds",
        "- memory: MiB of tensors saved for backward (see benchmarks/attention_cpu.py)",
        "- produced by `.venv/bin/python benchmarks/attention_cpu.py`",
        "",
        "| variant | fwd+bwd ms | × MHA | in attention kernel ms | GFLOP | × MHA | GFLOP/s | × MHA | saved MiB | × MHA | attention params |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "\"in attention kernel\": forward + backward time inside PyTorch's fused CPU attention kernel "
        "(torch.profiler self time, mean of 5 iterations). The × MHA columns of time and FLOP/s are "
        "medians over rounds of each round's ratio to MHA, so they can differ in the second decimal "
        "from the ratio of the medians shown.",
        "Below 0.8× MHA's FLOP/s (the time that would reach it, from MHA's rate in this run): "
        + ("; ".join(short) if short else "none") + ".",
        "",
    ])
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
