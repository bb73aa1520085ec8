"""Each paper figure and table as data: which runs, which difference, the paper's reference values.

Everything shown as "paper" in the book comes from this module, and every value here is taken
from ``docs/paper_values.md`` (facts from *Multi-Head Low-Rank Attention*, arXiv 2603.02188:
its tables, its figures read by eye (marked ≈), and the authors' released configuration).

An ablation figure compares two *arms* of the same variant: ``alt`` (the configuration the paper
argues against) and ``rec`` (the one it recommends). Its loss difference is always

    ΔL = L(alt) − L(rec)     (positive ⇒ the paper's recommended choice is better)

computed from paired runs (same data order, same seed) on the same steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from gtalib.book import ladders

# ---------------------------------------------------------------------------------------------
# Paper colours (docs/paper_values.md, "The ablation figures"); matplotlib colour names.
# ---------------------------------------------------------------------------------------------

#: Colours of the initialisation figure (docs/paper_values.md: MHA purple, MQA brown, GQA teal, MLA blue,
#: MFA pink, TPA orange, GLA-2 gray, GLA-4 light blue, GTA green).
INIT_COLORS: dict[str, str] = {
    "mha": "tab:purple", "mqa": "tab:brown", "gqa": "teal", "mla": "tab:blue",
    "mfa": "tab:pink", "tpa": "tab:orange", "gla-2": "tab:gray", "gla-4": "lightskyblue",
    "gta": "tab:green",
}
#: Colours of the gating figure (docs/paper_values.md: GQA teal, MLA blue, GLA-2 gray, MLRA-2 orange,
#: MLRA-4 red); reused by the latent-scaling and double-heads figures, whose colours the paper
#: text does not list.
GATE_COLORS: dict[str, str] = {
    "gqa": "teal", "mla": "tab:blue", "gla-2": "tab:gray", "mlra-2": "tab:orange",
    "mlra-4": "tab:red",
}
#: One colour per variant for plots that show all eleven (main results, decode speed).
VARIANT_COLORS: dict[str, str] = {**INIT_COLORS, "mlra-2": "tab:orange", "mlra-4": "tab:red"}
# MLRA-2 and TPA are both orange in the paper (different figures); in all-variant plots TPA
# takes gold so the two stay distinguishable.
VARIANT_COLORS["tpa"] = "goldenrod"

DISPLAY = {
    "mha": "MHA", "mqa": "MQA", "gqa": "GQA", "mla": "MLA", "mfa": "MFA", "tpa": "TPA",
    "gla-2": "GLA-2", "gla-4": "GLA-4", "gta": "GTA", "mlra-2": "MLRA-2", "mlra-4": "MLRA-4",
}


def display_name(variant: str) -> str:
    """The paper's spelling of a canonical variant name (``"mlra-4"`` → ``"MLRA-4"``).

    Raises:
        KeyError: unknown variant; the message lists the known ones.
    """
    return _lookup(DISPLAY, variant, f"unknown variant {variant!r}; known")


def _lookup(table: dict, key, message: str):
    """``table[key]``, or a KeyError ``"<message>: <the allowed keys>"``."""
    try:
        return table[key]
    except KeyError:
        raise KeyError(f"{message}: {', '.join(table)}") from None


# ---------------------------------------------------------------------------------------------
# Paper reference values
# ---------------------------------------------------------------------------------------------

#: The seven held-out validation sets of the paper's main table, in its column order.
PAPER_SOURCES = ("Wikipedia", "C4", "Pile", "RefinedWeb", "Cosmopedia", "FineWeb", "FineWeb-Edu")

#: Paper main table: validation perplexity, 7 sets and their average (docs/paper_values.md,
#: "Main results", 2.9 B parameters, 98.3 B tokens, zero init, no gate).
PAPER_MAIN_PPL = pd.DataFrame(
    [
        ("mha", 14.624, 16.575, 12.929, 18.698, 9.102, 15.656, 9.434, 13.860),
        ("mqa", 15.134, 16.837, 14.008, 19.202, 9.484, 15.942, 9.533, 14.306),
        ("gqa", 15.057, 16.628, 13.758, 18.885, 9.504, 15.713, 9.427, 14.139),
        ("mla", 14.567, 16.345, 12.965, 18.523, 8.966, 15.440, 9.284, 13.727),
        ("mfa", 15.693, 16.738, 13.903, 19.125, 9.423, 15.815, 9.506, 14.315),
        ("tpa", 14.789, 16.622, 13.333, 18.971, 9.130, 15.717, 9.333, 13.985),
        ("gla-2", 14.605, 16.323, 13.225, 18.509, 9.118, 15.424, 9.249, 13.779),
        ("gla-4", 14.547, 16.436, 13.229, 18.578, 9.076, 15.535, 9.307, 13.815),
        ("gta", 14.733, 16.599, 13.402, 18.924, 9.129, 15.672, 9.346, 13.972),
        ("mlra-2", 14.615, 16.342, 13.236, 18.602, 9.153, 15.439, 9.242, 13.804),
        ("mlra-4", 14.407, 16.286, 13.124, 18.398, 8.937, 15.361, 9.193, 13.672),
    ],
    columns=["variant", *PAPER_SOURCES, "avg"],
).set_index("variant")

#: Paper: gated MLRA-4, average perplexity over the 7 sets (docs/paper_values.md, gating table).
PAPER_MLRA4_GATED_AVG_PPL = 13.621

#: Paper zero-shot average accuracy over 7 tasks (%), docs/paper_values.md "Main results".
PAPER_ZERO_SHOT = {
    "mlra-4": 58.84, "mla": 58.75, "mlra-2": 58.68, "mfa": 58.53, "gla-2": 58.30,
    "gla-4": 58.19, "gqa": 57.89, "tpa": 57.87, "mha": 57.81, "gta": 57.80, "mqa": 57.55,
}

#: Paper decode latency of one attention layer, batch 1, one H100, in µs (≈, read off the
#: figure; docs/paper_values.md "Decoding speed"). Columns: context length in K tokens.
PAPER_DECODE_US = pd.DataFrame(
    {
        "GQA (TP 8)": [50.8, 75.8, 120.4, 208.4, 386.5],
        "MLA (DP)": [136.0, 188.6, 293.0, 490.7, 874.2],
        "GLA-2 (TP 2)": [63.5, 93.0, 152.3, 267.1, 493.4],
        "MLRA-4 (TP 4)": [48.4, 68.4, 103.5, 173.2, 308.2],
    },
    index=pd.Index([128, 256, 512, 1024, 2048], name="context (K tokens)"),
).T
#: Bandwidth of the paper's GPU (H100 HBM, bytes/s; docs/paper_values.md "Physical limits").
H100_HBM_BYTES_PER_S = 3.35e12

# Gated attention (Qiu et al. 2025). Not the MLRA paper's values: the book labels them "Qiu et
# al.". Source: Qiu et al., "Gated Attention for Large Language Models: Non-linearity, Sparsity,
# and Attention-Sink-Free", arXiv 2505.06708, Table 4 (docs/paper_values.md, "Gated attention
# (Qiu et al. 2025)"; what each probe measures here: docs/probes.md).

#: Qiu et al.'s values of the gate probes of :mod:`gtalib.training.probes`, keyed by the ``probes.json``
#: key, as ``(without the gate, with the gate)``: mean gate score ``σ(x̃ W_g)`` (gated model
#: only, NaN without the gate), attention on the first token (0.467 → 0.048), largest residual
#: activation ``|h|`` (1053 → 94, their "massive activations").
QIU_PROBES: dict[str, tuple[float, float]] = {
    "gate_mean": (math.nan, 0.116),
    "first_token_share": (0.467, 0.048),
    "max_abs_residual": (1053.0, 94.0),
}
#: The scale of Qiu et al.'s Table 4, as the book names it next to their values.
QIU_SCALE = "1.7 B+ parameters, 400 B–3.5 T tokens"


# ---------------------------------------------------------------------------------------------
# Ablation figures
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ablation:
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
        seeds: preset → the seeds this figure runs at that preset when the book asks for
            fewer (:func:`figure_seeds`): one n for every variant and both arms, fixed before
            any run.
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
    seeds: dict = field(default_factory=dict)

    def __post_init__(self):
        for preset, n in self.seeds.items():
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ValueError(f"Ablation {self.key!r}: seeds[{preset!r}] = {n!r}; allowed: a "
                                 "positive integer (one count for every variant of the figure)")

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

    def paper_curve_frame(self) -> pd.DataFrame:
        """Paper reference curves as a long frame ``[variant, tokens_B, delta]`` (≈ knots)."""
        rows = [
            (v, x, y) for v, knots in self.paper_curves.items() for x, y in knots
        ]
        return pd.DataFrame(rows, columns=["variant", "tokens_B", "delta"])


#: Training length of the gating chapter at the ``cpu`` preset, in optimizer steps (4× the
#: preset's 250; 2.05 M tokens per run).
GATE_CPU_STEPS = 1000

#: Seeds of the ablation figures and of the main-results table at the ``cpu`` preset, when the
#: book asks for fewer (its default is 3): one n per figure, the same for every variant and both
#: arms, fixed before the runs, never raised where a result looked undecided (that would
#: inflate false positives). At 5 the interval's half-width is 1.24 standard deviations of ΔL
#: against 2.48 at 3 (Student t); every run beyond the book's count is recorded. Every figure
#: runs it, the gating figure (whose runs are 4× longer) included.
CPU_SEEDS = 5

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
            seeds={"cpu": CPU_SEEDS},
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
            seeds={"cpu": CPU_SEEDS},
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
            seeds={"cpu": CPU_SEEDS},
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
            seeds={"cpu": CPU_SEEDS},
        ),
    )
}


def ablation(key: str) -> Ablation:
    """The :class:`Ablation` named ``key``.

    Raises:
        KeyError: unknown key; the message lists the allowed keys.
    """
    return _lookup(ABLATIONS, key, f"unknown figure {key!r}; allowed")


#: The main-results table: all eleven variants at the default options (zero init, no gate,
#: latent scale on, 1× heads), plus gated MLRA-4 (docs/paper_values.md "Main results" and gating table).
MAIN_CONFIGS: tuple[tuple[str, dict], ...] = tuple(
    (v, {}) for v in PAPER_MAIN_PPL.index
) + (("mlra-4", {"gate": True}),)
#: Main-results subset at the ``ci`` preset: configurations the ci ablations already train.
MAIN_CI_CONFIGS: tuple[tuple[str, dict], ...] = (("gqa", {}), ("mla", {}), ("gla-2", {}))


def config_label(variant: str, options: dict) -> str:
    """Human label of a configuration: ``"MLRA-4 + gate"``, ``"MLA (normal init)"``."""
    parts = []
    for k, v in sorted(options.items()):
        if k == "gate":
            parts.append("+ gate" if v else "no gate")
        elif k == "init":
            parts.append(f"{v} init")
        elif k == "latent_scale":
            parts.append("scale" if v else "no scale")
        elif k == "head_multiplier":
            parts.append(f"{v}× heads")
        else:
            parts.append(f"{k}={v}")
    return " ".join([display_name(variant), *parts])


def figure_variants(key: str, preset: str, variants=None) -> tuple[str, ...]:
    """The variants a figure shows at ``preset``: ``variants`` if given (validated against the
    figure's own list), the small ``ci_variants`` subset at the ``ci`` preset, else all of the
    paper's.

    Raises:
        KeyError: a requested variant that the paper's figure does not contain.
    """
    fig = ablation(key)
    if variants is None:
        return fig.ci_variants if preset == "ci" else fig.variants
    from gtalib.model.config import canonical_variant

    if isinstance(variants, str):
        variants = [v.strip() for v in variants.split(",") if v.strip()]
    out = []
    for v in variants:
        cv = canonical_variant(v)
        if cv not in fig.variants:
            raise KeyError(
                f"variant {v!r} is not in the {key} figure; allowed: {', '.join(fig.variants)}"
            )
        out.append(cv)
    return tuple(out)


def main_configs(preset: str) -> tuple[tuple[str, dict], ...]:
    """Configurations of the main-results table at ``preset`` (all twelve, or the ci subset)."""
    return MAIN_CI_CONFIGS if preset == "ci" else MAIN_CONFIGS


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


CLAIMS: tuple[Claim, ...] = (
    Claim(1, "Per-device KV load under TP as in Table 1; MLRA-2/4 total cache equals MLA's "
             "(4.5 d_h).", "MLRA-4 1.5 d_h per device at TP ≥ 4; MLA 4.5 d_h at every TP",
          "tables"),
    Claim(2, "All variants parameter-matched at ≈ 2.87 B by the FFN width alone.",
          "2.872–2.873 B", "tables"),
    Claim(3, "RoPE/NoPE key variance ratio at init ≈ d/d_c without scaling, ≈ 1 with it.",
          "6 (MLA) / 24 (128-wide block) → ≈ 1", "fresh-layers"),
    Claim(4, ABLATIONS["init"].claim, "ΔL > 0 for all nine; TPA largest", "init"),
    Claim(5, ABLATIONS["gate"].claim, "ΔL > 0 for all five; GQA largest", "gate"),
    Claim(6, ABLATIONS["latent_scale"].claim, "ΔL > 0 for MLA, GLA-2; ≈ 0 for MLRA-2",
          "latent_scale"),
    Claim(7, ABLATIONS["double_heads"].claim, "ΔL > 0 for GQA, MLA, GLA-2", "double_heads"),
    Claim(8, "MLRA-4 has the lowest validation loss of the eleven; MLRA-4 + gate is lower "
             "still.", "avg PPL 13.672; gated 13.621", "main"),
    Claim(9, "Decode latency: MLRA-4 (TP 4) < GQA (TP 8) < GLA-2 (TP 2) < MLA (DP); MLRA-4 "
             "≈ 2.8× faster than MLA, 1.05–1.26× faster than GQA.",
          "308 / 387 / 493 / 874 µs at 2M context (≈)", "decode"),
)


# ---------------------------------------------------------------------------------------------
# Runs behind a figure
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunRef:
    """One training run a figure needs: a configuration and a seed.

    ``arm`` is ``"alt"`` or ``"rec"`` for ablations (see module docstring), ``"main"`` for
    the main-results table, and a ladder arm name (``"scaled"``) for the scale ladder's extra
    arms; ``options`` are ``gtalib.model.presets.model_config`` keywords (the ladder adds
    ``n_layer``); ``train`` are :func:`gtalib.training.config.train_config` overrides of the
    preset's training settings (the ladder's longer runs set ``max_steps``).
    """

    variant: str
    arm: str
    options: tuple  # sorted (key, value) pairs: hashable
    seed: int
    train: tuple = ()  # sorted (field, value) pairs: hashable

    @property
    def label(self) -> str:
        return config_label(self.variant, dict(self.options))


def _opts(d: dict) -> tuple:
    return tuple(sorted(d.items()))


def figure_seeds(key: str, preset: str, seeds: int, variants=None, max_steps=None
                 ) -> dict[str, int]:
    """Seeds per variant of an ablation figure: the larger of the book's ``seeds`` and the
    figure's own count at ``preset`` (:attr:`Ablation.seeds`), the same for every variant. Like
    :attr:`Ablation.train` this is the figure's own design at the preset's length, so a
    book-wide ``max_steps`` override falls back to the book's count.

    Returns:
        variant → number of seeds (pairs), in the figure's variant order.
    Raises:
        ValueError: ``seeds`` < 1.  KeyError: unknown figure or variant.
    """
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise ValueError(f"seeds must be a positive integer, got {seeds!r}")
    n = max(seeds, ablation(key).seeds.get(preset, 0)) if max_steps is None else seeds
    return dict.fromkeys(figure_variants(key, preset, variants), n)


def figure_runs(key: str, preset: str, seeds: int, variants=None, max_steps=None
                ) -> list[RunRef]:
    """Every run an ablation figure needs: both arms of each variant for its seeds
    ``0..n-1`` (:func:`figure_seeds`), at the figure's own training length at ``preset``
    (:attr:`Ablation.train`) unless the book overrides the length for every figure
    (``max_steps`` not ``None``).

    Raises:
        ValueError: ``seeds`` < 1.  KeyError: unknown figure or variant.
    """
    fig = ablation(key)
    train = fig.train.get(preset, ()) if max_steps is None else ()
    return [
        RunRef(v, arm, _opts(opts), s, train)
        for v, n in figure_seeds(key, preset, seeds, variants, max_steps).items()
        for arm, opts in (("alt", fig.alt), ("rec", fig.rec))
        for s in range(n)
    ]


#: Seeds of the main-results table beyond the book's count, per preset: the ``cpu`` table runs
#: :data:`CPU_SEEDS` for all 12 configurations, like the ablation figures whose zero-init arms are
#: its plain runs (none under a book-wide ``max_steps``, like :func:`figure_seeds`).
MAIN_SEEDS = {"cpu": CPU_SEEDS}


def main_seeds(preset: str, seeds: int, max_steps=None) -> int:
    """Seeds of the main-results table: the larger of the book's ``seeds`` and
    :data:`MAIN_SEEDS` of ``preset`` (``seeds`` alone under a book-wide ``max_steps``).

    Raises:
        ValueError: ``seeds`` not a positive integer.
    """
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise ValueError(f"seeds must be a positive integer, got {seeds!r}")
    return max(seeds, MAIN_SEEDS.get(preset, 0)) if max_steps is None else seeds


def seed_counts(preset: str, seeds: int, max_steps=None) -> dict[str, int]:
    """Seeds of every ablation figure (by key) and of the main-results table (``"main"``) when
    the book asks for ``seeds`` (:func:`figure_seeds`, :func:`main_seeds`).

    Raises:
        ValueError: ``seeds`` not a positive integer.
    """
    counts = {key: max(figure_seeds(key, preset, seeds, max_steps=max_steps).values())
              for key in ABLATIONS}
    return {**counts, "main": main_seeds(preset, seeds, max_steps)}


def main_runs(preset: str, seeds: int, max_steps=None) -> list[RunRef]:
    """Every run of the main-results table at ``preset`` for seeds ``0..n-1``, ``n`` from
    :func:`main_seeds`."""
    n = main_seeds(preset, seeds, max_steps)
    return [RunRef(v, "main", _opts(o), s) for v, o in main_configs(preset) for s in range(n)]


# ---------------------------------------------------------------------------------------------
# The scale ladder: ΔL against depth and training length; the gap against width
# ---------------------------------------------------------------------------------------------

def ladder(preset: str) -> ladders.Ladder:
    """The :class:`~gtalib.book.ladders.Ladder` of ``preset``.

    Raises:
        KeyError: a preset without a ladder; the message lists those with one.
    """
    return _lookup(ladders.LADDERS, preset, f"preset {preset!r} has no scale ladder; allowed")


def ladder_runs(preset: str, seeds: int | None = None, part: str | None = None) -> list[RunRef]:
    """Every run of ``preset``'s ladder for seeds ``0..seeds-1``: ``part="init"``, ``"gate"``
    (the depth and token axes), ``"width"`` (the width axis) or all three (``None``). Each ref
    carries its depth in ``options["n_layer"]`` and its length in ``train["max_steps"]``; a
    width-axis ref has arm ``"main"`` and, in ``options``, the sizes of its width that differ
    from the preset's (:data:`~gtalib.book.ladders.WIDTH_FIELDS`), so at the preset's own width
    it is the same run as the token axis' and the main table's.

    Args:
        seeds: ``None``: each axis its own count (:attr:`gtalib.book.ladders.Ladder.seeds` for
            depth and length, :attr:`~gtalib.book.ladders.Ladder.width_seeds` for width).
    Raises:
        ValueError: ``seeds`` < 1 or an unknown ``part``.  KeyError: no ladder at ``preset``.
    """
    from gtalib.model.presets import PRESETS

    lad = ladder(preset)
    if seeds is not None and (not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1):
        raise ValueError(f"seeds must be a positive integer or None, got {seeds!r}")
    if part not in (None, "init", "gate", "width"):
        raise ValueError(f"part must be 'init', 'gate', 'width' or None, got {part!r}")
    n = lad.seeds if seeds is None else seeds
    groups = []
    if part in (None, "init"):
        groups.append((lad.init_variants, lad.init_arms, (1,), lad.depths))
        groups.append((lad.scaled_variants, (lad.scaled_arm,), (1,), lad.depths))
    if part in (None, "gate"):
        groups.append((lad.gate_variants, lad.gate_arms, lad.step_factors, lad.depths))
        groups.append((lad.token_variants, lad.gate_arms, lad.token_factors, (lad.token_depth,)))
    refs = [
        RunRef(v, arm, _opts({**dict(opts), "n_layer": depth}), s,
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
        n = lad.width_seeds if seeds is None else seeds
        for size in lad.widths:
            sizes = {k: x for k, x in zip(ladders.WIDTH_FIELDS, size) if own[k] != x}
            refs += [RunRef(v, "main", _opts({**sizes, "n_layer": lad.token_depth}), s,
                            train=(("max_steps", lad.base_steps),))
                     for v in lad.width_variants for s in range(n)]
    return list(dict.fromkeys(refs))  # the token axis shares GQA's runs with the depth axis


#: Option defaults of ``gtalib.model.presets.model_config`` (docs/variants.md "Ablation switches").
OPTION_DEFAULTS = {"init": "zero", "gate": False, "latent_scale": True, "head_multiplier": 1}


def canonical_options(options) -> tuple:
    """Options with defaults dropped, so ``{"gate": False}`` and ``{}`` name the same model."""
    d = dict(options)
    return _opts({k: v for k, v in d.items() if OPTION_DEFAULTS.get(k, object()) != v})


#: Tokenizer of each preset's corpus (presets.py: byte-level vocab 256 for cpu/ci, GPT-2 BPE
#: padded to 50304 for gpu/paper).
def preset_tokenizer(preset: str) -> str:
    """``"bytes"`` or ``"gpt2"``: the tokenizer a preset's vocabulary implies."""
    from gtalib.model.presets import PRESETS

    if preset not in PRESETS:
        raise KeyError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
    return "bytes" if PRESETS[preset]["vocab_size"] == 256 else "gpt2"
