"""The ablation chapters (initialisation, gating, latent scaling, double heads): each variant's
paired ΔL curves, their band over seeds, the tidy table of pairs (:func:`pair_table`), whose
verdicts :func:`gtalib.book.analysis.final_table.pair_verdicts` gives, the final-ΔL table, and
the values the page's sentences state (:func:`page_facts`) and its tables. The figure itself
is drawn by the notebooks' own plotting cell (tagged ``ablation-figure``, the same in the five
notebooks that draw an ablation figure), which reads :attr:`AblationResult.curves` and
:attr:`AblationResult.band` and, for the paper's panel, :func:`plot_paper_reference`.

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
    plateau_escape,
    seed_band,
)
from gtalib.book.analysis.final_table import ONE_RUN, final_delta_table
from gtalib.book.analysis.stats import (
    aggregate_verdicts,
    final_table_words,
    interval_columns,
    near_zero_differences,
    near_zero_test,
    verdict_text,
)
from gtalib.book.analysis.style import (
    MIN_BAND_SEEDS,
    and_join,
    plural,
    table_style,
    variant_style,
)
from gtalib.book.design.figures import ABLATIONS, ablation
from gtalib.book.design.names import USER_COLORS, display_name, is_user_variant
from gtalib.book.design.plan import Plan
from gtalib.book.chapters.shared import shared_file, shared_value
from gtalib.book.chapters.verdict_parts import NOT_MEASURED
from gtalib.book.design.paper import PAPER_PARAMS_B
from gtalib.model.presets import PRESETS

#: Where a page's "Your variants" links to: the methods chapter's section on the user's own
#: variants (how they are tested, apart from the paper's claims), from a generated page.
USER_VARIANTS = "../methods.md#your-own-variants"

# ---------------------------------------------------------------------------------------------
# The ablation result: curves, band and the final-ΔL table
# ---------------------------------------------------------------------------------------------

#: The columns of :attr:`AblationResult.deltas` (:func:`gtalib.book.analysis.curves.final_deltas`).
DELTA_COLUMNS = ["variant", "seed", "step", "tokens", "delta"]


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
    #: variant → seeds (pairs) the figure asked for (its spec's ``seeds_at``, one n for all)
    seed_counts: dict = field(default_factory=dict)
    #: the pair counts at which the figure is read (its spec's ``looks_at``)
    looks: tuple = ()
    #: the file the build keeps this result in (:func:`shared_file`) where it is the build's
    #: (read at the page defaults within a build), else ``None``; the values computed from it
    #: are kept beside it (:func:`gtalib.book.chapters.shared.derived_file`)
    shared: Path | None = None
    #: the user's own variants (``module:Class``) drawn beside the paper's: those with every
    #: run done, their ΔL curves and band, and their final table, a Holm family of its own at
    #: one look, each tested against the figure's expected sign. They are kept out of
    #: :attr:`complete`, :attr:`curves` and :attr:`final`, which every claim reads.
    user_complete: list = field(default_factory=list)
    user_curves: pd.DataFrame = field(default_factory=pd.DataFrame)
    user_band: pd.DataFrame = field(default_factory=pd.DataFrame)
    user_final: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: the user's variants asked for that this figure leaves out → why, in one line
    #: (its spec's ``user_variant_refusal``)
    left_out: dict = field(default_factory=dict)
    #: pair k at initialisation seed k and data order k (the joint design,
    #: its spec's ``reads_joint``); else every pair at data order 0
    joint: bool = False
    #: each pair's final ΔL of :attr:`final_column` (nats), the :attr:`complete` variants':
    #: :func:`gtalib.book.analysis.curves.final_deltas`, ``[variant, seed, step, tokens,
    #: delta]``; what the page's pair table, the claims and the figure tests read
    deltas: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=DELTA_COLUMNS))

    @property
    def runs(self) -> pd.DataFrame:
        return self.collected.runs

    def drawn(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(ΔL curves, band) the figure draws: the paper's variants', then the user's own
        (:attr:`curves` and :attr:`user_curves`, :attr:`band` and :attr:`user_band`)."""
        # concatenating an empty frame without columns would turn the dtypes to object
        return tuple(pd.concat([ours, users]) if len(users) else ours for ours, users in (
            (self.curves, self.user_curves), (self.band, self.user_band)))


def ablation_result(key: str, plan: Plan, run_dir, variants=None, train: bool = False,
                    smoothing=None, confidence: float = 0.95, curve_column: str = "train_loss",
                    final_column: str = "val_loss", source: str = "build",
                    one_order: bool = False) -> AblationResult:
    """Collect the runs of ablation ``key`` under ``plan`` (its preset, seed count and length
    override, :func:`gtalib.book.design.plan.make_plan`) and compute its curves, band and final
    table; ``variants``: a subset of the figure's (default: those it shows at the preset).
    ``one_order``: for a figure read in the joint design, its one-order pairs instead
    (:attr:`~gtalib.book.design.plan.Plan.one_order_refs`, every pair at data order 0, read
    at the preset's looks).

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
    if one_order and key not in plan.one_order_refs:
        raise KeyError(f"figure {key!r} is not read in the joint design at {plan.preset!r}, so it "
                       f"has no separate one-order pairs; those that have: "
                       f"{', '.join(plan.one_order_refs) or 'none'}")
    name = f"{key}-one-order" if one_order else key
    shared = shared_file(name, plan, run_dir, confidence, source) if defaults else None
    return shared_value(shared, lambda: _ablation_result(
        key, plan, run_dir, variants, train, smoothing, confidence, curve_column, final_column,
        source, shared, one_order))


def _ablation_result(key, plan, run_dir, variants, train, smoothing, confidence, curve_column,
                     final_column, source, shared, one_order=False) -> AblationResult:
    """:func:`ablation_result`, computed."""
    fig = ablation(key)
    preset, seeds, max_steps = plan.preset, plan.seeds, plan.max_steps
    joint = not one_order and fig.reads_joint(preset, max_steps)
    refs = ((plan.one_order_refs if one_order else plan.figure_refs)[key] if variants is None
            else fig.runs(preset, seeds, variants, max_steps, joint=joint))
    col = collect_runs(refs, plan, run_dir, train=train, source=source)
    done, bad = complete_variants(col)
    users = [v for v in done if is_user_variant(v)]
    ok = [v for v in done if v not in users]
    every = col.runs[col.runs["variant"].isin(done)] if len(col.runs) else col.runs
    if smoothing is None:
        logged = every.dropna(subset=[curve_column]).groupby(["variant", "arm", "seed"]).size()
        smoothing = auto_smoothing(int(logged.min()) if len(logged) else 1)
    looks = fig.looks_at(preset, seeds, max_steps, joint=joint)

    def part(names, expected, looks):  # curves, band and final table of some variants
        runs = every[every["variant"].isin(names)] if len(every) else every
        curves = delta_curves(runs if len(runs) else col.runs.iloc[:0], curve_column, smoothing)
        final = final_delta_table(runs, expected, confidence, final_column,
                                  looks) if len(runs) else pd.DataFrame()
        if len(final):
            pairs = col.pairs
            final["pair source"] = [pair_source_summary(pairs[pairs["variant"] == v])
                                    for v in final.index]
        return curves, seed_band(curves, confidence), final

    curves, band, final = part(ok, {v: fig.paper_final(v) for v in ok}, looks)
    # the user's variants: one family of their own, read once, against the figure's sign
    u_curves, u_band, u_final = part(users, dict.fromkeys(users, float(fig.expected_sign)), ())
    if len(u_final):
        u_final["paper ΔL (≈)"] = math.nan  # no paper value: the sign tested is the figure's
    counts = dict.fromkeys(fig.variants_at(preset, variants),
                           fig.seeds_at(preset, seeds, max_steps))
    asked = [v for v in ([] if variants is None else variants) if is_user_variant(v)]
    left_out = {v: fig.user_variant_refusal(preset, v) for v in asked if v not in counts}
    paired = every[every["variant"].isin(ok)] if len(every) else every
    deltas = (final_deltas(paired, final_column) if len(paired)
              else pd.DataFrame(columns=DELTA_COLUMNS))
    return AblationResult(key, preset, seeds, smoothing, confidence, col, ok, bad, curves, band,
                          final, curve_column, final_column, tuple(counts), counts, looks, shared,
                          users, u_curves, u_band, u_final, left_out, joint, deltas)


def ablation_results(plan: Plan, run_dir, confidence: float = 0.95, source: str = "build") -> dict:
    """Every ablation figure's result under ``plan`` (:func:`ablation_result`, key → result),
    computed once for the pages that read them all (the claims page's two tables)."""
    return {key: ablation_result(key, plan, run_dir, confidence=confidence, source=source)
            for key in ABLATIONS}


def pair_table(result) -> pd.DataFrame:
    """The figure's pairs, tidy: one row per pair, ``[variant, seed, data order, ΔL]`` (ΔL in
    nats: the unsmoothed final-step ΔL of :attr:`AblationResult.final_column`,
    :func:`gtalib.book.analysis.curves.final_deltas`), the complete variants in the figure's
    order. Read in the joint design (:attr:`AblationResult.joint`), pair k is at seed k and data
    order k; otherwise every pair is at data order 0 (the default ``data_seed`` of
    :class:`gtalib.training.config.TrainConfig`) and the data-order runs are read apart
    (:mod:`gtalib.book.chapters.curve_features`)."""
    d = result.deltas
    return pd.DataFrame({"variant": d["variant"], "seed": d["seed"],
                         "data order": d["seed"] if result.joint else 0,
                         "ΔL": d["delta"]}).reset_index(drop=True)


def near_zero_claim(result, named: str) -> tuple[str, str]:
    """(ours, verdict) of the paper's "``named``'s ΔL ≈ 0" (:attr:`Ablation.near_zero`) in an
    ablation result: an equivalence test of its final ΔL against a margin of half the other
    complete variants' mean ΔL, paired by seed over the seeds they all have
    (:func:`gtalib.book.analysis.stats.near_zero_differences`,
    :func:`~gtalib.book.analysis.stats.near_zero_test`). Its row's own verdict tests the sign
    only, as declared for every row; this is the claim's size."""
    if named not in result.complete or len(result.complete) < 2:
        return NOT_MEASURED, NOT_MEASURED
    wide = result.deltas.pivot(index="seed", columns="variant",
                               values="delta").dropna()  # [seed, variant]
    others = wide.drop(columns=named)
    below, above, verdict_ = near_zero_test(*near_zero_differences(
        wide[named].to_numpy(), others.to_numpy().T), result.confidence)
    name, margin = display_name(named), abs(others.to_numpy().mean()) / 2
    rest = and_join(display_name(v) for v in others.columns)
    head = (f"{name} ΔL {wide[named].mean():+.3f} against ±{margin:.3f} (half the mean ΔL of "
            f"{rest})")
    if below.n < 2:
        return head + ", one pair", verdict_
    return (f"{head}; margin − ΔL [{below.low:+.3f}, {below.high:+.3f}], margin + ΔL "
            f"[{above.low:+.3f}, {above.high:+.3f}] over {below.n} pairs (both above 0 = the "
            f"claim)", verdict_)


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
    :attr:`AblationResult.seed_counts`, one n for every variant)."""
    return plural(max(counts.values()), "seed") if counts else "no seeds"


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
                    label=f"{display_name(v)} paper, final (≈)")
            if not math.isnan(final):
                values.append(final)
    lo, hi = min(values), max(values)
    pad = 0.1 * (hi - lo or 1.0)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xlim(-3, 105)
    ax.set_xlabel(f"training tokens (B), paper's {PAPER_PARAMS_B:g} B model")
    ax.set_ylabel("ΔL (nats)")
    ax.set_title("paper (≈)", fontsize=10)
    _outside_legend(ax, fontsize=7)


def _hardware(cards: list) -> str:
    """One-line hardware summary from run cards (``device``/``threads`` keys when present;
    ``"unknown"`` without a run card)."""
    seen = []
    for c in cards:
        dev = c.get("device") or c.get("accelerator") or "?"
        thr = c.get("threads") or c.get("torch_threads")
        s = f"{dev}" + (f", {plural(thr, 'thread')}" if thr else "")
        if s not in seen:
            seen.append(s)
    return "; ".join(seen) if seen else "unknown"


#: The plateau-escape rule of :func:`plateau_table`
#: (:func:`gtalib.book.analysis.curves.plateau_escape`): the trailing mean's window (steps) and
#: the margin below the unigram entropy (nats).
PLATEAU_WINDOW, PLATEAU_MARGIN = 10, 0.1


#: The fold's title over the final table's column definitions (:func:`show_verdicts`).
COLUMNS = "The columns"


def page_facts(result, entropy: float | None = None) -> dict[str, str]:
    """The values an ablation page's sentences state, by name (the page's templates name them
    ``fig_<name>``), as the text it reads; the same names on every page.

    The verdict (right under the figure): ``verdict`` (the figure's, by the claims page's rule,
    :func:`gtalib.book.analysis.stats.aggregate_verdicts`; ``"not measured"`` without a complete
    variant), ``verdicts`` (which variants got which verdict, ``"*agrees* for GQA and MLA"``;
    ``"none"``), ``pairs`` (the most seed pairs of a variant, ``"3 seed pairs"``), ``claim`` (the paper's values),
    ``single_run`` (the variants whose |ΔL| exceeds one arm's seed sd, ``"none"``),
    ``near_zero_variant`` and ``near_zero`` (the variant the paper calls ≈ 0 and the verdict of
    that claim, :func:`near_zero_claim`, ``"not measured"`` where it is not complete here;
    ``"none"`` where the figure has no such variant).
    The caption: ``title``, ``convention``, ``pair_order`` (``"*k*"`` for pair *k* in the joint
    design, else ``"0"``), ``preset`` (as code), ``n_layer``, ``d_model``, ``n_head``,
    ``head_dim``, ``tokens`` (per run, ``"2.05M"``), ``seeds`` (``"3 seeds"``), ``hardware``,
    ``smoothing`` (the trailing mean's length, ``"12 logged steps"``), ``confidence`` (``"95%"``), ``band_from`` (the seeds from which
    the band is shaded, :data:`MIN_BAND_SEEDS`).
    The seeds: ``looks`` (the pair counts the figure is read at, ``"5 and 10"``) and
    ``variants_tested`` (the family's size).
    The plateau (:func:`plateau_table`): ``entropy``, the corpus's unigram entropy (nats, 3
    decimals; ``"—"`` without ``entropy``)."""
    final, spec = result.final, ablation(result.key)

    def named(variants) -> str:
        return and_join([display_name(v) for v in variants]) if len(variants) else "none"

    if final.empty:
        verdict, groups, pairs, single = NOT_MEASURED, "none", 0, "none"
    else:
        verdict = aggregate_verdicts(final["verdict"]).split(":")[0]
        groups = "; ".join(f"*{v}* for {named(final.index[final['verdict'] == v])}"
                           for v in dict.fromkeys(final["verdict"]))
        pairs, single = int(final["seeds"].max()), named(final.index[final[ONE_RUN] == "yes"])
    near = list(spec.near_zero)
    tokens = int(result.curves["tokens"].max()) if len(result.curves) else 0
    div, unit = token_unit(max(tokens, 1))
    size = PRESETS[result.preset]
    looks = tuple(result.looks) or ((pairs,) if pairs else ())
    return {
        "verdict": verdict, "verdicts": groups, "pairs": plural(pairs, "seed pair"), "claim": spec.claim_value,
        "single_run": single, "near_zero_variant": named(near),
        "near_zero": near_zero_claim(result, near[0])[1] if near else "none",
        "title": spec.title, "convention": spec.convention,
        "pair_order": "*k*" if result.joint else "0", "preset": f"`{result.preset}`",
        **{k: f"{size[k]}" for k in ("n_layer", "d_model", "n_head", "head_dim")},
        "tokens": f"{tokens / div:.3g}{unit}", "seeds": seeds_text(result.seed_counts),
        "hardware": _hardware(result.collected.cards), "smoothing": plural(result.smoothing, "logged step"),
        "confidence": f"{result.confidence:.0%}", "band_from": f"{MIN_BAND_SEEDS}",
        "looks": and_join([f"{n}" for n in looks]) if looks else "0",
        "variants_tested": f"{len([v for v in result.variants if not is_user_variant(v)])}",
        "entropy": "—" if entropy is None else f"{entropy:.3f}",
    }


def variant_color(fig_spec, variant: str, users=()) -> str:
    """The colour of ``variant`` in ``fig_spec``'s figure: the paper's, and for a user's own
    variant one of :data:`gtalib.book.design.names.USER_COLORS` by its place in ``users``."""
    if variant in fig_spec.colors:
        return fig_spec.colors[variant]
    users = list(users)
    return USER_COLORS[(users.index(variant) if variant in users else 0) % len(USER_COLORS)]


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
        ONE_RUN: final[ONE_RUN],
    })
    if "look 1" in final:  # two looks: the first one's verdict beside the final one
        out.insert(len(out.columns) - 1, f"at {int(final['first pairs'].iloc[0])} pairs",
                   [f"{v} (p = {p:.2g})" for v, p in zip(final["look 1"], final["p (look 1)"])])
        out = out.rename(columns={"verdict": f"verdict at {int(final['seeds'].max())} pairs"})
    if final["paper ΔL (≈)"].isna().all():  # the user's variants: no paper value
        out = out.drop(columns="paper ΔL (≈)")
    out.index = [display_name(v) for v in final.index]
    out.index.name = "variant"
    return out


def show_missing(result) -> None:
    """Display the notice of the runs an ablation page lacks (above its figure), if any."""
    notice = missing_notice(result.collected)
    if notice:
        display(Markdown(notice))


def show_verdicts(result, verdicts: pd.DataFrame) -> None:
    """Display the tables that follow an ablation page's verdict and caption (its Markdown,
    from :func:`page_facts`): the final-ΔL table with its pair sources and, where the page was
    given the user's own variants, those this figure leaves out (and why) and, under the
    heading "Your variants", their own table (what it tests: :data:`USER_VARIANTS`).
    ``verdicts``: the page's :func:`gtalib.book.analysis.final_table.pair_verdicts` of
    :func:`pair_table`, which the table's verdicts must be (the page shows that call).

    Raises:
        ValueError: ``verdicts`` are not the table's (computed from other pairs or another rule).
    """
    final = result.final
    if list(verdicts.get("verdict", [])) != list(final.get("verdict", [])):
        raise ValueError("the verdicts given are not those of the result's final table")
    if result.complete:
        # what each column means is reference: folded, so the table follows the verdict
        display(Markdown(f"<details><summary>{COLUMNS}</summary>\n\n"
                         f"{final_table_words(result.confidence, result.looks)}\n\n</details>"))
        table = format_final_table(final, result.confidence)
        verdict_cols = [c for c in table.columns if c.startswith(("verdict", "at "))]
        display(table_style(table.style, prose=verdict_cols))
        if "pair source" in final:
            display(Markdown(pair_source_lines(dict(zip(
                map(display_name, final.index), final["pair source"])))))
    if result.left_out:
        display(table_style(pd.DataFrame(
            {"left out": list(result.left_out.values())},
            index=pd.Index([display_name(v) for v in result.left_out], name="variant")).style,
            prose=["left out"]))
    if result.user_complete:
        display(Markdown(f"### Your variants\n\n[Tested apart]({USER_VARIANTS})"))
        table = format_final_table(result.user_final, result.confidence)
        display(table_style(table.style, prose=[c for c in table.columns
                                                if c.startswith("verdict")]))


def show_runs(result, params=None) -> None:
    """Display an ablation page's reference block, after its figure and tables: the parameters
    of the page (``params``, a :class:`gtalib.book.pipeline.parameters.NotebookParams`, shown
    as its closed dropdown) and where the runs come from
    (:func:`gtalib.book.analysis.collect.provenance_html`: a compact table, the configurations
    in a closed dropdown); the seed policy is the page's Markdown (:func:`page_facts`)."""
    if params is not None:
        display(params)
    display(HTML(provenance_html(result.collected)))


def plateau_table(result, entropy: float, margin: float = PLATEAU_MARGIN,
                  window: int = PLATEAU_WINDOW) -> pd.DataFrame:
    """The plateau-escape step of every run of an ablation (docs/cpu_regime.md): the first step
    at which the training loss (trailing mean over ``window`` steps) falls below the corpus's
    unigram ``entropy`` minus ``margin`` nats, by run label (rows) and seed (columns
    ``seed <k>``), ``"never"`` where it does not within the run; empty without runs."""
    if result.runs.empty:
        return pd.DataFrame()
    e = plateau_escape(result.runs, entropy, margin, window)
    table = e.pivot_table(index="label", columns="seed", values="escape_step", aggfunc="first",
                          dropna=False)
    table.columns = [f"seed {c}" for c in table.columns]
    return table.map(lambda x: "never" if pd.isna(x) else f"{int(x)}")


def show_plateaus(result, entropy: float, margin: float = PLATEAU_MARGIN,
                  window: int = PLATEAU_WINDOW) -> None:
    """Display :func:`plateau_table` (nothing without runs; the rule and how to read it: the
    page's Markdown and the methods chapter)."""
    table = plateau_table(result, entropy, margin, window)
    if len(table):
        display(table)
