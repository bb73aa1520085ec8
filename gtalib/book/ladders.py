"""The scale ladder's design, as data: for each preset that has one, the depths, training
lengths, variants and arms of its runs (:class:`Ladder`, :data:`LADDERS`). Its runs are
:func:`gtalib.book.figures.ladder_runs`; its page's analysis is
:func:`gtalib.book.ladder.ladder_result`. Reads nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Ladder:
    """The scale ladder of one preset: the init ablation of ``init_variants`` and the gate
    ablation of ``gate_variants`` repeated at every depth of ``depths`` (the FFN width solved
    per depth, so every rung is parameter-matched), the gate at each multiple in
    ``step_factors`` of ``base_steps``; and the gate's token axis: the gate ablation of
    ``token_variants`` at ``token_depth`` layers at each multiple in ``token_factors`` of
    ``base_steps`` (a run shared with the depth axis is one run).

    Arms (ΔL = L(arm) − L(rec), rec = zero init / gate on): init ``alt`` = N(0, σ) output
    projections; for ``scaled_variants`` also ``scaled`` = N(0, σ/√(2L)) output projections
    (GPT-2's residual scaling, the direct test of the depth hypothesis); gate ``alt`` = no gate.

    ``base_steps`` is fixed here rather than read from the training preset, so a change of
    the book's default length does not silently change (and invalidate) recorded ladder runs;
    ``seeds`` is the number of seeds recorded per point (the ladder page shows that many,
    whatever the book's own seed count).
    """

    depths: tuple[int, ...]
    base_steps: int
    init_variants: tuple[str, ...] = ("mha", "mla", "tpa")
    init_arms: tuple = (("alt", (("init", "normal"),)), ("rec", ()))
    scaled_variants: tuple[str, ...] = ("mha",)
    scaled_arm: tuple = ("scaled", (("init", "scaled"),))
    gate_variants: tuple[str, ...] = ("gqa",)
    gate_arms: tuple = (("alt", ()), ("rec", (("gate", True),)))
    step_factors: tuple[int, ...] = (1, 4)
    token_variants: tuple[str, ...] = ()
    token_depth: int = 8
    token_factors: tuple[int, ...] = (1, 4)
    seeds: int = 3

    def __post_init__(self):
        both = set(self.init_variants) & (set(self.gate_variants) | set(self.token_variants))
        if both:  # a run's part is read off its variant (gtalib.book.ladder.ladder_result)
            raise ValueError(f"Ladder: variants {sorted(both)} are in init_variants and in "
                             f"gate_variants or token_variants; allowed: disjoint lists")
        if not set(self.scaled_variants) <= set(self.init_variants):
            raise ValueError(f"Ladder.scaled_variants {self.scaled_variants} must be among "
                             f"init_variants {self.init_variants}")

    def depth_variants(self, part: str) -> tuple[str, ...]:
        """The variants drawn against depth in ``part`` (``"init"`` or ``"gate"``); the token
        axis' own variants are drawn against training length only."""
        return {"init": self.init_variants, "gate": self.gate_variants}[part]

    def depth_steps(self) -> tuple[int, ...]:
        """The training lengths (steps) drawn against depth: ``base_steps`` × ``step_factors``
        (a token-axis length that only ``token_depth`` has is drawn against length only)."""
        return tuple(self.base_steps * f for f in self.step_factors)

    def part(self, variant: str) -> str:
        """``"gate"`` for a variant of the gate's depth or token axis, else ``"init"``."""
        return "gate" if variant in (*self.gate_variants, *self.token_variants) else "init"


#: The ladder of each preset that has one: ``cpu`` at its width (d 128, 4 heads of 32) at 2, 4
#: and 8 layers and 250 / 1000 steps, the gate of GQA and MLRA-4 at 8 layers and 250 / 1000 /
#: 2000 steps; ``ci`` a two-rung miniature for the tests.
LADDERS: dict[str, Ladder] = {
    "cpu": Ladder(depths=(2, 4, 8), base_steps=250, token_variants=("gqa", "mlra-4"),
                  token_factors=(1, 4, 8)),
    "ci": Ladder(depths=(1, 2), base_steps=10, init_variants=("mha",), step_factors=(1, 3),
                 token_variants=("gqa", "mla"), token_depth=2, token_factors=(1, 3), seeds=2),
}
