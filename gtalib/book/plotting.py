"""Seaborn figures and notebook displays of the book, in the paper's colours.

Layout of an ablation figure: two panels (stacked), because the scales differ by three orders
of magnitude and sharing one axis would hide one of them. Top, **ours**: ΔL against our training
tokens, every seed as a thin light line, the mean over seeds as a bold line, its Student-t band
shaded lightly from :data:`MIN_BAND_SEEDS` seeds up; the y-range follows the curves, not the band.
Below, **paper (≈)**: the paper's curves, dashed, against the paper's 0–100 B tokens, read off its
figure (``gtalib.book.figures``); where the paper gives only final perplexities, a marker at 100 B.
Legends sit outside the axes, to the right, so that they hide no curve or marker. Each variant
keeps the paper's colour and also gets its own marker and (paper panel) dash pattern, because
some of the paper's colours are close (GQA teal, MLA blue).
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd

from gtalib.book import figures as F
from gtalib.book.collect import missing_notice, pair_source_lines, sources_notice
from gtalib.book.curves import plateau_escape
from gtalib.book.stats import _interval_columns, final_table_words, verdict_text
from gtalib.book.style import MIN_BAND_SEEDS, _variant_style, curve_limits, plural, set_style
from gtalib.model.presets import PRESETS

_UNITS = ((1e9, "B"), (1e6, "M"), (1e3, "K"), (1, ""))


def _outside_legend(ax, **kw) -> None:
    """Legend outside the axes, right of them, top-aligned (hides nothing)."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kw)


def token_unit(max_tokens: float) -> tuple[float, str]:
    """``(divisor, suffix)`` that prints ``max_tokens`` with at most three integer digits."""
    for div, suffix in _UNITS:
        if max_tokens >= div:
            return div, suffix
    return 1, ""


def seeds_text(counts: dict) -> str:
    """The seeds of an ablation figure: ``"3 seeds"``, or ``"3 seeds (5 for MLA, MLRA-2)"`` when
    some variants run more (``counts``: variant → seeds, :attr:`AblationResult.seed_counts`)."""
    if not counts:
        return "no seeds"
    base = min(counts.values())
    more = {}
    for v, n in counts.items():
        if n != base:
            more.setdefault(n, []).append(F.display_name(v))
    extra = "; ".join(f"{n} for {', '.join(vs)}" for n, vs in sorted(more.items()))
    return plural(base, "seed") + (f" ({extra})" if extra else "")


def drawn_text(counts: dict, confidence: float) -> str:
    """What an ablation figure draws, as its caption says it: ``"thin lines: each seed's ΔL;
    bold: mean over 3 seeds; shaded: 95% t-interval of the mean, shown from 3 seeds; the
    y-range follows the curves, the shading is cut at the frame"`` (``counts``: variant →
    seeds; a variant with fewer than :data:`MIN_BAND_SEEDS` is not shaded, and the text says
    why)."""
    fewest, most = min(counts.values(), default=0), max(counts.values(), default=0)
    if most < MIN_BAND_SEEDS:
        band = (f"no shading: the {confidence:.0%} t-interval of the mean is shown from "
                f"{MIN_BAND_SEEDS} seeds, this figure has {fewest}; the y-range follows the curves")
    else:
        unshaded = ("" if fewest >= MIN_BAND_SEEDS else
                    " (a variant with fewer is not shaded)")
        band = (f"shaded: {confidence:.0%} t-interval of the mean, shown from {MIN_BAND_SEEDS} "
                f"seeds{unshaded}; the y-range follows the curves, the shading is cut at the frame")
    return f"thin lines: each seed's ΔL; bold: mean over {seeds_text(counts)}; {band}"


def plot_ablation(result, ax_ours=None, ax_paper=None) -> plt.Figure:
    """The ablation figure of an :class:`gtalib.book.analysis.AblationResult` (see module
    docstring): each seed's ΔL thin and light, the mean over seeds bold, the Student-t interval
    of the mean shaded lightly from :data:`MIN_BAND_SEEDS` seeds up; the y-range is set by the
    curves (seeds and means, with a margin), never by the interval, which is clipped to it.

    Returns:
        the matplotlib figure (two axes: ours, paper).
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    set_style()
    fig_spec = F.ablation(result.key)
    if ax_ours is None:
        # stacked, not side by side: the book's text column is narrow
        fig, (ax_ours, ax_paper) = plt.subplots(
            2, 1, figsize=(10, 7.5), gridspec_kw={"height_ratios": [3, 2]}
        )
    else:
        fig = ax_ours.figure
    curves, band = result.curves, result.band
    div, unit = token_unit(float(curves["tokens"].max()) if len(curves) else 1.0)
    shown, banded = [], False
    for v in result.complete:
        color = fig_spec.colors[v]
        for _, g in curves[curves["variant"] == v].groupby("seed"):
            ax_ours.plot(g["tokens"] / div, g["delta"], color=color, lw=0.7, alpha=0.4)
            shown += list(g["delta"])
        b = band[band["variant"] == v]
        x = b["tokens"] / div
        marker, _ = _variant_style(fig_spec, v)
        ax_ours.plot(x, b["mean"], color=color, lw=2.2, marker=marker, ms=5,
                     markevery=max(1, len(b) // 8), label=F.display_name(v))
        shown += list(b["mean"])
        if len(b) and b["n"].min() >= MIN_BAND_SEEDS:
            ax_ours.fill_between(x, b["lo"], b["hi"], color=color, alpha=0.08, lw=0)
            banded = True
    ax_ours.set_ylim(*curve_limits(shown))  # the band is clipped to the curves' range
    ax_ours.axhline(0.0, color="black", lw=0.8, ls=":")
    ax_ours.set_xlabel(f"training tokens ({unit})" if unit else "training tokens")
    ax_ours.set_ylabel(f"{fig_spec.convention} (nats)")
    ax_ours.set_title(f"ours: {result.preset} preset, {seeds_text(result.seed_counts)}, "
                      f"{result.curve_column.replace('_', ' ')}", fontsize=10)
    if result.complete:
        handles, _ = ax_ours.get_legend_handles_labels()
        handles += [Line2D([], [], color="0.4", lw=0.7, alpha=0.6, label="each seed's ΔL"),
                    Line2D([], [], color="0.4", lw=2.2,
                           label=f"mean over {seeds_text(result.seed_counts)}")]
        if banded:
            handles.append(Patch(color="0.4", alpha=0.2, lw=0,
                                 label=f"{result.confidence:.0%} t-interval of the mean"))
        _outside_legend(ax_ours, handles=handles)
    else:
        ax_ours.text(0.5, 0.5, "no complete runs:\nsee the notice above", ha="center",
                     va="center", transform=ax_ours.transAxes, color="crimson")
    plot_paper_reference(fig_spec, ax_paper, result.variants or None)
    fig.tight_layout()
    return fig


def plot_paper_reference(fig_spec, ax, variants=None) -> None:
    """The paper's curves of ``fig_spec`` (dashed, ≈) on its 0–100 B token axis; markers at
    100 B for the final ΔL = ln(PPL ratio) where the paper gives only perplexities.

    Args:
        variants: the variants to draw (those the page asked for; default all of the paper's),
            in the paper's legend order.

    The y-range covers every plotted paper value, 0 and the figure's ``paper_ylim``, plus a 10 %
    margin, so that no curve start or marker touches the frame."""
    curves = fig_spec.paper_curve_frame()
    values = [0.0, *(fig_spec.paper_ylim or ())]
    shown = fig_spec.variants if variants is None else [
        v for v in fig_spec.variants if v in set(variants)]
    for v in shown:
        color = fig_spec.colors[v]
        marker, dash = _variant_style(fig_spec, v)
        c = curves[curves["variant"] == v]
        if len(c):
            ax.plot(c["tokens_B"], c["delta"], color=color, ls=dash, lw=1.5, marker=marker,
                    ms=5, label=f"{F.display_name(v)} paper (≈)")
            values += list(c["delta"])
        else:
            final = fig_spec.paper_final(v)
            ax.plot([100], [final], color=color, marker=marker, ms=7, ls="none",
                    label=f"{F.display_name(v)} paper final (≈ ln PPL ratio)")
            if not math.isnan(final):
                values.append(final)
    lo, hi = min(values), max(values)
    pad = 0.1 * (hi - lo or 1.0)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xlim(-3, 105)
    ax.set_xlabel("training tokens (B), paper's 2.9 B model")
    ax.set_ylabel("ΔL (nats)")
    ax.set_title("paper (≈, read off its figure)", fontsize=10)
    _outside_legend(ax, fontsize=7)


def _hardware(cards: list) -> str:
    """One-line hardware summary from run cards (``device``/``threads`` keys when present)."""
    seen = []
    for c in cards:
        dev = c.get("device") or c.get("accelerator") or "?"
        thr = c.get("threads") or c.get("torch_threads")
        s = f"{dev}" + (f", {plural(thr, 'thread')}" if thr else "")
        if s not in seen:
            seen.append(s)
    return "; ".join(seen) if seen else "unknown (no run card)"


_COLUMN_WORDS = {
    "train_loss": "training loss on the batch of each step (paired runs share every batch)",
    "val_loss": "validation loss on the fixed held-out windows",
}


def ablation_caption(result) -> str:
    """Markdown caption: convention, preset, tokens, seeds, hardware, smoothing and what is
    drawn (:func:`drawn_text`)."""
    fig_spec = F.ablation(result.key)
    tokens = int(result.curves["tokens"].max()) if len(result.curves) else 0
    div, unit = token_unit(max(tokens, 1))
    size = PRESETS[result.preset]
    return (
        f"**{fig_spec.title}.** {fig_spec.convention}, from paired runs (same data order, same "
        f"seed) on the same steps; positive means the paper's recommended choice is better. "
        f"Preset `{result.preset}`: {size['n_layer']} layers, d_model {size['d_model']}, "
        f"{size['n_head']} heads of {size['head_dim']} (the scale ladder shows what depth does "
        f"to ΔL), {tokens / div:.3g}{unit} training tokens per run, "
        f"{seeds_text(result.seed_counts)} per configuration, hardware: {_hardware(result.collected.cards)}. "
        f"Curves: {_COLUMN_WORDS.get(result.curve_column, result.curve_column)}, each seed's "
        f"ΔL smoothed by a trailing mean over {plural(result.smoothing, 'logged step')}; "
        f"{drawn_text(result.seed_counts, result.confidence)}. Table below: "
        f"{_COLUMN_WORDS.get(result.final_column, result.final_column)} at the last step, "
        f"unsmoothed. Lower panel: the paper's "
        f"curves (2.9 B parameters, 0–100 B tokens), approximate, read off its figure."
    )


def format_final_table(final: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """The final-ΔL table as printed: paper variant names, ΔL with its CI, the smallest
    resolvable |ΔL| and the pairs that would resolve the mean, and the verdict saying what could
    hide (:func:`gtalib.book.stats.verdict_text`). The pair source, a long text, is printed
    under the table (:func:`pair_source_lines`) so that the table fits the text column."""
    if final.empty:
        return final

    out = pd.DataFrame({
        "n (pairs)": final["seeds"],  # tokens per run: in the caption (one value for the table)
        **_interval_columns(final["seeds"], final["ΔL"], final["CI low"], final["CI high"],
                            final["resolvable |ΔL|"], final["pairs to resolve"], confidence),
        "seed spread": final["seed spread"].map("{:.4f}".format),
        "paper ΔL (≈)": final["paper ΔL (≈)"].map("{:+.4f}".format),
        "verdict": [verdict_text(v, n, x, sp) for v, n, x, sp in
                    zip(final["verdict"], final["seeds"], final["resolvable |ΔL|"],
                        final["seed spread"])],
    })
    out.index = [F.display_name(v) for v in final.index]
    out.index.name = "variant"
    return out


def show_ablation(result) -> None:
    """Display an ablation page's content in a notebook: incomplete-runs notice, figure,
    caption, final ΔL table and the plateau-escape table."""
    from IPython.display import Markdown, display

    notice = missing_notice(result.collected)
    if notice:
        display(Markdown(notice))
    display(Markdown(sources_notice(result.collected)))
    plot_ablation(result)
    plt.show()
    display(Markdown(ablation_caption(result)))
    if result.complete:
        display(Markdown(final_table_words(result.confidence)))
        display(format_final_table(result.final, result.confidence))
        if "pair source" in result.final:
            display(Markdown(pair_source_lines(dict(zip(
                map(F.display_name, result.final.index), result.final["pair source"])))))


def verdict_summary(result) -> str:
    """Markdown sentence counting OUR per-variant verdicts of an ablation (from
    ``result.final``), e.g. "2 of 2 variants: agrees 1, within noise 1"; the narrative of a page
    uses it instead of a fixed claim so that text and table cannot disagree."""
    final = result.final
    if final.empty:
        return "**Our verdicts:** no complete runs, nothing measured."
    counts = final["verdict"].value_counts()
    parts = []
    for verdict, n in counts.items():
        names = ", ".join(F.display_name(v) for v in final.index[final["verdict"] == verdict])
        parts.append(f"*{verdict}* for {n} ({names})")
    return (f"**Our verdicts** (preset `{result.preset}`, {seeds_text(result.seed_counts)}, "
            f"{plural(len(final), 'variant')}, table above): " + "; ".join(parts) + ".")


def show_plateaus(result, entropy: float, margin: float = 0.1, window: int = 10) -> None:
    """Display the plateau-escape step of every run of an ablation (docs/cpu_regime.md): first step at
    which the training loss (trailing mean over ``window`` steps) falls below the corpus's
    unigram entropy minus ``margin`` nats."""
    from IPython.display import Markdown, display

    if result.runs.empty:
        display(Markdown("No complete runs: no plateau to report."))
        return
    e = plateau_escape(result.runs, entropy, margin, window)
    table = e.pivot_table(index="label", columns="seed", values="escape_step", aggfunc="first",
                          dropna=False)
    table.columns = [f"seed {c}" for c in table.columns]
    table = table.map(lambda x: "not within run" if pd.isna(x) else f"{int(x)}")
    display(Markdown(
        f"Plateau escape step per run: the first step at which the training loss (trailing mean "
        f"over {window} steps) falls below the corpus's unigram entropy ({entropy:.3f} nats) "
        f"minus {margin} nats. Compare the arms' steps: "
        f"the arm that leaves the plateau later starts its descent behind, and escape steps "
        f"that differ between seeds add to the seed-to-seed spread."))
    display(table)


# ---------------------------------------------------------------------------------------------
# Gate probes (the gating page's "What the gate does inside the model")
# ---------------------------------------------------------------------------------------------

def _probe_value(x: float) -> str:
    """A probe value as the table prints it: 3 decimals below 10, 2 below 100, else whole
    numbers (Qiu et al.'s 1053); ``"—"`` for NaN (not measured)."""
    if math.isnan(x):
        return "—"
    return f"{x:.3f}" if abs(x) < 10 else f"{x:.2f}" if abs(x) < 100 else f"{x:.0f}"


def format_probe_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The gate-probe table of the gating page from :attr:`gtalib.book.analysis.Probes.summary`:
    one row per variant with the probed runs of each arm, the gate's mean (gated arm), the
    first-token share and the largest residual activation without and with the gate, then a
    row of Qiu et al.'s values (:data:`gtalib.book.figures.QIU_PROBES`). Gate and share: mean
    over layers and seeds; largest ``|h|``: max over layers, mean over seeds. Strings."""
    arms = summary.set_index(["variant", "arm"])
    nan = pd.Series(math.nan, index=arms.columns)

    def row(name, runs, gate, share, resid, fmt=_probe_value):
        return {"variant": name, "runs with probes (no gate; gate)": runs,
                "gate mean (gate)": fmt(gate[1]),
                "first-token share, no gate": fmt(share[0]),
                "first-token share, gate": fmt(share[1]),
                "largest |h|, no gate": fmt(resid[0]), "largest |h|, gate": fmt(resid[1])}

    rows = []
    for v in dict.fromkeys(summary["variant"]):
        a, r = (arms.loc[(v, arm)] if (v, arm) in arms.index else nan for arm in ("alt", "rec"))
        runs = "; ".join("—" if math.isnan(x["runs"]) else f"{x['with_probes']:.0f} of "
                         f"{x['runs']:.0f}" for x in (a, r))
        rows.append(row(F.display_name(v), runs, (a["gate_mean"], r["gate_mean"]),
                        (a["first_token_share"], r["first_token_share"]),
                        (a["max_abs_residual_max"], r["max_abs_residual_max"])))
    q = F.QIU_PROBES
    rows.append(row(f"Qiu et al. 2025 ({F.QIU_SCALE})", "", q["gate_mean"],
                    q["first_token_share"], q["max_abs_residual"], "{:g}".format))  # as printed
    return pd.DataFrame(rows).set_index("variant")


def plot_first_token_share(per_layer: pd.DataFrame) -> plt.Figure:
    """First-token share against layer, one panel per variant (the variants of ``per_layer``
    with any probes, :attr:`gtalib.book.analysis.Probes.per_layer`): each probed run a thin
    line, the mean over seeds bold, without the gate black and dashed, with it in the variant's
    colour; a grey dotted line at uniform attention's share
    (:func:`gtalib.book.analysis.uniform_first_token_share`)."""
    from gtalib.book.analysis import uniform_first_token_share

    set_style()
    probed = per_layer.dropna(subset=["first_token_share"])
    variants = list(dict.fromkeys(probed["variant"]))
    cols = min(len(variants), 3)
    rows = -(-len(variants) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.9 * rows), squeeze=False,
                             sharey=True)
    top = probed["first_token_share"].max()
    for ax, v in zip(axes.flat, variants):
        g = probed[probed["variant"] == v]
        for arm, color, ls, name in (("alt", "black", "--", "no gate"),
                                     ("rec", F.GATE_COLORS.get(v, "tab:blue"), "-", "gate")):
            a = g[g["arm"] == arm]
            for _, run in a.groupby("run_id"):
                ax.plot(run["layer"], run["first_token_share"], color=color, ls=ls, lw=0.7,
                        alpha=0.5)
            if len(a):
                mean = a.groupby("layer")["first_token_share"].mean()
                ax.plot(mean.index, mean.to_numpy(), color=color, ls=ls, lw=2, marker="o",
                        ms=3, label=f"{name} ({plural(a['run_id'].nunique(), 'run')})")
        t = int(g["tokens"].max())
        ax.axhline(uniform_first_token_share(t), color="0.55", lw=1.2, ls=":",
                   label=f"uniform attention, {t} tokens")
        ax.set_title(F.display_name(v), fontsize=10)
        ax.set_xlabel("layer (0 = first block)")
        ax.set_ylim(0, 1.6 * top)  # headroom: the legend covers no line
        ax.legend(fontsize=7, loc="upper left")
    for ax in axes[:, 0]:
        ax.set_ylabel("attention on the first token")
    for ax in list(axes.flat)[len(variants):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def show_probes(result) -> None:
    """Display the gating page's "What the gate does inside the model" for the complete
    variants of an ablation result: the runs without probes, the table of
    :func:`format_probe_table`, the first-token share per layer
    (:func:`plot_first_token_share`) and what the numbers explain
    (:func:`gtalib.book.analysis.probe_findings`); where no run has probes, only which runs
    lack them."""
    from IPython.display import Markdown, display

    from gtalib.book.analysis import (GATE_AT_INIT, probe_findings, read_probes,
                                      uniform_first_token_share)

    probes = read_probes(result.collected)
    summary = probes.summary[probes.summary["variant"].isin(result.complete)]
    missing = probes.missing[probes.missing["variant"].isin(result.complete)]
    if summary.empty:
        display(Markdown("No complete runs: nothing to probe."))
        return
    lacking = "\n".join(f"- {r['label']}, seed {r['seed']} (`{r['run_id']}`): {r['detail']}"
                         for _, r in missing.iterrows())
    if summary["with_probes"].sum() == 0:
        display(Markdown(f"**No run of this page has gate probes** (`probes.json`), so there is "
                         f"nothing to show here:\n\n{lacking}"))
        return
    if len(missing):
        display(Markdown(f"**{len(missing)} of {int(summary['runs'].sum())} runs have no gate "
                         f"probes**: an arm's values below are the mean over its probed runs, "
                         f"and — where it has none:\n\n{lacking}"))
    t = int(summary["tokens"].max())
    display(Markdown(
        f"Gate probes of the final weights, on the same held-out windows of {t} tokens for "
        f"both arms. *Gate mean*: the gate score σ(x̃ W_g), {GATE_AT_INIT} at initialisation. "
        f"*First-token share*: attention probability on the first position, averaged over "
        f"heads and the queries after the first (uniform attention over {t} tokens gives "
        f"{uniform_first_token_share(t):.3f}). Both: mean over layers and seeds. *Largest |h|*: "
        f"the largest activation of the residual stream, max over layers, batch, positions and "
        f"channels, mean over seeds; its level depends on the model's width and "
        f"initialisation, so only the ratio of the two arms compares with Qiu et al.'s. "
        f"Qiu et al. 2025 (arXiv 2505.06708, Table 4): {F.QIU_SCALE}."))
    display(format_probe_table(summary))
    plot_first_token_share(probes.per_layer[probes.per_layer["variant"].isin(result.complete)])
    plt.show()
    display(Markdown(probe_findings(summary)))
