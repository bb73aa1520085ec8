"""The scale ladder's design, as data, and its runs: for each preset that has one, the depths,
widths, training lengths, variants and arms of its runs (:class:`Ladder`, :data:`LADDERS`), the
runs themselves (:func:`ladder_runs`) and the parameter matching of its configurations per depth
and per width (:func:`ladder_params`, :func:`width_params`); its seed counts are the seed
table's (:mod:`gtalib.book.design.seeds`). Its pages' analyses are
:mod:`gtalib.book.chapters.scale_ladder` (depth and length) and
:mod:`gtalib.book.chapters.ladder_width` (width). Reads :mod:`gtalib.model` (presets, parameter
counts) and the design modules below it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from gtalib.book.design.names import config_label, display_name, lookup, option_pairs
from gtalib.book.design.run_specs import RunRef
from gtalib.book.design.figures import TABLES
from gtalib.model.params import count_params
from gtalib.model.presets import PRESETS, model_config

#: The sizes a width of the width axis sets, in the order of :attr:`Ladder.widths`.
WIDTH_FIELDS = ("d_model", "n_head", "head_dim")


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
    the book's default length does not silently change (and invalidate) recorded ladder runs.
    The seeds recorded per point are the seed table's ``"ladder"`` count (the ladder page shows
    that many, whatever the book's own seed count).

    The width axis: ``width_variants`` at the main results' configuration (zero init, no gate,
    latent scale on, 1× heads; arm ``"main"``, no ΔL pair) at ``token_depth`` layers and
    ``base_steps`` steps, at every size ``(d_model, n_head, head_dim)`` of ``widths``, with
    the seed table's ``"ladder_width"`` count of seeds; its analysis is ``width_named``'s gap to
    the best of the others
    (:func:`gtalib.book.chapters.ladder_width.width_gap`). The other sizes follow the paper's ratios from
    ``head_dim`` and ``d_model`` (:meth:`gtalib.model.config.ModelConfig.resolved`), and the
    SwiGLU width is matched to the MHA model of each width
    (:func:`gtalib.model.presets.mha_intermediate_size`). The first size is the preset's own, so
    that point's runs are the ones the token axis and the main table have at that depth and
    length.
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
    width_variants: tuple[str, ...] = ()
    widths: tuple[tuple[int, int, int], ...] = ()
    width_named: str = "mlra-4"

    def __post_init__(self):
        both = set(self.init_variants) & (set(self.gate_variants) | set(self.token_variants))
        if both:  # a run's part is read off its variant (gtalib.book.chapters.scale_ladder.ladder_result)
            raise ValueError(f"Ladder: variants {sorted(both)} are in init_variants and in "
                             f"gate_variants or token_variants; allowed: disjoint lists")
        if not set(self.scaled_variants) <= set(self.init_variants):
            raise ValueError(f"Ladder.scaled_variants {self.scaled_variants} must be among "
                             f"init_variants {self.init_variants}")
        if self.width_variants:
            if self.width_named not in self.width_variants or len(self.width_variants) < 2:
                raise ValueError(f"Ladder.width_named {self.width_named!r} must be one of "
                                 f"width_variants {self.width_variants}, which need another")
            if len(self.widths) < 2 or any(
                    len(w) != 3 or not all(isinstance(x, int) and x > 0 for x in w)
                    for w in self.widths):
                raise ValueError(f"Ladder.widths {self.widths!r}: allowed: two or more "
                                 f"(d_model, n_head, head_dim) triples of positive integers")

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
#: 2000 steps, and the width axis: MHA, GQA, MLA, MLRA-2 and MLRA-4 at 8 layers and 250 steps,
#: d 128 (4 heads of 32) and d 256 (4 heads of 64, so MLRA-4's four latent blocks are 64 wide
#: instead of 32). ``ci`` a two-rung miniature for the tests; its width axis has the
#: ci pages' two variants, GQA and MLA (MLA named, as the ci token axis has no MLRA-4), at d 128
#: and 256.
LADDERS: dict[str, Ladder] = {
    "cpu": Ladder(depths=(2, 4, 8), base_steps=250, token_variants=("gqa", "mlra-4"),
                  token_factors=(1, 4, 8),
                  width_variants=("mha", "gqa", "mla", "mlra-2", "mlra-4"),
                  widths=((128, 4, 32), (256, 4, 64))),
    "ci": Ladder(depths=(1, 2), base_steps=10, init_variants=("mha",), step_factors=(1, 3),
                 token_variants=("gqa", "mla"), token_depth=2, token_factors=(1, 3),
                 width_variants=("gqa", "mla"), widths=((128, 4, 32), (256, 4, 64)),
                 width_named="mla"),
}


def ladder(preset: str) -> Ladder:
    """The :class:`Ladder` of ``preset``.

    Raises:
        KeyError: a preset without a ladder; the message lists those with one.
    """
    return lookup(LADDERS, preset, f"preset {preset!r} has no scale ladder; allowed")


def ladder_runs(preset: str, seeds: int | None = None, part: str | None = None) -> list[RunRef]:
    """Every run of ``preset``'s ladder for seeds ``0..seeds-1``: ``part="init"``, ``"gate"``
    (the depth and token axes), ``"width"`` (the width axis) or all three (``None``). Each ref
    carries its depth in ``options["n_layer"]`` and its length in ``train["max_steps"]``; a
    width-axis ref has arm ``"main"`` and, in ``options``, the sizes of its width that differ
    from the preset's (:data:`WIDTH_FIELDS`), so at the preset's own width
    it is the same run as the token axis' and the main table's.

    Args:
        seeds: ``None``: each axis its own count (its spec's ``seeds_at``:
            ``"ladder"`` for depth and length, ``"ladder_width"`` for width).
    Raises:
        ValueError: ``seeds`` < 1 or an unknown ``part``.  KeyError: no ladder at ``preset``.
    """
    lad = ladder(preset)
    if seeds is not None and (not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1):
        raise ValueError(f"seeds must be a positive integer or None, got {seeds!r}")
    if part not in (None, "init", "gate", "width"):
        raise ValueError(f"part must be 'init', 'gate', 'width' or None, got {part!r}")
    n = TABLES["ladder"].seeds_at(preset) if seeds is None else seeds
    groups = []
    if part in (None, "init"):
        groups.append((lad.init_variants, lad.init_arms, (1,), lad.depths))
        groups.append((lad.scaled_variants, (lad.scaled_arm,), (1,), lad.depths))
    if part in (None, "gate"):
        groups.append((lad.gate_variants, lad.gate_arms, lad.step_factors, lad.depths))
        groups.append((lad.token_variants, lad.gate_arms, lad.token_factors, (lad.token_depth,)))
    refs = [
        RunRef(v, arm, option_pairs({**dict(opts), "n_layer": depth}), s,
               train=(("max_steps", lad.base_steps * factor),))
        for variants, arms, factors, depths in groups
        for factor in factors
        for depth in depths
        for v in variants
        for s in range(n)
        for arm, opts in arms
    ]
    if part in (None, "width"):
        own = PRESETS[preset]
        n = TABLES["ladder_width"].seeds_at(preset) if seeds is None else seeds
        for size in lad.widths:
            sizes = {k: x for k, x in zip(WIDTH_FIELDS, size) if own[k] != x}
            refs += [RunRef(v, "main", option_pairs({**sizes, "n_layer": lad.token_depth}), s,
                            train=(("max_steps", lad.base_steps),))
                     for v in lad.width_variants for s in range(n)]
    return list(dict.fromkeys(refs))  # the token axis shares GQA's runs with the depth axis


def depth_runs(preset: str, seeds: int | None = None) -> list[RunRef]:
    """The runs of ``preset``'s depth and token axes (the init and gate parts of
    :func:`ladder_runs`), whose ΔL pairs the scale-ladder page computes; the width axis' are
    ``part="width"``."""
    return [*ladder_runs(preset, seeds, "init"), *ladder_runs(preset, seeds, "gate")]


# ---------------------------------------------------------------------------------------------
# Parameter matching: per rung of the depth and token axes, per width of the width axis
# ---------------------------------------------------------------------------------------------

def ladder_params(preset: str) -> pd.DataFrame:
    """Total parameters of every configuration of ``preset``'s depth and token axes at every
    depth, and its deviation from MHA's at the same depth in percent (the FFN width is solved
    per depth by :func:`gtalib.model.presets.model_config`; the width axis':
    :func:`width_params`).

    Raises:
        KeyError: no ladder at ``preset``.
    """
    configs = {(r.variant, tuple(kv for kv in r.options if kv[0] != "n_layer"))
               for r in depth_runs(preset, 1)}
    rows = []
    for depth in ladder(preset).depths:
        mha = count_params(model_config(preset, "mha", n_layer=depth))["total"]
        for variant, opts in sorted(configs):
            cfg = model_config(preset, variant, n_layer=depth, **dict(opts))
            n = count_params(cfg)["total"]
            rows.append((depth, config_label(variant, dict(opts)), cfg.intermediate_size,
                         n, 100 * (n - mha) / mha))
    return pd.DataFrame(rows, columns=["n_layer", "config", "intermediate_size", "n_params",
                                       "vs_mha_pct"])


def width_params(preset: str) -> pd.DataFrame:
    """Every width-axis configuration of ``preset``: ``d_model, n_head, head_dim, config,
    intermediate_size, kv_lora_rank, block_width`` (the latent's width per block, ``d_c`` over
    the blocks; both ``<NA>`` without a latent, "—" as printed,
    :func:`gtalib.book.chapters.ladder_width.format_width_params`), ``n_params`` and
    ``vs_mha_pct``, the deviation from MHA at the same width in percent (the SwiGLU width solved
    against the MHA model of that width, :func:`gtalib.model.presets.model_config`).

    Raises:
        KeyError: no ladder at ``preset``.
    """
    lad = ladder(preset)
    rows = []
    for size in lad.widths:
        opts = {**dict(zip(WIDTH_FIELDS, size)), "n_layer": lad.token_depth}
        mha = count_params(model_config(preset, "mha", **opts))["total"]
        for v in lad.width_variants:
            cfg = model_config(preset, v, **opts)
            n = count_params(cfg)["total"]
            block = cfg.kv_lora_rank // cfg.latent_blocks if cfg.latent_blocks else None
            rows.append((*size, display_name(v), cfg.intermediate_size, cfg.kv_lora_rank,
                         block, n, 100 * (n - mha) / mha))
    out = pd.DataFrame(rows, columns=["d_model", "n_head", "head_dim", "config",
                                      "intermediate_size", "kv_lora_rank", "block_width",
                                      "n_params", "vs_mha_pct"])
    return out.astype({"kv_lora_rank": "Int64", "block_width": "Int64"})
