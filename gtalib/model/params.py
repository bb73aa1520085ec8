"""Parameter counting and the FFN-width rule that matches every variant to the MHA baseline.

docs/variants.md, "Parameter matching and paper sizes": all variants are matched at about 2.87 B
parameters by changing only the SwiGLU width F. A SwiGLU layer has ``3·d·F`` parameters, so the
matched width solves ``3·d·n_layer·F = P_ref − P_variant(F = 0)`` exactly, then rounds.

Rounding rule: nearest multiple of ``multiple``. With ``multiple = 8`` at paper size this
reproduces every published width (MHA 8192, MQA 10152, GQA 9728, MFA 8024, TPA 10760, GTA 9960,
MLA 9448, GLA-2 10048, GLA-4 10136, MLRA-2 10048, MLRA-4 9880; gated −1024 exactly; double heads
7680 / 7320 / 8344). Small presets use ``multiple = 1``: a multiple of 8 would move totals by up
to ``4·3·d·n_layer`` parameters, more than 0.1 % of a d = 128 model.
"""

from __future__ import annotations

import functools

import torch

from gtalib.model.config import VARIANT_SIZES, ModelConfig


def count_params(cfg: ModelConfig) -> dict[str, int]:
    """Count parameters by building one layer of the model on the meta device (no memory).

    Every layer is identical, so ``total = embedding + final norm + n_layer · layer``.

    Args:
        cfg: any config; ``intermediate_size=None`` counts the MLPs at F = 0.
    Returns:
        ``dict(total=..., attn_per_layer=..., mlp_per_layer=..., embedding=...)``: ``total`` counts
        the tied embedding once; ``attn_per_layer`` is the attention module of one layer (its
        internal RMSNorm gains and gate included, the block's pre-norm excluded); ``mlp_per_layer``
        is ``3·d_model·F``.
    Raises:
        ValueError / KeyError: as :meth:`ModelConfig.resolved` and ``build_attention``.
    """
    return dict(_count_params(cfg))


@functools.lru_cache(maxsize=1024)
def _count_params(cfg: ModelConfig) -> tuple:
    from gtalib.model.gpt import GPT  # gtalib.model.gpt imports the attention registry

    F = cfg.intermediate_size or 0
    with torch.device("meta"):
        model = GPT(cfg.replace(n_layer=1, intermediate_size=max(F, 1)))
    block = model.blocks[0]
    layer = sum(p.numel() for p in block.parameters()) - 3 * cfg.d_model * (max(F, 1) - F)
    outside = model.num_params() - sum(p.numel() for p in block.parameters())
    attn = sum(p.numel() for p in block.attn.parameters())
    return (("total", outside + cfg.n_layer * layer), ("attn_per_layer", attn),
            ("mlp_per_layer", 3 * cfg.d_model * F), ("embedding", model.wte.weight.numel()))


def default_intermediate_size(d_model: int, multiple: int = 8) -> int:
    """SwiGLU width with the parameters of a 4·d GELU MLP: ``8·d/3`` rounded to the nearest
    ``multiple`` (Shazeer 2020; 8192 at d = 3072, the paper's MHA width)."""
    return multiple * int(8 * d_model / 3 / multiple + 0.5)


def match_intermediate_size(
    cfg: ModelConfig,
    reference: str = "mha",
    reference_intermediate_size: int | None = None,
    multiple: int = 1,
) -> int:
    """The FFN width F that makes ``cfg`` match the reference model's parameter count.

    The reference is ``cfg`` with ``variant=reference``, no gate, one head multiplier and width
    ``reference_intermediate_size`` (default :func:`default_intermediate_size`): the plain model
    of the same shared sizes, so gate and double heads are re-matched automatically.

    Args:
        cfg: the model to size (its own ``intermediate_size`` is ignored), as typed: pass a
            double-heads config unresolved (``head_multiplier=2``), since ``resolved()`` folds the
            multiplier into ``n_head`` and the reference would then get the doubled heads too.
        reference: variant of the baseline (paper: ``"mha"``).
        reference_intermediate_size: the baseline's F (paper: 8192).
        multiple: F is rounded to the nearest multiple (paper: 8; see the module docstring).
    Returns:
        F (int, > 0).
    Raises:
        ValueError: the variant's attention alone exceeds the reference's parameters (F <= 0).
    """
    if reference_intermediate_size is None:
        reference_intermediate_size = default_intermediate_size(cfg.d_model)
    # Only the shared sizes carry over: the reference derives its own variant sizes.
    ref = cfg.replace(variant=reference, variant_source=None, gate=False, head_multiplier=1,
                      latent_scale=True,
                      intermediate_size=reference_intermediate_size,
                      **{name: None for name in VARIANT_SIZES})
    target = count_params(ref)["total"]
    base = count_params(cfg.replace(intermediate_size=None))["total"]
    exact = (target - base) / (3 * cfg.d_model * cfg.n_layer)
    F = multiple * int(exact / multiple + 0.5)
    if F <= 0:
        raise ValueError(
            f"cannot match {cfg.variant!r} to {reference!r}: its attention alone exceeds the "
            f"reference's parameters (solved intermediate_size={exact:.1f})"
        )
    return F
