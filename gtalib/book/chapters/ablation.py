"""The ablation chapters (initialisation, gating, latent scaling, double heads): each variant's
paired ΔL curves, their band over seeds, the tidy table of pairs (:func:`pair_table`), its
verdicts (:func:`pair_verdicts`) and the final-ΔL table, and the page's caption, tables and
sentences. The figure itself is drawn by the notebooks' own plotting cell (tagged
``ablation-figure``, the same in the four notebooks), which reads :attr:`AblationResult.curves`
and :attr:`AblationResult.band` and, for the paper's panel, :func:`plot_paper_reference`.

Reads :mod:`gtalib.book.design.figures` (the ablation, its runs, the paper's curves and colours),
:mod:`gtalib.book.design.plan`, :mod:`gtalib.book.analysis.collect` (runs, pairs, notices),
:mod:`gtalib.book.analysis.curves`, :mod:`gtalib.book.analysis.stats` (interval, verdict, table columns),
:mod:`gtalib.book.analysis.style` and the preset sizes (:data:`gtalib.model.presets.PRESETS`). ΔL in nats
(conventions: :mod:`gtalib.book.analysis.curves`, :mod:`gtalib.book.analysis.stats`), tokens per run.

Layout of an ablation figure: two panels (stacked), because the scales differ by three orders
of magnitude and sharing one axis would hide one of them. Top, **ours**: ΔL against our training
tokens, every seed as a thin light line, the mean over seeds as a bold line, its Student-t band
shaded lightly from :data:`MIN_BAND_SEEDS` seeds up; the y-range follows the curves, not the band.
Below, **paper (≈)**: the paper's curves, dashed, against the paper's 0–100 B tokens, read off its
figure (``gtalib.book.design.figures``); where the paper gives only final perplexities, a marker at 100 B.
Legends sit outside the axes, to the right, so that they hide no curve or marker. Each variant
keeps the paper's colour and also gets its own marker and (paper panel) dash pattern, because
some of the paper's colours are close (GQA teal, MLA blue).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from IPython.display import HTML, Markdown, display

from gtalib.book.analysis.collect import (
    Collected,
    collect_runs,
    complete_variants,
    missing_notice,
    pair_source_lines,
    pair_source_summary,
    provenance_html,
)
from gtalib.book.analysis.curves import (
    auto_smoothing,
    delta_curves,
    final_deltas,
    final_values,
    plateau_escape,
    seed_band,
)
from gtalib.book.analysis.sequential import holm_level, two_look_verdicts
from gtalib.book.analysis.stats import (
    aggregate_verdicts,
    delta_stats,
    family_verdicts,
    final_table_words,
    interval_columns,
    near_zero_differences,
    near_zero_test,
    pairs_needed_at,
    spread_rule_verdict,
    verdict_text,
    visible_text,
)
from gtalib.book.analysis.style import (
    MIN_BAND_SEEDS,
    and_join,
    plural,
    table_style,
    variant_style,
)
from gtalib.book.design.figures import ABLATIONS, ablation
from gtalib.book.design.names import display_name
from gtalib.book.design.plan import Plan
from gtalib.book.design.run_specs import figure_runs
from gtalib.book.design.seeds import figure_seeds, looks_of
from gtalib.book.chapters.curve_features import data_order_sentence, summary_counts
from gtalib.book.chapters.shared import shared_file, shared_value
from gtalib.model.presets import PRESETS

# ---------------------------------------------------------------------------------------------
# The ablation result: curves, band and the final-ΔL table
# ---------------------------------------------------------------------------------------------

@dataclass
class AblationResult:
    """Everything an ablation page shows. Built by :func:`ablation_result`."""

    key: str
    preset: str
    seeds: int
    smoothing: int
    confidence: float
    collected: Collected
    complete: list
    incomplete: list
    curves: pd.DataFrame
    band: pd.DataFrame
    final: pd.DataFrame
    curve_column: str = "train_loss"
    final_column: str = "val_loss"
    #: the variants the page asked for (complete or not), in the figure's order
    variants: tuple = ()
    #: variant → seeds (pairs) the figure asked for (:func:`gtalib.book.design.seeds.figure_seeds`)
    seed_counts: dict = field(default_factory=dict)
    #: the pair counts at which the figure is read (:func:`gtalib.book.design.seeds.looks_of`)
    looks: tuple = ()
    #: the file the build keeps this result in (:func:`shared_file`) where it is the build's
    #: (read at the page defaults within a build), else ``None``; the values computed from it
    #: are kept beside it (:func:`gtalib.book.chapters.shared.derived_file`)
    shared: Path | None = None

    @property
    def runs(self) -> pd.DataFrame:
        return self.collected.runs


def ablation_result(key: str, plan: Plan, run_dir, variants=None, train: bool = False,
                    smoothing=None, confidence: float = 0.95, curve_column: str = "train_loss",
                    final_column: str = "val_loss", source: str = "build") -> AblationResult:
    """Collect the runs of ablation ``key`` under ``plan`` (its preset, seed count and length
    override, :func:`gtalib.book.design.plan.make_plan`) and compute its curves, band and final
    table; ``variants``: a subset of the figure's (default: those it shows at the preset).

    Within a book build (:data:`gtalib.book.chapters.shared.ENV_SHARED_RESULTS` set), a result
    read at the page defaults is
    computed once and then loaded by every page and snippet that asks for it again.

    Curves use ``curve_column`` (default the training loss: paired runs see the same batch at
    every step, so its per-step ΔL is dense and the batch difficulty cancels), smoothed per seed
    by a trailing mean over ``smoothing`` steps (``None``: :func:`auto_smoothing` of the
    number of logged steps). The final table uses ``final_column`` (default the validation
    loss on the fixed held-out windows), unsmoothed, at the last step. See :mod:`gtalib.book.analysis.stats`
    for the band and verdict conventions. ``source``: ``"build"`` reads a run this build's
    store holds from the store, ``"records"`` from its record where it has one
    (:func:`gtalib.book.analysis.collect.collect_runs`).
    """

    defaults = (variants is None and not train and smoothing is None
                and (curve_column, final_column) == ("train_loss", "val_loss"))
    shared = shared_file(key, plan, run_dir, confidence, source) if defaults else None
    return shared_value(shared, lambda: _ablation_result(
        key, plan, run_dir, variants, train, smoothing, confidence, curve_column, final_column,
        source, shared))


def _ablation_result(key, plan, run_dir, variants, train, smoothing, confidence, curve_column,
                     final_column, source, shared) -> AblationResult:
    """:func:`ablation_result`, computed."""
    fig = ablation(key)
    preset, seeds, max_steps = plan.preset, plan.seeds, plan.max_steps
    refs = (plan.figure_refs[key] if variants is None
            else figure_runs(key, preset, seeds, variants, max_steps))
    col = collect_runs(refs, plan, run_dir, train=train, source=source)
    ok, bad = complete_variants(col)
    runs = col.runs[col.runs["variant"].isin(ok)] if len(col.runs) else col.runs
    if smoothing is None:
        logged = runs.dropna(subset=[curve_column]).groupby(["variant", "arm", "seed"]).size()
        smoothing = auto_smoothing(int(logged.min()) if len(logged) else 1)
    curves = delta_curves(runs if len(runs) else col.runs.iloc[:0], curve_column, smoothing)
    band = seed_band(curves, confidence)
    looks = looks_of(key, preset, seeds, max_steps)
    final = final_delta_table(runs, {v: fig.paper_final(v) for v in ok}, confidence,
                              final_column, looks) if len(runs) else pd.DataFrame()
    if len(final):
        pairs = col.pairs
        final["pair source"] = [pair_source_summary(pairs[pairs["variant"] == v])
                                for v in final.index]
    counts = figure_seeds(key, preset, seeds, variants, max_steps)
    return AblationResult(key, preset, seeds, smoothing, confidence, col, ok, bad, curves, band,
                          final, curve_column, final_column, tuple(counts), counts, looks, shared)


def ablation_results(plan: Plan, run_dir, confidence: float = 0.95, source: str = "build") -> dict:
    """Every ablation figure's result under ``plan`` (:func:`ablation_result`, key → result),
    computed once for the pages that read them all (the claims page's two tables)."""
    return {key: ablation_result(key, plan, run_dir, confidence=confidence, source=source)
            for key in ABLATIONS}


def pair_table(result) -> pd.DataFrame:
    """The figure's pairs, tidy: one row per pair, ``[variant, seed, data order, ΔL]`` (ΔL in
    nats: the unsmoothed final-step ΔL of :attr:`AblationResult.final_column`,
    :func:`gtalib.book.analysis.curves.final_deltas`), the complete variants in the figure's
    order. The figure's pairs share one data order, 0 (the default ``data_seed`` of
    :class:`gtalib.training.config.TrainConfig`); the data-order runs are read apart
    (:mod:`gtalib.book.chapters.curve_features`)."""
    runs = result.runs[result.runs["variant"].isin(result.complete)] if len(result.runs) else (
        result.runs)
    d = final_deltas(runs, result.final_column) if len(runs) else pd.DataFrame(
        columns=["variant", "seed", "delta"])
    return pd.DataFrame({"variant": d["variant"], "seed": d["seed"], "data order": 0,
                         "ΔL": d["delta"]}).reset_index(drop=True)


def pair_verdicts(pairs: pd.DataFrame, paper: dict, looks: tuple = (),
                  confidence: float = 0.95) -> pd.DataFrame:
    """The verdicts of a figure from its pairs (:func:`pair_table`): its variants are one family
    of paired t-tests of the paper's sign, read at ``looks`` (one look: Holm's procedure at
    1 − ``confidence``, :func:`gtalib.book.analysis.stats.family_verdicts`; two looks, every
    variant having the last look's pairs: the group-sequential rule of
    :func:`gtalib.book.analysis.sequential.two_look_verdicts`; default one look at the pairs
    there are).

    Args:
        pairs: ``[variant, seed, ΔL]`` rows (nats), one per pair.
        paper: variant → the paper's final ΔL (nats); its sign is the claim.
    Returns:
        DataFrame indexed by variant (in ``pairs`` order): ``pairs, ΔL`` (mean), ``p``, ``p
        (Holm)``, ``verdict`` (*agrees*, *differs* or *within noise*); with two looks also ``p
        (look 1)``, ``level (look 1)``, ``look 1`` (*agrees*, *differs* or *continue*), ``first
        pairs`` and ``decided at`` (pairs; 0: not decided).
    """
    paired = {v: g.sort_values("seed")["ΔL"].to_numpy(float)
              for v, g in pairs.groupby("variant", sort=False)}
    stats = [delta_stats(d, confidence) for d in paired.values()]
    expected = [paper.get(v, math.nan) for v in paired]
    out = pd.DataFrame({"pairs": [st.n for st in stats], "ΔL": [st.mean for st in stats]},
                       index=pd.Index(list(paired), name="variant"))
    out["p"], out["p (Holm)"], one_look = family_verdicts(
        out["ΔL"], [st.sd for st in stats], out["pairs"], expected, confidence)
    looks = tuple(looks) or (int(out["pairs"].max()) if len(out) else 0,)
    if len(looks) == 1 or (out["pairs"] < looks[-1]).any():
        out["verdict"] = one_look  # a figure not yet complete at its last look included
        return out
    seq = two_look_verdicts(list(paired.values()), expected, looks, 1 - confidence)
    out["verdict"] = [o["verdict"] for o in seq]
    out["p (look 1)"] = [o["p"][0] for o in seq]
    out["level (look 1)"] = seq[0]["level"][0]
    out["look 1"] = [o["interim"] for o in seq]
    out["first pairs"] = looks[0]
    out["decided at"] = [looks[o["look"] - 1] if o["look"] else 0 for o in seq]
    return out


def final_delta_table(
    runs: pd.DataFrame, paper_final: dict, confidence: float = 0.95, column: str = "val_loss",
    looks: tuple = (),
) -> pd.DataFrame:
    """The table under each ablation figure: final ΔL per variant with CI, what the seeds could
    resolve (:func:`delta_stats`), the seed sd of one arm, the paper's ΔL and a verdict (the
    figure's variants are one family, read at ``looks``: one look, Holm's procedure at
    1 − ``confidence``; two, the group-sequential rule of
    :func:`gtalib.book.analysis.sequential.two_look_verdicts`; default one look at the pairs
    there are).

    Args:
        runs: runs frame with ``alt`` and ``rec`` arms.
        paper_final: variant → the paper's final ΔL (nats); its sign is the paper's claim.
    Returns:
        DataFrame indexed by variant with columns ``seeds, step, tokens, ΔL, ΔL sd, CI low, CI
        high, resolvable |ΔL|, pairs to resolve, seed sd, paper ΔL (≈), p, p (Holm), verdict,
        one run shows it?`` (nats; ``seeds`` = number of pairs n; ``ΔL sd`` = the sample
        standard deviation of the paired ΔL; ``resolvable |ΔL|`` = the interval's half-width,
        ``pairs to resolve`` = the pairs whose t-test would reach the level this variant's
        verdict uses, Holm's threshold for its rank at the last look
        (:func:`gtalib.book.analysis.stats.pairs_needed_at`); ``seed sd`` = the larger of the
        two arms' standard deviations of the final loss over seeds). With two looks also
        ``p (look 1)``, ``level (look 1)``, ``look 1`` (the first look's verdict: *agrees*,
        *differs* or *continue*) and ``decided at`` (pairs; 0: not decided).
    """
    finals = final_values(runs, column)
    deltas = final_deltas(runs, column)
    rows = []
    for variant, at in deltas.groupby("variant", sort=False):
        st = delta_stats(at["delta"], confidence)
        f = finals[finals["variant"] == variant]
        seed_sd = float(f.groupby("arm")["value"].std(ddof=1).max())
        rows.append((
            variant, st.n, int(at["step"].iloc[0]), int(at["tokens"].iloc[0]), st.mean, st.sd,
            st.low, st.high, st.resolvable, st.pairs_needed, seed_sd,
            paper_final.get(variant, math.nan),
        ))
    cols = ["variant", "seeds", "step", "tokens", "ΔL", "ΔL sd", "CI low", "CI high",
            "resolvable |ΔL|", "pairs to resolve", "seed sd", "paper ΔL (≈)"]
    table = pd.DataFrame(rows, columns=cols).set_index("variant")
    pairs = deltas.assign(**{"data order": 0}).rename(columns={"delta": "ΔL"})
    judged = pair_verdicts(pairs, paper_final, looks, confidence)
    table = table.join(judged.drop(columns=["pairs", "ΔL"]))
    alpha = 1 - confidence
    two_looks = "decided at" in table
    looks = (tuple(looks) if two_looks else ()) or (int(table["seeds"].max()),)
    # the level each row's verdict uses: Holm's threshold for its rank among the rows still
    # open at the last look (a row decided at the first look: at that look)
    last = table["p"].to_numpy(float)
    open_ = (table["decided at"] != looks[0]).to_numpy() if two_looks else np.ones(len(table), bool)
    need = []
    for i, (m, s) in enumerate(zip(table["ΔL"], table["ΔL sd"])):
        if not open_[i]:
            p1 = table["p (look 1)"].to_numpy(float)
            rank = int((p1 < p1[i]).sum())
            need.append(pairs_needed_at(m, s, holm_level(looks, alpha, len(table) - rank, 0)))
            continue
        fam = last[open_]
        rank = int((fam < last[i]).sum())
        need.append(pairs_needed_at(m, s, holm_level(looks, alpha, max(1, len(fam) - rank), -1)))
    table["pairs to resolve"] = need
    table["one run shows it?"] = [visible_text(m, s) for m, s in
                                  zip(table["ΔL"], table["seed sd"])]
    return table


def near_zero_claim(result, named: str) -> tuple[str, str]:
    """(ours, verdict) of the paper's "``named``'s ΔL ≈ 0" (:attr:`Ablation.near_zero`) in an
    ablation result: an equivalence test of its final ΔL against a margin of half the other
    complete variants' mean ΔL, paired by seed over the seeds they all have
    (:func:`gtalib.book.analysis.stats.near_zero_differences`,
    :func:`~gtalib.book.analysis.stats.near_zero_test`). Its row's own verdict tests the sign
    only, as declared for every row; this is the claim's size."""
    runs = result.runs[result.runs["variant"].isin(result.complete)]
    if named not in result.complete or len(result.complete) < 2:
        return "not measured", "not measured"
    wide = final_deltas(runs, result.final_column).pivot(
        index="seed", columns="variant", values="delta").dropna()  # [seed, variant]
    others = wide.drop(columns=named)
    below, above, verdict_ = near_zero_test(*near_zero_differences(
        wide[named].to_numpy(), others.to_numpy().T), result.confidence)
    head = (f"{display_name(named)} ΔL {wide[named].mean():+.3f} against ±"
            f"{abs(others.to_numpy().mean()) / 2:.3f} (half the mean ΔL of "
            f"{and_join(display_name(v) for v in others.columns)})")
    if below.n < 2:
        return head + ", one pair", verdict_
    return (f"{head}; margin − ΔL [{below.low:+.3f}, {below.high:+.3f}], margin + ΔL "
            f"[{above.low:+.3f}, {above.high:+.3f}] over {below.n} pairs (both above 0 = the "
            f"claim)", verdict_)


def rule_comparison(result) -> pd.DataFrame:
    """The variants of an ablation whose verdict under the seed-spread rule
    (:func:`gtalib.book.analysis.stats.spread_rule_verdict`) differs from this book's, and why.

    Returns:
        DataFrame ``[figure, variant, n, ΔL, CI, seed spread, p, p (Holm), spread rule,
        verdict, why]`` (nats; one row per variant whose verdicts differ).
    """
    final, rows = result.final, []
    if final.empty:
        return pd.DataFrame(rows)
    finals = final_values(result.runs, result.final_column)
    m = int(final["p"].notna().sum())
    for v, r in final.iterrows():
        f = finals[finals["variant"] == v]
        spread = float(f.groupby("arm")["value"].agg(lambda x: x.max() - x.min()).max())
        old = spread_rule_verdict(r["CI low"], r["CI high"], r["ΔL"], spread, r["paper ΔL (≈)"],
                                  int(r["seeds"]))
        if old == r["verdict"]:
            continue
        why = (f"the interval excludes zero (p = {r['p']:.2g}), but not once adjusted for "
               f"{plural(m, 'variant')} (p = {r['p (Holm)']:.2g})" if r["verdict"] == "within noise"
               else f"|ΔL| {abs(r['ΔL']):.3f} ≤ seed spread {spread:.3f}: the spread test, not "
                    f"the paired test, held it back")
        rows.append({"figure": ablation(result.key).heading, "variant":
                     display_name(v), "n": int(r["seeds"]), "ΔL": f"{r['ΔL']:+.3f}",
                     "CI": f"[{r['CI low']:+.3f}, {r['CI high']:+.3f}]",
                     "seed spread": f"{spread:.3f}", "p (Holm)": f"{r['p (Holm)']:.2g}",
                     "spread rule": old, "verdict": r["verdict"], "why": why})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# The ablation page: figure, caption and tables
# ---------------------------------------------------------------------------------------------

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
    """The seeds of an ablation figure, e.g. ``"5 seeds"`` (``counts``: variant → seeds,
    :attr:`AblationResult.seed_counts`, one n for every variant: :func:`figure_seeds`)."""
    return plural(max(counts.values()), "seed") if counts else "no seeds"


def drawn_text(counts: dict, confidence: float) -> str:
    """What an ablation figure draws, as its caption says it: ``"thin lines: each seed's ΔL;
    bold: mean over 3 seeds; shaded: 95% t-interval of the mean, shown from 3 seeds; the
    y-range follows the curves, the shading is cut at the frame"`` (``counts``: variant →
    seeds; below :data:`MIN_BAND_SEEDS` nothing is shaded, and the text says why)."""
    n = max(counts.values(), default=0)
    if n < MIN_BAND_SEEDS:
        band = (f"no shading: the {confidence:.0%} t-interval of the mean is shown from "
                f"{MIN_BAND_SEEDS} seeds, this figure has {n}; the y-range follows the curves")
    else:
        band = (f"shaded: {confidence:.0%} t-interval of the mean, shown from {MIN_BAND_SEEDS} "
                f"seeds; the y-range follows the curves, the shading is cut at the frame")
    return f"thin lines: each seed's ΔL; bold: mean over {seeds_text(counts)}; {band}"


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
        marker, dash = variant_style(fig_spec, v)
        c = curves[curves["variant"] == v]
        if len(c):
            ax.plot(c["tokens_B"], c["delta"], color=color, ls=dash, lw=1.5, marker=marker,
                    ms=5, label=f"{display_name(v)} paper (≈)")
            values += list(c["delta"])
        else:
            final = fig_spec.paper_final(v)
            ax.plot([100], [final], color=color, marker=marker, ms=7, ls="none",
                    label=f"{display_name(v)} paper final (≈ ln PPL ratio)")
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
    fig_spec = ablation(result.key)
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
        f"unsmoothed. Lower panel: the paper's " + (
            "curves (2.9 B parameters, 0–100 B tokens), approximate, read off its figure."
            if fig_spec.paper_curves else "final values (2.9 B parameters, markers at 100 B "
                                          "tokens), ln of its perplexity ratios; it prints no "
                                          "curves.")
    )


def format_final_table(final: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """The final-ΔL table as printed: paper variant names, ΔL with its CI, the smallest
    resolvable |ΔL| and the pairs that would resolve the mean, and the verdict saying what could
    hide (:func:`gtalib.book.analysis.stats.verdict_text`). The pair source, a long text, is printed
    under the table (:func:`pair_source_lines`) so that the table fits the text column."""
    if final.empty:
        return final

    out = pd.DataFrame({
        "n (pairs)": final["seeds"],  # tokens per run: in the caption (one value for the table)
        **interval_columns(final["seeds"], final["ΔL"], final["CI low"], final["CI high"],
                            final["resolvable |ΔL|"], final["pairs to resolve"], confidence),
        "seed sd": final["seed sd"].map("{:.4f}".format),
        "paper ΔL (≈)": final["paper ΔL (≈)"].map("{:+.4f}".format),
        "verdict": [verdict_text(v, n, x, p, m) for v, n, x, p, m in
                    zip(final["verdict"], final["seeds"], final["resolvable |ΔL|"],
                        final["p (Holm)"], final["ΔL"])],
        "one run shows it?": final["one run shows it?"],
    })
    if "look 1" in final:  # two looks: the first one's verdict beside the final one
        out.insert(len(out.columns) - 1, f"at {int(final['first pairs'].iloc[0])} pairs",
                   [f"{v} (p = {p:.2g})" for v, p in zip(final["look 1"], final["p (look 1)"])])
        out = out.rename(columns={"verdict": f"verdict at {int(final['seeds'].max())} pairs"})
    out.index = [display_name(v) for v in final.index]
    out.index.name = "variant"
    return out


def seeds_paragraph(result) -> str:
    """The page's **Seeds** paragraph, from the result: the pairs each variant runs, that the
    count is one for the figure and fixed before the runs, how the pairs are read (one look, or
    the two declared looks) and the size of the family the verdicts adjust for."""
    n = seeds_text(result.seed_counts)
    looks = tuple(result.looks)
    read = (f"read in two looks declared beforehand, at {looks[0]} and at {looks[-1]} pairs "
            f"(methods chapter, \"A second look\")" if len(looks) == 2 else
            "read once (methods chapter, \"Statistics\")")
    m = len(result.variants)
    return (f"**Seeds.** At the `{result.preset}` preset every variant runs {n}, both arms: one "
            f"n for the whole figure, fixed before the runs, {read}, and the verdicts adjust "
            f"for testing {plural(m, 'variant')} at once.")


def show_missing(result) -> None:
    """Display the notice of the runs an ablation page lacks (above its figure), if any."""
    notice = missing_notice(result.collected)
    if notice:
        display(Markdown(notice))


def show_verdicts(result, verdicts: pd.DataFrame, orders=None, features=None) -> None:
    """Display what follows an ablation figure: the verdict (:func:`verdict_lead`, ``orders``
    and ``features`` as there), the caption and the final-ΔL table with its pair sources.
    ``verdicts``: the page's :func:`pair_verdicts` of :func:`pair_table`, which the table's
    verdicts must be (the page shows that call).

    Raises:
        ValueError: ``verdicts`` are not the table's (computed from other pairs or another rule).
    """
    final = result.final
    if list(verdicts.get("verdict", [])) != list(final.get("verdict", [])):
        raise ValueError("the verdicts given are not those of the result's final table")
    display(Markdown(verdict_lead(result, orders, features)))
    display(Markdown(ablation_caption(result)))
    if result.complete:
        display(Markdown(final_table_words(result.confidence, result.looks)))
        table = format_final_table(final, result.confidence)
        verdict_cols = [c for c in table.columns if c.startswith(("verdict", "at "))]
        display(table_style(table.style, prose=verdict_cols))
        if "pair source" in final:
            display(Markdown(pair_source_lines(dict(zip(
                map(display_name, final.index), final["pair source"])))))


def show_runs(result, params=None) -> None:
    """Display an ablation page's reference block, after its figure and tables: the parameters
    of the page (``params``, a :class:`gtalib.book.pipeline.parameters.NotebookParams`, shown
    as its closed dropdown), the seed policy (:func:`seeds_paragraph`) and where the runs come
    from (:func:`gtalib.book.analysis.collect.provenance_html`: a compact table, the
    configurations in a closed dropdown)."""
    if params is not None:
        display(params)
    display(Markdown(seeds_paragraph(result)))
    display(HTML(provenance_html(result.collected)))


def verdict_lead(result, orders=None, features=None) -> str:
    """The page's verdict, for right under its figure: the figure's
    verdict by the claims page's rule (:func:`gtalib.book.analysis.stats.aggregate_verdicts`)
    against the paper's claim, which variants got which verdict, the equivalence test of a
    variant the paper calls ≈ 0 (:func:`near_zero_claim`), and whether a single run
    could show the effects; for a figure the paper draws as curves (``features``: its
    :func:`gtalib.book.chapters.curve_features.curve_features`), how its features read, so
    that a final ΔL that agrees beside curves that do not is said where the verdict is; where
    the figure has data-order runs (``orders``: its
    :func:`gtalib.book.chapters.curve_features.data_order_table`), which verdicts the data
    order's variance changes
    (:func:`gtalib.book.chapters.curve_features.data_order_sentence`)."""
    final = result.final
    spec = ablation(result.key)
    if final.empty:
        return (f"**Verdict: not measured**: no variant has complete runs (paper: "
                f"{spec.claim_value}).")
    word = aggregate_verdicts(final["verdict"]).split(":")[0]
    groups = [f"*{v}* for {and_join(display_name(x) for x in final.index[final['verdict'] == v])}"
              for v in dict.fromkeys(final["verdict"])]
    n = int(final["seeds"].max())
    lead = (f"**Verdict: {word}.** Over {plural(n, 'seed pair')}, {'; '.join(groups)} "
            f"(paper: {spec.claim_value}).")
    seen = [display_name(v) for v in final.index[final["one run shows it?"] == "yes"]]
    single = (f" A single run of each arm would show the effect for {and_join(seen)} only; the "
              "others need the paired seeds to tell it from seed noise." if seen and
              len(seen) < len(final) else
              " A single run of each arm would show every one of these effects." if seen else
              " No single run of each arm would show these effects: |ΔL| is below the "
              "seed-to-seed spread of one arm's loss, as it would be for each of the paper's "
              "single-seed curves at this scale.")
    shape = (f" Read feature by feature ([below](#the-curves-feature-by-feature)), "
             f"the curves give {summary_counts(features)}." if features is not None else "")
    size = "".join(
        f" {display_name(v)}'s row tests the sign only; the paper's ≈ 0 for it, tested as an "
        f"equivalence against half the other variants' mean ΔL (claims page), "
        f"*{near_zero_claim(result, v)[1]}*." for v in spec.near_zero if v in final.index)
    return lead + size + single + shape + data_order_sentence(orders)


def show_plateaus(result, entropy: float, margin: float = 0.1, window: int = 10) -> None:
    """Display the plateau-escape step of every run of an ablation (docs/cpu_regime.md): first step at
    which the training loss (trailing mean over ``window`` steps) falls below the corpus's
    unigram entropy minus ``margin`` nats."""

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
