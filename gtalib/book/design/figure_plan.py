"""What a figure's spec plans: its variants, seeds, looks and runs at a preset, as methods of the
specs (:class:`AblationPlan` and :class:`TablePlan`, the bases of
:class:`gtalib.book.design.figures.Ablation` and :class:`~gtalib.book.design.figures.Table`), and
the run reference they return (:class:`RunRef`).

The seed policy the methods apply: every count is fixed before the runs it governs and is the
same for every variant of a figure and for both arms of its ΔL pairs (a pair is one seed). A
figure never gets more seeds because one of its results looked undecided: the ``cpu`` ablation
figures went from 5 to 10 pairs for every variant, as a second look declared before the new runs
were read and paid for by group-sequential levels (:mod:`gtalib.book.analysis.sequential`). At 10
pairs the 95 % interval of a mean ΔL is ±0.72 standard deviations of ΔL, against ±1.24 at 5
(Student t at 9 and 4 degrees of freedom).

Reads :mod:`gtalib.book.design.names` and the model layer (a user's variant's arms).
"""

from __future__ import annotations

from dataclasses import dataclass

from gtalib.book.design.names import (
    canonical_options,
    config_label,
    is_user_variant,
    option_pairs,
)
from gtalib.model.config import canonical_variant

#: Seeds per configuration when the book is asked for none (``gtalib book --seeds``).
DEFAULT_SEEDS = 3
#: The most seeds per configuration a book may ask for (``gtalib book --seeds``): ten times the
#: largest count any figure or table is declared at (the specs' ``seeds``). At ``cpu`` that is
#: ten times the 724-run default book, hundreds of core-hours; a larger count would only spend
#: minutes enumerating runs that no budget trains.
MAX_SEEDS = 100
#: The initialisation seed of the pair that the data-order design repeats
#: (:attr:`~gtalib.book.design.figures.Ablation.data_orders`).
DATA_ORDER_SEED = 0


def check_seeds(seeds) -> None:
    """Refuse a book's seed count outside 1…:data:`MAX_SEEDS`.

    Raises:
        ValueError: ``seeds`` not an integer from 1 to :data:`MAX_SEEDS` (the message names
            ``--seeds`` and the allowed range).
    """
    if (not isinstance(seeds, int) or isinstance(seeds, bool) or not 1 <= seeds <= MAX_SEEDS):
        raise ValueError(f"seeds (--seeds) must be an integer from 1 to {MAX_SEEDS}, "
                         f"got {seeds!r}")


@dataclass(frozen=True)
class RunRef:
    """One training run a figure needs: a configuration and a seed.

    ``arm`` is ``"alt"`` or ``"rec"`` for ablations, ``"main"`` for the main-results table, and
    a ladder arm name (``"scaled"``) for the scale ladder's extra arms; ``options`` are
    ``gtalib.model.presets.model_config`` keywords (the ladder adds ``n_layer``); ``train`` are
    :func:`gtalib.training.config.train_config` overrides of the preset's training settings
    (the ladder's longer runs set ``max_steps``).
    """

    variant: str
    arm: str
    options: tuple  # sorted (key, value) pairs: hashable
    seed: int
    train: tuple = ()  # sorted (field, value) pairs: hashable

    @property
    def label(self) -> str:
        return config_label(self.variant, dict(self.options))


def run_identity(ref: RunRef) -> tuple:
    """What makes two refs one run: variant, canonical options (a default spelled out or left
    out is one configuration), seed and training overrides."""
    return (ref.variant, canonical_options(ref.options), ref.seed, ref.train)


class AblationPlan:
    """The plan methods of an ablation figure's spec (fields of
    :class:`gtalib.book.design.figures.Ablation`: ``variants``, ``ci_variants``, ``alt``,
    ``rec``, ``train``, ``seeds``, ``looks``, ``data_orders``, ``joint``, ``spot_check``)."""

    def variants_at(self, preset: str, variants=None) -> tuple[str, ...]:
        """The variants the figure shows at ``preset``: of the paper's, those ``variants``
        names (validated against the figure's own list), else the small ``ci_variants`` subset
        at the ``ci`` preset, else all; then the user's own variants that ``variants`` names by
        import path (``module:Class``) and that can take both of the figure's arms
        (:meth:`user_variant_refusal`), in the order given.

        Raises:
            KeyError: a requested variant that the paper's figure does not contain, or an
                import path of another form than ``module:Class``.
        """
        if variants is None:
            return self.ci_variants if preset == "ci" else self.variants
        if isinstance(variants, str):
            variants = [v.strip() for v in variants.split(",") if v.strip()]
        mine = {v: is_user_variant(v) for v in variants}
        variants = [v for v in variants if not mine[v]]
        users = tuple(dict.fromkeys(canonical_variant(v) for v, user in mine.items() if user))
        users = tuple(v for v in users if self.user_variant_refusal(preset, v) is None)
        if not variants:
            return (*self.variants_at(preset), *users)
        out = []
        for v in variants:
            try:
                cv = canonical_variant(v)
            except KeyError:  # not a variant at all: the allowed ones are still the figure's
                cv = None
            if cv not in self.variants:
                raise KeyError(f"variant {v!r} is not in the {self.key} figure; allowed: "
                               f"{', '.join(self.variants)}")
            out.append(cv)
        return (*out, *users)

    def user_variant_refusal(self, preset: str, variant: str) -> str | None:
        """Why the user's variant ``variant`` (``module:Class``) cannot join the figure at
        ``preset``, in one line (its class does not import, cannot be parameter-matched, or
        refuses one of the figure's arms, as the model layer says), or ``None`` when it can."""
        from gtalib.model.presets import model_config

        for arm in (self.alt, self.rec):
            try:
                model_config(preset, variant, **arm)
            except (KeyError, ValueError) as exc:
                return str(exc.args[0])
        return None

    def seeds_at(self, preset: str, seeds: int = DEFAULT_SEEDS, max_steps=None) -> int:
        """The seeds the figure runs at ``preset`` when the book asks for ``seeds``: the larger
        of ``seeds`` and its ``seeds`` count, which is its design at the preset's own length,
        so a book-wide ``max_steps`` override falls back to ``seeds``.

        Raises:
            ValueError: ``seeds`` not an integer from 1 to :data:`MAX_SEEDS`.
        """
        check_seeds(seeds)
        return max(seeds, self.seeds.get(preset, 0)) if max_steps is None else seeds

    def reads_joint(self, preset: str, max_steps=None) -> bool:
        """Whether the figure is read in the joint design at ``preset`` (its ``joint``); never
        under a book-wide length override, since the joint runs are recorded at the figure's
        own length."""
        return max_steps is None and preset in self.joint

    def looks_at(self, preset: str, seeds: int = DEFAULT_SEEDS, max_steps=None,
                 joint: bool | None = None) -> tuple[int, ...]:
        """The pair counts at which the figure is read: one look at the count it runs
        (:meth:`seeds_at`) in the joint design (``joint``; default :meth:`reads_joint`,
        declared with one look), else its ``looks`` at ``preset`` when it runs exactly its last
        look's count, else one look at the count it runs.

        Raises:
            as :meth:`seeds_at`.
        """
        n = self.seeds_at(preset, seeds, max_steps)
        joint = self.reads_joint(preset, max_steps) if joint is None else joint
        looks = () if joint else self.looks.get(preset, ())
        return looks if looks and looks[-1] == n else (n,)

    def _arms(self, variants, seeds, train) -> list[RunRef]:
        """Both arms of each of ``variants`` at each of ``seeds``, with training ``train``
        (variant by variant, then arm, then seed)."""
        return [RunRef(v, arm, option_pairs(opts), s, train) for v in variants
                for arm, opts in (("alt", self.alt), ("rec", self.rec)) for s in seeds]

    def runs(self, preset: str, seeds: int, variants=None, max_steps=None,
             joint: bool | None = None) -> list[RunRef]:
        """Every run the figure needs: both arms of each variant (:meth:`variants_at`) for its
        seeds ``0..n-1`` (:meth:`seeds_at`), at its own training length at ``preset``
        (``train``) unless the book overrides the length for every figure (``max_steps``). In
        the joint design (``joint``; default :meth:`reads_joint`) pair ``k`` also reads data
        order ``k`` (:meth:`joint_runs`); ``joint=False`` gives the one-order pairs.

        Raises:
            ValueError: ``seeds`` < 1.  KeyError: unknown variant.
        """
        n = self.seeds_at(preset, seeds, max_steps)
        if self.reads_joint(preset, max_steps) if joint is None else joint:
            return self.joint_runs(preset, n, variants)
        train = self.train.get(preset, ()) if max_steps is None else ()
        return self._arms(self.variants_at(preset, variants), range(n), train)

    def data_order_runs(self, preset: str, orders=None, max_steps=None) -> list[RunRef]:
        """The data-order runs: both arms of each variant at the initialisation seed
        :data:`DATA_ORDER_SEED` and each data order of ``orders`` (default the figure's
        ``data_orders`` at ``preset``; none where it has none, or under a book-wide length
        override, since they are recorded at the figure's own length). Each is the figure's
        own run with ``data_seed`` set."""
        orders = self.data_orders.get(preset, ()) if orders is None else orders
        if max_steps is not None:
            return []
        base = dict(self.train.get(preset, ()))
        return [r for d in orders for r in self._arms(
            self.variants_at(preset), (DATA_ORDER_SEED,),
            tuple(sorted({**base, "data_seed": d}.items())))]

    def joint_runs(self, preset: str, pairs: int, variants=None) -> list[RunRef]:
        """The joint-design runs (``joint_declared``): both arms of each variant (default the
        figure's at ``preset``) for pairs ``k = 0…pairs−1``, pair ``k`` at initialisation seed
        ``k`` and data order ``k`` at the figure's own training length; pair 0 is the figure's
        own run at seed 0, data order 0.

        Raises:
            KeyError: unknown variant.  ValueError: ``pairs`` < 0.
        """
        if not isinstance(pairs, int) or isinstance(pairs, bool) or pairs < 0:
            raise ValueError(f"pairs must be a non-negative integer, got {pairs!r}")
        base = dict(self.train.get(preset, ()))
        shown = self.variants_at(preset, variants)
        # data order 0 is the default: pair 0 is spelled exactly as the figure's own run
        return [r for k in range(pairs) for r in self._arms(
            shown, (k,), tuple(sorted({**base, **({"data_seed": k} if k else {})}.items())))]


class TablePlan:
    """The plan methods of a table's spec (:class:`gtalib.book.design.figures.Table`: the main
    table, whose ``seeds`` is a least count, or a scale-ladder axis, whose ``seeds`` is the
    count its runs were recorded at)."""

    def configs_at(self, preset: str) -> tuple:
        """The main table's configurations ``(variant, options)`` at ``preset``."""
        return self.ci_configs if preset == "ci" else self.configs

    def variants_at(self, preset: str, variants=None) -> tuple[str, ...]:
        """The variants the table shows at ``preset``, in its order."""
        return tuple(dict.fromkeys(v for v, _ in self.configs_at(preset)))

    def seeds_at(self, preset: str, seeds: int = DEFAULT_SEEDS, max_steps=None) -> int:
        """The main table: the larger of ``seeds`` and its ``seeds`` count (``seeds`` under a
        book-wide ``max_steps``); a ladder axis: its recorded count.

        Raises:
            ValueError: ``seeds`` not an integer from 1 to :data:`MAX_SEEDS`.
            KeyError: a ladder axis at a preset without a ladder.
        """
        if self.key != "main":
            if preset not in self.seeds:
                raise KeyError(f"preset {preset!r} has no scale ladder; allowed: "
                               f"{', '.join(self.seeds)}")
            return self.seeds[preset]
        check_seeds(seeds)
        return max(seeds, self.seeds.get(preset, 0)) if max_steps is None else seeds

    def runs(self, preset: str, seeds: int, variants=None, max_steps=None) -> list[RunRef]:
        """Every run of the main table at ``preset`` for seeds ``0..n-1`` (:meth:`seeds_at`)."""
        n = self.seeds_at(preset, seeds, max_steps)
        return [RunRef(v, "main", option_pairs(o), s)
                for v, o in self.configs_at(preset) for s in range(n)]
