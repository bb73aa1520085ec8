"""Model configuration, variant names and the rules that derive every variant's sizes.

One frozen dataclass, :class:`ModelConfig`, describes a model. Variant-specific sizes (KV heads,
latent ranks, RoPE width, TPA ranks, MFA head width) are derived from the paper's ratios by
:meth:`ModelConfig.resolved` unless given explicitly, so a preset only types the shared sizes.

Sources: ``../shared/design/variants.md`` (MLRA paper, arXiv 2603.02188, Sec. 4 and App. B; the
authors' released configuration).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

#: Canonical variant names, in the paper's table order.
VARIANTS: tuple[str, ...] = (
    "mha", "mqa", "gqa", "mla", "mfa", "tpa", "gla-2", "gla-4", "gta", "mlra-2", "mlra-4",
)
#: Display names as printed in the paper.
DISPLAY_NAMES: dict[str, str] = {v: v.upper() for v in VARIANTS}

LATENT_VARIANTS = ("mla", "gla-2", "gla-4", "mlra-2", "mlra-4")
INIT_CHOICES = ("zero", "normal")
ATTN_IMPLS = ("auto", "torch", "triton")


def canonical_variant(name: str) -> str:
    """Map a user-typed variant name (any case, ``_`` or ``-``: ``MLRA_4``, ``mlra4``) to its
    canonical form (``mlra-4``).

    Raises:
        KeyError: unknown name; the message lists the allowed variants.
    """
    if not isinstance(name, str):
        raise KeyError(f"variant must be a string, one of {', '.join(VARIANTS)}; got {name!r}")
    key = name.strip().lower().replace("_", "-")
    if key not in VARIANTS and key[-1:].isdigit() and "-" not in key:
        key = key[:-1] + "-" + key[-1]  # "mlra4" -> "mlra-4"
    if key not in VARIANTS:
        raise KeyError(f"unknown variant {name!r}; allowed: {', '.join(VARIANTS)}")
    return key


@dataclass(frozen=True)
class ModelConfig:
    """Everything that determines a model's architecture and initialisation.

    Shared sizes (every variant):
        variant: canonical name from :data:`VARIANTS` (any spelling accepted by
            :func:`canonical_variant`).
        n_layer, d_model, n_head, head_dim: depth, width, query heads, per-head width ``d_h``.
        vocab_size: tokens in the (tied) embedding.
        block_size: longest sequence in tokens (size of the RoPE table).
        intermediate_size: SwiGLU width F; ``None`` means "solve by parameter matching against
            the MHA model of the same shared sizes" (:func:`gtalib.params.match_intermediate_size`).

    Variant sizes (``None`` = derive from the paper's ratios in :meth:`resolved`):
        n_kv_head: KV heads of GQA/GTA (``n_head // gqa_group``); 1 for MQA; ``n_head`` for MHA.
        gqa_group: query heads per KV head for GQA/GTA at ``head_multiplier == 1`` (paper: 4).
        kv_lora_rank: latent width ``d_c`` of the latent family (paper: ``4 * head_dim`` = 512).
        q_lora_rank: query latent ``d_q`` (paper: ``d_model / 2`` for MLA, ``d_model / 3`` for
            GLA/MLRA, ``2 d_model / 3`` for MFA's query bottleneck).
        qk_rope_head_dim: decoupled RoPE width ``d_r`` (paper: ``head_dim / 2`` = 64).
        qk_nope_head_dim: ``d_n`` (paper: ``head_dim``).
        v_head_dim: value width per head (paper: ``head_dim``; MFA: ``2 * head_dim``).
        tpa_q_rank, tpa_rank: TPA's ``R_q`` and ``R`` (paper: 6 and 2).

    Ablation options (variants.md, "Ablation switches"):
        init: ``"zero"`` (W_O and W_down exactly zero) or ``"normal"`` (N(0, init_std)).
        gate: sigmoid output gate before W_O.
        latent_scale: the α_q, α_kv, α_o constants of the latent family (MLA/GLA/MLRA only).
        head_multiplier: 1, or 2 for the double-heads ablation (GQA, MLA, GLA-2 in the paper;
            per-head dims and KV cache unchanged).

    Other:
        rope_theta: RoPE base (10000). init_std: σ = 0.02. attn_impl: ``"auto"`` (Triton on CUDA,
        PyTorch elsewhere), ``"torch"`` or ``"triton"``. tie_embeddings: always true in the paper.
    """

    variant: str = "mha"
    n_layer: int = 2
    d_model: int = 128
    n_head: int = 4
    head_dim: int = 32
    vocab_size: int = 256
    block_size: int = 128
    intermediate_size: int | None = None

    n_kv_head: int | None = None
    gqa_group: int = 4
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    tpa_q_rank: int = 6
    tpa_rank: int = 2

    init: str = "zero"
    gate: bool = False
    latent_scale: bool = True
    head_multiplier: int = 1

    rope_theta: float = 10000.0
    init_std: float = 0.02
    attn_impl: str = "auto"

    def __post_init__(self):
        object.__setattr__(self, "variant", canonical_variant(self.variant))
        for name in ("n_layer", "d_model", "n_head", "head_dim", "vocab_size", "block_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.init not in INIT_CHOICES:
            raise ValueError(f"init must be one of {INIT_CHOICES}, got {self.init!r}")
        if self.head_multiplier not in (1, 2):
            raise ValueError(f"head_multiplier must be 1 or 2, got {self.head_multiplier!r}")
        if self.attn_impl not in ATTN_IMPLS:
            raise ValueError(f"attn_impl must be one of {ATTN_IMPLS}, got {self.attn_impl!r}")
        if not self.latent_scale and self.variant not in LATENT_VARIANTS:
            raise ValueError(
                f"latent_scale=False only applies to {', '.join(LATENT_VARIANTS)}; "
                f"variant {self.variant!r} has no latent scale"
            )
        if self.head_multiplier != 1 and self.variant == "mqa":
            # MQA doubled stays MQA; allowed. TPA/MFA have no meaningful head doubling in the paper
            pass
        if self.intermediate_size is not None and self.intermediate_size <= 0:
            raise ValueError(f"intermediate_size must be positive or None, got {self.intermediate_size}")

    def replace(self, **changes) -> "ModelConfig":
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """Plain-dict form (JSON-serialisable), used in run specs and hashes."""
        return dataclasses.asdict(self)
