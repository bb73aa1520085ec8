"""The book's seed policy: how many seeds each figure and table runs at each preset and at
which pair counts the ablation figures are read, from the fields ``seeds`` and ``looks`` of each
figure's spec (:mod:`gtalib.book.design.figures`, the one registry of per-figure facts).

Every count is fixed before the runs it governs and is the same for every variant of a figure and
for both arms of its ΔL pairs (a pair is one seed). A figure never gets more seeds because one of
its results looked undecided: the ``cpu`` ablation figures went from 5 to 10 pairs for every
variant of all four, as a second look declared before the new runs were read and paid for by
group-sequential levels (:mod:`gtalib.book.analysis.sequential`). At 10 pairs the 95 % interval
of a mean ΔL is ±0.72 standard deviations of ΔL, against ±1.24 at 5 (Student t at 9 and 4
degrees of freedom).

Everything that needs a seed count reads it here: the runs each figure enumerates
(:mod:`gtalib.book.design.run_specs`, :mod:`gtalib.book.design.ladder`), the CLI's default
(:data:`DEFAULT_SEEDS`, which the Makefile leaves to the CLI), the notebooks' parameter tables
(:mod:`gtalib.book.pipeline.parameters`) and the pages' sentences. Reads
:mod:`gtalib.book.design.figures`.
"""

from __future__ import annotations

from gtalib.book.design.figures import ABLATIONS, TABLES, by_preset, figure_spec, figure_variants
from gtalib.book.design.names import and_join

#: Seeds per configuration when the book is asked for none (``gtalib book --seeds``).
DEFAULT_SEEDS = 3
#: The most seeds per configuration a book may ask for (``gtalib book --seeds``): ten times the
#: largest count any figure or table is declared at (the specs' ``seeds``). At ``cpu`` that is ten times the
#: 724-run default book, hundreds of core-hours; a larger count would only spend minutes
#: enumerating runs that no budget trains.
MAX_SEEDS = 100

#: The scale ladder's axes: counts of recorded runs, shown as recorded whatever the book asks.
LADDER_KEYS = ("ladder", "ladder_width")

#: The initialisation seed of the pair that the data-order design repeats
#: (:attr:`~gtalib.book.design.figures.Ablation.data_orders`).
DATA_ORDER_SEED = 0

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
#: :func:`~gtalib.book.design.run_specs.joint_runs`, read at one look; their one-order pairs and
#: data-order repeats stay read beside them. A figure switches only once every one of its joint
#: runs is recorded, so the default book never trains them.
JOINT: dict[str, dict[str, int]] = {p: by_preset("joint").get(p, {})
                                    for p in {**JOINT_DECLARED, **by_preset("joint")}}


def reads_joint(key: str, preset: str, max_steps=None) -> bool:
    """Whether figure ``key`` is read in the joint design at ``preset`` (its spec's
    :attr:`~gtalib.book.design.figures.Ablation.joint`); never under a book-wide length
    override, since the joint runs are recorded at the figure's own length."""
    return max_steps is None and key in ABLATIONS and preset in ABLATIONS[key].joint


def _check_count(name: str, n) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"{name} must be a positive integer, got {n!r}")


def check_seeds(seeds) -> None:
    """Refuse a book's seed count outside 1…:data:`MAX_SEEDS`.

    Raises:
        ValueError: ``seeds`` not an integer from 1 to :data:`MAX_SEEDS` (the message names
            ``--seeds`` and the allowed range).
    """
    if (not isinstance(seeds, int) or isinstance(seeds, bool) or not 1 <= seeds <= MAX_SEEDS):
        raise ValueError(f"seeds (--seeds) must be an integer from 1 to {MAX_SEEDS}, "
                         f"got {seeds!r}")


def seeds_of(key: str, preset: str, seeds: int = DEFAULT_SEEDS, max_steps=None) -> int:
    """The seeds figure ``key`` runs at ``preset`` when the book asks for ``seeds``.

    An ablation figure or ``"main"``: the larger of ``seeds`` and its spec's ``seeds`` count,
    which is the figure's design at the preset's own length, so a book-wide ``max_steps``
    override falls back to ``seeds``. A ladder axis (:data:`LADDER_KEYS`): its recorded count.

    Raises:
        ValueError: ``seeds`` not an integer from 1 to :data:`MAX_SEEDS`.
        KeyError: unknown figure key, or a ladder key at a preset without a ladder.
    """
    if key in LADDER_KEYS:
        counts = TABLES[key].seeds
        if preset not in counts:
            raise KeyError(f"preset {preset!r} has no scale ladder; allowed: {', '.join(counts)}")
        return counts[preset]
    check_seeds(seeds)
    if key not in ABLATIONS and key != "main":
        raise KeyError(f"unknown figure {key!r}; allowed: {', '.join([*ABLATIONS, 'main'])}")
    return max(seeds, figure_spec(key).seeds.get(preset, 0)) if max_steps is None else seeds


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



def looks_of(key: str, preset: str, seeds: int = DEFAULT_SEEDS, max_steps=None,
             joint: bool | None = None) -> tuple[int, ...]:
    """The pair counts at which figure ``key`` is read: one look at the count it runs
    (:func:`seeds_of`) in the joint design (``joint``; default :func:`reads_joint`, declared
    with one look), else its spec's ``looks`` at ``preset`` for an ablation figure that runs
    exactly its last look's count, else one look at the count it runs.

    Raises:
        as :func:`seeds_of`.
    """
    n = seeds_of(key, preset, seeds, max_steps)
    if joint is None:
        joint = reads_joint(key, preset, max_steps)
    looks = ABLATIONS[key].looks.get(preset, ()) if key in ABLATIONS and not joint else ()
    return looks if looks and looks[-1] == n else (n,)


def ablation_looks(preset: str) -> tuple[int, ...]:
    """The looks the ablation figures share at ``preset`` (their specs' ``looks``), which the
    methods chapter and the pages describe as one design; ``()`` where they declare none or
    differ."""
    looks = {a.looks.get(preset, ()) for a in ABLATIONS.values()}
    return looks.pop() if len(looks) == 1 else ()


def figure_seeds(key: str, preset: str, seeds: int, variants=None, max_steps=None
                 ) -> dict[str, int]:
    """Seeds per variant of ablation figure ``key`` (:func:`seeds_of`, one n for all), in the
    figure's variant order (:func:`gtalib.book.design.figures.figure_variants`).

    Raises:
        ValueError: ``seeds`` < 1.  KeyError: unknown figure or variant.
    """
    n = seeds_of(key, preset, seeds, max_steps)
    return dict.fromkeys(figure_variants(key, preset, variants), n)


def seed_counts(preset: str, seeds: int, max_steps=None) -> dict[str, int]:
    """Seeds of every ablation figure (by key) and of the main-results table (``"main"``) when
    the book asks for ``seeds`` (:func:`seeds_of`).

    Raises:
        ValueError: ``seeds`` not a positive integer.
    """
    return {key: seeds_of(key, preset, seeds, max_steps) for key in (*ABLATIONS, "main")}
