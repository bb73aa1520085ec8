"""Named presets: the shared sizes of a model family; every variant's sizes are derived.

``model_config(preset, variant, **options)`` returns a resolved :class:`ModelConfig` with the FFN
width F solved by :func:`gtalib.model.params.match_intermediate_size` against the preset's MHA model, so
every variant (and its gated / double-heads configurations) of a preset has the MHA baseline's
parameter count to within 0.1 %. The MHA baseline's own F follows one rule at every preset and
every width: ``8·d_model/3`` rounded to a multiple of 8
(:func:`gtalib.model.params.default_intermediate_size`; paper 8192, ``gpu`` 1368, ``cpu`` and
``ci`` 344), so a model given another ``d_model`` (the scale ladder's width axis) is matched to
the MHA model of *its* width, not of the preset's.

=========  ========================================================================  ==========
preset     shared sizes                                                              about
=========  ========================================================================  ==========
``paper``  24 layers, d 3072, 24 heads × 128, vocab 50304 (GPT-2 BPE), block 2048      2.87 B
``gpu``    8 layers, d 512, 8 heads × 64, vocab 50304, block 1024                       51 M
``cpu``    8 layers, d 128, 4 heads × 32, vocab 256 (bytes), block 128, GQA group 2    1.6 M
``ci``     2 layers, d 128, 4 heads × 32, vocab 256, block 64, GQA group 2             0.43 M
=========  ========================================================================  ==========

``cpu`` has 8 layers because the scale ladder (``docs/cpu_regime.md``) measured the
initialisation effect with the paper's sign (zero init ahead) for MHA, MLA and TPA at 8 layers
and the opposite sign for MHA and MLA at 2 and 4. ``ci`` keeps d = 128: at d = 64 integer FFN widths cannot bring every variant within 0.1 % of the
MHA total (one unit of F is ``3·d·n_layer`` parameters, ~0.17 % of a d = 64 model); its shorter
block keeps tests fast.

Training settings live in :mod:`gtalib.training.config` (``TRAIN_PRESETS``, ``train_config``), keyed by
the same preset names (the training layer reads this one; this one never reads it).
"""

from __future__ import annotations

from gtalib.model.config import VARIANTS, ModelConfig, canonical_variant
from gtalib.model.params import default_intermediate_size, match_intermediate_size

#: Shared sizes per preset. ``ffn_multiple``: rounding of the matched widths (paper 8, see
#: gtalib.model.params); the MHA baseline's width is :func:`mha_intermediate_size`.
PRESETS: dict[str, dict] = {
    "paper": dict(n_layer=24, d_model=3072, n_head=24, head_dim=128, vocab_size=50304,
                  block_size=2048, gqa_group=4, ffn_multiple=8),
    "gpu": dict(n_layer=8, d_model=512, n_head=8, head_dim=64, vocab_size=50304,
                block_size=1024, gqa_group=4, ffn_multiple=1),
    "cpu": dict(n_layer=8, d_model=128, n_head=4, head_dim=32, vocab_size=256,
                block_size=128, gqa_group=2, ffn_multiple=1),
    "ci": dict(n_layer=2, d_model=128, n_head=4, head_dim=32, vocab_size=256,
               block_size=64, gqa_group=2, ffn_multiple=1),
}


def mha_intermediate_size(d_model: int) -> int:
    """The MHA baseline's SwiGLU width F at width ``d_model``, the reference every variant is
    matched to: ``8·d_model/3`` rounded to the nearest multiple of 8, the parameters of a
    4·d GELU MLP (Shazeer 2020; :func:`gtalib.model.params.default_intermediate_size`). The
    paper's MHA has 8192 at d 3072 (docs/variants.md, "Parameter matching and paper sizes");
    ``gpu`` 1368 at d 512; ``cpu`` and ``ci`` 344 at d 128; 680 at d 256.

    Raises:
        ValueError: ``d_model`` not a positive integer.
    """
    if not isinstance(d_model, int) or isinstance(d_model, bool) or d_model < 1:
        raise ValueError(f"d_model must be a positive integer, got {d_model!r}")
    return default_intermediate_size(d_model, multiple=8)


def preset_tokenizer(preset: str) -> str:
    """``"bytes"`` or ``"gpt2"``: the tokenizer a preset's vocabulary implies (:data:`PRESETS`:
    byte-level vocabulary 256 for cpu/ci, GPT-2 BPE padded to 50304 for gpu/paper).

    Raises:
        KeyError: unknown preset; the message lists the allowed ones.
    """
    if preset not in PRESETS:
        raise KeyError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
    return "bytes" if PRESETS[preset]["vocab_size"] == 256 else "gpt2"


def model_config(preset: str, variant: str, **options) -> ModelConfig:
    """The resolved, parameter-matched config of ``variant`` at ``preset``.

    Args:
        preset: one of :data:`PRESETS`.
        variant: any spelling accepted by :func:`gtalib.model.config.canonical_variant`.
        **options: :class:`ModelConfig` fields to override (``gate``, ``init``, ``latent_scale``,
            ``head_multiplier``, ``attn_impl``, or sizes). ``intermediate_size`` given explicitly
            is kept; otherwise F is solved against the MHA model of the same shared sizes, whose
            F is :func:`mha_intermediate_size` of the config's ``d_model``.
    Raises:
        KeyError: unknown preset or variant (lists the allowed names).
        ValueError: an option the variant cannot take (names the parameter).
    """
    if preset not in PRESETS:
        raise KeyError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
    p = dict(PRESETS[preset])
    multiple = p.pop("ffn_multiple")
    cfg = ModelConfig(variant=canonical_variant(variant), **{**p, **options})
    if cfg.intermediate_size is None:
        # the reference is the MHA model of the config's own width (a width override included)
        F = match_intermediate_size(cfg, "mha", multiple=multiple,
                                    reference_intermediate_size=mha_intermediate_size(cfg.d_model))
        cfg = cfg.replace(intermediate_size=F)
    return cfg.resolved()


def preset_variants() -> tuple[str, ...]:
    """All variant names (canonical), in the paper's order."""
    return VARIANTS
