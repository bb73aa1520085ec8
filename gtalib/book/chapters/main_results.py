"""The main-results chapter: final validation perplexity and loss of every main-table
configuration on each held-out source and their average (the paper's layout), their Student-t
half-widths over seeds, the distance to the corpus's unigram entropy, and the page's tables and
figure.

Reads :mod:`gtalib.book.design.figures` (the paper's table, colours, names), :mod:`gtalib.book.design.plan`,
:mod:`gtalib.book.analysis.collect`, :mod:`gtalib.book.analysis.curves` (final values, the corpus entropy),
:mod:`gtalib.book.analysis.stats` (half-widths) and :mod:`gtalib.book.analysis.style`. Losses in nats per token,
perplexity ``exp(loss)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import HTML, Markdown, display

from gtalib.book.analysis.collect import (
    Collected,
    collect_runs,
    missing_notice,
    provenance_html,
)
from gtalib.book.analysis.curves import final_values
from gtalib.book.analysis.stats import delta_stats
from gtalib.book.analysis.style import plural, set_style, style_best, table_style
from gtalib.book.design.figures import TABLES
from gtalib.book.design.names import VARIANT_COLORS, display_name
from gtalib.book.design.paper import PAPER_MAIN_PPL, PAPER_MLRA4_GATED_AVG_PPL
from gtalib.book.design.plan import Plan


def source_columns(runs: pd.DataFrame) -> list[str]:
    """Held-out source names present as ``val_loss/<source>`` columns, in frame order."""
    return [c.split("/", 1)[1] for c in runs.columns if c.startswith("val_loss/")]


def main_table(runs: pd.DataFrame, metric: str = "ppl", confidence: float = 0.95
               ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Final validation loss or perplexity of each configuration on each held-out source, in the
    paper's layout (rows configurations, columns sources then ``avg``).

    Per seed: loss of each source at the final logged step; ``ppl = exp(loss)``; ``avg`` is the
    mean over sources of that metric (the paper averages perplexities over its 7 sets). Then
    mean over seeds.

    Returns:
        ``(mean, half_width)``: two frames indexed by configuration label; ``half_width`` is the
        Student-t CI half-width over seeds (NaN for one seed).
    Raises:
        ValueError: ``metric`` not ``"ppl"`` or ``"loss"``; no ``val_loss/<source>`` column.
    """
    df = per_seed_table(runs, metric)
    cols = [c for c in df.columns if c not in ("label", "seed")]
    mean = df.groupby("label", sort=False)[cols].mean()
    half = df.groupby("label", sort=False)[cols].agg(
        lambda v: delta_stats(v, confidence).resolvable
    )
    return mean, half


def per_seed_table(runs: pd.DataFrame, metric: str = "ppl") -> pd.DataFrame:
    """:func:`main_table` before the mean over seeds: one row per (configuration, seed), columns
    ``label, seed``, the sources and ``avg``.

    Raises:
        ValueError: as :func:`main_table`.
    """
    if metric not in ("ppl", "loss"):
        raise ValueError(f"metric must be 'ppl' or 'loss', got {metric!r}")
    sources = source_columns(runs)
    if not sources:
        raise ValueError("runs have no val_loss/<source> columns")
    per_seed = []
    for (label, seed), g in runs.groupby(["label", "seed"], sort=False):
        row = {}
        for s in sources:
            logged = g.dropna(subset=[f"val_loss/{s}"])
            loss = logged.sort_values("step")[f"val_loss/{s}"].iloc[-1] if len(logged) else math.nan
            row[s] = math.exp(loss) if metric == "ppl" else loss
        row["avg"] = float(np.mean([row[s] for s in sources]))
        per_seed.append({"label": label, "seed": seed, **row})
    return pd.DataFrame(per_seed)


def entropy_gap(runs: pd.DataFrame, entropy: float, column: str = "val_loss") -> pd.DataFrame:
    """Final validation loss of each configuration against the corpus's unigram entropy
    (``manifest.json`` of :mod:`gtalib.data`, ``train_unigram_entropy_nats``): a model that has
    learned anything beyond token frequencies ends below it.

    Returns:
        DataFrame indexed by label: ``seeds``, ``val loss`` (the final validation loss, mean
        over seeds), ``unigram entropy``, ``gap`` with ``gap = entropy − loss`` in nats
        (positive ⇒ below the entropy).
    """
    f = final_values(runs, column)
    g = f.groupby("label", sort=False)["value"].agg(["count", "mean"])
    return pd.DataFrame({"seeds": g["count"], "val loss": g["mean"],
                         "unigram entropy": entropy, "gap": entropy - g["mean"]})


def seeds_shown(entropy: pd.DataFrame) -> str:
    """The seeds behind the table, counted in its runs (``entropy``: :func:`entropy_gap`'s
    frame): ``"5 seeds"``, or a range where configurations differ (``"3–5 seeds"``)."""
    n = sorted(set(entropy["seeds"]))
    return plural(n[0], "seed") if len(n) == 1 else f"{n[0]}–{n[-1]} seeds"


def complete_runs(collected: Collected) -> pd.DataFrame:
    """The collected runs of the configurations whose runs are all complete: the ones the
    page's tables show (a configuration with a missing seed is left out, never averaged over
    fewer seeds)."""
    runs = collected.runs
    return runs[~runs["label"].isin(set(collected.incomplete["label"]))] if len(runs) else runs


@dataclass
class MainResult:
    """Everything the main-results page shows. Built by :func:`main_result`."""

    preset: str
    confidence: float
    collected: Collected
    ppl: pd.DataFrame
    ppl_ci: pd.DataFrame
    loss: pd.DataFrame
    entropy: pd.DataFrame
    #: each complete configuration's perplexities per seed (:func:`per_seed_table`: ``label,
    #: seed``, the sources, ``avg``), what the claims' paired tests read
    per_seed: pd.DataFrame = field(default_factory=pd.DataFrame)


def main_result(plan: Plan, run_dir, train: bool = False, confidence: float = 0.95,
                source: str = "build") -> MainResult:
    """Final validation perplexity/loss per held-out source of every main-table configuration
    under ``plan`` (:func:`gtalib.book.design.plan.make_plan`) whose runs are all complete, and
    their distance to the corpus's unigram entropy. ``source``: where a run both the store and
    the records hold is read from (:func:`gtalib.book.analysis.collect.collect_runs`)."""
    from gtalib.book.analysis.curves import (
        corpus_entropy,  # at call time: a test kernel replaces it
    )

    preset = plan.preset
    col = collect_runs(plan.figure_refs["main"], plan, run_dir, train=train, source=source)
    runs = complete_runs(col)
    if len(runs):
        per_seed = per_seed_table(runs)
        ppl, ppl_ci = main_table(runs, "ppl", confidence)
        loss, _ = main_table(runs, "loss", confidence)
        gap = entropy_gap(runs, corpus_entropy(preset))
    else:
        ppl = ppl_ci = loss = gap = per_seed = pd.DataFrame()
    return MainResult(preset, confidence, col, ppl, ppl_ci, loss, gap, per_seed)


# ---------------------------------------------------------------------------------------------
# The main-results page
# ---------------------------------------------------------------------------------------------

def plot_main_results(mean: pd.DataFrame, half: pd.DataFrame | None = None,
                      paper: pd.DataFrame | None = None) -> plt.Figure:
    """Average validation perplexity per configuration as dots (ours left, with the Student-t
    half-widths over seeds as error bars; the paper's right, including gated MLRA-4). Dots, not
    bars: the axes do not start at zero."""
    set_style()
    fig, axes = plt.subplots(2, 1, figsize=(8, 8), gridspec_kw={"height_ratios": [1, 1.3]})
    labels = list(mean.index)
    err = None if half is None else half["avg"].fillna(0.0).to_numpy()
    for i, lbl in enumerate(labels):
        axes[0].errorbar(mean["avg"].iloc[i], i, xerr=None if err is None else err[i], fmt="o",
                         color=VARIANT_COLORS.get(_variant_of(lbl), "gray"), capsize=3)
    axes[0].set_yticks(range(len(labels)), labels)
    axes[0].set_xlabel("average perplexity")
    axes[0].set_title("ours", fontsize=10)
    axes[0].invert_yaxis()
    if paper is not None:
        pv = paper["avg"].to_dict()
        plabels = [display_name(v) for v in pv] + ["MLRA-4 + gate"]
        pvals = list(pv.values()) + [PAPER_MLRA4_GATED_AVG_PPL]
        pcolors = [VARIANT_COLORS[v] for v in pv] + [VARIANT_COLORS["mlra-4"]]
        axes[1].scatter(pvals, range(len(pvals)), c=pcolors, zorder=3)
        axes[1].set_yticks(range(len(plabels)), plabels)
        axes[1].set_xlabel("average perplexity")
        axes[1].set_title("paper", fontsize=10)
        axes[1].invert_yaxis()
    fig.tight_layout()
    return fig


def _variant_of(label: str) -> str:
    """Canonical variant of a configuration label (``"MLRA-4 + gate"`` → ``"mlra-4"``)."""
    return label.split(" ")[0].lower()


def show_main_figure(main: MainResult, paper: pd.DataFrame | None = None) -> None:
    """Display the page's head: the incomplete-runs notice
    (:func:`gtalib.book.analysis.collect.missing_notice`) and, where a configuration's runs are
    all complete, :func:`plot_main_results` beside the paper's values (``paper``: default
    :data:`gtalib.book.design.paper.PAPER_MAIN_PPL`)."""
    notice = missing_notice(main.collected)
    if notice:
        display(Markdown(notice))
    if not main.ppl.empty:
        plot_main_results(main.ppl, main.ppl_ci, PAPER_MAIN_PPL if paper is None else paper)
        plt.show()


def show_table(main: MainResult, name: str) -> None:
    """Display one of the page's tables: ``"ppl"`` (our perplexity per held-out source and
    their average; best of each column **bold**, second underlined), ``"loss"`` (the same in
    nats per token), ``"entropy"`` (:func:`entropy_gap`), ``"paper"`` (the paper's table,
    :data:`gtalib.book.design.paper.PAPER_MAIN_PPL`) or ``"provenance"`` (where the runs come
    from, :func:`gtalib.book.analysis.collect.provenance_html`); ours show nothing where no
    configuration is complete.

    Raises:
        ValueError: another ``name``.
    """
    if name == "paper":
        shown = PAPER_MAIN_PPL.copy()
        shown.index = [display_name(v) for v in shown.index]
        display(style_best(shown))
    elif name == "provenance":
        display(HTML(provenance_html(main.collected)))
    elif name not in ("ppl", "loss", "entropy"):
        raise ValueError(f"name must be ppl, loss, entropy, paper or provenance, got {name!r}")
    elif main.ppl.empty:
        return
    elif name == "entropy":
        display(table_style(main.entropy.style.format(
            {"val loss": "{:.4f}", "unigram entropy": "{:.4f}", "gap": "{:+.4f}"})))
    else:
        display(style_best(main.ppl) if name == "ppl" else style_best(main.loss, fmt="{:.4f}"))


def main_facts(main: MainResult) -> dict[str, str]:
    """What the page's sentences state, by name (Markdown text): ``main_preset``,
    ``main_seeds`` (the seeds behind the tables, :func:`seeds_shown`; ``"0 seeds"`` where no
    configuration is complete), ``main_confidence`` (``"95%"``), ``main_half_widths`` (each
    configuration's Student-t half-width of the average, ``"MHA ±0.123, ..."``; ``"—"`` where
    none), ``main_planned_seeds`` (the seeds per configuration this preset plans,
    its spec's ``seeds_at``), ``paper_sets`` (the paper's validation sets)
    and ``paper_gated_avg`` (gated MLRA-4's average perplexity in the paper)."""
    ci = main.ppl_ci["avg"] if not main.ppl.empty else pd.Series(dtype=float)
    return {
        "main_preset": f"`{main.preset}`",
        "main_seeds": seeds_shown(main.entropy) if not main.ppl.empty else "0 seeds",
        "main_confidence": f"{main.confidence:.0%}",
        "main_half_widths": ", ".join(f"{k} ±{v:.3f}" for k, v in ci.items()) or "—",
        "main_planned_seeds": f"{TABLES['main'].seeds_at(main.preset)}",
        "paper_sets": f"{len([c for c in PAPER_MAIN_PPL.columns if c != 'avg'])}",
        "paper_gated_avg": f"{PAPER_MLRA4_GATED_AVG_PPL}",
    }
