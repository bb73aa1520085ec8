"""The decode-speed chapter's display: decode latency of the Figure-5 shards against context
length (measured on this CPU, the roofline model, the paper's H100 figure and, when recorded, the
Triton kernels on a GPU), the model's error, the latency ratios and the shards' arithmetic
intensity. No timing happens here: it shows recorded measurements.

Reads :mod:`gtalib.book.analysis.style` and :mod:`gtalib.kernels.decode_model`. Latencies in µs (the CPU
panel in ms), contexts in K tokens.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from gtalib.book.analysis.style import range_text, set_style, table_style
from gtalib.kernels import decode_model as dm

_DECODE_COLORS = {"gqa": "teal", "mla": "tab:blue", "gla-2": "tab:gray", "mlra-4": "tab:red"}


def plot_decode(cpu: pd.DataFrame, h100: pd.DataFrame, gpu: pd.DataFrame | None = None,
                gpu_name: str = "GPU") -> plt.Figure:
    """Decode latency of the Figure-5 shards against context length, two panels.

    Left, this CPU: measured (solid, markers) and the model (dashed), ms. Right, the paper's
    H100 figure (solid, markers, ≈), the roofline model at H100 peaks (dashed) and, when recorded,
    the Triton kernels measured on ``gpu_name`` (dotted), µs.

    Args:
        cpu: long table with ``variant, shard, context_k, measured_us, predicted_us``.
        h100: long table with ``variant, shard, context_k, latency_us, paper_latency_us``.
        gpu: optional long table with ``variant, shard, context_k, latency_us``.
    """
    set_style()
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    for v, g in cpu.groupby("variant", sort=False):
        c = _DECODE_COLORS.get(v, "black")
        a.plot(g.context_k, g.measured_us / 1e3, marker="o", color=c, label=f"{g.shard.iloc[0]}: measured")
        a.plot(g.context_k, g.predicted_us / 1e3, ls="--", color=c, label=f"{g.shard.iloc[0]}: model")
    for v, g in h100.groupby("variant", sort=False):
        c = _DECODE_COLORS.get(v, "black")
        b.plot(g.context_k, g.paper_latency_us, marker="o", color=c, label=f"{g.shard.iloc[0]}: paper (≈)")
        b.plot(g.context_k, g.latency_us, ls="--", color=c, label=f"{g.shard.iloc[0]}: roofline model")
    if gpu is not None:
        for v, g in gpu.groupby("variant", sort=False):
            b.plot(g.context_k, g.latency_us, ls=":", marker="s", color=_DECODE_COLORS.get(v, "black"),
                   label=f"{g.shard.iloc[0]}: measured, {gpu_name}")
    for ax, title, unit in ((a, "this CPU, fp32, one core", "ms"), (b, "H100, bf16", "µs")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ctx = sorted(set(cpu.context_k if ax is a else h100.context_k))
        ax.set_xticks(ctx, [str(c) for c in ctx])
        ax.minorticks_off()
        ax.set_xlabel("context length (K tokens)")
        ax.set_ylabel(f"decode step, one layer, batch 1 ({unit})")
        ax.set_title(title)
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def _span(values) -> str:
    """A range of ratios as the decode page prints it, e.g. ``"1.05–1.26×"``."""
    return f"{range_text(values, '.2f')}×"


def show_decode(cpu: dict, model: pd.DataFrame, paper: pd.DataFrame, gpu=None, tolerance: float = 0.25) -> None:
    """Display the decode chapter from recorded measurements (no timing happens here).

    Args:
        cpu: the CPU results of ``benchmarks/decode_cpu.py``
            (:func:`gtalib.kernels.decode_model.load_cpu_results`).
        model: :func:`gtalib.kernels.decode_model.model_table` (the H100 rows are used).
        paper: :func:`gtalib.kernels.decode_model.paper_table`.
        gpu: ``(DataFrame, provenance)`` of a recorded GPU check
            (:func:`gtalib.kernels.bench.recorded_results`) or ``None``.
        tolerance: the model's allowed relative error on the CPU (25 %).
    """


    rows = pd.DataFrame(cpu["rows"])
    h100 = model[(model.gpu == "H100") & model.paper_latency_us.notna()]
    gpu_df, gpu_env = gpu if gpu is not None else (None, {})
    if gpu_df is not None:  # a failed point is a row with an error and no latency
        gpu_df = gpu_df[gpu_df["latency_us"].notna()] if "latency_us" in gpu_df else gpu_df.iloc[:0]
    plot_decode(rows, h100, gpu_df, gpu_env.get("gpu", "GPU"))
    plt.show()
    display(Markdown(
        f"CPU measurement recorded {cpu['date_utc']} on {cpu['cpu']} ({cpu['threads']} thread of "
        f"{cpu['logical_cpus']}; load average {cpu['load_average_before'][0]} before, "
        f"{cpu['load_average_after'][0]} after; torch {cpu['torch']}; `{cpu['command'].strip()}`). "
        f"Measured in the same run: peak {cpu['peak_flops'] / 1e9:.0f} GFLOP/s (1024³ fp32 GEMM), "
        f"bandwidth {cpu['bandwidth'] / 1e9:.1f} GB/s (streaming read), so the CPU's balance is "
        f"{cpu['peak_flops'] / cpu['bandwidth']:.1f} FLOP/byte; the H100's is "
        f"{dm.PEAK_FLOPS['H100'] / dm.HBM_BANDWIDTH['H100']:.0f}."
        + (f" GPU check recorded {gpu_env.get('date_utc', '?')} on {gpu_env.get('gpu', '?')}."
           if gpu is not None else " No GPU measurement is recorded.")))

    err = rows.pivot_table(index="shard", columns="context_k", values="rel_error", sort=False)
    worst = float(err.abs().max().max())
    display(Markdown(
        f"Model error on this CPU, measured ÷ model − 1 (model: GEMM roofline "
        f"max(F / P_H, B / W) plus the softmax, with the rates measured in the same run). Largest "
        f"|error|: **{worst:.0%}** ({'within' if worst <= tolerance else 'outside'} ±{tolerance:.0%})."))
    display(table_style(err.style.format("{:+.0%}")))

    ratios = {
        "measured here (CPU)": dm.latency_ratios(rows, "measured_us"),
        "predicted, H100 (roofline)": dm.latency_ratios(h100, "latency_us"),
        "paper (H100, ≈)": dm.latency_ratios(paper, "latency_us"),
    }
    if gpu_df is not None and not gpu_df.empty:
        ratios[f"measured, {gpu_env.get('gpu', 'GPU')} (Triton)"] = dm.latency_ratios(gpu_df, "latency_us")
    table = pd.DataFrame({k: {c: _span(r[c].dropna()) for c in r.columns} for k, r in ratios.items()})
    display(Markdown("Latency ratios (range over the contexts of each source):"))
    display(table_style(table.style))

    big = rows[rows.context_k == rows.context_k.max()].sort_values("measured_us")
    h = h100[h100.context_k == h100.context_k.max()]
    rank_cpu = " < ".join(big.shard)
    rank_h100 = " < ".join(h.sort_values("latency_us").shard)
    rank_paper = " < ".join(h.sort_values("paper_latency_us").shard)
    shards = pd.DataFrame([{"shard": s.name, "FLOPs / token": s.flops_per_token,
                            "bytes / token, fp32 (CPU)": 4 * s.elems_per_token,
                            "FLOP / byte, fp32": s.flops_per_token / (4 * s.elems_per_token),
                            "bytes / token, bf16 (H100)": 2 * s.elems_per_token,
                            "FLOP / byte, bf16": s.flops_per_token / (2 * s.elems_per_token)}
                           for s in dm.PAPER_SHARDS.values()]).set_index("shard")
    display(Markdown(
        f"Ranking, fastest first: this CPU at {int(big.context_k.iloc[0])}K: {rank_cpu}; H100 "
        f"roofline: {rank_h100}; paper: {rank_paper}. Arithmetic intensity (FLOPs per byte of "
        f"cache read) of each shard:"))
    display(table_style(shards.style.format({c: "{:,.0f}" for c in shards.columns})))
