"""The curve figures read feature by feature (initialisation and gating pages, the claims page):
what the paper's figure shows of each curve's course, its top, slowest and lowest curves, their
convergence and their order, tested on this build's curves over seeds; the data-order check
of each variant's final verdict; and the values their pages state of both (:func:`page_facts`).

The window (methods chapter, "The curves read feature by feature"): the paper's curves begin at
its first logged point, about 1 B of 100 B tokens, after its models have left the start of
training behind; at this scale every run first sits on the unigram plateau, and the ΔL of that
stretch measures which arm escapes first. So a figure's window starts where the last of its
runs (any variant, either arm, any seed) has left the plateau
(:func:`gtalib.book.analysis.curves.plateau_escape`), plus the drawn curve's smoothing window,
so that no plateau step enters the first point; it ends at the run's end. The rule reads the
training loss against the corpus entropy only, never ΔL, and is the same for every variant.

Within a book build each figure's features (:func:`curve_features`) and data-order table
(:func:`data_order_table`) are computed once, by the first page or snippet that asks (the
figure's page, the claims page, the methods and landing-page snippets), and loaded by the
others: they are kept beside the build's result of the figure
(:func:`gtalib.book.chapters.shared.derived_file`). Outside a build, or for a result read at
other options than the page defaults, each call computes them.

Reads :mod:`gtalib.book.analysis.features` (the statistics), :mod:`gtalib.book.analysis.stats`,
:mod:`gtalib.book.analysis.sequential`, :mod:`gtalib.book.analysis.curves`,
:mod:`gtalib.book.analysis.collect` and the figure's design (:mod:`gtalib.book.design.figures`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from gtalib.book.analysis import features as ft
from gtalib.book.analysis.collect import collect_runs
from gtalib.book.analysis.curves import final_deltas, plateau_escape
from gtalib.book.analysis.sequential import holm_level, holm_rejects
from gtalib.book.analysis.stats import VARIANCE_SOURCES, data_order_stats, variance_components
from gtalib.book.analysis.style import and_join, md_table, plural, table_style
from gtalib.book.chapters.ablation import ablation_result
from gtalib.book.chapters.shared import derived_file, shared_value
from gtalib.book.chapters.verdict_parts import is_joint, order_changes, summary_counts
from gtalib.book.design.figures import ablation
from gtalib.book.design.names import display_name, is_user_variant
from gtalib.training.runs import resolve_run_dir

#: A feature's row in the features table, as the paper's figure shows it (what each measures:
#: the methods chapter, "The curves read feature by feature"): kind → its name.
NAMES = {"course": "{v} falls", "top": "{v} on top", "slowest": "{v} falls slowest",
         "lowest": "{v} ends lowest", "convergence": "curves {way}", "order": "end order"}


@dataclass(frozen=True)
class Window:
    """The part of a figure's curves its features read (module docstring).

    Attributes:
        start, end: first and last step (optimizer steps). fraction: ``start / end``.
        escaped, runs: the runs that left the plateau, of all the figure's runs.
        latest: the latest escape step (NaN when no run escaped: the window is then the last
            half of the run). smoothing: the drawn curve's trailing window (steps).
        :meth:`facts`: the values a page states.
    """

    start: int
    end: int
    escaped: int
    runs: int
    latest: float
    smoothing: int

    @property
    def fraction(self) -> float:
        return self.start / self.end

    def facts(self) -> dict[str, str]:
        """The window as a page states it: ``window`` (``"120–250"``, steps),
        ``window_fraction`` (``start / end``, 2 decimals), ``escape`` (the latest escape,
        ``"step 110"``, or ``"none"``), ``escaped`` (``"12 of 12"`` runs) and ``smoothing``
        (steps)."""
        return {"window": f"{self.start}–{self.end}", "window_fraction": f"{self.fraction:.2f}",
                "escape": "none" if math.isnan(self.latest) else f"step {int(self.latest)}",
                "escaped": f"{self.escaped} of {self.runs}", "smoothing": f"{self.smoothing}"}


def feature_window(result, entropy: float) -> Window:
    """The window of ``result``'s figure (module docstring): from the latest plateau escape of
    its runs plus ``result.smoothing`` steps to its last logged step.

    Raises:
        ValueError: the result has no complete runs.
    """
    if result.curves.empty:
        raise ValueError(f"{result.key}: no complete pair, no curve to read")
    end = int(result.curves["step"].max())
    esc = plateau_escape(result.runs, entropy)["escape_step"]
    latest = float(esc.max()) if esc.notna().any() else math.nan
    start = end // 2 if math.isnan(latest) else int(latest) + result.smoothing
    if start >= end:
        start, latest = end // 2, math.nan
    return Window(start, end, int(esc.notna().sum()), len(esc), latest, result.smoothing)


@dataclass(frozen=True)
class CurveFeatures:
    """A figure's features (:func:`curve_features`): the window, each feature with its
    Holm-adjusted p-value and verdict, in table order."""

    key: str
    window: Window
    features: list
    p_holm: np.ndarray
    verdicts: list
    paper: dict  # variant → the paper's final ΔL
    confidence: float
    subset: bool = False  # read at some of the figure's variants only

    def counts(self) -> dict:
        """Verdict → how many features have it."""
        return pd.Series(self.verdicts).value_counts().to_dict()


def curve_features(result, entropy: float) -> CurveFeatures | None:
    """The features of ``result``'s figure (:class:`CurveFeatures`), or ``None`` for a figure
    whose paper gives no curves or with fewer than two complete variants. Each course uses the
    drawn curve (the training-loss ΔL, smoothed as the figure draws it); the lowest end and
    the order use the final validation ΔL of the final table. ``entropy``: the corpus's unigram
    entropy (nats/token, :func:`gtalib.book.analysis.curves.corpus_entropy`), which places the
    window (:func:`feature_window`).

    Within a book build, computed once per figure result and entropy and loaded by every later
    call (module docstring)."""
    return shared_value(derived_file(result, "features", float(entropy)),
                        lambda: _curve_features(result, entropy))


def _curve_features(result, entropy: float) -> CurveFeatures | None:
    """:func:`curve_features`, computed."""
    fig = ablation(result.key)
    variants = [v for v in result.complete if v in fig.paper_curves]
    if not fig.paper_curves or len(variants) < 2:
        return None
    window = feature_window(result, entropy)
    C, _, seeds = ft.curve_array(result.curves, variants, window.start)
    fin = result.deltas
    F = (fin[fin["variant"].isin(variants) & fin["seed"].isin(seeds)]
         .pivot(index="seed", columns="variant", values="delta")[variants].to_numpy())
    conf = result.confidence
    out = ft.course(C, variants, {v: fig.paper_course(v) for v in variants}, conf)
    if fig.top_curve in variants:
        out.append(ft.top_margin(C, variants, fig.top_curve, conf))
    if fig.slowest_fall in variants:
        out.append(ft.slowest_margin(C, variants, fig.slowest_fall, fig.paper_course(
            fig.slowest_fall), conf))
    if fig.lowest_end in variants:
        out.append(ft.lowest_margin(F, variants, fig.lowest_end, conf))
    if len(variants) > 2:  # a spread and an order need three curves to mean anything
        out.append(ft.convergence(C, fig.paper_convergence(variants), conf))
        out.append(ft.order(F, [fig.paper_final(v) for v in variants], conf))
    p_holm, verdicts = ft.feature_verdicts(out, conf)
    paper = [v for v in result.variants if not is_user_variant(v)]  # a user's are no subset
    subset = set(paper or variants) != set(ablation(result.key).variants_at(result.preset))
    return CurveFeatures(result.key, window, out, p_holm, verdicts,
                         {v: fig.paper_final(v) for v in variants}, conf, subset)


#: The paper's column: its curves read by eye from the first logged point to 100 B tokens.
PAPER_COLUMN = "paper (≈, first point → 100 B tokens)"


def _paper_words(f, cf: CurveFeatures) -> str:
    fig = ablation(cf.key)
    if f.kind == "course":
        (_, y0), (_, y1) = fig.paper_curves[f.variant][0], fig.paper_curves[f.variant][-1]
        return f"{y0:.3f} → {y1:.3f}"
    if f.kind == "convergence":
        firsts = [fig.paper_curves[v][0][1] for v in cf.paper]
        lasts = [fig.paper_curves[v][-1][1] for v in cf.paper]
        if np.std(firsts) == 0:  # a ratio of spreads from none: the values themselves
            return f"{firsts[0]:.3f} → {min(lasts):.3f}–{max(lasts):.3f}"
        return f"{np.std(lasts) / np.std(firsts):.2f}"
    if f.kind == "order":
        # tied values (several curves end at ≈ 0.020) share a rank: "=" between them
        ties = {}
        for v in sorted(cf.paper, key=lambda v: -cf.paper[v]):
            ties.setdefault(round(cf.paper[v], 4), []).append(display_name(v))
        return " > ".join(" = ".join(names) for names in ties.values())
    knots = fig.paper_curves[f.variant]
    if f.kind == "top":  # its first knots are read too coarsely to show it: the paper's drawing
        return "highest"
    if f.kind == "slowest":
        return f"falls slowest: {knots[0][1]:.3f} → {knots[-1][1]:.3f}"
    return f"lowest at 100 B: {knots[-1][1]:.3f}"


def _way(cf: CurveFeatures) -> str:
    """What the paper's curves of these variants do toward the end."""
    return "close up" if ablation(cf.key).paper_convergence(list(cf.paper)) < 0 else "spread out"


def _number(kind: str, x: float) -> str:
    """A feature's value as printed: a ratio or τ to 2 decimals, nats to 4 with a sign."""
    return f"{x:.2f}" if kind in ("convergence", "order") else f"{x:+.4f}"


def features_table(cf: CurveFeatures) -> pd.DataFrame:
    """The features table as printed: one row per feature, the paper's feature and value, this
    build's value with its interval, the Holm-adjusted p-value and the verdict (what each row
    measures: the methods chapter, "The curves read feature by feature")."""
    rows = []
    for f, p, verdict in zip(cf.features, cf.p_holm, cf.verdicts):
        name = NAMES[f.kind].format(v=display_name(f.variant) if f.variant else "", way=_way(cf))
        interval = (f"n/a ({plural(f.n, 'pair')})" if math.isnan(f.low) else
                    f"[{_number(f.kind, f.low)}, {_number(f.kind, f.high)}]")
        rows.append({"feature": name, PAPER_COLUMN: _paper_words(f, cf),
                     "this build": _number(f.kind, f.estimate),
                     f"{cf.confidence:.0%} interval": interval,
                     "p (Holm)": "n/a" if math.isnan(p) else f"{p:.2g}", "verdict": verdict})
    return pd.DataFrame(rows).set_index("feature")


def show_features(cf: CurveFeatures | None) -> None:
    """Display a curve figure's features table (:func:`features_table`); nothing where there
    are no curves to read (``cf`` is ``None``: the page's counts say *not measured*)."""
    if cf is not None:
        display(table_style(features_table(cf).style).hide(names=True))


# ---------------------------------------------------------------------------------------------
# The data-order check
# ---------------------------------------------------------------------------------------------

def data_order_deltas(key: str, plan, run_dir, source: str = "build") -> pd.DataFrame:
    """The final ΔL of the figure's data-order runs (:attr:`gtalib.book.design.plan.Plan.data_order_refs`):
    ``[variant, data_order, delta]``, one row per complete pair; empty where the plan has none.
    Only runs this store holds or the records hold are read (nothing is trained here)."""
    refs = plan.data_order_refs.get(key, ())
    rows = []
    for d in sorted({dict(r.train)["data_seed"] for r in refs}):
        col = collect_runs([r for r in refs if dict(r.train)["data_seed"] == d], plan, run_dir,
                           source=source)
        if col.runs.empty:
            continue
        for _, row in final_deltas(col.runs).iterrows():
            rows.append((row["variant"], d, float(row["delta"])))
    return pd.DataFrame(rows, columns=["variant", "data_order", "delta"])


def data_order_check(result, orders: pd.DataFrame) -> pd.DataFrame:
    """Each variant's final verdict with the data order's variance added
    (:func:`gtalib.book.analysis.stats.data_order_stats`): the final ΔL over seeds (data order
    0) and, for the pair at seed 0, its ΔL at every data order measured (0 included). The
    variants are one family, as in the final table: Holm's procedure at the level of the
    figure's last look (:func:`gtalib.book.analysis.sequential.holm_level`).

    Returns:
        DataFrame by variant: ``sd seeds`` (of its final ΔL over the seeds, data order 0),
        ``sd orders`` (of the pair at seed 0 over its data orders), ``data orders, ΔL, low,
        high`` (the interval), ``dof, p, verdict, final verdict`` (the figure's final table's)
        and ``flipped`` (the two verdicts differ); empty without data-order runs.
    """
    if orders.empty or result.final.empty:
        return pd.DataFrame()
    fin = result.deltas
    rows = []
    for v in result.final.index:
        at = fin[fin["variant"] == v].sort_values("seed")
        mine = orders[orders["variant"] == v]
        if at.empty or mine.empty or 0 not in set(at["seed"]):
            continue
        seed0 = float(at.loc[at["seed"] == 0, "delta"].iloc[0])
        st = data_order_stats(at["delta"], [seed0, *mine.sort_values("data_order")["delta"]],
                              result.confidence)
        rows.append((v, st.sd_init, st.sd_data, st.k, st.mean, st.low, st.high, st.dof, st.p))
    table = pd.DataFrame(rows, columns=["variant", "sd seeds", "sd orders", "data orders", "ΔL",
                                        "low", "high", "dof", "p"])
    if table.empty:
        return table
    table = table.set_index("variant")
    looks = tuple(result.looks) or (int(result.final["seeds"].max()),)
    alpha = 1 - result.confidence
    levels = [math.nan] + [holm_level(looks, alpha, d, -1) for d in range(1, len(table) + 1)]
    reject = holm_rejects(table["p"].to_numpy(float), np.array(levels))
    paper = ablation(result.key)
    table["verdict"] = [
        ("agrees" if math.copysign(1, m) == math.copysign(1, paper.paper_final(v)) else "differs")
        if r else "within noise" for v, m, r in zip(table.index, table["ΔL"], reject)]
    table["final verdict"] = result.final.loc[table.index, "verdict"]
    table["flipped"] = table["verdict"] != table["final verdict"]
    return table


def joint_check(result, base, orders: pd.DataFrame) -> pd.DataFrame:
    """:func:`data_order_check` of a figure read in the joint design: the data-order check of
    its one-order pairs (``base``, every pair at data order 0, and ``orders``, the pair at seed
    0 at other orders), beside each variant's verdict over the joint pairs (``result``, pair k
    at seed k and data order k) and the variance of a pair's ΔL split by source over all three
    sets (:func:`gtalib.book.analysis.stats.variance_components`).

    Returns:
        :func:`data_order_check`'s table (its ``final verdict`` is the verdict at data order 0)
        with ``joint verdict``, ``joint ΔL``, ``sd joint`` (over the joint pairs), ``changed``
        (the verdict at data order 0 is not the joint one) and, per source of
        :data:`~gtalib.book.analysis.stats.VARIANCE_SOURCES`, ``share <source>`` with its
        interval ``share <source> low/high``; empty where either design has no complete
        variant.
    """
    table = data_order_check(base, orders)
    if table.empty or result.final.empty:
        return pd.DataFrame()
    one, joint = base.deltas, result.deltas
    rows = {}
    for v in table.index:
        if v not in result.final.index:
            continue
        # every pair once: (seed, order) → ΔL; the pair at seed 0, order 0 is in all three sets
        cells = {(int(r.seed), 0): r.delta for r in one[one["variant"] == v].itertuples()}
        cells.update({(0, int(r.data_order)): r.delta
                      for r in orders[orders["variant"] == v].itertuples()})
        cells.update({(int(r.seed), int(r.seed)): r.delta
                      for r in joint[joint["variant"] == v].itertuples()})
        (seed, order), delta = zip(*cells), list(cells.values())
        try:
            vc = variance_components(seed, order, delta, result.confidence)
        except ValueError:  # too few pairs in one of the three sets here
            continue
        row = {"joint verdict": result.final.loc[v, "verdict"],
               "joint ΔL": float(result.final.loc[v, "ΔL"]), "sd joint": vc.sd_joint}
        for src in VARIANCE_SOURCES:
            row.update({f"share {src}": vc.share[src], f"share {src} low": vc.share_low[src],
                        f"share {src} high": vc.share_high[src]})
        rows[v] = row
    if not rows:
        return pd.DataFrame()
    table = table.loc[list(rows)].join(pd.DataFrame.from_dict(rows, orient="index"))
    table["changed"] = table["final verdict"] != table["joint verdict"]
    return table


def data_order_table(result, plan, run_dir, source: str = "build") -> pd.DataFrame:
    """:func:`data_order_check` of ``result``'s figure with its data-order runs read
    (:func:`data_order_deltas`), or :func:`joint_check` where the figure is read in the joint
    design (:attr:`gtalib.book.design.plan.Plan.one_order_refs`): the one call of every page and
    snippet that shows it.

    Within a book build, computed once per figure result, plan, run store and source and loaded
    by every later call (module docstring)."""
    path = derived_file(result, "data-order", plan.preset, plan.seeds, plan.max_steps,
                        str(resolve_run_dir(run_dir)), source)
    return shared_value(path, lambda: _data_order_table(result, plan, run_dir, source))


def _data_order_table(result, plan, run_dir, source):
    """:func:`data_order_table`, computed."""
    orders = data_order_deltas(result.key, plan, run_dir, source)
    if result.key not in plan.one_order_refs:
        return data_order_check(result, orders)
    base = ablation_result(result.key, plan, run_dir, confidence=result.confidence,
                           source=source, one_order=True)
    return joint_check(result, base, orders)


def data_order_facts(table: pd.DataFrame, key: str, plan) -> dict[str, str]:
    """What a page states of its figure's data order (``table``: its :func:`data_order_table`):
    ``design`` (``"joint"``: pair *k* at seed *k* and data order *k*; ``"one order"``: every
    pair at data order 0), ``orders`` (the data orders its pair at seed 0 repeats at, those
    the plan reads or, where the set is declared but not all recorded, those declared;
    ``"none"``), ``order_read`` (``"yes"``/``"no"``: the repeats are read here), and
    ``order_changes`` (:func:`gtalib.book.chapters.verdict_parts.order_changes`)."""
    refs = plan.data_order_refs.get(key, ())
    orders = (sorted({dict(r.train)["data_seed"] for r in refs}) if refs else
              list(ablation(key).data_orders_declared.get(plan.preset, ())))
    return {"design": "joint" if key in plan.one_order_refs else "one order",
            "orders": and_join(list(map(str, orders))) if orders else "none",
            "order_read": "yes" if len(table) else "no",
            "order_changes": order_changes(table)}


def format_data_order(table: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """The data-order table as printed (a joint-design figure's: its verdicts by design), its
    columns named as the methods chapter's "Data order" explains them."""
    if is_joint(table):
        out = pd.DataFrame({
            "verdict, joint": table["joint verdict"],
            "verdict, order 0": table["final verdict"],
            "+ order variance": table["verdict"],
            "ΔL, joint": table["joint ΔL"].map("{:+.4f}".format),
            "ΔL, order 0": table["ΔL"].map("{:+.4f}".format),
        })
    else:
        out = pd.DataFrame({
            # of the pair's ΔL, not of one arm's loss (the final table's "seed sd")
            "sd seeds": table["sd seeds"].map("{:.4f}".format),
            "sd orders": table["sd orders"].map("{:.4f}".format),
            "ΔL": table["ΔL"].map("{:+.4f}".format),
            f"{confidence:.0%} interval": [
                f"[{lo:+.4f}, {hi:+.4f}]" for lo, hi in zip(table["low"], table["high"])],
            "verdict": table["verdict"],
            "verdict, order 0": table["final verdict"],  # the figure's final table's
            "changed?": ["yes" if f else "no" for f in table["flipped"]],
        })
    out.index = pd.Index([display_name(v) for v in table.index], name="variant")
    return out


def format_variance(table: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """A joint-design figure's variance table as printed: the spread of ΔL (nats) over the
    seeds at data order 0, over the data orders at seed 0 and over the joint pairs, and each
    source's share of the variance with its interval (:func:`joint_check`)."""
    out = pd.DataFrame({
        "sd seeds": table["sd seeds"].map("{:.4f}".format),
        "sd orders": table["sd orders"].map("{:.4f}".format),
        "sd joint": table["sd joint"].map("{:.4f}".format),
        **{f"share: {src}" if src == VARIANCE_SOURCES[0] else src: [
            f"{m:.0%} [{lo:.0%}, {hi:.0%}]" if math.isfinite(m) else "—"
            for m, lo, hi in zip(table[f"share {src}"], table[f"share {src} low"],
                                 table[f"share {src} high"])] for src in VARIANCE_SOURCES},
    })
    out.index = pd.Index([display_name(v) for v in table.index], name="variant")
    return out


def show_data_order(table: pd.DataFrame, result) -> None:
    """Display the data-order table of ``result``'s page from its :func:`data_order_table`
    (a joint-design figure's, at data order 0, folded with its variance table); nothing
    without one (the page's facts say so, :func:`data_order_facts`)."""
    if table.empty:
        return
    printed = format_data_order(table, result.confidence)
    styled = table_style(printed.style,
                         prose=[c for c in printed.columns if c.startswith("verdict")])
    if not is_joint(table):
        display(styled)
        return
    variance = table_style(format_variance(table, result.confidence).style)
    # raw HTML in Markdown gets no scroll box from the theme: each table gets its own, so
    # that it scrolls sideways inside the column on a phone (the book's stylesheet)
    boxed = [f'<div class="pst-scrollable-table-container">{t.to_html()}</div>'
             for t in (styled, variance)]
    display(Markdown(f"<details><summary>Data order 0</summary>\n\n{boxed[0]}\n\n{boxed[1]}"
                     "\n\n</details>"))


def page_facts(result, features: CurveFeatures | None, orders: pd.DataFrame,
               plan) -> dict[str, str]:
    """The values a curve figure's page states of its features and data order, by name (stated
    beside :func:`gtalib.book.chapters.ablation.page_facts`, as ``fig_<name>``): ``features``
    (:func:`summary_counts` of ``features``, its :func:`curve_features`), the window's ``window``, ``window_fraction``,
    ``escape`` and ``escaped`` (:meth:`Window.facts`; ``"—"`` without features) and
    :func:`data_order_facts` of ``orders`` (its :func:`data_order_table`)."""
    window = features.window.facts() if features is not None else {}
    return {"features": summary_counts(features),
            **{k: window.get(k, "—") for k in ("window", "window_fraction", "escape", "escaped")},
            **data_order_facts(orders, result.key, plan)}


# ---------------------------------------------------------------------------------------------
# The claims page's lines
# ---------------------------------------------------------------------------------------------

#: The heading of a curve page's features section, "The curves, feature by feature", as Sphinx
#: anchors it: what the claims page links to.
ANCHOR = "the-curves-feature-by-feature"


def overview_lines(results: dict, plan, run_dir, entropy: float, source: str = "build") -> str:
    """One Markdown line per ablation figure for the claims page: for a curve figure, how many
    of its features agree, differ or are within noise at this scale (:func:`summary_counts`,
    linking to the page's table); for a figure the paper prints final values of only, that it
    has no curves to read; then its design and the verdicts another data order changes
    (:func:`data_order_facts`), e.g. ``"- **Initialisation ablation**: 3 of 7 agree, 0 differ,
    4 within noise ([features](init_ablation.ipynb#…)); joint design, verdicts another data
    order changes: GQA"`` (the designs: the methods chapter's "Data order").
    ``results``: ablation key → result
    (:func:`gtalib.book.chapters.ablation.ablation_results`)."""
    lines = []
    for key, result in results.items():
        fig = ablation(key)
        if fig.paper_curves:
            cf = curve_features(result, entropy) if result.complete else None
            read = f"{summary_counts(cf)} ([features]({fig.notebook}.ipynb#{ANCHOR}))"
        else:
            read = "final values only (the paper prints no curves)"
        facts = data_order_facts(data_order_table(result, plan, run_dir, source), key, plan)
        lines.append(f"- **{fig.heading}**: {read}; {facts['design']} design, verdicts another "
                     f"data order changes: {facts['order_changes']}")
    return "\n".join(lines)


def methods_markdown(results: dict, plan, run_dir, entropy: float) -> str:
    """The methods chapter's numbers of this build for the ablation figures, a Markdown table:
    one row per figure and variant, ``figure, window`` (steps, :meth:`Window.facts`; "—" for a
    figure the paper prints final values of only), ``variant``, ``sd orders`` and ``sd seeds``
    (nats, of the final ΔL over the data orders of the pair at seed 0 and over the seeds at
    data order 0; "—" where it has no data-order runs here) and, for a joint-design figure,
    ``shares`` (of a pair's ΔL variance: initialisation seed / data order / residual); "—"
    alone where no figure was built."""
    rows = []
    for key, result in results.items():
        fig = ablation(key)
        if result.curves.empty:
            continue
        window = feature_window(result, entropy).facts()["window"] if fig.paper_curves else "—"
        table = data_order_table(result, plan, run_dir)
        if table.empty:
            rows.append((fig.heading, window, "—", "—", "—", "—"))
        for v, r in table.iterrows():
            shares = (" / ".join(f"{r[f'share {src}']:.0%}" for src in VARIANCE_SOURCES)
                      if is_joint(table) else "—")
            rows.append((fig.heading, window, display_name(v), f"{r['sd orders']:.4f}",
                         f"{r['sd seeds']:.4f}", shares))
    if not rows:
        return "—\n"
    out = pd.DataFrame(rows, columns=["figure", "window", "variant", "sd orders", "sd seeds",
                                      "shares"])
    return md_table(out, index=False) + "\n"
