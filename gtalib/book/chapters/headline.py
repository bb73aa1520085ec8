"""The introduction's headline: every claim of the paper in one line (what the paper says, what
this build measured, the verdict), one overview figure of the ablations (each variant's
final ΔL with its interval beside the paper's value, a forest plot coloured by verdict) and how
many runs this build trained and how they compared with their records (:func:`run_facts`, the
numbers of ``book/intro.md``'s sentence about them).

Everything comes from the claims page's table (:func:`gtalib.book.chapters.claims.claims_table`,
computed once per build) and from each figure's result
(:func:`gtalib.book.chapters.ablation.ablation_results`, computed once per build), so that the
headline and the pages cannot disagree. ΔL in nats.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from gtalib.book.analysis.collect import OUTCOME_WORDS
from gtalib.book.analysis.stats import VERDICTS, aggregate_verdicts
from gtalib.book.analysis.style import and_join, plural, set_style
from gtalib.book.chapters.ablation import near_zero_claim
from gtalib.book.chapters.claims import NO_RUNS
from gtalib.book.design.chapters import ablation_notebooks
from gtalib.book.design.figures import ABLATIONS
from gtalib.book.design.figures import claims as paper_claims
from gtalib.book.design.names import display_name

#: Colour and marker of each verdict, in the figure and the headline table (colour-blind safe
#: enough with the marker: filled circle, filled square, hollow circle).
VERDICT_STYLE = {"agrees": ("#1a7f37", "o", True), "differs": ("#c2185b", "s", True),
                 "within noise": ("#5f6368", "o", False)}
#: The headline's figure files, written beside ``headline.md``: one row of panels for a wide
#: screen, two rows for a phone (the page shows one or the other, by CSS).
FIGURE_FILES = {layout: f"headline-forest-{layout}.png" for layout in ("wide", "narrow")}
#: Per layout: the figure's width (inches) and its smallest font (points). Each figure is shown
#: as wide as the text column (:data:`COLUMN_PX`), so its text shows at points × column px /
#: (72 × width): 8 pt at 8.5 in ≈ 10 px in the 772-px column at 1400 px, 9 pt at 3.6 in ≈ 12 px
#: in the 358-px column of a 390-px phone.
LAYOUTS = {"wide": (8.5, 8), "narrow": (3.6, 9)}
#: The headline's words for a claim's verdict with the data order's variance added, and for a
#: joint-design figure's verdict with every pair at data order 0 (``book/intro.md`` says so).
ANY_ORDER, ORDER_0 = "any order", "order 0"
#: The class of a verdict in the headline (the book's stylesheet colours it by its word).
VERDICT_CLASS = "gtalib-verdict"
#: The run sources (:data:`gtalib.book.pipeline.snippets.RUN_SOURCES`) trained here.
TRAINED_HERE = ("trained in this build", "in the store before")
#: The file of the landing page's substitutions (:func:`run_facts`), beside ``headline.md``;
#: ``book/_ext/gtalib_publish.py`` hands its values to MyST.
SUBSTITUTIONS = "substitutions.json"
#: The book's text column (px) in which each layout is shown: at 1400 px and on a 390-px phone.
COLUMN_PX = {"wide": 772, "narrow": 358}


def verdict_word(verdict: str) -> str:
    """The verdict's word: ``"agrees"``, ``"differs"``, ``"within noise"``, ``"mixed"``,
    ``"not measured"`` (the claims table's longer texts cut at their first ``":"`` or ``" ("``,
    e.g. ``"mixed: agrees 7/9, within noise 2/9"`` → ``"mixed"``)."""
    word = str(verdict).split(":")[0].split(" (")[0].strip()
    return "not measured" if word.startswith("not measured") else word


def headline_table(claims: pd.DataFrame, data_orders: dict | None = None) -> pd.DataFrame:
    """One row per claim of the paper (the ranking and ≈ 0 rows folded into their claim's):
    ``claim`` (its number), ``source``, ``paper says`` (the claim's short line,
    :attr:`gtalib.book.design.figures.Claim.short`), ``measured`` (the claims table's column),
    ``verdict`` (the claims table's, counts of a mixed verdict included), ``ranking`` (the
    ranking claim's verdict, ``""`` where the claim ranks nothing), ``≈ 0`` (the verdict of its
    "≈ 0" part, :func:`gtalib.book.chapters.ablation.near_zero_claim`, ``""`` where it has none)
    ``any order`` (the
    claim's verdict with the data order's variance added, ``""`` where its figure has no
    data-order runs or is read in the joint design, whose verdict holds for any order already)
    and ``order 0`` (for a joint-design figure, its verdict with every pair at data order
    0; else ``""``).

    Args:
        claims: :func:`gtalib.book.chapters.claims.claims_table`.
        data_orders: ablation key → ``(column, verdict)`` (:func:`data_order_verdicts`);
            figures without data-order runs absent.
    Raises:
        KeyError: a claim of :func:`gtalib.book.design.figures.claims` is not in ``claims``.
    """
    rows = []
    for c in paper_claims():
        r = claims.loc[c.number]
        ranking, near_zero = f"{c.number} (ranking)", f"{c.number} (≈ 0)"
        rows.append({"claim": c.number, "source": c.source, "paper says": c.short,
                     "measured": r["measured"], "verdict": r["verdict"],
                     "ranking": claims.loc[ranking, "verdict"] if ranking in claims.index
                     else "",
                     "≈ 0": claims.loc[near_zero, "verdict"] if near_zero in claims.index
                     else "", ANY_ORDER: "", ORDER_0: ""})
        column, said = (data_orders or {}).get(c.source, ("", ""))
        if column:
            rows[-1][column] = said
    return pd.DataFrame(rows).set_index("claim")


def data_order_verdicts(tables: dict) -> dict:
    """Ablation key → ``(column, verdict)`` for :func:`headline_table`: its variants' verdicts
    aggregated as the claims are (:func:`gtalib.book.analysis.stats.aggregate_verdicts`, e.g.
    ``"mixed: within noise 7/9, agrees 2/9"``), with the data order's variance added
    (:data:`ANY_ORDER`) or, for a figure read in the joint design, with every pair at data
    order 0 (:data:`ORDER_0`). ``tables``: key → the figure's data-order table
    (:func:`gtalib.book.chapters.curve_features.data_order_table`); an empty one is left out."""
    return {key: (ORDER_0, aggregate_verdicts(table["final verdict"]))
            if "joint verdict" in table else (ANY_ORDER, aggregate_verdicts(table["verdict"]))
            for key, table in tables.items() if not table.empty}


_PLURAL = {"agrees": "agree", "differs": "differ"}


def _verdict_html(verdict: str) -> str:
    """A verdict as the headline prints it: its word in bold and coloured (a class of the
    book's stylesheet); a mixed verdict with its counts (``"mixed: 7 agree, 2 within noise"``),
    the reasons of the others on the claims page."""
    word = verdict_word(verdict)
    css = word.replace(" ", "-")
    counts = ""
    if word == "mixed":  # "mixed: agrees 7/9, within noise 2/9" (aggregate_verdicts)
        parts = [part.rsplit(" ", 1) for part in str(verdict).split(": ", 1)[1].split(", ")]
        counts = ": " + ", ".join(f"{n.split('/')[0]} {_PLURAL.get(v, v)}" for v, n in parts)
    return f'<strong class="{VERDICT_CLASS} {VERDICT_CLASS}-{css}">{word}</strong>{counts}'


def headline_markdown_table(table: pd.DataFrame) -> str:
    """The headline table as Markdown (MyST): each ablation claim's line links its page."""
    pages = ablation_notebooks()
    lines = ["| | paper | this build | verdict |", "|---|---|---|---|"]
    for number, r in table.iterrows():
        says = r["paper says"]
        if r["source"] in pages:
            head, _, rest = says.partition(": ")
            says = f"{{doc}}`{head} <generated/{pages[r['source']]}>`: {rest}"
        verdict = _verdict_html(r["verdict"])
        if r["ranking"]:
            verdict += f" · ranking {_verdict_html(r['ranking'])}"
        if r.get("≈ 0"):
            verdict += f" · ≈ 0 {_verdict_html(r['≈ 0'])}"
        for order in (ANY_ORDER, ORDER_0):
            if r.get(order):
                verdict += f" · {order}: {_verdict_html(r[order])}"
        lines.append(f"| {number} | {says} | {r['measured']} | {verdict} |")
    return "\n".join(lines) + "\n"


def forest_figure(results: dict, layout: str = "wide") -> plt.Figure:
    """The overview of the ablations: one panel per figure (``results``: key → its
    :class:`~gtalib.book.chapters.ablation.AblationResult`), a row per variant with this
    build's mean final ΔL and its 95 % t-interval (coloured and marked by the variant's
    verdict, :data:`VERDICT_STYLE`) and, just below it, the paper's final ΔL (≈, a black
    diamond; none where the paper gives none). ``layout``: ``"wide"`` (one row of panels) or
    ``"narrow"`` (one column, for a phone; :data:`LAYOUTS`).

    Raises:
        ValueError: ``layout`` not one of ``"wide"``, ``"narrow"``.
    """
    if layout not in FIGURE_FILES:
        raise ValueError(f"layout must be one of {tuple(FIGURE_FILES)}, got {layout!r}")
    set_style()
    keys = [k for k in ABLATIONS if k in results]
    rows = [max(len(results[k].final), 1) for k in keys] or [1]
    width, font = LAYOUTS[layout]
    scale = font / 7  # a row's and a panel's frame height grow with their text
    if layout == "wide":  # one row of panels, as tall as the longest
        grid, cols, heights = 1, max(len(keys), 1), [max(rows)]
    else:  # one panel a row, each as tall as its variants need
        grid, cols, heights = len(rows), 1, rows
    ncol = 4 if layout == "wide" else 1  # the legend's columns: one line, or one entry a line
    legend_in = 4 / ncol * (font + 1) * 1.5 / 72 + 0.12  # its lines at 1.5 × the font, inches
    panels_in = [0.7 * scale + 0.16 * scale * n for n in heights]
    fig, axes = plt.subplots(grid, cols, squeeze=False, gridspec_kw={"height_ratios": panels_in},
                             figsize=(width, sum(panels_in) + legend_in))
    for ax, key in zip(axes.flat, keys):
        _forest_panel(ax, key, results[key], font)
    handles = [Line2D([], [], color=c, marker=m, ls="-", mfc=c if filled else "white",
                      label=f"this build: {v}") for v, (c, m, filled) in VERDICT_STYLE.items()]
    handles.append(Line2D([], [], color="black", marker="D", ls="none", mfc="white",
                          label="paper (≈)"))
    fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=font + 1, frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout(rect=(0, legend_in / fig.get_figheight(), 1, 1), w_pad=0.6)
    return fig


def shown_verdicts(key: str, result) -> pd.Series:
    """The verdict the overview shows per variant of ablation ``key``'s result: its row's, except for
    a variant the paper calls ≈ 0, whose dot stands for that claim
    (:func:`gtalib.book.chapters.ablation.near_zero_claim`) and is labelled so."""
    final = result.final
    verdicts = final["verdict"].copy() if len(final) else pd.Series(dtype=str)
    for v in ABLATIONS[key].near_zero:
        if v in verdicts.index:
            verdicts[v] = near_zero_claim(result, v)[1]
    return verdicts


def _forest_panel(ax, key: str, result, font: float) -> None:
    """One ablation's rows of :func:`forest_figure` (``result``: its ablation result; ``font``:
    the smallest font, points)."""
    final = result.final
    ax.set_title(ABLATIONS[key].heading.removesuffix(" ablation"), fontsize=font + 2)
    ax.axvline(0.0, color="0.3", lw=0.8, ls=":")
    ax.tick_params(labelsize=font)
    ax.set_xlabel("final ΔL (nats)", fontsize=font)
    if final.empty:
        ax.text(0.5, 0.5, NO_RUNS, ha="center", va="center",
                transform=ax.transAxes, fontsize=font + 1, color="0.3")
        ax.set_yticks([])
        return
    n, shown = len(final), shown_verdicts(key, result)
    for i, (variant, r) in enumerate(final.iterrows()):
        y = n - 1 - i
        color, marker, filled = VERDICT_STYLE.get(shown[variant], VERDICT_STYLE["within noise"])
        if r["seeds"] >= 2:
            ax.plot([r["CI low"], r["CI high"]], [y, y], color=color, lw=1.6)
        ax.plot([r["ΔL"]], [y], marker=marker, color=color, ms=5,
                mfc=color if filled else "white", ls="none")
        if not math.isnan(r["paper ΔL (≈)"]):
            ax.plot([r["paper ΔL (≈)"]], [y - 0.3], marker="D", color="black", ms=3.5,
                    mfc="white", ls="none")
    ax.set_yticks(range(n))
    near = ABLATIONS[key].near_zero
    ax.set_yticklabels([display_name(v) + (" (≈ 0)" if v in near else "")
                        for v in reversed(final.index)])
    ax.set_ylim(-0.8, n - 0.4)


def forest_alt(results: dict) -> str:
    """The figure's alt text: what it shows, and each panel's verdict counts."""
    parts = []
    for key in ABLATIONS:
        shown = shown_verdicts(key, results[key]) if key in results else pd.Series(dtype=str)
        counts = shown.value_counts()
        said = [f"{plural(int(counts[v]), 'variant')} {v}" for v in VERDICTS if v in counts]
        said = and_join(said) if said else NO_RUNS
        parts.append(f"{ABLATIONS[key].heading.removesuffix(' ablation')}: {said}")
    return ("Forest plot of each variant's final ΔL, 95 % interval and paper value: "
            + "; ".join(parts) + ".")


def run_facts(counts: dict, outcomes: dict) -> dict[str, str]:
    """Where the runs the pages read come from and how those trained here compare with their
    records, by name, for the landing page's Markdown (MyST substitutions, ``{{ name }}`` in
    ``book/intro.md``, read from :data:`SUBSTITUTIONS`): ``runs_read`` (``"360 runs"``),
    ``runs_sources`` (each source with its count, ``"17 trained in this build and 343 read
    from records"``), ``runs_here`` (those trained here: by this build or earlier into its run
    store), ``runs_compared`` (those of them that have a record) and ``runs_outcomes`` (how
    these compared, ``"15 bit-identical and 2 within the envelope"``; ``"none"``).

    Args:
        counts: where the runs the pages read come from:
            :data:`gtalib.book.pipeline.snippets.RUN_SOURCES` → number.
        outcomes: this build's trained runs that have a record, by outcome
            (:data:`gtalib.training.records.OUTCOMES` → number).
    """
    sources = [f"{n} {k}" for k, n in counts.items() if n]
    compared = [f"{n} {OUTCOME_WORDS[k]}" for k, n in outcomes.items() if n]
    return {
        "runs_read": plural(sum(counts.values()), "run"),
        "runs_sources": and_join(sources) if sources else "none",
        "runs_here": f"{sum(counts.get(k, 0) for k in TRAINED_HERE)}",
        "runs_compared": f"{sum(outcomes.values())}",
        "runs_outcomes": and_join(compared) if compared else "none",
    }


def write_headline(claims: pd.DataFrame, results: dict, counts: dict, outcomes: dict,
                   out_dir: Path, image_dir: str = "generated",
                   data_orders: dict | None = None) -> str:
    """Write the headline's figures (:data:`FIGURE_FILES`) into ``out_dir`` and return the
    headline's Markdown (MyST, included by ``book/intro.md``, which names ``out_dir`` as
    ``image_dir``: an included file's image paths are read from the including page): the
    claims table (:func:`headline_table`, ``data_orders`` as there) and the figure (wide and
    narrow, :func:`forest_figure`); and write the runs' counts (:func:`run_facts`) into
    :data:`SUBSTITUTIONS` in ``out_dir``."""
    out_dir = Path(out_dir)
    (out_dir / SUBSTITUTIONS).write_text(json.dumps(run_facts(counts, outcomes), indent=1))
    for layout, name in FIGURE_FILES.items():
        fig = forest_figure(results, layout)
        fig.savefig(out_dir / name, dpi=200)
        plt.close(fig)
    alt = forest_alt(results).replace('"', "'")
    # no :width: (Sphinx would wrap each image in a link to itself, one of them hidden)
    images = "\n".join(f"```{{image}} {image_dir}/{name}\n:alt: {alt}\n:class: gtalib-{layout}\n"
                       f"```\n" for layout, name in FIGURE_FILES.items())
    return ("::::{container} gtalib-headline\n"
            + headline_markdown_table(headline_table(claims, data_orders)) + "\n"
            + images + "::::\n")
