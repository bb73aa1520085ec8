"""The parts of an ablation page's verdict lead that come from its curve figure's tables: how
its curve features read (:func:`summary_counts`) and what the data order does to its verdicts
(:func:`data_order_sentence`). Shared by the ablation chapter
(:func:`gtalib.book.chapters.ablation.verdict_lead`) and the curve-feature chapter
(:mod:`gtalib.book.chapters.curve_features`, which builds those tables from the ablation
results). Reads :mod:`gtalib.book.analysis.style` and :mod:`gtalib.book.design.names`.
"""

from __future__ import annotations

import pandas as pd

from gtalib.book.analysis.style import and_join
from gtalib.book.design.names import display_name


def is_joint(table: pd.DataFrame) -> bool:
    """Whether a data-order table (:func:`gtalib.book.chapters.curve_features.data_order_table`)
    is a joint-design figure's (:func:`gtalib.book.chapters.curve_features.joint_check`)."""
    return "joint verdict" in table


def summary_counts(cf) -> str:
    """How many of a figure's features reappear, differ or are within noise, e.g. "4 of 13
    agree, 6 differ, 3 within noise" (``cf``: a
    :class:`gtalib.book.chapters.curve_features.CurveFeatures`, or ``None``)."""
    if cf is None:
        return "no curve features (fewer than two complete variants)"
    c = cf.counts()
    undetermined = len(cf.verdicts) - sum(c.get(k, 0) for k in ("agrees", "differs",
                                                                 "within noise"))
    return (f"{c.get('agrees', 0)} of {len(cf.verdicts)} agree, {c.get('differs', 0)} differ, "
            f"{c.get('within noise', 0)} within noise"
            + (f", {undetermined} undetermined (too few pairs)" if undetermined else ""))


def data_order_sentence(orders) -> str:
    """One sentence on what the data order's variance does to the verdicts (``orders``: a
    :func:`gtalib.book.chapters.curve_features.data_order_table`, with ``verdict``,
    ``final verdict`` and ``flipped`` by variant); ``""`` without data-order runs."""
    if orders is None or orders.empty:
        return ""
    where = "([another data order](#another-data-order), below)"
    if is_joint(orders):
        changed = [display_name(v) for v in orders.index[orders["changed at order 0"]]]
        return (" Each pair read its own data order, so these verdicts hold for any data order;"
                f" with every pair at data order 0 {where}, "
                + (f"{and_join(changed)} would read otherwise." if changed else
                   "every verdict is the same."))
    if not orders["flipped"].any():
        return f" With the data order's variance added {where}, every verdict stands."
    moves = orders[orders["flipped"]].groupby(["final verdict", "verdict"], sort=False)
    said = [f"{and_join(display_name(v) for v in g.index)} {'moves' if len(g) == 1 else 'move'} "
            f"from *{old}* to *{new}*" for (old, new), g in moves]
    kept = [display_name(v) for v in orders.index[~orders["flipped"]
                                                   & (orders["verdict"] != "within noise")]]
    return (f" With the data order's variance added {where}, " + "; ".join(said)
            + (f"; {and_join(kept)} {'keeps its' if len(kept) == 1 else 'keep their'} "
               "verdict." if kept else "."))
