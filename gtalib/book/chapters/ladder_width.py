"""The scale ladder's width axis: MLRA-4's gap to the best of the other variants at each width of
the ladder and against training length, paired by seed with its Student-t interval; the trend
along each axis; the parameter table per width and the cost of a width's runs; the tables and
words of the section the ladder and main-results pages show (its English is the scale
ladder page's Markdown).

Reads :mod:`gtalib.book.design.ladder` (the ladder and its runs), :mod:`gtalib.book.design.names`,
:mod:`gtalib.book.design.figures` (the ablations whose runs the length axis draws on), the book's
:class:`~gtalib.book.design.plan.Plan` (its own design: the runs planned at the preset's
lengths), :mod:`gtalib.book.analysis.collect` (runs, where they come from),
:mod:`gtalib.book.analysis.stats` (the paired interval and the ranking test),
:mod:`gtalib.book.analysis.style`; :mod:`gtalib.model` for parameter counts and
:mod:`gtalib.training.record_costs` for recorded costs.

Definitions (losses in nats per token; the named variant is MLRA-4 at ``cpu``,
:attr:`gtalib.book.design.ladder.Ladder.width_named`):

- *Final loss* of a run: its validation loss at the last logged step, unsmoothed.
- *Best other* at a point (a width, or a training length): of the other variants whose every
  required run at that point is done (*complete*), the one with the lowest mean final loss over
  seeds. A variant with a missing run is left out of the point, never averaged over fewer seeds.
- *Gap* at a point, per seed s: ``g(s) = L_named(s) − L_best(s)``; positive: the named variant
  is behind. Its mean over the seeds both have, with the two-sided Student-t interval
  (:func:`gtalib.book.analysis.stats.delta_stats`). The paper's claim (MLRA-4 has the lowest perplexity)
  is ``g < 0``: the table's verdict is :func:`gtalib.book.analysis.stats.ranking_test` of ``−g``.
- *Trend* along an axis: per seed, the change of the gap from the axis' first point to its last,
  ``g_last(s) − g_first(s)``, over the seeds both points have, with its Student-t interval (the
  same paired interval: each seed's change is one value). The gap *falls* when that interval
  lies below zero, *rises* when above, else it does not change beyond noise. The best other may
  differ between points; the table names it. The ends may plan different seeds (the length
  axis: 5 at ``cpu``'s 250 and 1,000 steps, 3 at 2,000, :func:`length_refs`): each gap uses all
  of its point's, the change only those both ends have.

Cost of a width's runs (:func:`width_cost`): each run's recorded core-seconds at the preset's
width (the median over its bundles, ``gtalib record costs``, ``docs/recorded_runs.md``) × the
ratio of training FLOPs, ``6 · parameters · tokens`` (Kaplan et al. 2020, "Scaling Laws for
Neural Language Models", Sec. 2.1; the tokens per run are equal, so the ratio is that of the
parameter counts). An estimate: the per-token attention FLOPs and the memory traffic are left
out, and a wider model's larger matrix products may run nearer the CPU's peak. At ``cpu``
(FLOPs ratio 3.93) it gives 8.0 (MHA) to 16.2 (MLRA-4) core-minutes per d-256 run, 54
core-minutes for one seed of the five variants, 4.5 core-hours for the 25 runs of 5 seeds (about
2.3 hours on two cores, one thread per run); ``docs/cpu_regime.md``, "The width axis"."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import pandas as pd
from IPython.display import HTML, Markdown, display

from gtalib.book.analysis.collect import Collected, collect_runs, provenance_html
from gtalib.book.analysis.stats import delta_stats, ranking_test
from gtalib.book.analysis.style import and_join, plural, table_style
from gtalib.book.design import ladder as ladders
from gtalib.book.design.figures import ABLATIONS, TABLES, ablation
from gtalib.book.design.ladder import WIDTH_FIELDS, ladder, ladder_runs, width_params
from gtalib.book.design.names import canonical_options, config_label, display_name
from gtalib.book.design.plan import Plan
from gtalib.model.params import count_params
from gtalib.model.presets import PRESETS, model_config
from gtalib.training import record_costs
from gtalib.training.config import train_config

#: Columns of :func:`gap_points`' table.
POINT_COLUMNS = ["point", "needed", "done", "others", "left_out", "best", "named_loss",
                 "best_loss", "n", "mean", "sd", "low", "high", "verdict"]


# ---------------------------------------------------------------------------------------------
# The gap at each point and the trend
# ---------------------------------------------------------------------------------------------

def gap_points(final: pd.DataFrame, needed: pd.DataFrame, named: str, confidence: float = 0.95
               ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The named variant's gap to the best complete other variant at every point of an axis (see
    the module docstring).

    Args:
        final: one row per done run: ``point, variant, seed, loss`` (final loss, nats).
        needed: one row per run the axis needs, done or not: ``point, variant, seed``.
        named: the variant whose gap is measured.
    Returns:
        ``(points, per_seed)``: ``points`` one row per point of ``needed`` in its order, columns
        :data:`POINT_COLUMNS` (``needed``/``done``: run counts; ``others``: the complete other
        variants; ``left_out``: incomplete variants as ``(variant, done, needed)``; ``best``,
        the means and the gap's statistics NaN / ``None`` where the named variant or every other
        is incomplete; ``verdict`` of the paper's ranking, :func:`ranking_test` of ``−g``);
        ``per_seed``: ``point, seed, best, gap``.
    Raises:
        ValueError: a column missing from ``final`` or ``needed``.
    """
    for frame, cols, arg in ((final, ("point", "variant", "seed", "loss"), "final"),
                             (needed, ("point", "variant", "seed"), "needed")):
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise ValueError(f"{arg} lacks column(s) {missing}; required: {list(cols)}")
    rows, seeds_rows = [], []
    for point in dict.fromkeys(needed["point"]):
        need = needed[needed["point"] == point]
        have = final[final["point"] == point]
        counts = {v: (int(have["variant"].eq(v).sum()), len(g))
                  for v, g in need.groupby("variant", sort=False)}
        complete = [v for v, (d, n) in counts.items() if d == n]
        left_out = tuple((v, d, n) for v, (d, n) in counts.items() if d < n)
        others = tuple(v for v in complete if v != named)
        row = dict(point=point, needed=len(need), done=len(have), others=others,
                   left_out=left_out, best=None, named_loss=math.nan, best_loss=math.nan,
                   n=0, mean=math.nan, sd=math.nan, low=math.nan, high=math.nan, verdict="")
        if named in complete and others:
            loss = have.set_index(["variant", "seed"])["loss"]
            means = {v: float(loss[v].mean()) for v in others}
            best = min(means, key=means.get)
            own, riv = loss[named], loss[best]
            common = own.index.intersection(riv.index)
            gap = own[common] - riv[common]
            st = delta_stats(gap, confidence)
            _, verdict = ranking_test(-gap, confidence)
            row.update(best=best, named_loss=float(own.mean()), best_loss=means[best], n=st.n,
                       mean=st.mean, sd=st.sd, low=st.low, high=st.high, verdict=verdict)
            seeds_rows += [(point, s, best, float(g)) for s, g in gap.items()]
        rows.append(row)
    return (pd.DataFrame(rows, columns=POINT_COLUMNS),
            pd.DataFrame(seeds_rows, columns=["point", "seed", "best", "gap"]))


def gap_trend(per_seed: pd.DataFrame, first, last, confidence: float = 0.95):
    """The change of the gap from point ``first`` to point ``last``, paired by seed: per seed
    ``g_last(s) − g_first(s)`` over the seeds both have, as :class:`~gtalib.book.analysis.stats.DeltaStats`
    (:func:`delta_stats`); ``None`` when no seed has both."""
    a = per_seed[per_seed["point"] == first].set_index("seed")["gap"]
    b = per_seed[per_seed["point"] == last].set_index("seed")["gap"]
    common = a.index.intersection(b.index)
    return delta_stats(b[common] - a[common], confidence) if len(common) else None


def point_text(axis: str, point) -> str:
    """A point as the pages name it: ``"d_model 256"`` on the width axis, ``"1,000 steps"`` on
    the length axis.

    Raises:
        ValueError: ``axis`` not ``"width"`` or ``"steps"``.
    """
    if axis == "width":
        return f"d_model {point}"
    if axis == "steps":
        return f"{point:,} steps"
    raise ValueError(f"axis must be 'width' or 'steps', got {axis!r}")


#: Columns of :attr:`WidthGap.trends`.
TREND_COLUMNS = ["axis", "first", "last", "n", "mean", "low", "high", "trend"]


def trend_row(points: pd.DataFrame, per_seed: pd.DataFrame, axis: str,
              confidence: float = 0.95) -> dict:
    """How the named variant's gap changes along an axis (:func:`gap_points`' ``points`` and
    ``per_seed``), one row of :data:`TREND_COLUMNS`: ``first``, ``last``, the first and last
    points with a gap; ``n``, ``mean``, ``low``, ``high``: the paired change
    (:func:`gap_trend`, over the seeds both have; NaN interval below 2 seeds); ``trend``:
    ``"falls"`` / ``"rises"`` (interval below / above zero; with one seed, the sign of the
    change), ``"no change"`` (interval covers zero) or ``"—"`` (fewer than two points with a
    gap, or no seed at both).

    Raises:
        ValueError: ``axis`` not ``"width"`` or ``"steps"``.
    """
    point_text(axis, 0)  # validates the axis
    have = points[points["best"].notna()]
    row = dict(axis=axis, first=None, last=None, n=0, mean=math.nan, low=math.nan,
               high=math.nan, trend="—")
    if len(have) < 2:
        return row
    row.update(first=have["point"].iloc[0], last=have["point"].iloc[-1])
    ch = gap_trend(per_seed, row["first"], row["last"], confidence)
    if ch is None:
        return row
    row.update(n=ch.n, mean=ch.mean, low=ch.low, high=ch.high)
    row["trend"] = ("no change" if ch.n >= 2 and ch.low <= 0 <= ch.high else
                    "falls" if (ch.high < 0 if ch.n >= 2 else ch.mean < 0) else "rises")
    return row


# ---------------------------------------------------------------------------------------------
# The width axis' runs and result
# ---------------------------------------------------------------------------------------------

@dataclass
class WidthGap:
    """Everything the width-axis section of a page shows. Built by :func:`width_gap`.

    Attributes:
        preset, named, confidence: as given (``named``: the ladder's ``width_named``).
        collected: the runs of both axes (:func:`gtalib.book.analysis.collect.collect_runs`).
        width, length: :func:`gap_points` tables of the width axis (``point`` = ``d_model``)
            and of training length at the width axis' depth and the preset's width (``point`` =
            steps, :func:`length_refs`); ``width_per_seed``, ``length_per_seed``: their
            per-seed gaps.
        trends: :func:`trend_row` of each axis, ``"width"`` then ``"steps"``
            (:data:`TREND_COLUMNS`).
        params: :func:`gtalib.book.design.ladder.width_params`.
        note: where ``preset`` has no width axis (then every frame is empty), that and the
            presets with one; else ``""``.
        width_seeds: seeds per variant and width the width axis plans.
        length_runs: :func:`length_refs`, the runs the length axis plans and their sources.
    """

    preset: str
    named: str
    confidence: float
    collected: Collected | None
    width: pd.DataFrame
    width_per_seed: pd.DataFrame
    length: pd.DataFrame
    length_per_seed: pd.DataFrame
    trends: pd.DataFrame
    params: pd.DataFrame
    note: str = ""
    width_seeds: int = 0
    length_runs: list = field(default_factory=list)


def width_refs(plan: Plan, seeds: int | None = None) -> list[tuple[str, object, object]]:
    """``(axis, point, RunRef)`` of every run the width section reads at ``plan``'s preset: the
    width axis (:func:`gtalib.book.design.ladder.ladder_runs` ``part="width"``; point
    ``d_model``) and the length axis (point: steps, :func:`length_refs`). ``seeds=None``: each
    source its own count.

    Raises:
        KeyError: no ladder at the plan's preset.
    """
    preset = plan.preset
    out = [("width", ref_width(r, preset)[0], r) for r in ladder_runs(preset, seeds, "width")]
    return out + [("steps", steps, r) for steps, r, _ in length_refs(plan, seeds)]


#: Where a length point's runs come from (:func:`length_refs`), in the order that breaks a tie
#: between two that plan a run: the width axis' own, the main table's, an ablation page's (its
#: key), the ladder's gate runs.
_SOURCE_ORDER = ("width", "main", *ABLATIONS, "ladder")


def length_refs(plan: Plan, seeds: int | None = None) -> list[tuple[int, object, str]]:
    """``(steps, RunRef, source)`` of every run of the length axis, in length, variant and
    seed order: the width axis' variants at the main results' configuration (zero init, no
    gate, latent scale on, 1× heads), the ladder's token depth and the preset's width, at each
    length of the ladder's token axis (``base_steps`` × ``token_factors``). At ``base_steps``
    they are the width axis' runs (source ``"width"``), so that point is the width table's
    first; at a longer length, every run of that configuration and length the book plans at the
    preset's own lengths (``plan``'s :meth:`~gtalib.book.design.plan.Plan.own_design`, so a
    book-wide ``max_steps`` override changes no source): the
    main table's (``"main"``), an ablation page's arm that is this configuration (its key: at
    ``cpu``'s 1,000 steps the gating page's runs without the gate, its pairs at data order 0
    where the page reads the joint design) and the ladder's gate runs
    without the gate (``"ladder"``); a run two of them plan (same specification, same run id)
    is read once, from the source that plans the most seeds of that variant at that length
    (then the first in :data:`_SOURCE_ORDER`). A variant has the seeds its sources
    plan: ``seeds=None``: each source its own count (the own design at the book's smallest
    count, 1, which every plan of the book holds); else seeds ``0..seeds-1``.

    Raises:
        KeyError: no ladder at the plan's preset.
    """

    preset = plan.preset
    lad = ladder(preset)
    lengths = [lad.base_steps * f for f in lad.token_factors]
    default_steps, depth = train_config(preset).max_steps, PRESETS[preset]["n_layer"]
    found = [("width", r) for r in ladder_runs(preset, seeds, "width")]
    own = plan.own_design(seeds or 1)
    # a figure read in the joint design: its pairs at data order 0, as every other source here
    found += [(key, r) for key, refs in own.figure_refs.items()
              for r in own.one_order_refs.get(key, refs)]
    found += [("ladder", r) for r in ladder_runs(preset, seeds, "gate")]
    on_axis = []
    for source, r in found:
        opts = dict(canonical_options(r.options))
        steps = dict(r.train).get("max_steps", default_steps)
        # the main configuration (no option left once the defaults and the token depth are
        # dropped), a width variant, a token length; the base length is the width axis' own
        if (opts.pop("n_layer", depth) == lad.token_depth and not opts
                and r.variant in lad.width_variants and steps in lengths
                and (steps == lad.base_steps) == (source == "width")
                and (seeds is None or r.seed < seeds)):
            on_axis.append((steps, r, source))
    # a run two sources plan is read from the one planning the most seeds of its variant at
    # that length (then the first in _SOURCE_ORDER), so a page's runs are named as that page's
    count = Counter((steps, r.variant, source) for steps, r, source in on_axis)
    seen, out = set(), []
    for steps, r, source in sorted(on_axis, key=lambda t: (-count[(t[0], t[1].variant, t[2])],
                                                           _SOURCE_ORDER.index(t[2]))):
        if (r.variant, steps, r.seed) not in seen:
            seen.add((r.variant, steps, r.seed))
            out.append((steps, r, source))
    order = {v: i for i, v in enumerate(lad.width_variants)}
    return sorted(out, key=lambda t: (lengths.index(t[0]), order[t[1].variant], t[1].seed))


def ref_width(ref, preset: str) -> tuple[int, int, int]:
    """``(d_model, n_head, head_dim)`` of a run ref: its options, else the preset's sizes.

    Raises:
        KeyError: unknown preset (lists the allowed ones).
    """

    if preset not in PRESETS:
        raise KeyError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
    opts = dict(ref.options)
    return tuple(opts.get(k, PRESETS[preset][k]) for k in WIDTH_FIELDS)


def width_gap(plan: Plan, seeds: int | None = None, run_dir=None, train: bool = False,
              confidence: float = 0.95, record_dir=None) -> WidthGap:
    """Collect the width section's runs at ``plan``'s preset (:func:`width_refs`: local store,
    else recorded runs, else trained if ``train``; resolved under
    :meth:`~gtalib.book.design.plan.Plan.own_design`, the lengths they were recorded at) and
    compute the named variant's gap at each width and each
    training length, and its trend along each. A preset without a ladder or without a width axis gives
    a result with empty tables and a ``note`` (the main-results page shows every preset).

    Raises:
        ValueError: ``seeds`` < 1, ``confidence`` outside (0, 1).
    """

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    preset = plan.preset
    lad = ladders.LADDERS.get(preset)
    if lad is None or not lad.width_variants:
        empty = pd.DataFrame(columns=POINT_COLUMNS)
        with_axis = ", ".join(f"`{k}`" for k, v in ladders.LADDERS.items() if v.widths)
        return WidthGap(preset, "", confidence, None, empty, pd.DataFrame(), empty,
                        pd.DataFrame(), pd.DataFrame(columns=TREND_COLUMNS), pd.DataFrame(),
                        note=f"`{preset}`: no width axis (presets with one: {with_axis}).")
    refs = width_refs(plan, seeds)
    unique = list(dict.fromkeys(r for _, _, r in refs))
    collected = collect_runs(unique, plan.own_design(), run_dir, train=train,
                             record_dir=record_dir)
    finals = _final_losses(collected)
    tables = {}
    for axis in ("width", "steps"):
        rows = [(p, r, _key(r, p if axis == "steps" else lad.base_steps))
                for a, p, r in refs if a == axis]
        needed = pd.DataFrame([(p, r.variant, r.seed) for p, r, _ in rows],
                              columns=["point", "variant", "seed"])
        final = pd.DataFrame([(p, r.variant, r.seed, finals[k]) for p, r, k in rows
                              if k in finals], columns=["point", "variant", "seed", "loss"])
        pts, per_seed = gap_points(final, needed, lad.width_named, confidence)
        tables[axis] = (pts, per_seed, trend_row(pts, per_seed, axis, confidence))
    return WidthGap(preset, lad.width_named, confidence, collected, tables["width"][0],
                    tables["width"][1], tables["steps"][0], tables["steps"][1],
                    pd.DataFrame([tables[a][2] for a in ("width", "steps")],
                                 columns=TREND_COLUMNS), width_params(preset),
                    width_seeds=TABLES["ladder_width"].seeds_at(preset) if seeds is None else seeds,
                    length_runs=length_refs(plan, seeds))


def _key(ref, steps: int) -> tuple:
    """A run's key in :func:`_final_losses`: its label (which names its sizes), its length in
    steps, its seed."""
    return ref.label, steps, ref.seed


def _final_losses(collected: Collected) -> dict:
    """Final validation loss of every complete run, keyed by :func:`_key`."""
    runs = collected.runs
    if runs.empty:
        return {}
    last = runs.dropna(subset=["val_loss"]).sort_values("step").groupby(
        ["label", "max_steps", "seed"]).tail(1)
    return {(r.label, int(r.max_steps), int(r.seed)): float(r.val_loss)
            for r in last.itertuples()}


# ---------------------------------------------------------------------------------------------
# The parameter table and the cost per width
# ---------------------------------------------------------------------------------------------

def format_width_params(params: pd.DataFrame) -> pd.DataFrame:
    """:func:`gtalib.book.design.ladder.width_params` as printed: the columns named as on the
    page, "—" where a variant has no latent (``d_c``, latent block), parameters with thousands
    separators and the deviation from MHA in percent to three decimals."""
    out = params.rename(columns={"intermediate_size": "F", "kv_lora_rank": "d_c",
                                 "block_width": "latent block", "n_params": "parameters",
                                 "vs_mha_pct": "vs MHA (%)"})
    for col in ("d_c", "latent block"):
        out[col] = ["—" if pd.isna(x) else str(int(x)) for x in out[col]]
    out["parameters"] = [f"{int(x):,}" for x in out["parameters"]]
    out["vs MHA (%)"] = [f"{x:+.3f}" for x in out["vs MHA (%)"]]
    return out.reset_index(drop=True)


def width_cost(plan: Plan, costs=None) -> pd.DataFrame:
    """Estimated core-seconds of every width-axis run of ``plan``'s preset beyond the preset's
    width (their specs under :meth:`~gtalib.book.design.plan.Plan.own_design`), from the
    recorded run of the same variant at the preset's width scaled by the ratio of training FLOPs
    ``6 · parameters · tokens`` (rule and source: module docstring).

    Args:
        costs: :func:`gtalib.training.record_costs.cost_table` (read from ``book/recorded/`` when
            ``None``).
    Returns:
        one row per (width, variant): ``d_model, variant, n_params, base_params, flops_ratio,
        base_core_s`` (median recorded core-seconds per run at the preset's width; NaN when
        unrecorded), ``core_s`` (the estimate per run) and ``seeds``.
    Raises:
        KeyError: no ladder at the plan's preset. FileNotFoundError: the corpus is not built
        (the run specs' data identity).
    """

    costs = record_costs.cost_table() if costs is None else costs
    median = dict(zip(costs["key"], costs["core_s_median"]))
    preset, lad = plan.preset, ladder(plan.preset)
    plan = plan.own_design()
    refs = ladder_runs(preset, 1, "width")
    base = {r.variant: plan.spec(r) for r in refs if ref_width(r, preset) == lad.widths[0]}
    rows = []
    for r in refs:
        if ref_width(r, preset) == lad.widths[0]:
            continue
        spec, b = plan.spec(r), base[r.variant]
        flops, bflops = (6 * count_params(s.model)["total"] * s.train.max_steps
                         * s.train.tokens_per_step for s in (spec, b))
        core = median.get(record_costs.config_key(b), math.nan)
        rows.append((ref_width(r, preset)[0], r.variant, count_params(spec.model)["total"],
                     count_params(b.model)["total"], flops / bflops, core,
                     core * flops / bflops, TABLES["ladder_width"].seeds_at(preset)))
    return pd.DataFrame(rows, columns=["d_model", "variant", "n_params", "base_params",
                                       "flops_ratio", "base_core_s", "core_s", "seeds"])


# ---------------------------------------------------------------------------------------------
# The pages' section
# ---------------------------------------------------------------------------------------------

def format_gap_table(points: pd.DataFrame, named: str, axis: str, confidence: float = 0.95,
                     preset: str | None = None) -> pd.DataFrame:
    """A :func:`gap_points` table as printed: the point (``d_model`` with heads and the named
    variant's latent block width, given ``preset``; or steps), runs done, the others compared,
    the best with its mean final loss, the named variant's, the gap with its interval and pairs,
    the paired test of "the named variant is lowest" (the paper's ranking claim), and what was
    left out.

    Raises:
        ValueError: ``axis`` not ``"width"`` or ``"steps"``.
    """
    point_text(axis, 0)  # validates the axis
    name = display_name(named)
    out = pd.DataFrame({
        ("d_model" if axis == "width" else "steps"): [
            _width_cell(p, named, preset) if axis == "width" else f"{p:,}"
            for p in points["point"]],
        "runs done": [f"{d} of {n}" for d, n in zip(points["done"], points["needed"])],
        "others compared": [", ".join(map(display_name, o)) or "—" for o in points["others"]],
        "best other (mean loss)": ["—" if pd.isna(b) else f"{display_name(b)} ({x:.4f})"
                                   for b, x in zip(points["best"], points["best_loss"])],
        f"{name} (mean loss)": ["—" if math.isnan(x) else f"{x:.4f}"
                                for x in points["named_loss"]],
        f"{name} − best other": ["—" if pd.isna(b) else f"{m:+.4f}"
                                 for b, m in zip(points["best"], points["mean"])],
        f"{confidence:.0%} CI": ["—" if pd.isna(b) else "n/a (1 pair)" if n < 2 else
                                 f"[{lo:+.4f}, {hi:+.4f}]" for b, n, lo, hi in
                                 zip(points["best"], points["n"], points["low"], points["high"])],
        "pairs": points["n"],
        f"{name} lowest?": [v or "—" for v in points["verdict"]],
        "left out": [("all (none done)" if d == 0 and n else
                      "; ".join(f"{display_name(v)} ({k} of {plural(m, 'run')})"
                                for v, k, m in lo) or "—")
                     for lo, d, n in zip(points["left_out"], points["done"], points["needed"])],
    })
    return out.reset_index(drop=True)


def _width_cell(d_model, named: str, preset: str | None) -> str:
    """``"256 (4 × 64; MLRA-4 latent: 4 blocks of 64)"`` given ``preset``, else ``"256"``."""

    if preset is None:
        return str(d_model)
    size = next(s for s in ladder(preset).widths if s[0] == d_model)
    cfg = model_config(preset, named, d_model=size[0], n_head=size[1], head_dim=size[2])
    blocks = cfg.latent_blocks
    block = (f"; {display_name(named)} latent: {plural(blocks, 'block')} of "
             f"{cfg.kv_lora_rank // blocks}" if blocks else "")
    return f"{d_model} ({size[1]} × {size[2]}{block})"


#: How :func:`length_sources` names a length point's source (:func:`length_refs`); an ablation
#: page by its title and the arm that is the main configuration.
_SOURCE_NAMES = {"width": "width axis", "main": "main table", "ladder": "ladder gate"}


def _source_name(source: str) -> str:
    """A :func:`length_refs` source as :func:`length_sources` names it: ``"width axis"``,
    ``"main table"``, ``"ladder gate"``, or an ablation page's title and arm (``"Gating
    ablation (no gate)"``)."""
    if source in _SOURCE_NAMES:
        return _SOURCE_NAMES[source]
    fig = ablation(source)
    arm = next(opts for opts in (fig.alt, fig.rec) if not canonical_options(opts.items()))
    label = config_label("mha", arm).removeprefix("MHA").strip()
    return fig.heading + (f" ({label})" if label else "")


def length_sources(result: WidthGap) -> pd.DataFrame:
    """Where each length of :attr:`WidthGap.length_runs` reads its runs: one row per (length,
    source, seed count), ``steps, source`` (:func:`_source_name`), ``seeds`` and ``variants``
    (the variants with that many seeds there), then per length whose runs lack a width variant
    a row of source ``"none"``, 0 seeds, naming those variants."""
    lad = ladder(result.preset)
    seeds: dict = {}
    for steps, r, source in result.length_runs:
        seeds.setdefault(steps, {}).setdefault(source, {}).setdefault(r.variant, set()).add(
            r.seed)
    rows = []
    for steps, by_source in seeds.items():
        for source in sorted(by_source, key=_SOURCE_ORDER.index):
            counts: dict = {}
            for v, ss in by_source[source].items():
                counts.setdefault(len(ss), []).append(display_name(v))
            rows += [(steps, _source_name(source), n, and_join(vs))
                     for n, vs in sorted(counts.items(), reverse=True)]
        absent = [display_name(v) for v in lad.width_variants
                  if not any(v in pv for pv in by_source.values())]
        if absent:
            rows.append((steps, "none", 0, and_join(absent)))
    return pd.DataFrame(rows, columns=["steps", "source", "seeds", "variants"])


#: The names this page's sentences state (the keys of :func:`width_facts`).
FACT_NAMES = ("width_named", "width_others", "width_depth", "width_steps", "width_seeds",
              "width_confidence")


def width_facts(result: WidthGap) -> dict[str, str]:
    """The words and numbers the width section's Markdown states, by name: ``width_named``
    (the named variant), ``width_others`` (the other width variants, ``"A, B and C"``),
    ``width_depth`` and ``width_steps`` (the width axis' depth and length), ``width_seeds``
    (seeds per variant and width) and ``width_confidence`` (``"95%"``); ``"—"`` each where the
    preset has no width axis."""
    if result.note:
        return dict.fromkeys(FACT_NAMES, "—")
    lad = ladder(result.preset)
    return {"width_named": display_name(result.named),
            "width_others": and_join(display_name(v) for v in lad.width_variants
                                     if v != result.named),
            "width_depth": f"{lad.token_depth}", "width_steps": f"{lad.base_steps:,}",
            "width_seeds": f"{result.width_seeds}",
            "width_confidence": f"{result.confidence:.0%}"}


def incomplete_table(collected: Collected) -> pd.DataFrame:
    """The section's runs that are missing or failed, one row per configuration, length and
    state: ``label, steps, state, seeds`` (``"0, 2"``) and ``detail`` (a failed or corrupt run's
    message per seed, ``"seed 1: <message>"``; ``""`` for missing runs). Empty when every run is
    done."""
    rows = []
    for (label, steps, state), g in collected.incomplete.groupby(
            ["label", "max_steps", "state"], sort=False):
        detail = "; ".join(f"seed {r.seed}: {r.detail}" for r in g.itertuples()
                           if state != "missing" and r.detail)
        rows.append((label, steps, state, ", ".join(map(str, sorted(g["seed"]))), detail))
    return pd.DataFrame(rows, columns=["label", "steps", "state", "seeds", "detail"])


def format_trend_table(trends: pd.DataFrame, named: str, confidence: float = 0.95
                       ) -> pd.DataFrame:
    """:attr:`WidthGap.trends` as printed: ``axis``, ``from`` and ``to`` (the points, as
    :func:`point_text` names them), the change of the named variant's gap with its interval,
    its ``pairs`` and the ``trend`` word; ``"—"`` where there is none."""
    name = display_name(named)

    def pt(axis, p):
        return "—" if p is None or pd.isna(p) else point_text(axis, p)

    return pd.DataFrame({
        "axis": trends["axis"],
        "from": [pt(a, p) for a, p in zip(trends["axis"], trends["first"])],
        "to": [pt(a, p) for a, p in zip(trends["axis"], trends["last"])],
        f"change of {name} − best": ["—" if n == 0 else f"{m:+.4f}" for n, m in
                                      zip(trends["n"], trends["mean"])],
        f"{confidence:.0%} CI": ["—" if n == 0 else "n/a (1 pair)" if n < 2 else
                                 f"[{lo:+.4f}, {hi:+.4f}]" for n, lo, hi in
                                 zip(trends["n"], trends["low"], trends["high"])],
        "pairs": trends["n"], "trend": trends["trend"]})


def show_width_gap(result: WidthGap, parameters: bool = True) -> None:
    """Display the width section: its note where the preset has no width axis; else the runs
    missing or failed (:func:`incomplete_table`, where any), the trend along each axis
    (:func:`format_trend_table`), the width and length tables (:func:`format_gap_table`), where
    each length's runs come from (:func:`length_sources`), with ``parameters`` the parameter
    matching per width, and where its runs come from
    (:func:`gtalib.book.analysis.collect.provenance_html`)."""

    if result.note:
        display(Markdown(result.note))
        return
    bad = incomplete_table(result.collected)
    tables = [bad] if len(bad) else []
    tables.append(format_trend_table(result.trends, result.named, result.confidence))
    tables += [format_gap_table(table, result.named, axis, result.confidence, result.preset)
               for table, axis in ((result.width, "width"), (result.length, "steps"))]
    tables.append(length_sources(result))
    if parameters:
        tables.append(format_width_params(result.params))
    for table in tables:
        display(table_style(table.style.hide(axis="index")))
    display(HTML(provenance_html(result.collected)))
