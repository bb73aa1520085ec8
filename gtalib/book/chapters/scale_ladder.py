"""The scale ladder chapter: the paired final ΔL of every ladder point (depth, training length,
arm) with its interval and verdict, the parameter table per rung, where each series has the
paper's sign (:func:`series_table`), the depth test of the scaled initialisation
(:func:`scaled_table`), the seeds and family of tests beside the ablation pages'
(:func:`shared_table`, :func:`ladder_facts`), and the page's figure and tables; the page's
English is its notebook's Markdown. The width axis (its gap, its parameter table and cost)
is :mod:`gtalib.book.chapters.ladder_width`.

Reads :mod:`gtalib.book.design.ladder` (the ladder, its runs and its parameter matching),
:mod:`gtalib.book.design.figures` (the paper's perplexities), :mod:`gtalib.book.design.names`,
the book's :class:`~gtalib.book.design.plan.Plan` (its own design resolves the runs),
:mod:`gtalib.book.analysis.collect` (runs and pair sources), :mod:`gtalib.book.analysis.stats`
(interval, verdict, table columns) and :mod:`gtalib.book.analysis.style`;
:mod:`gtalib.training.config` for the ablation pages' training lengths.
ΔL = L(arm) − L(rec), final validation loss in nats; depths in layers, lengths in steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import HTML, Markdown, display

from gtalib.book.analysis.collect import (
    Collected,
    collect_runs,
    missing_notice,
    pair_source_lines,
    pair_source_summary,
    provenance_html,
)
from gtalib.book.analysis.stats import (
    delta_stats,
    family_verdicts,
    final_table_words,
    holm_pairs_needed,
    interval_columns,
    verdict_text,
    visible_text,
)
from gtalib.book.analysis.style import (
    MIN_BAND_SEEDS,
    and_join,
    curve_limits,
    set_style,
    table_style,
    variant_style,
)
from gtalib.book.design.figures import ablation, figure_spec
from gtalib.book.design.ladder import depth_runs, ladder, ladder_params
from gtalib.book.design.names import VARIANT_COLORS, display_name
from gtalib.book.design.plan import Plan
from gtalib.model.presets import PRESETS
from gtalib.training.config import train_config

# ---------------------------------------------------------------------------------------------
# The ladder's points and what each series shows
# ---------------------------------------------------------------------------------------------

@dataclass
class LadderResult:
    """Everything the scale-ladder page shows. Built by :func:`ladder_result`.

    Attributes:
        per_seed: one row per paired seed: ``part, variant, arm, n_layer, max_steps, seed,
            delta`` with ``delta = L(arm) − L(rec)``, final validation loss (nats).
        points: one row per ladder point: ``part, variant, arm, n_layer, max_steps, n, mean,
            sd, low, high, resolvable, pairs_needed, seed_sd, paper, pair_source, p_holm, verdict``
            (``resolvable``, ``pairs_needed``: :class:`DeltaStats`; ``paper``: the paper's ΔL
            at 2.9 B parameters, ``ln PPL(alt) − ln PPL(rec)``, NaN where the paper has no such
            arm; ``pair_source``: :func:`pair_source_summary` of the point's pairs; ``verdict``
            of an arm the paper has no value for, where resolved: the arm ahead, ``"zero
            ahead"`` or ``"<arm> ahead"``).
        params: parameter matching per rung: ``n_layer, config, n_params, vs_mha_pct``.
        seeds: seeds per point of the depth and length axes; width_seeds: per variant and
            width on the width axis (:mod:`gtalib.book.chapters.ladder_width`; 0 without one).
    """

    preset: str
    seeds: int
    confidence: float
    collected: Collected
    per_seed: pd.DataFrame
    points: pd.DataFrame
    params: pd.DataFrame
    width_seeds: int = 0


def paper_delta(key: str, variant: str) -> float:
    """The paper's final ΔL of ablation ``key`` for ``variant`` in nats, from its average
    perplexities: ``ln PPL(alt) − ln PPL(rec)`` (NaN where the paper gives none)."""

    ppl = ablation(key).paper_ppl.get(variant)
    return math.log(ppl[0] / ppl[1]) if ppl else math.nan


def ladder_result(plan: Plan, seeds: int | None = None, run_dir=None, train: bool = False,
                  confidence: float = 0.95, record_dir=None) -> LadderResult:
    """Collect the ladder's runs at ``plan``'s preset (local store, else recorded runs, else
    trained if ``train``) and compute the paired final ΔL of every point with its Student-t
    interval and verdict (:func:`gtalib.book.analysis.stats.family_verdicts`, the ladder's
    points one family; the seed sd is the larger of the two arms' standard deviations of the
    final loss). The runs are the ladder's own lengths, resolved under
    :meth:`~gtalib.book.design.plan.Plan.own_design` whatever the book's ``max_steps``.
    ``seeds=None``: the seeds the ladder was recorded with (the seed table's ``"ladder"``
    count, and ``"ladder_width"`` on the width axis, its spec's ``seeds_at``);
    else ``seeds`` on every axis.

    Raises:
        KeyError: the plan's preset has no ladder. ValueError: ``seeds`` < 1.
    """

    preset = plan.preset
    lad = ladder(preset)
    width_seeds = ((figure_spec("ladder_width").seeds_at(preset) if seeds is None else seeds)
                   if lad.width_variants else 0)
    seeds = figure_spec("ladder").seeds_at(preset) if seeds is None else seeds
    refs = depth_runs(preset, seeds)
    collected = collect_runs(refs, plan.own_design(), run_dir, train=train,
                             record_dir=record_dir)
    runs = collected.runs
    cols = ["part", "variant", "arm", "n_layer", "max_steps", "seed", "delta"]
    per_seed, points, stats_ = [], [], []
    if not runs.empty:
        last = runs.dropna(subset=["val_loss"]).sort_values("step").groupby(
            ["variant", "arm", "n_layer", "max_steps", "seed"]).tail(1)
        final = last.set_index(["variant", "arm", "n_layer", "max_steps", "seed"])["val_loss"]
        for (variant, arm, depth, steps, seed), value in final.items():
            if arm == "rec":
                continue
            key = (variant, "rec", depth, steps, seed)
            if key in final.index:  # a variant is in one part only (Ladder checks it)
                part = lad.part(variant)
                per_seed.append((part, variant, arm, depth, steps, seed, value - final[key]))
    per_seed = pd.DataFrame(per_seed, columns=cols)
    pairs = collected.pairs
    for (part, variant, arm, depth, steps), g in per_seed.groupby(
            ["part", "variant", "arm", "n_layer", "max_steps"], sort=True):
        st = delta_stats(g["delta"], confidence)
        stats_.append(st)
        m, lo, hi, n = st.mean, st.low, st.high, st.n
        fin = final.xs((variant, depth, steps), level=["variant", "n_layer", "max_steps"])
        seed_sd = max(float(np.std(fin.xs(a, level="arm").to_numpy(), ddof=1))
                      if n > 1 else math.nan for a in (arm, "rec"))
        paper = paper_delta(part, variant) if arm == "alt" else math.nan  # part = ablation key
        source = pair_source_summary(pairs[(pairs["variant"] == variant) & (pairs["arm"] == arm)
                                           & (pairs["n_layer"] == depth)
                                           & (pairs["max_steps"] == steps)])
        points.append((part, variant, arm, depth, steps, n, m, st.sd, lo, hi, st.resolvable,
                       st.pairs_needed, seed_sd, paper, source))
    points = pd.DataFrame(points, columns=["part", "variant", "arm", "n_layer", "max_steps", "n",
                                           "mean", "sd", "low", "high", "resolvable",
                                           "pairs_needed", "seed_sd", "paper", "pair_source"])
    # the ladder's points are one family of tests (Holm across all of them); an arm without a
    # paper value (the scaled init) says which arm is ahead instead of agrees / differs
    p_raw, points["p_holm"], verdicts = family_verdicts(
        stats_, [p if math.isfinite(p) else 1.0 for p in points["paper"]], confidence)
    # pairs to resolve at the level each verdict uses (as the table's words say)
    points["pairs_needed"] = holm_pairs_needed(points["mean"], points["sd"], p_raw, confidence)
    points["verdict"] = [v if arm == "alt" or v not in ("agrees", "differs") else
                         ("zero ahead" if m > 0 else f"{arm} ahead")
                         for v, arm, m in zip(verdicts, points["arm"], points["mean"])]
    return LadderResult(preset, seeds, confidence, collected, per_seed, points,
                        ladder_params(preset), width_seeds)


def _listed(values) -> str:
    """``"2, 4, 8"``, or ``"none"`` for no value."""
    return ", ".join(f"{v:,}" for v in values) or "none"


def sign_row(series: pd.DataFrame, along: str) -> dict:
    """Where one ladder series (rows of :attr:`LadderResult.points`, one per point along
    ``along``: ``"n_layer"`` or ``"max_steps"``) has ΔL > 0 (the paper's sign, or zero init
    ahead), as lists of the points in order: ``points`` (every point), ``positive`` (mean ΔL >
    0), ``excludes_zero`` (its interval over seeds excludes zero), and ``from_``: the first
    point from which every later point has ΔL > 0 (``None`` when the last has not)."""
    s = series.sort_values(along)
    points, means = s[along].tolist(), s["mean"].tolist()
    return {"points": points, "positive": [x for x, m in zip(points, means) if m > 0],
            "excludes_zero": [x for x, lo, hi in zip(points, s["low"], s["high"])
                              if lo > 0 or hi < 0],
            "from_": next((points[i] for i in range(len(points))
                           if all(m > 0 for m in means[i:])), None)}


def series_table(result) -> pd.DataFrame:
    """Where each ladder series has ΔL > 0, one row per series (:func:`sign_row`): every depth
    series at the depth axis' lengths (:meth:`Ladder.depth_steps`), then the gate of each token
    variant against training length at the token axis' depth. Columns, strings: ``ΔL of`` (the
    variant and what ΔL differences), ``along`` (``"layers"`` or ``"steps"``), ``at`` (the
    series' fixed length or depth), ``points``, ``ΔL > 0 at``, ``> 0 from`` (``"—"``: not at
    the last point) and ``CI excludes 0 at`` (lists of points; ``"none"``)."""
    lad = ladder(result.preset)
    pts, rows = result.points, []

    def row(label, along, at, g):
        sg = sign_row(g, along)
        return {"ΔL of": label, "along": "layers" if along == "n_layer" else "steps", "at": at,
                "points": _listed(sg["points"]), "ΔL > 0 at": _listed(sg["positive"]),
                "> 0 from": "—" if sg["from_"] is None else f"{sg['from_']:,}",
                "CI excludes 0 at": _listed(sg["excludes_zero"])}

    for part, variant, arm, steps, g in _ladder_series(_depth_points(pts, lad)):
        rows.append(row(f"{display_name(variant)}: {_LADDER_DELTA[(part, arm)]}", "n_layer",
                        f"{steps:,} steps", g))
    for v in lad.token_variants:
        g = pts[(pts["part"] == "gate") & (pts["variant"] == v) & (pts["arm"] == "alt")
                & (pts["n_layer"] == lad.token_depth)]
        if len(g):
            rows.append(row(f"{display_name(v)}: {_LADDER_DELTA[('gate', 'alt')]}",
                            "max_steps", f"{lad.token_depth} layers", g))
    return pd.DataFrame(rows, columns=["ΔL of", "along", "at", "points", "ΔL > 0 at",
                                       "> 0 from", "CI excludes 0 at"])


def scaled_test(points: pd.DataFrame, variant: str, max_steps: int) -> dict | None:
    """The ladder's direct test of the depth hypothesis for ``variant`` at ``max_steps``: at the
    deepest rung where zero init is ahead of N(0, σ) output projections (ΔL = L(normal) −
    L(zero) > 0), how much of that gap the scaled ones N(0, σ/√(2L)) remove. The hypothesis (a
    zero-initialised block adds no noise to the residual stream) predicts most of it.

    Returns:
        ``None`` when no depth has both arms; else ``layers`` (that rung; ``None`` where N(0, σ)
        is behind at no depth), ``normal`` and ``scaled`` (the two ΔL's points there, rows of
        ``points``; ``None`` without such a rung) and ``removed``: ``1 − ΔL(scaled) /
        ΔL(normal)``, NaN without such a rung (≥ 1: the scaled arm ahead of zero init).
    """
    sel = points[(points["part"] == "init") & (points["variant"] == variant)
                 & (points["max_steps"] == max_steps)]
    normal = sel[sel["arm"] == "alt"].set_index("n_layer")
    scaled = sel[sel["arm"] == "scaled"].set_index("n_layer")
    depths = sorted(set(normal.index) & set(scaled.index))
    if not depths:
        return None
    behind = [d for d in depths if normal.loc[d, "mean"] > 0]
    if not behind:
        return {"layers": None, "normal": None, "scaled": None, "removed": math.nan}
    d = behind[-1]
    n, sc = normal.loc[d], scaled.loc[d]
    return {"layers": d, "normal": n, "scaled": sc, "removed": 1 - sc["mean"] / n["mean"]}


def scaled_table(result) -> pd.DataFrame:
    """:func:`scaled_test` of every scaled-init variant of the ladder at its base length, one row
    each with a depth having both arms, strings: ``variant``, ``steps``, ``layers`` (``"—"``:
    zero init ahead of N(0, σ) at no depth), ``normal − zero`` and ``scaled − zero`` (mean ΔL
    with its interval there) and ``removed`` (percent of the gap; ``"all"`` from 100 %)."""
    lad = ladder(result.preset)

    def iv(r):
        return "—" if r is None else f"{r['mean']:+.3f} [{r['low']:+.3f}, {r['high']:+.3f}]"

    rows = []
    for v in lad.scaled_variants:
        t = scaled_test(result.points, v, lad.base_steps)
        if t is None:
            continue
        x = t["removed"]
        rows.append((display_name(v), f"{lad.base_steps:,}",
                     "—" if t["layers"] is None else f"{t['layers']}", iv(t["normal"]),
                     iv(t["scaled"]), "—" if math.isnan(x) else "all" if x >= 1 else f"{x:.0%}"))
    return pd.DataFrame(rows, columns=["variant", "steps", "layers", "normal − zero",
                                       "scaled − zero", "removed"])


# ---------------------------------------------------------------------------------------------
# The ladder's page: figure and tables
# ---------------------------------------------------------------------------------------------

#: Depth of the paper's models (2.9 B parameters, 24 layers): where its ΔL is drawn on the
#: ladder's depth axis.
PAPER_DEPTH = 24


#: What each ladder series differences, by (part, arm).
_LADDER_DELTA = {("init", "alt"): "normal − zero", ("init", "scaled"): "scaled − zero",
                 ("gate", "alt"): "no gate − gate"}


def _depth_points(points: pd.DataFrame, lad) -> pd.DataFrame:
    """The ladder points drawn and told against depth: the depth variants of each part at the
    depth axis' lengths (:meth:`Ladder.depth_variants`, :meth:`Ladder.depth_steps`)."""
    on_axis = pd.Series([v in lad.depth_variants(p)
                         for p, v in zip(points["part"], points["variant"])], index=points.index,
                        dtype=bool)
    return points[on_axis & points["max_steps"].isin(lad.depth_steps())]


def _ladder_series(points: pd.DataFrame):
    """``(part, variant, arm, max_steps, rows sorted by depth)`` of every ladder series."""
    for key, g in points.groupby(["part", "variant", "arm", "max_steps"], sort=True):
        yield (*key, g.sort_values("n_layer"))


def _ladder_point(ax, g, x, color, marker, style, label, dots, xcol, hollow=False):
    """One ladder series: the mean over seeds with its Student-t error bar from
    :data:`MIN_BAND_SEEDS` seeds up, and every seed as a small dot; returns the y-values shown."""
    wide = g["n"] < MIN_BAND_SEEDS  # no error bar: the interval would fill the panel
    yerr = [(g["mean"] - g["low"]).mask(wide).fillna(0),
            (g["high"] - g["mean"]).mask(wide).fillna(0)]
    ax.errorbar(x, g["mean"], yerr=yerr, color=color, ls=style, marker=marker, capsize=3,
                label=label, mfc="white" if hollow else color)
    ax.scatter(dots[xcol], dots["delta"], color=color, s=8, alpha=0.5, zorder=1)
    return [*g["mean"], *dots["delta"]]


def plot_ladder(result) -> plt.Figure:
    """The ladder's three panels: ΔL against depth (log₂ axis) for the init ladder (top left)
    and the gate (top right), and the gate's ΔL against training length at the token axis'
    depth (bottom, log₂ axis in steps). Each point is the mean over seeds, with its Student-t interval
    as an error bar from :data:`MIN_BAND_SEEDS` seeds up, every seed a small dot; on the depth
    panels the paper's ΔL (2.9 B parameters, 24 layers) is a star at 24 layers, and a grey band
    marks the depth the preset's ablation pages train at. The y-range is set by the points,
    dots and stars (an error bar reaching beyond is cut at the frame); the legends sit below
    the panels."""
    set_style()
    lad = ladder(result.preset)
    book_depth = PRESETS[result.preset]["n_layer"]
    # two depth panels side by side, the token panel under the first: a row of three would be
    # shrunk to unreadable in the book's text column
    fig = plt.figure(figsize=(12, 11.5))
    grid = fig.add_gridspec(2, 2)
    axes = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]),
            fig.add_subplot(grid[1, 0])]
    pts, per_seed = result.points, result.per_seed
    base_steps = pts["max_steps"].min()
    for ax, part in zip(axes, ("init", "gate")):
        fig_spec = ablation(part)
        shown = []
        ax.axhline(0, color="black", lw=0.8)
        ax.axvline(book_depth, color="0.6", lw=6, alpha=0.3, zorder=0,
                   label=f"ablation pages ({book_depth} layers)")
        on_axis = _depth_points(pts[pts["part"] == part], lad)
        for _, variant, arm, steps, g in _ladder_series(on_axis):
            marker, _ = variant_style(fig_spec, variant)
            # solid: the base length; dashed: the longer runs; dotted: the scaled-init arm
            style = ":" if arm == "scaled" else "-" if steps == base_steps else "--"
            dots = per_seed[(per_seed["part"] == part) & (per_seed["variant"] == variant)
                            & (per_seed["arm"] == arm) & (per_seed["max_steps"] == steps)]
            shown += _ladder_point(
                ax, g, g["n_layer"], VARIANT_COLORS[variant], marker, style,
                f"{display_name(variant)}: {_LADDER_DELTA[(part, arm)]}, {steps} steps",
                dots, "n_layer", hollow=arm == "scaled")
        for variant in dict.fromkeys(on_axis["variant"]):
            paper = on_axis[on_axis["variant"] == variant]["paper"].dropna()
            if not paper.empty:
                ax.scatter([PAPER_DEPTH], [paper.iloc[0]], marker="*", s=140,
                           color=VARIANT_COLORS[variant], edgecolor="black", zorder=3,
                           label=f"{display_name(variant)}: paper (2.9 B, 24 layers)")
                shown.append(paper.iloc[0])
        ax.set_ylim(*curve_limits(shown))
        depths = sorted(set(pts["n_layer"])) + [PAPER_DEPTH]
        ax.set_xscale("log", base=2)
        ax.set_xticks(depths, [str(d) for d in depths])
        ax.set_xlabel("layers (log scale)")
        ax.set_ylabel("final ΔL (nats); > 0: paper's choice better")
        ax.set_title({"init": "Initialisation: ΔL = L(arm) − L(zero init)",
                      "gate": "Gate: ΔL = L(no gate) − L(gate)"}[part], fontsize=10)
    ax, shown = axes[2], []
    ax.axhline(0, color="black", lw=0.8)
    tokens = pts[(pts["part"] == "gate") & (pts["n_layer"] == lad.token_depth)
                 & pts["variant"].isin(lad.token_variants) & (pts["arm"] == "alt")]
    for variant, g in tokens.groupby("variant", sort=False):
        g = g.sort_values("max_steps")
        dots = per_seed[(per_seed["part"] == "gate") & (per_seed["variant"] == variant)
                        & (per_seed["arm"] == "alt") & (per_seed["n_layer"] == lad.token_depth)]
        shown += _ladder_point(ax, g, g["max_steps"], VARIANT_COLORS[variant],
                               variant_style(ablation("gate"), variant)[0], "-",
                               f"{display_name(variant)}: no gate − gate", dots, "max_steps")
    if shown:
        ax.set_ylim(*curve_limits(shown))
        lengths = sorted(set(tokens["max_steps"]))
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [f"{n:,}" for n in lengths])
    ax.set_xlabel("training steps (log scale)")
    ax.set_ylabel("final ΔL (nats); > 0: gate better")
    ax.set_title(f"Gate, {lad.token_depth} layers", fontsize=10)
    for ax in axes[:2]:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=2)
    if axes[2].get_legend_handles_labels()[0]:  # beside the token panel, in the free quarter
        axes[2].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.08, 0.5))
    fig.tight_layout()
    return fig


def format_ladder_table(points: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """The ladder's points as printed: one row per (series, depth, length), with the columns of
    :func:`gtalib.book.chapters.ablation.format_final_table` (``n (pairs)`` only where the points'
    pair counts differ: the page's seed words give the one count), "one run shows it?" included
    (:func:`gtalib.book.analysis.stats.visible_text` of the mean ΔL and the seed sd; the pair source
    under it: :func:`ladder_pair_sources`)."""
    if points.empty:
        return points
    out = pd.DataFrame({
        # the point in two short columns, so that the table fits the text column at 1400 px
        "ΔL of": [f"{display_name(v)}: {_LADDER_DELTA[(p, a)]}" for v, p, a in
                  zip(points["variant"], points["part"], points["arm"])],
        "layers × steps": [f"{d} × {n}" for d, n in zip(points["n_layer"], points["max_steps"])],
        "n (pairs)": points["n"],
        **interval_columns(points["n"], points["mean"], points["low"], points["high"],
                            points["resolvable"], points["pairs_needed"], confidence),
        "seed sd": points["seed_sd"].map("{:.4f}".format),
        "paper ΔL (≈)": points["paper"].map(lambda x: "—" if math.isnan(x) else f"{x:+.4f}"),
        "verdict": [verdict_text(v, n, x, p, m) for v, n, x, p, m in
                    zip(points["verdict"], points["n"], points["resolvable"], points["p_holm"],
                        points["mean"])],
        "one run shows it?": [visible_text(m, sd) for m, sd in
                              zip(points["mean"], points["seed_sd"])],
    })
    if points["n"].nunique() == 1:  # the same pairs everywhere: the page's seed words say how many
        out = out.drop(columns="n (pairs)")
    return out.reset_index(drop=True)


def ladder_pair_sources(points: pd.DataFrame) -> str:
    """The ladder table's :func:`pair_source_lines`, a row named by its variant, ΔL, layers
    and steps."""
    return pair_source_lines({
        f"{display_name(p.variant)} {_LADDER_DELTA[(p.part, p.arm)]}, {p.n_layer} layers, "
        f"{p.max_steps} steps": p.pair_source for p in points.itertuples()})


def shared_rungs(result) -> list[tuple[str, tuple[str, ...], int, int]]:
    """The rungs that are an ablation page's own configuration (the preset's depth, the page's
    training length, the ``alt`` arm of a variant that page shows): ``(ablation key, variants,
    depth, steps)`` per page with such a rung; the runs are the same (same specification, same
    run id) on both pages."""

    depth = PRESETS[result.preset]["n_layer"]
    out = []
    for key in ("init", "gate"):
        steps = dict(ablation(key).train.get(result.preset, ())).get(
            "max_steps", train_config(result.preset).max_steps)
        pts = result.points
        on = pts[(pts["part"] == key) & (pts["arm"] == "alt") & (pts["n_layer"] == depth)
                 & (pts["max_steps"] == steps)
                 & pts["variant"].isin(ablation(key).variants_at(result.preset))]
        if not on.empty:
            out.append((key, tuple(on["variant"]), depth, steps))
    return out


#: How :func:`shared_table` names an ablation page.
_PAGE = {"init": "initialisation", "gate": "gating"}


def shared_table(result) -> pd.DataFrame:
    """The rungs an ablation page shares (:func:`shared_rungs`), one row per page, strings:
    ``page`` (``"initialisation"``, ``"gating"``), ``ΔL of`` (its variants and what ΔL
    differences), ``layers``, ``steps``, ``seeds there`` (the page's seed count of the same runs;
    ``"book's"`` where the page reads the book's count) and ``seeds here`` (the ladder's)."""
    rows = []
    for key, variants, depth, steps in shared_rungs(result):
        own = figure_spec(key).seeds.get(result.preset)
        rows.append((_PAGE[key], f"{and_join(display_name(v) for v in variants)}: "
                     f"{_LADDER_DELTA[(key, 'alt')]}", f"{depth}", f"{steps:,}",
                     "book's" if own is None else f"{own}", f"{result.seeds}"))
    return pd.DataFrame(rows, columns=["page", "ΔL of", "layers", "steps", "seeds there",
                                       "seeds here"])


#: The names this page's sentences state (the keys of :func:`ladder_facts`).
FACT_NAMES = ("ladder_seeds", "ladder_seed_last", "ladder_width_seeds", "ladder_family")


def ladder_facts(result) -> dict[str, str]:
    """The numbers the ladder page's Markdown states about its seeds, by name:
    ``ladder_seeds`` (seeds paired at every point of the depth and length axes, seeds 0 to
    ``ladder_seed_last``), ``ladder_width_seeds`` (seeds per variant and width on the width
    axis; ``"—"`` without one) and ``ladder_family`` (the points Holm-adjusted as one family)."""
    n = result.seeds
    return {"ladder_seeds": f"{n}", "ladder_seed_last": f"{n - 1}",
            "ladder_width_seeds": f"{result.width_seeds}" if result.width_seeds else "—",
            "ladder_family": f"{int(result.points['p_holm'].notna().sum())}"}


def show_ladder(result) -> None:
    """Display the ladder page's lead: the incomplete-runs notice
    (:func:`gtalib.book.analysis.collect.missing_notice`), then the figure, or where no point is
    complete where the runs come from (:func:`gtalib.book.analysis.collect.provenance_html`)."""

    notice = missing_notice(result.collected)
    if notice:
        display(Markdown(notice))
    if result.points.empty:
        display(HTML(provenance_html(result.collected)))
        return
    plot_ladder(result)
    plt.show()


def show_series(result) -> None:
    """Display :func:`series_table` and :func:`scaled_table` (tables without a row index), each
    where it has a row."""
    for table in (series_table(result), scaled_table(result)):
        if table.empty:
            continue
        display(table_style(table.style.hide(axis="index"),
                            prose=["ΔL of"] if "ΔL of" in table else ()))


def show_points(result) -> None:
    """Display the ladder's tables of points: the rungs an ablation page shares
    (:func:`shared_table`, where any), the columns' meaning
    (:func:`gtalib.book.analysis.stats.final_table_words`), the table of points
    (:func:`format_ladder_table`) and its pair sources, the parameter matching per rung, and
    where the runs come from (:func:`gtalib.book.analysis.collect.provenance_html`)."""

    if result.points.empty:
        return
    shared = shared_table(result)
    if len(shared):
        display(table_style(shared.style.hide(axis="index")))
    display(Markdown(final_table_words(result.confidence)))
    table = format_ladder_table(result.points, result.confidence)
    display(table_style(table.style.hide(axis="index"), prose=["ΔL of"]))
    display(Markdown(ladder_pair_sources(result.points)))
    params = result.params.rename(columns={"n_layer": "layers", "intermediate_size": "F",
                                           "n_params": "parameters", "vs_mha_pct": "vs MHA (%)"})
    display(table_style(params.style.hide(axis="index").format(
        {"parameters": "{:,}", "vs MHA (%)": "{:+.3f}"})))
    display(HTML(provenance_html(result.collected)))
