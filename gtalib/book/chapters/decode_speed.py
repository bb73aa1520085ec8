"""The decode-speed chapter: its figure of decode latency of the Figure-5 shards against context
length (measured on this CPU, the roofline model, the paper's H100 figure and, when recorded, the
Triton kernels on a GPU), the model's error, the latency ratios and the shards' arithmetic
intensity. No timing happens here: it shows recorded measurements.

Reads :mod:`gtalib.book.analysis.style` and :mod:`gtalib.kernels.decode_model`. Latencies in µs (the CPU
panel in ms), contexts in K tokens.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display

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
    for ax, title, unit in ((a, "this CPU (fp32, 1 core)", "ms"), (b, "H100 (bf16)", "µs")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ctx = sorted(set(cpu.context_k if ax is a else h100.context_k))
        ax.set_xticks(ctx, [str(c) for c in ctx])
        ax.minorticks_off()
        ax.set_xlabel("context length (K tokens)")
        ax.set_ylabel(f"latency ({unit})")
        ax.set_title(title)
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def _span(values) -> str:
    """A range of ratios as the decode page prints it, e.g. ``"1.05–1.26×"``."""
    return f"{range_text(values, '.2f')}×"


def _gpu_rows(gpu) -> tuple[pd.DataFrame | None, dict]:
    """``(rows, provenance)`` of a recorded GPU check (``None, {}`` when none): the points
    measured (a failed point is a row with an error and no latency)."""
    gpu_df, gpu_env = gpu if gpu is not None else (None, {})
    if gpu_df is not None:
        gpu_df = gpu_df[gpu_df["latency_us"].notna()] if "latency_us" in gpu_df else gpu_df.iloc[:0]
    return gpu_df, gpu_env


def _h100(model: pd.DataFrame) -> pd.DataFrame:
    """The model's H100 rows at the paper's contexts."""
    return model[(model.gpu == "H100") & model.paper_latency_us.notna()]


def show_decode_plot(cpu: dict, model: pd.DataFrame, gpu=None) -> None:
    """Show :func:`plot_decode` of the recorded measurements (no timing happens here).

    Args:
        cpu: the CPU results of ``benchmarks/decode_cpu.py``
            (:func:`gtalib.kernels.decode_model.load_cpu_results`).
        model: :func:`gtalib.kernels.decode_model.model_table` (the H100 rows are used).
        gpu: ``(DataFrame, provenance)`` of a recorded GPU check
            (:func:`gtalib.kernels.bench.recorded_results`) or ``None``.
    """
    gpu_df, gpu_env = _gpu_rows(gpu)
    plot_decode(pd.DataFrame(cpu["rows"]), _h100(model), gpu_df, gpu_env.get("gpu", "GPU"))
    plt.show()


def error_table(cpu: dict) -> pd.DataFrame:
    """The model's relative error on this CPU, measured ÷ model − 1: shard × context (K)."""
    rows = pd.DataFrame(cpu["rows"])
    return rows.pivot_table(index="shard", columns="context_k", values="rel_error", sort=False)


def ratio_table(cpu: dict, model: pd.DataFrame, paper: pd.DataFrame, gpu=None) -> pd.DataFrame:
    """Latency ratios (:func:`gtalib.kernels.decode_model.latency_ratios`), one column per source
    (this CPU, the H100 roofline, the paper, a recorded GPU check), each cell the range over
    that source's contexts (``"1.05–1.26×"``)."""
    gpu_df, gpu_env = _gpu_rows(gpu)
    h100 = _h100(model)
    ratios = {
        "measured here (CPU)": dm.latency_ratios(pd.DataFrame(cpu["rows"]), "measured_us"),
        "predicted, H100 (roofline)": dm.latency_ratios(h100, "latency_us"),
        "paper (H100, ≈)": dm.latency_ratios(paper, "latency_us"),
    }
    if gpu_df is not None and not gpu_df.empty:
        ratios[f"measured, {gpu_env.get('gpu', 'GPU')} (Triton)"] = dm.latency_ratios(gpu_df, "latency_us")
    return pd.DataFrame({k: {c: _span(r[c].dropna()) for c in r.columns} for k, r in ratios.items()})


def shard_table() -> pd.DataFrame:
    """Each Figure-5 shard's FLOPs and cache bytes per cached token (fp32 on the CPU, bf16 on
    the H100) and their ratio, the arithmetic intensity (FLOP / byte)."""
    return pd.DataFrame([{"shard": s.name, "FLOPs / token": s.flops_per_token,
                          "bytes / token, fp32 (CPU)": 4 * s.elems_per_token,
                          "FLOP / byte, fp32": s.flops_per_token / (4 * s.elems_per_token),
                          "bytes / token, bf16 (H100)": 2 * s.elems_per_token,
                          "FLOP / byte, bf16": s.flops_per_token / (2 * s.elems_per_token)}
                         for s in dm.PAPER_SHARDS.values()]).set_index("shard")


def show_table(table: pd.DataFrame, fmt=None) -> None:
    """Display one of the page's tables in the book's style (``fmt``: a pandas format)."""
    display(table_style(table.style.format(fmt) if fmt else table.style))


def decode_facts(cpu: dict, model: pd.DataFrame, gpu=None, tolerance: float = 0.25
                 ) -> dict[str, str]:
    """What the page's sentences state, by name (Markdown text): the CPU record's
    provenance (``cpu_date``, ``cpu_name``, ``cpu_threads``, ``cpu_logical``, ``load_before``,
    ``load_after``, ``cpu_torch``, ``cpu_command``), its measured peak (``cpu_gflops``,
    GFLOP/s), bandwidth (``cpu_gbs``, GB/s) and balance (``cpu_balance``, FLOP/byte), the
    H100's balance (``h100_balance``), the recorded GPU check (``gpu_check``: date and GPU, or
    ``"none"``), the model's largest |error| on the CPU (``worst_error``, a percentage), whether
    it is ``within`` or ``outside`` the tolerance (``error_within``, ``tolerance``), the
    largest recorded context (``cpu_context``, K tokens) and the rankings there, fastest first
    (``rank_cpu``, ``rank_h100``, ``rank_paper``: shards joined by ``" < "``)."""
    rows, h100 = pd.DataFrame(cpu["rows"]), _h100(model)
    _, gpu_env = _gpu_rows(gpu)
    worst = float(error_table(cpu).abs().max().max())
    big = rows[rows.context_k == rows.context_k.max()].sort_values("measured_us")
    h = h100[h100.context_k == h100.context_k.max()]
    return {
        "cpu_date": f"{cpu['date_utc']}", "cpu_name": f"{cpu['cpu']}",
        "cpu_threads": f"{cpu['threads']}", "cpu_logical": f"{cpu['logical_cpus']}",
        "load_before": f"{cpu['load_average_before'][0]}",
        "load_after": f"{cpu['load_average_after'][0]}", "cpu_torch": f"{cpu['torch']}",
        "cpu_command": f"`{cpu['command'].strip()}`",
        "cpu_gflops": f"{cpu['peak_flops'] / 1e9:.0f}", "cpu_gbs": f"{cpu['bandwidth'] / 1e9:.1f}",
        "cpu_balance": f"{cpu['peak_flops'] / cpu['bandwidth']:.1f}",
        "h100_balance": f"{dm.PEAK_FLOPS['H100'] / dm.HBM_BANDWIDTH['H100']:.0f}",
        "gpu_check": (f"{gpu_env.get('date_utc', '?')}, {gpu_env.get('gpu', '?')}"
                      if gpu is not None else "none"),
        "worst_error": f"{worst:.0%}", "tolerance": f"{tolerance:.0%}",
        "error_within": "within" if worst <= tolerance else "outside",
        "cpu_context": f"{int(big.context_k.iloc[0])}K",
        "rank_cpu": " < ".join(big.shard),
        "rank_h100": " < ".join(h.sort_values("latency_us").shard),
        "rank_paper": " < ".join(h.sort_values("paper_latency_us").shard),
    }
