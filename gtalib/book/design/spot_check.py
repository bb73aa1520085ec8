"""The spot-check set: the recorded runs that every default book trains again first, on the
reader's machine, so that each figure and table is checked against its records.

The default book cannot re-train its 724 recorded runs within its hour (58.2 core-hours), so it
reads most of them from ``book/recorded/``. Which ones it re-trains must not depend on the
calibration's noise nor on what a kept run store already holds: the set is declared per
preset in each figure's spec (``spot_check``, :mod:`gtalib.book.design.figures`), before any
run, one variant per figure and table at seed :data:`SPOT_CHECK_SEED`, both arms of its ΔL pair
(one task: both arms train on one worker). At ``cpu`` it is sized to fit the 60-minute budget on
the slowest CPU seen (recorded costs × :data:`SLOWEST_FACTOR`; a test holds it there). Because a
task holds every run of one variant, seed and length (:func:`gtalib.book.pipeline.budget.group_key`), a spot-checked
variant brings its other seed-0 runs of the same length along (GQA's initialisation pair and
main-table run with its double-heads pair).

What time is left after the set goes to the next tier of :func:`training_tiers`: seed 0 of
every other variant, in rounds across the figures (the second variant of each figure, then the
third, ...), and only once all of those fit to further seeds, so that a faster machine checks
more variants of every figure rather than more seeds of the first. Reads
:mod:`gtalib.book.design.figures` and the plan's runs.
"""

from __future__ import annotations

from gtalib.book.design.figure_plan import run_identity
from gtalib.book.design.figures import ABLATIONS, figure_spec

#: The seed of every spot-checked run (seed 0 exists at every seed count).
SPOT_CHECK_SEED = 0
#: This machine's time for recorded work over the recorded time on the slowest CPU seen, an AMD
#: EPYC family 23 model 1 with two workers at once (the calibration of the default book there,
#: ``benchmarks/book_wall_time.md``): the set at ``cpu`` must fit the budget at this factor.
SLOWEST_FACTOR = 2.01

#: Which variant of a figure or table is spot-checked at a preset is its spec's ``spot_check``
#: (:mod:`gtalib.book.design.figures`). At ``cpu``: MHA's initialisation pair (also its
#: main-table run), GLA-2's gating pair (the cheapest of the gating figure's 1000-step pairs),
#: MLRA-2's latent-scaling pair (also its main-table run) and GQA's double-heads pair (with its
#: initialisation pair and main-table run): 34.7 recorded core-minutes. A preset declares a set
#: where any figure names a variant there; a figure that names none (one added later, say) is
#: then checked at its first variant (:func:`spot_check_variants`).


def figure_keys() -> tuple[str, ...]:
    """The figures a spot-check names: the ablation keys, then ``"main"``."""
    return (*ABLATIONS, "main")


def spot_check_words(preset: str) -> str | None:
    """The spot-check set of ``preset`` in words (``None``: none declared), e.g. "seed 0 of MHA
    (initialisation), GLA-2 (gating), ..."."""
    from gtalib.book.design.names import and_join, display_name

    chosen = spot_check_variants(preset)
    if not chosen:
        return None
    what = {k: ABLATIONS[k].heading.removesuffix(" ablation").lower().replace("-", " ")
            if k in ABLATIONS else "main results" for k in chosen}
    return (f"seed {SPOT_CHECK_SEED}, both arms, of "
            + and_join([f"{display_name(v)} ({what[k]})" for k, v in chosen.items()]))


def spot_check_variants(preset: str) -> dict[str, str]:
    """Figure key → the variant spot-checked at ``preset``: the spec's ``spot_check``, else the
    figure's first variant; empty for a preset where no figure declares one."""
    specs = {k: figure_spec(k) for k in figure_keys()}
    if not any(preset in spec.spot_check for spec in specs.values()):
        return {}
    return {k: spec.spot_check.get(preset) or spec.variants_at(preset)[0]
            for k, spec in specs.items()}


def spot_check_refs(plan) -> tuple:
    """The plan's spot-checked runs (:func:`spot_check_variants` at its preset), each configuration
    once, figure by figure, for the figures its chapters read; empty at a preset without a
    declared set."""
    chosen = spot_check_variants(plan.preset)
    runs = {run_identity(r): r for r in plan.runs}  # the plan's own ref of each run
    return tuple(runs[i] for i in dict.fromkeys(
        run_identity(r) for key, variant in chosen.items() if key in plan.reads
        for r in plan.figure_refs[key] if r.variant == variant and r.seed == SPOT_CHECK_SEED))


#: The tiers of :func:`training_tiers`, in the order the budget takes them.
TIERS = ("spot-check", "seed 0", "other seeds and data orders")


def training_tiers(plan) -> tuple[tuple, tuple, tuple]:
    """The plan's runs in the three :data:`TIERS`: the spot-check set (:func:`spot_check_refs`);
    seed 0 of each figure's other variants in rounds (round ``i``: the ``i``-th remaining
    variant of every figure); the rest in the plan's order (the other seeds, then the pairs at
    seed 0 repeated at other data orders, :attr:`gtalib.book.design.plan.Plan.data_order_refs`).
    Each run once, in the first tier that holds it; the budget takes a later tier only once
    every task of the earlier ones fits (:func:`gtalib.book.pipeline.budget.choose`), so more
    variants are checked before more seeds."""
    read = [k for k in figure_keys() if k in plan.reads]
    chosen = spot_check_variants(plan.preset)
    rest = {k: [v for v in dict.fromkeys(r.variant for r in plan.figure_refs[k])
                if v != chosen.get(k)] for k in read}
    rounds = [r for i in range(max(map(len, rest.values()), default=0)) for k in read
              if i < len(rest[k]) for r in plan.figure_refs[k]
              if r.variant == rest[k][i] and r.seed == SPOT_CHECK_SEED]
    runs = {run_identity(r): r for r in plan.runs}  # the plan's own ref of each run
    seen, tiers = set(), []
    for tier in (spot_check_refs(plan), rounds, plan.runs):
        ids = [i for i in dict.fromkeys(map(run_identity, tier)) if i not in seen]
        seen.update(ids)
        tiers.append(tuple(runs[i] for i in ids))
    return tuple(tiers)
