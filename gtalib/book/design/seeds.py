"""The book's seed policy: how many seeds each figure and table runs at each preset
(:data:`FIXED`) and at which pair counts the ablation figures are read (:data:`LOOKS`).

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

from gtalib.book.design.figures import ABLATIONS, figure_variants
from gtalib.book.design.names import and_join

#: Seeds per configuration when the book is asked for none (``gtalib book --seeds``).
DEFAULT_SEEDS = 3
#: The most seeds per configuration a book may ask for (``gtalib book --seeds``): ten times the
#: largest count any figure is declared at (:data:`FIXED`). At ``cpu`` that is ten times the
#: 472-run default book, hundreds of core-hours; a larger count would only spend minutes
#: enumerating runs that no budget trains.
MAX_SEEDS = 100

#: The scale ladder's axes: counts of recorded runs, shown as recorded whatever the book asks.
LADDER_KEYS = ("ladder", "ladder_width")

#: Per preset, the seeds each figure runs (ablation key, ``"main"`` for the main-results table,
#: :data:`LADDER_KEYS` for the scale ladder's depth/length axes and its width axis). An ablation
#: figure or the main table runs the larger of this and the book's count; a ladder axis runs
#: exactly this. At ``cpu`` the ablation figures run 10 pairs, read in two looks
#: (:data:`LOOKS`); the main table 5; the ladder 3 per depth and length, 5 per width. A figure
#: is raised to its second look's count only once all of its new runs are recorded, so that the
#: default book reads them instead of training them.
FIXED: dict[str, dict[str, int]] = {
    "cpu": {"init": 10, "gate": 10, "latent_scale": 10, "double_heads": 10, "main": 5,
            "ladder": 3, "ladder_width": 5},
    "ci": {"ladder": 2, "ladder_width": 2},
}


#: Per preset, the pair counts at which the ablation figures are read: at ``cpu`` a first look
#: at 5 pairs and a second at 10 (a group-sequential design,
#: :mod:`gtalib.book.analysis.sequential`). The book's ablation figures were read at 5 pairs
#: first; the second look was declared, for every variant of all four figures whatever its
#: verdict, before any of seeds 5–9 was read. A figure read at any other count has one look.
LOOKS: dict[str, tuple[int, ...]] = {"cpu": (5, 10)}


#: The initialisation seed of the pair that the data-order design repeats (:data:`DATA_ORDERS`).
DATA_ORDER_SEED = 0

#: Per preset, the curve figures whose pair at :data:`DATA_ORDER_SEED` is repeated at other data
#: orders (``TrainConfig.data_seed``; the figures' other runs read data order 0), both arms of
#: every variant: the spread of ΔL over data orders, set beside the spread over initialisation
#: seeds (docs/methods: "Data order"). Fixed before any of these runs was read. A figure enters
#: this table only once all of its data-order runs are recorded, so that the default book reads
#: them; :data:`DATA_ORDERS_DECLARED` holds the whole declared design, recorded or not.
#: At ``ci`` the initialisation figure's pair runs at two more data orders, so that every
#: test build goes through the whole data-order path.
DATA_ORDERS: dict[str, dict[str, tuple[int, ...]]] = {"cpu": {"init": (1, 2, 3, 4),
                                                               "gate": (1, 2, 3, 4)},
                                                       "ci": {"init": (1, 2)}}

#: The whole data-order design, declared before its first run: data orders 1–4 of the pair at
#: :data:`DATA_ORDER_SEED` of every variant of the initialisation and gating figures.
DATA_ORDERS_DECLARED: dict[str, dict[str, tuple[int, ...]]] = {
    "cpu": {"init": (1, 2, 3, 4), "gate": (1, 2, 3, 4)}}


#: The joint design (declared 2026-12-05, before any of its new runs was read): per preset, the
#: curve figures whose pair ``k`` (k = 0…n−1) trains both arms at initialisation seed ``k`` *and*
#: data order ``k``, so that the data order's variance averages down with the number of pairs as
#: the seed's does (Bouthillier et al. 2021, *Accounting for Variance in Machine Learning
#: Benchmarks*, MLSys; the MultiBERTs, Sellam et al. 2022, vary both in every checkpoint). Both
#: arms of a pair share seed and order, so the pairing holds; pair 0 is the figure's pair at
#: seed 0 and data order 0. Read at one look, at ``n`` pairs. At ``ci`` the initialisation
#: figure's pairs run at distinct orders too, so every test build goes through this path.
JOINT_DECLARED: dict[str, dict[str, int]] = {"cpu": {"init": 10, "gate": 10}, "ci": {"init": 2}}

#: The figures of :data:`JOINT_DECLARED` that the book reads in the joint design: a figure
#: switches only once every one of its joint runs is recorded, so the default book never trains
#: them; until then it reads its one-order pairs (seeds 0…n−1 at data order 0).
JOINT: dict[str, dict[str, int]] = {"cpu": {}, "ci": {"init": 2}}


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


def check_table(table: dict) -> None:
    """Check a table shaped like :data:`FIXED`.

    Raises:
        KeyError: a figure key that is none of the ablations, ``"main"`` or :data:`LADDER_KEYS`.
        ValueError: a count that is not a positive integer.
    """
    allowed = (*ABLATIONS, "main", *LADDER_KEYS)
    for preset, counts in table.items():
        for key, n in counts.items():
            if key not in allowed:
                raise KeyError(f"seed table: unknown figure {key!r} at {preset!r}; allowed: "
                               f"{', '.join(allowed)}")
            _check_count(f"seed table [{preset!r}][{key!r}]", n)


check_table(FIXED)


def seeds_of(key: str, preset: str, seeds: int = DEFAULT_SEEDS, max_steps=None) -> int:
    """The seeds figure ``key`` runs at ``preset`` when the book asks for ``seeds``.

    An ablation figure or ``"main"``: the larger of ``seeds`` and :data:`FIXED`'s count, which is
    the figure's design at the preset's own length, so a book-wide ``max_steps`` override falls
    back to ``seeds``. A ladder axis (:data:`LADDER_KEYS`): its recorded count.

    Raises:
        ValueError: ``seeds`` not an integer from 1 to :data:`MAX_SEEDS`.
        KeyError: unknown figure key, or a ladder key at a preset without a ladder.
    """
    if key in LADDER_KEYS:
        counts = FIXED.get(preset, {})
        if key not in counts:
            have = [p for p, c in FIXED.items() if key in c]
            raise KeyError(f"preset {preset!r} has no scale ladder; allowed: {', '.join(have)}")
        return counts[key]
    check_seeds(seeds)
    if key not in ABLATIONS and key != "main":
        raise KeyError(f"unknown figure {key!r}; allowed: {', '.join([*ABLATIONS, 'main'])}")
    return max(seeds, FIXED.get(preset, {}).get(key, 0)) if max_steps is None else seeds


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



def looks_of(key: str, preset: str, seeds: int = DEFAULT_SEEDS, max_steps=None
             ) -> tuple[int, ...]:
    """The pair counts at which figure ``key`` is read: :data:`LOOKS` of ``preset`` for an
    ablation figure that runs exactly its last look's count (:func:`seeds_of`), else one look at
    the count it runs.

    Raises:
        as :func:`seeds_of`.
    """
    n = seeds_of(key, preset, seeds, max_steps)
    looks = LOOKS.get(preset, ())
    return looks if key in ABLATIONS and looks and looks[-1] == n else (n,)


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
