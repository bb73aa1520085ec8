"""Each paper figure as data: its arms, the paper's values and claim; the paper's claims; the main
table's configurations.

Every value here is taken
from ``docs/paper_values.md`` (facts from *Multi-Head Low-Rank Attention*, arXiv 2603.02188:
its tables, its figures read by eye (marked ≈), and the authors' released configuration).

An ablation figure compares two *arms* of the same variant: ``alt`` (the configuration the paper
argues against) and ``rec`` (the one it recommends). Its loss difference is always

    ΔL = L(alt) − L(rec)     (positive ⇒ the paper's recommended choice is better)

computed from paired runs (same data order, same seed) on the same steps. The paper's other
reference values are :mod:`gtalib.book.design.paper`.

This is the one registry of per-figure facts: every figure's spec (:class:`Ablation`, and
:class:`Table` for the main-results table and the scale ladder's axes) holds its seed counts and
looks per preset, its data-order designs, its spot-checked variant. No other module keeps a
table keyed by figure name. A spec plans itself: its variants, seeds, looks and runs at a preset
are its methods (:mod:`gtalib.book.design.figure_plan`: ``spec.runs(preset, seeds)``,
``spec.seeds_at(preset)``, ...); :mod:`gtalib.book.design.seeds` keeps what is not per figure.
Reads :mod:`gtalib.book.design.names`, :mod:`gtalib.book.design.figure_plan` and
:mod:`gtalib.book.design.paper`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from gtalib.book.design.figure_plan import AblationPlan, TablePlan
from gtalib.book.design.names import GATE_COLORS, INIT_COLORS, lookup
from gtalib.book.design.paper import PAPER_MAIN_PPL, PAPER_MATCHED_PARAMS_B

# ---------------------------------------------------------------------------------------------
# Ablation figures
# ---------------------------------------------------------------------------------------------

def check_counts(key: str, name: str, counts: dict) -> None:
    """Refuse a value of ``counts`` (a spec's per-preset field) that is not a positive integer.

    Raises:
        ValueError: naming the figure, the field and the value.
    """
    for where, n in counts.items():
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"figure {key!r}: {name}[{where!r}] must be a positive integer, "
                             f"got {n!r}")


@dataclass(frozen=True)
class Ablation(AblationPlan):
    """One ablation figure of the paper.

    Attributes:
        key: short id used by notebooks and the CLI (``"init"``, ``"gate"``, ...).
        title: figure title.
        variants: the paper's variants, in its legend order.
        alt, rec: model options (keywords of ``gtalib.model.presets.model_config``) of the arm the
            paper argues against and of the arm it recommends; ΔL = L(alt) − L(rec).
        convention: the ΔL convention as printed in captions.
        colors: variant → matplotlib colour (the paper's).
        paper_curves: variant → knots ``((tokens_B, ΔL), ...)`` of the paper's curve, read off
            its figure (≈); linear between knots. Empty where the paper text gives no curve.
        paper_ppl: variant → (avg PPL alt, avg PPL rec) over the paper's 7 validation sets.
        paper_ylim: the paper's y-axis range (≈).
        claim: the paper's conclusion, as a sentence.
        ci_variants: the small subset used at the ``ci`` preset (chosen to share runs across
            figures).
        train: preset → training overrides of this figure's runs (sorted ``(field, value)``
            pairs of :func:`gtalib.training.config.train_config`), for a figure whose effect needs
            a longer run than the preset's default; fixed before any run, both arms alike.
        notebook: the stem of its chapter (``notebooks/<notebook>.ipynb``), which
            :mod:`gtalib.book.design.chapters` places among the book's ablations.
        summary: what the chapter compares, as the introduction lists it.
        claim_value: the paper's values behind :attr:`claim`, as the claims table prints them.
        ranking: ``(variant, sentence)`` where the paper also ranks a variant first (its ΔL
            the largest), tested on the claims page as a paired difference; else ``None``.
        top_curve, slowest_fall, lowest_end: the variant the paper's figure shows highest
            throughout, falling slowest, ending lowest (docs/paper_values.md), or ``None``
            where it names none; features of the curves (:mod:`gtalib.book.chapters.curve_features`).
        near_zero: the variants whose effect the paper calls ≈ 0 (latent scaling "barely"
            helps MLRA-2): their row's verdict tests the sign, as every row's does, and the
            claims page adds an equivalence test of the size
            (:func:`gtalib.book.chapters.ablation.near_zero_claim`).
        expected_sign: the sign of ΔL the paper's claim expects (+1: its recommended arm is
            better); a user's own variant, which has no paper value, is tested against it.

    The design, per preset (fixed before any run it governs; its methods, :class:`AblationPlan`):

        seeds: preset → the seed pairs every variant runs at least (the book's count when it
            asks for more; none: the book's count).
        looks: preset → the pair counts at which the figure is read, when it runs exactly the
            last of them (a group-sequential design, :mod:`gtalib.book.analysis.sequential`).
        data_orders_declared: preset → the data orders (``TrainConfig.data_seed``) at which the
            pair at seed :data:`~gtalib.book.design.figure_plan.DATA_ORDER_SEED` of every variant is
            repeated, both arms (docs/methods: "Data order").
        data_orders: preset → the data orders the book reads: a figure's set enters only once
            all of its runs are recorded, so that the default book reads them.
        joint_declared: preset → ``n``: pair ``k`` (k = 0…n−1) of every variant trains both arms
            at initialisation seed ``k`` and data order ``k`` (the joint design).
        joint: preset → the ``n`` of :attr:`joint_declared` that the book reads (once all of
            its runs are recorded).
        spot_check: preset → the variant whose seed-0 pair every default book trains first
            (:mod:`gtalib.book.design.spot_check`); a preset that declares a set but not this
            figure's checks its first variant.

    Raises:
        ValueError: a count that is not a positive integer, data orders that are not positive
            integers, a figure read at orders it does not declare, or a spot-checked variant the
            figure does not show at that preset (the message names the field and the allowed
            values).
    """

    key: str
    title: str
    variants: tuple[str, ...]
    alt: dict
    rec: dict
    convention: str
    colors: dict
    paper_curves: dict = field(default_factory=dict)
    paper_ppl: dict = field(default_factory=dict)
    paper_ylim: tuple | None = None
    claim: str = ""
    ci_variants: tuple[str, ...] = ()
    train: dict = field(default_factory=dict)
    notebook: str = ""
    summary: str = ""
    claim_value: str = ""
    ranking: tuple[str, str] | None = None
    top_curve: str | None = None
    slowest_fall: str | None = None
    lowest_end: str | None = None
    near_zero: tuple[str, ...] = ()
    expected_sign: int = 1
    seeds: dict = field(default_factory=dict)
    looks: dict = field(default_factory=dict)
    data_orders_declared: dict = field(default_factory=dict)
    data_orders: dict = field(default_factory=dict)
    joint_declared: dict = field(default_factory=dict)
    joint: dict = field(default_factory=dict)
    spot_check: dict = field(default_factory=dict)

    def __post_init__(self):
        check_counts(self.key, "seeds", self.seeds)
        check_counts(self.key, "joint_declared", self.joint_declared)
        check_counts(self.key, "joint", self.joint)
        for preset, looks in self.looks.items():
            if not (isinstance(looks, tuple) and looks and list(looks) == sorted(set(looks))):
                raise ValueError(f"figure {self.key!r}: looks[{preset!r}] must be a tuple of "
                                 f"increasing counts, got {looks!r}")
            check_counts(self.key, f"looks[{preset!r}]", dict(enumerate(looks)))
        for name in ("data_orders_declared", "data_orders"):
            for preset, orders in getattr(self, name).items():
                check_counts(self.key, f"{name}[{preset!r}]", dict(enumerate(orders)))
        for preset, variant in self.spot_check.items():
            allowed = self.ci_variants if preset == "ci" else self.variants
            if variant not in allowed:
                raise ValueError(f"figure {self.key!r}: spot_check[{preset!r}] = {variant!r} is "
                                 f"not shown at {preset!r}; allowed: {', '.join(allowed)}")

    @property
    def heading(self) -> str:
        """The title before its colon, e.g. ``"Initialisation ablation"``."""
        return self.title.split(":")[0]

    def paper_final(self, variant: str) -> float:
        """Paper's final ΔL for ``variant`` in nats: ``ln(PPL_alt / PPL_rec)`` of the 7-set
        average perplexities when the paper gives them, else the curve's value at 100 B tokens
        (≈), else NaN. The ln-ratio of averaged perplexities approximates the averaged loss
        difference (docs/paper_values.md: ln(14.094/13.860) = 0.017 for MHA's init ablation)."""
        if variant in self.paper_ppl:
            alt, rec = self.paper_ppl[variant]
            return math.log(alt / rec)
        if variant in self.paper_curves:
            return self.paper_curves[variant][-1][1]
        return math.nan

    def paper_course(self, variant: str) -> int:
        """The sign of the change of ``variant``'s paper curve from its first knot to its last
        (−1: it falls); 0 without a curve."""
        knots = self.paper_curves.get(variant, ())
        return 0 if len(knots) < 2 else int(math.copysign(1, knots[-1][1] - knots[0][1]))

    def paper_convergence(self, variants=None) -> int:
        """−1 when the spread of the paper's curves of ``variants`` (default: all; standard
        deviation across variants) is smaller at their last knot than at their first, i.e. they
        converge; +1 when it is larger (they spread out: the gating figure's curves all start
        near 0.018, ≈); 0 without curves of two variants."""
        knots = [k for v, k in self.paper_curves.items() if variants is None or v in variants]
        firsts, lasts = [k[0][1] for k in knots], [k[-1][1] for k in knots]
        if len(firsts) < 2:
            return 0
        return -1 if float(np.std(lasts)) < float(np.std(firsts)) else +1

    def paper_curve_frame(self) -> pd.DataFrame:
        """Paper reference curves as a long frame ``[variant, tokens_B, delta]`` (≈ knots)."""
        rows = [
            (v, x, y) for v, knots in self.paper_curves.items() for x, y in knots
        ]
        return pd.DataFrame(rows, columns=["variant", "tokens_B", "delta"])


#: Training length of the gating chapter at the ``cpu`` preset, in optimizer steps (4× the
#: preset's 250; 2.05 M tokens per run).
GATE_CPU_STEPS = 1000


# First logged point of the paper's curves, in B tokens (≈: the curves start at the left edge).
_X0 = 1.0

ABLATIONS: dict[str, Ablation] = {
    a.key: a
    for a in (
        Ablation(
            key="init",
            title="Initialisation ablation: N(0, 0.02) vs zero-initialised output projections",
            variants=("mha", "mqa", "gqa", "mla", "mfa", "tpa", "gla-2", "gla-4", "gta"),
            alt={"init": "normal"},
            rec={"init": "zero"},
            convention="ΔL = L(normal init) − L(zero init)",
            colors=INIT_COLORS,
            paper_curves={
                "tpa": ((_X0, 0.08), (100, 0.03)),
                "mha": ((_X0, 0.08), (20, 0.04), (100, 0.02)),
                "mqa": ((_X0, 0.07), (40, 0.03), (100, 0.02)),
                "gqa": ((_X0, 0.07), (100, 0.025)),
                "mla": ((_X0, 0.065), (100, 0.02)),
                "mfa": ((_X0, 0.06), (100, 0.02)),
                "gla-2": ((_X0, 0.055), (100, 0.02)),
                "gla-4": ((_X0, 0.05), (100, 0.02)),
                "gta": ((_X0, 0.045), (100, 0.02)),
            },
            paper_ppl={
                "mha": (14.094, 13.860), "mla": (13.927, 13.727),
                "gla-2": (14.009, 13.779), "tpa": (14.478, 13.985),
            },
            paper_ylim=(0.01, 0.09),
            claim="Zero-initialised output projections beat N(0, 0.02) for all nine baselines; "
                  "largest gain for TPA.",
            ci_variants=("gqa", "mla"),
            notebook="init_ablation",
            summary="zero vs normal initialisation of the output projections",
            claim_value="ΔL > 0 for all nine; TPA largest",
            ranking=("tpa", "TPA gains most from zero init (its ΔL minus the next largest)"),
            top_curve="tpa",
            slowest_fall="gta",
            seeds={"cpu": 10},
            looks={"cpu": (5, 10)},
            # at ci the pair runs at two more data orders and in the joint design, so that every
            # test build goes through both paths
            data_orders_declared={"cpu": (1, 2, 3, 4)},
            data_orders={"cpu": (1, 2, 3, 4), "ci": (1, 2)},
            joint_declared={"cpu": 10, "ci": 2},
            joint={"cpu": 10, "ci": 2},
            spot_check={"cpu": "mha", "gpu": "mha", "ci": "gqa"},
        ),
        Ablation(
            key="gate",
            title="Gating ablation: output gate off vs on",
            variants=("gqa", "mla", "gla-2", "mlra-2", "mlra-4"),
            alt={"gate": False},
            rec={"gate": True},
            convention="ΔL = L(no gate) − L(gate)",
            colors=GATE_COLORS,
            paper_curves={
                "gqa": ((_X0, 0.018), (100, 0.012)),
                "mla": ((_X0, 0.018), (20, 0.009), (100, 0.007)),
                "gla-2": ((_X0, 0.018), (20, 0.008), (100, 0.006)),
                "mlra-2": ((_X0, 0.018), (20, 0.009), (100, 0.007)),
                "mlra-4": ((_X0, 0.018), (20, 0.008), (100, 0.005)),
            },
            paper_ppl={
                "gqa": (14.139, 13.806), "mla": (13.727, 13.642), "gla-2": (13.779, 13.701),
                "mlra-2": (13.804, 13.651), "mlra-4": (13.672, 13.621),
            },
            paper_ylim=(0.003, 0.018),
            claim="The output gate helps GQA, MLA, GLA-2, MLRA-2 and MLRA-4; largest gain for "
                  "GQA; gated MLRA-4 is the paper's best model.",
            ci_variants=("gqa", "mla"),
            # At 250 steps the gate is behind at every depth of the scale ladder; at 8 layers
            # and 1000 steps (the ladder's long rung) GQA's ΔL takes the paper's sign
            # (docs/cpu_regime.md, "The default book").
            train={"cpu": (("max_steps", GATE_CPU_STEPS),)},
            notebook="gating_ablation",
            summary="the output gate",
            claim_value="ΔL > 0 for all five; GQA largest",
            ranking=("gqa", "GQA gains most from the gate (its ΔL minus the next largest)"),
            top_curve="gqa",
            lowest_end="mlra-4",
            seeds={"cpu": 10},
            looks={"cpu": (5, 10)},
            data_orders_declared={"cpu": (1, 2, 3, 4)},
            data_orders={"cpu": (1, 2, 3, 4)},
            joint_declared={"cpu": 10},
            joint={"cpu": 10},
            # the cheapest of the gating figure's 1000-step pairs at cpu
            spot_check={"cpu": "gla-2", "gpu": "gla-2", "ci": "mla"},
        ),
        Ablation(
            key="latent_scale",
            title="Latent-scaling ablation: scale constants off vs on",
            variants=("mla", "gla-2", "mlra-2"),
            alt={"latent_scale": False},
            rec={"latent_scale": True},
            convention="ΔL = L(no scale) − L(scale)",
            colors=GATE_COLORS,
            paper_ppl={
                "mla": (13.779, 13.727), "gla-2": (13.827, 13.779), "mlra-2": (13.808, 13.804),
            },
            claim="Latent scaling helps MLA and GLA-2, barely MLRA-2.",
            ci_variants=("mla", "gla-2"),
            notebook="latent_scaling",
            summary="the latent scaling constants",
            claim_value="ΔL > 0 for MLA, GLA-2; ≈ 0 for MLRA-2",
            near_zero=("mlra-2",),
            seeds={"cpu": 10},
            looks={"cpu": (5, 10)},
            # declared 2026-12-07, before any of its runs was read: the joint design and the
            # pair at seed 0 repeated at four more data orders, as the init and gating figures
            data_orders_declared={"cpu": (1, 2, 3, 4)},
            joint_declared={"cpu": 10},
            spot_check={"cpu": "mlra-2", "gpu": "mlra-2", "ci": "gla-2"},
        ),
        Ablation(
            key="double_heads",
            title="Double-heads ablation: 2× query heads at fixed parameters and KV cache",
            variants=("gqa", "mla", "gla-2"),
            alt={"head_multiplier": 2},
            rec={"head_multiplier": 1},
            convention="ΔL = L(2× heads) − L(1× heads)",
            colors=GATE_COLORS,
            paper_ppl={
                "gqa": (14.213, 14.139), "mla": (13.836, 13.727), "gla-2": (13.851, 13.779),
            },
            claim="Doubling heads at fixed parameters and KV cache hurts GQA, MLA and GLA-2 "
                  "(more heads alone do not explain MLRA).",
            ci_variants=("gqa", "mla"),
            notebook="double_heads",
            summary="doubled heads",
            claim_value="ΔL > 0 for GQA, MLA, GLA-2",
            seeds={"cpu": 10},
            looks={"cpu": (5, 10)},
            # declared 2026-12-07 with the latent-scaling figure's
            data_orders_declared={"cpu": (1, 2, 3, 4)},
            joint_declared={"cpu": 10},
            spot_check={"cpu": "gqa", "gpu": "gqa", "ci": "gqa"},
        ),
    )
}


def ablation(key: str) -> Ablation:
    """The :class:`Ablation` named ``key``.

    Raises:
        KeyError: unknown key; the message lists the allowed keys.
    """
    return lookup(ABLATIONS, key, f"unknown figure {key!r}; allowed")


@dataclass(frozen=True)
class Table(TablePlan):
    """A figure that is no ablation: the main-results table (``"main"``) or an axis of the scale
    ladder (``"ladder"``: depth and length; ``"ladder_width"``: width; their runs are
    :mod:`gtalib.book.design.ladder`'s).

    Attributes:
        key: its id (``"main"``, ``"ladder"``, ``"ladder_width"``).
        seeds: preset → seeds per configuration: the main table runs at least this many (the
            book's count when it asks for more); a ladder axis exactly this many, the count its
            runs were recorded at, and exists only at these presets.
        spot_check: preset → the variant whose seed-0 run every default book trains first.
        configs, ci_configs: the main table's configurations, ``(variant, options)``, at every
            preset but ``ci`` and at ``ci``.

    Raises:
        ValueError: a count that is not a positive integer, or a spot-checked variant the table
            does not show at that preset.
    """

    key: str
    seeds: dict = field(default_factory=dict)
    spot_check: dict = field(default_factory=dict)
    configs: tuple = ()
    ci_configs: tuple = ()

    def __post_init__(self):
        check_counts(self.key, "seeds", self.seeds)
        for preset, variant in self.spot_check.items():
            allowed = tuple(dict.fromkeys(v for v, _ in (
                self.ci_configs if preset == "ci" else self.configs)))
            if variant not in allowed:
                raise ValueError(f"figure {self.key!r}: spot_check[{preset!r}] = {variant!r} is "
                                 f"not shown at {preset!r}; allowed: {', '.join(allowed)}")


#: The main-results table: all eleven variants at the default options (zero init, no gate,
#: latent scale on, 1× heads), plus gated MLRA-4 (docs/paper_values.md "Main results" and gating
#: table); at ``ci`` the configurations the ci ablations already train. 5 seeds at ``cpu``.
MAIN = Table(
    key="main",
    seeds={"cpu": 5},
    spot_check={"cpu": "mha", "gpu": "mha", "ci": "gqa"},
    configs=tuple((v, {}) for v in PAPER_MAIN_PPL.index) + (("mlra-4", {"gate": True}),),
    ci_configs=(("gqa", {}), ("mla", {}), ("gla-2", {})),
)

#: The tables, by key: the main table and the scale ladder's two axes (3 seeds per depth and
#: length, 5 per width at ``cpu``; 2 each at ``ci``).
TABLES: dict[str, Table] = {t.key: t for t in (
    MAIN,
    Table(key="ladder", seeds={"cpu": 3, "ci": 2}),
    Table(key="ladder_width", seeds={"cpu": 5, "ci": 2}),
)}


def figure_spec(key: str) -> Ablation | Table:
    """The spec of figure ``key``: an ablation (:data:`ABLATIONS`, read at call time) or a
    table (:data:`TABLES`).

    Raises:
        KeyError: unknown key; the message lists the allowed keys.
    """
    return lookup({**ABLATIONS, **TABLES}, key, f"unknown figure {key!r}; allowed")


def by_preset(name: str, keys=None) -> dict[str, dict]:
    """A view of the specs' field ``name`` (a preset → value dict) turned around: preset →
    figure key → value, for the figures ``keys`` (default: every ablation, then the tables
    that have the field), each preset in the order the specs first name it."""
    specs = {**ABLATIONS, **TABLES} if keys is None else {k: figure_spec(k) for k in keys}
    out: dict[str, dict] = {}
    for key, spec in specs.items():
        for preset, value in getattr(spec, name, {}).items():
            out.setdefault(preset, {})[key] = value
    return out


# ---------------------------------------------------------------------------------------------
# Claims (docs/paper_values.md "Claims a reproduction checks")
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Claim:
    """One claim of the paper. ``source`` says where the book checks it: an ablation key,
    ``"main"``, ``"tables"``, ``"decode"`` or ``"fresh-layers"`` (measured on freshly
    initialised layers)."""

    number: int
    text: str
    paper_value: str
    source: str
    #: the claim in one short line with the paper's value, as the introduction's headline
    #: table prints it (``""``: :attr:`text`)
    headline: str = ""

    @property
    def short(self) -> str:
        """:attr:`headline`, else :attr:`text`."""
        return self.headline or self.text


_FIXED_CLAIMS = (
    Claim(0, "Per-device KV load under TP as in Table 1; MLRA-2/4 total cache equals MLA's "
             "(4.5 dₕ).", "MLRA-4 1.5 dₕ per device at TP ≥ 4; MLA 4.5 dₕ at every TP",
          "tables", "KV per device: MLRA-4 1.5 dₕ at TP ≥ 4, MLA 4.5"),
    Claim(0, f"All variants parameter-matched at ≈ {PAPER_MATCHED_PARAMS_B:g} B by the FFN "
             "width alone.",
          "2.872–2.873 B", "tables",
          f"Every variant ≈ {PAPER_MATCHED_PARAMS_B:g} B by the FFN width alone"),
    Claim(0, "RoPE/NoPE key variance ratio at init ≈ d/d_c without scaling, ≈ 1 with it.",
          "6 (MLA) / 24 (128-wide block) → ≈ 1", "fresh-layers",
          "Latent scaling: key variance ratio d/d_c → ≈ 1"),
)
_LAST_CLAIMS = (
    Claim(0, "MLRA-4 has the lowest validation loss of the eleven; MLRA-4 + gate is lower "
             "still.", "avg PPL 13.672; gated 13.621", "main",
          "MLRA-4 lowest PPL (13.672), gated lower (13.621)"),
    Claim(0, "Decode latency: MLRA-4 (TP 4) < GQA (TP 8) < GLA-2 (TP 2) < MLA (DP); MLRA-4 "
             "≈ 2.8× faster than MLA, 1.05–1.26× faster than GQA.",
          "308 / 387 / 493 / 874 µs at 2M context (≈)", "decode",
          "Decode: MLRA-4 fastest on an H100, ≈ 2.8× MLA"),
)


def claims() -> tuple[Claim, ...]:
    """The paper's claims, numbered in order: the tables', the fresh layers', one per ablation
    figure (in :data:`ABLATIONS` order: its :attr:`Ablation.claim` and
    :attr:`~Ablation.claim_value`), the main table's, the decode latency's. Read at call time,
    so a figure added to :data:`ABLATIONS` brings its claim."""
    figures = tuple(Claim(0, a.claim, a.claim_value, key,
                          f"{a.heading.removesuffix(' ablation')}: {a.claim_value}")
                    for key, a in ABLATIONS.items())
    return tuple(replace(c, number=i)
                 for i, c in enumerate((*_FIXED_CLAIMS, *figures, *_LAST_CLAIMS), 1))


def rankings() -> dict[str, tuple[str, bool, str]]:
    """The ranking claims, each tested on the claims page as a difference paired by seed:
    figure → (the configuration the paper ranks first, lowest-is-the-claim, the claim). The
    ablations' come from their :attr:`Ablation.ranking` (the largest ΔL); the main table's is
    the lowest perplexity."""
    return {
        **{key: (a.ranking[0], False, a.ranking[1]) for key, a in ABLATIONS.items() if a.ranking},
        "main": ("MLRA-4", True, "MLRA-4 has the lowest perplexity of the 11 (the best other's "
                                 "minus MLRA-4's)"),
    }


