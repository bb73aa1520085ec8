"""The parts of an ablation page's verdict that come from its curve figure's tables: how its
curve features read (:func:`summary_counts`) and which verdicts another data order changes
(:func:`order_changes`). Shared by the ablation chapter
(:func:`gtalib.book.chapters.ablation.page_facts`) and the curve-feature chapter
(:mod:`gtalib.book.chapters.curve_features`, which builds those tables from the ablation
results). Reads :mod:`gtalib.book.analysis.style` and :mod:`gtalib.book.design.names`.
"""

from __future__ import annotations

import pandas as pd

from gtalib.book.analysis.style import and_join
from gtalib.book.design.names import display_name

#: What a page states where a figure has no table to read (no features, no data-order runs).
NOT_MEASURED = "not measured"


def is_joint(table: pd.DataFrame) -> bool:
    """Whether a data-order table (:func:`gtalib.book.chapters.curve_features.data_order_table`)
    is a joint-design figure's (:func:`gtalib.book.chapters.curve_features.joint_check`)."""
    return "joint verdict" in table


def summary_counts(cf) -> str:
    """How many of a figure's features agree, differ or are within noise, e.g. ``"4 of 13
    agree, 6 differ, 3 within noise"``, with ``", 2 undetermined"`` where a feature has too few
    pairs (``cf``: a :class:`gtalib.book.chapters.curve_features.CurveFeatures`, or ``None``:
    :data:`NOT_MEASURED`)."""
    if cf is None:
        return NOT_MEASURED
    c = cf.counts()
    undetermined = len(cf.verdicts) - sum(c.get(k, 0) for k in ("agrees", "differs",
                                                                 "within noise"))
    return (f"{c.get('agrees', 0)} of {len(cf.verdicts)} agree, {c.get('differs', 0)} differ, "
            f"{c.get('within noise', 0)} within noise"
            + (f", {undetermined} undetermined" if undetermined else ""))


def changed_variants(orders) -> list[str]:
    """The variants (display names) whose verdict another data order changes (``orders``: a
    :func:`gtalib.book.chapters.curve_features.data_order_table`): in a joint-design figure's
    table, those whose verdict with every pair at data order 0 is not the joint one
    (``changed``); otherwise those whose verdict the data order's variance turns
    (``flipped``); none without a table."""
    if orders is None or orders.empty:
        return []
    flags = orders["changed"] if is_joint(orders) else orders["flipped"]
    return [display_name(v) for v in orders.index[flags.astype(bool)]]


def order_changes(orders) -> str:
    """:func:`changed_variants` as a page states it: ``"GQA and MLA"``, ``"none"``, or
    :data:`NOT_MEASURED` without data-order runs."""
    if orders is None or orders.empty:
        return NOT_MEASURED
    names = changed_variants(orders)
    return and_join(names) if names else "none"
