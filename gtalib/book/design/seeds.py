"""The book's seed counts as a whole: the CLI's default and cap, and what a preset makes of the
book's count across all figures (:func:`seed_counts`, :func:`counts_words`,
:func:`ablation_looks`). A figure's own seeds and looks are methods of its spec
(:meth:`~gtalib.book.design.figure_plan.AblationPlan.seeds_at`,
:meth:`~gtalib.book.design.figure_plan.AblationPlan.looks_at`), which hold the policy.

The views below (preset → figure key → value) are read by the pages' words and the scripts; the
book's own code reads the specs, so that a figure added at run time is seen. Reads
:mod:`gtalib.book.design.figures`.
"""

from __future__ import annotations

from gtalib.book.design.figure_plan import DATA_ORDER_SEED, DEFAULT_SEEDS, MAX_SEEDS, check_seeds
from gtalib.book.design.figures import ABLATIONS, by_preset, figure_spec
from gtalib.book.design.names import and_join

__all__ = ["DATA_ORDER_SEED", "DEFAULT_SEEDS", "MAX_SEEDS", "check_seeds", "LADDER_KEYS",
           "DATA_ORDERS", "DATA_ORDERS_DECLARED", "JOINT_DECLARED", "JOINT", "counts_words",
           "ablation_looks", "seed_counts"]

#: The scale ladder's axes: counts of recorded runs, shown as recorded whatever the book asks.
LADDER_KEYS = ("ladder", "ladder_width")

# Views of the figure specs' design fields (gtalib.book.design.figures; the specs are the one
# place they are kept), preset -> figure key -> value, as of import; the book's own code reads
# the specs, so that a figure added at run time is seen.

#: Per preset, the curve figures whose pair at :data:`DATA_ORDER_SEED` is repeated at other data
#: orders and read by the book (:attr:`Ablation.data_orders
#: <gtalib.book.design.figures.Ablation.data_orders>`).
DATA_ORDERS: dict[str, dict[str, tuple[int, ...]]] = by_preset("data_orders")

#: The whole data-order design, declared before its first run (:attr:`Ablation.data_orders_declared
#: <gtalib.book.design.figures.Ablation.data_orders_declared>`).
DATA_ORDERS_DECLARED: dict[str, dict[str, tuple[int, ...]]] = by_preset("data_orders_declared")

#: The joint design (declared 2026-12-05, before any of its new runs was read): per preset, the
#: curve figures whose pair ``k`` (k = 0…n−1) trains both arms at initialisation seed ``k`` *and*
#: data order ``k`` (:attr:`Ablation.joint_declared
#: <gtalib.book.design.figures.Ablation.joint_declared>`; Bouthillier et al. 2021, *Accounting
#: for Variance in Machine Learning Benchmarks*, MLSys; the MultiBERTs, Sellam et al. 2022).
JOINT_DECLARED: dict[str, dict[str, int]] = by_preset("joint_declared")

#: The figures of :data:`JOINT_DECLARED` that the book reads in the joint design
#: (:attr:`Ablation.joint <gtalib.book.design.figures.Ablation.joint>`): every preset of the
#: declared design, with the figures already switched. Their
#: :attr:`~gtalib.book.design.plan.Plan.figure_refs` are
#: :meth:`~gtalib.book.design.figure_plan.AblationPlan.joint_runs`, read at one look; their one-order pairs and
#: data-order repeats stay read beside them. A figure switches only once every one of its joint
#: runs is recorded, so the default book never trains them.
JOINT: dict[str, dict[str, int]] = {p: by_preset("joint").get(p, {})
                                    for p in {**JOINT_DECLARED, **by_preset("joint")}}


def counts_words(preset: str, seeds: int, max_steps=None) -> str | None:
    """What ``preset`` makes of the book's ``seeds``, in words, for the pages' parameter tables
    and the reproduction page: ``None`` when every figure runs the book's count, else e.g.
    ``"the ablation figures run 10, the main table 5"``."""
    counts = seed_counts(preset, seeds, max_steps)
    figures, main = {counts[k] for k in ABLATIONS}, counts["main"]
    if set(counts.values()) == {seeds}:
        return None
    if figures == {main}:
        return f"every figure and the main table run {main}"
    if len(figures) == 1:
        return f"the ablation figures run {figures.pop()}, the main table {main}"
    groups = {}
    for key, n in counts.items():
        groups.setdefault(n, []).append("the main table" if key == "main" else
                                        ABLATIONS[key].heading.removesuffix(" ablation").lower())

    def named(names):
        figs = [x for x in names if x != "the main table"]
        words = ([f"the {and_join(figs)} figure{'s' if len(figs) > 1 else ''}"] if figs else [])
        return and_join(words + [x for x in names if x == "the main table"])

    (n, first), *rest = sorted(groups.items(), reverse=True)
    single = len(first) == 1 and first[0] != "the main table" or first == ["the main table"]
    return (f"{named(first)} {'runs' if single else 'run'} {n}"
            + "".join(f"; {named(names)} {k}" for k, names in rest))



def ablation_looks(preset: str) -> tuple[int, ...]:
    """The looks the ablation figures share at ``preset`` (their specs' ``looks``), which the
    methods chapter and the pages describe as one design; ``()`` where they declare none or
    differ."""
    looks = {a.looks.get(preset, ()) for a in ABLATIONS.values()}
    return looks.pop() if len(looks) == 1 else ()


def seed_counts(preset: str, seeds: int, max_steps=None) -> dict[str, int]:
    """Seeds of every ablation figure (by key) and of the main-results table (``"main"``) when
    the book asks for ``seeds`` (each spec's ``seeds_at``).

    Raises:
        ValueError: ``seeds`` not a positive integer.
    """
    return {key: figure_spec(key).seeds_at(preset, seeds, max_steps)
            for key in (*ABLATIONS, "main")}
