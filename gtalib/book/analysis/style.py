"""What every figure and table of the book shares: the seaborn style, each variant's marker and
dash pattern (a second cue besides the paper's colours, :data:`gtalib.book.design.names.VARIANT_COLORS`),
a y-range that follows the plotted values, from how many seeds a figure draws an interval
(:data:`MIN_BAND_SEEDS`), the tables' styling (best **bold**, second underlined; cell padding) and
small text helpers (:func:`plural`, :func:`range_text`).

Reads no other book module (a figure spec only through its ``variants``, a list of variant names).
Units: whatever the caller plots (ΔL in nats on the book's figures).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from gtalib.book.design.names import and_join  # noqa: F401  (the pages' word lists)


def set_style() -> None:
    """The book's seaborn style (white grid, readable at page width)."""
    sns.set_theme(style="whitegrid", context="notebook")
    pd.set_option("display.max_colwidth", None)  # a table cell (a verdict) is never cut
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 100, "legend.fontsize": 8})


#: Per-variant markers and dash patterns, assigned by the variant's position in its figure's
#: legend order (``Ablation.variants``): a second cue besides the paper's colours.
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h")
_DASHES = ("--", "-.", (0, (1, 1.5)), (0, (6, 2, 1, 2, 1, 2)), (0, (8, 3)), (0, (3, 1, 1, 1)),
           (0, (2, 2)), (0, (10, 2, 2, 2)), (0, (4, 1)))


def variant_style(fig_spec, variant: str) -> tuple[str, object]:
    """(marker, dash pattern) of ``variant`` in ``fig_spec`` (stable across both panels)."""
    i = fig_spec.variants.index(variant) if variant in fig_spec.variants else 0
    return _MARKERS[i % len(_MARKERS)], _DASHES[i % len(_DASHES)]


def curve_limits(values, margin: float = 0.08) -> tuple[float, float]:
    """y-range of a panel from the values it plots (and 0, the line of no effect), widened by
    ``margin`` of the span on each side; ``(-1, 1)`` without any finite value."""

    v = np.asarray(list(values), dtype=float)
    v = np.append(v[np.isfinite(v)], 0.0)
    lo, hi = float(v.min()), float(v.max())
    pad = margin * (hi - lo) if hi > lo else 1.0
    return lo - pad, hi + pad


#: Fewest seeds (pairs) for which a figure draws the Student-t interval of the mean: with two,
#: ``t_{0.975, 1} = 12.7`` makes the interval wider than the curves' whole range.
MIN_BAND_SEEDS = 3


#: Cell padding and a smaller font for every styled table (the book theme styles only its own
#: tables; pandas Stylers would otherwise print numbers without spacing).
_TABLE_CSS = [
    {"selector": "td, th", "props": "padding: 2px 5px; text-align: right; font-size: 0.8em;"},
    {"selector": "th.row_heading, th.index_name",
     "props": "text-align: left; white-space: nowrap;"},
    # a row whose sentence wraps reads from its first line, beside its name
    {"selector": "tbody td, tbody th", "props": "vertical-align: top;"},
]


#: The characters of a verdict that one line of a 14em column holds at the tables' font size.
VERDICT_LINE = 24


def table_style(styler, prose=()):
    """The book's table style on a pandas Styler, with every text cell and every row and column
    label HTML-escaped (a "<" in a claim or a verdict is shown, never read as markup; numeric
    columns keep their formatters).

    Numbers are right-aligned, to compare digits; the columns named in ``prose`` (a claim, what
    was measured) and a ``verdict`` column hold sentences and read left to right, their
    headings aligned with them. A verdict column that holds a sentence (longer than
    :data:`VERDICT_LINE` characters) is given room for it."""
    data = styler.data
    text = [c for c in data.columns if data[c].map(lambda x: isinstance(x, str)).any()]
    if text:
        styler = styler.format(escape="html", subset=text)
    styler = styler.format_index(escape="html", axis=0).format_index(escape="html", axis=1)
    styler = styler.set_table_styles(_TABLE_CSS, overwrite=False)
    # a verdict sentence gets room, so that its row does not grow to eight lines in the text
    # column; a short one ("agrees at 10 pairs") leaves the room to the other columns
    sentence = "verdict" in data and data["verdict"].astype(str).str.len().max() > VERDICT_LINE
    left = {c: [{"selector": "td, th", "props": "text-align: left;"}]
            + ([{"selector": "td", "props": "min-width: 14em;"}]
               if c == "verdict" and sentence else [])
            for c in data.columns if c == "verdict" or c in prose}
    return styler.set_table_styles(left, overwrite=False) if left else styler


def style_best(df: pd.DataFrame, lower_is_better: bool = True, fmt: str = "{:.3f}"):
    """A pandas Styler marking the best value of each column **bold** and the second best
    underlined (the paper's table convention)."""

    def mark(col: pd.Series):
        order = col.rank(method="min", ascending=lower_is_better)
        return ["font-weight: bold" if r == 1 else "text-decoration: underline" if r == 2 else ""
                for r in order]

    return table_style(df.style.apply(mark, axis=0).format(fmt))


def md_table(df: pd.DataFrame, index: bool = True) -> str:
    """A pandas frame as a Markdown pipe table (``pandas.DataFrame.to_markdown``, tabulate's
    GitHub format, every cell printed as ``str`` of its value), with its index as the first
    column unless ``index`` is False; a ``|`` inside a cell (``|ΔL|``) is escaped so that it does
    not end the cell."""
    def cell(x) -> str:
        return str(x).replace("|", "\\|")

    out = df.reset_index(names=df.index.name or "") if index else df
    return out.map(cell).rename(columns=cell).to_markdown(
        index=False, tablefmt="github", disable_numparse=True)


def plural(n, word: str) -> str:
    """``"1 thread"``, ``"2 threads"``: ``n`` followed by ``word``, pluralised with an ``s``."""
    return f"{n} {word}" + ("" if str(n) == "1" else "s")


def range_text(values, fmt: str = ".3f") -> str:
    """``"0.026–0.035"``: the smallest and largest of ``values`` formatted with ``fmt``, or one
    value when both print alike."""
    lo, hi = format(float(min(values)), fmt), format(float(max(values)), fmt)
    return lo if lo == hi else f"{lo}–{hi}"
