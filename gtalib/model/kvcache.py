"""Analytic KV-cache accounting: elements and bytes per token, in total and per device under
tensor parallelism (TP), for every variant, from a :class:`~gtalib.model.config.ModelConfig`.

Everything here is a closed form of the configuration (docs/variants.md, "Parameter matching and paper
sizes" and "KV cache per device under tensor parallelism"; MLRA paper, arXiv 2603.02188, Table 1).
The attention modules' caches (``Attention.new_cache``) must hold exactly
:func:`kv_elems_per_token` elements per token; ``tests/model/test_kvcache.py`` checks both against each
other and against the paper's numbers.

Per token and layer (``H`` query heads, ``H_kv`` KV heads, ``d_h`` head dim, ``d_r`` RoPE width,
``d_c`` KV latent, ``R`` TPA rank):

============  ===============================  ===============  =======================
variant       stored per token                 paper, 24 heads  Table 1, 64 heads (d_h)
============  ===============================  ===============  =======================
MHA           K, V of H heads: ``2 H d_h``     6144             128
GQA           K, V of H_kv heads               1536             16 (8 KV heads)
MQA           one K, V head: ``2 d_h``         256              2
MFA           one K, V head of ``2 d_h``       512              4
TPA           factors ``2 (H R + R d_h)``      608              6
GTA           ``H_kv`` tied states + ``k_r``   832              8.5 (8 KV heads)
MLA/GLA/MLRA  latent + ``k_r``: ``d_c + d_r``  576              4.5
============  ===============================  ===============  =======================

Per device under TP degree ``t`` (the heads are sharded evenly, ``t`` must divide ``n_head``):

- MHA/GQA/MQA: each device holds ``ceil(H_kv / t)`` KV heads (a KV head is replicated on every
  device whose query heads read it): MHA 128/64/32/16 d_h, GQA 16/8/4/2, MQA 2 at TP 1/2/4/8.
- Latent family: each device holds ``ceil(n_blocks / t)`` latent blocks plus the shared RoPE key
  (replicated): MLA 4.5 at every degree (its single latent cannot be split), GLA-2 4.5/2.5/2.5/2.5,
  GLA-4 and MLRA-4 4.5/2.5/1.5/1.5.
- **MLRA-2 beyond TP 2 (our choice; the paper does not settle it):** 1.5 d_h at TP 4 and 8. Its
  four (branch, head group) pairs each read one block; at TP 2 a device serves one head group in
  both branches (2 blocks, 2.5 d_h); at TP 4 each device serves one (branch, head group) pair and
  at TP 8 half of one, so it loads one block. The branch sum ``y_A + y_B`` is then done by the
  all-reduce after ``W_O`` that TP performs anyway (``W_O`` is linear, and both partial products
  use the same rows of ``W_O``); the price is that the query projection of a head group is
  computed on two devices. This is the same rule as MLRA-4 (branches on different devices), so
  one formula, ``ceil(n_blocks / t)``, covers the whole family.
- GTA (no paper rule; derived): tied states shard like GQA's KV heads, the single RoPE key is
  replicated: ``ceil(H_kv / t) d_h + d_r`` (8 KV heads: 8.5/4.5/2.5/1.5 d_h).
- MFA (no paper rule; derived): its single wide KV head is replicated like MQA's: ``2 · 2 d_h`` =
  4 d_h at every degree.
- TPA (no paper rule; derived): the head factors ``A_k, A_v`` (``H R`` each) shard with the heads,
  the token factors ``B_k, B_v`` (``R d_h`` each) are shared by all heads and replicated:
  ``2 (H R / t + R d_h)`` (Table-1 setting: 6/5/4.5/4.25 d_h).

A user's own variant (``"module:Class"``, :mod:`gtalib.model.user_variants`) is counted from the
cache tensors its class declares (``cache_shapes``; the class is built on the meta device, which
holds no values), at TP degree 1 only: gtalib has no rule for sharding it.
"""

from __future__ import annotations

import math

import torch

from gtalib.model.config import LATENT_LAYOUT, VARIANTS, ModelConfig, canonical_variant
from gtalib.model.user_variants import is_user_variant

#: Tensor-parallel degrees of the paper's Table 1.
TP_DEGREES: tuple[int, ...] = (1, 2, 4, 8)


def table1_config(variant: str) -> ModelConfig:
    """The paper's Table-1 setting for ``variant``: 64 query heads, ``head_dim`` 128, RoPE width
    64 (decoupled variants), GQA and GTA with 8 KV heads; other sizes by the usual ratios
    (``d_c = 4 d_h`` = 512, MFA head 256, TPA rank 2).

    ``d_model`` is set to ``64 · 128 = 8192`` only because a config needs one: no cache size
    depends on it. The config is not meant to be built into a model.

    Raises:
        KeyError: unknown variant.
    """
    v = canonical_variant(variant)
    extra = {"n_kv_head": 8} if v in ("gqa", "gta") else {}
    return ModelConfig(variant=v, n_layer=1, d_model=64 * 128, n_head=64, head_dim=128,
                       block_size=2048, **extra).resolved()


def kv_elems_per_token(cfg: ModelConfig) -> int:
    """KV-cache elements stored per token per layer (see the module docstring's table).

    Args:
        cfg: any :class:`ModelConfig` (resolved here).
    Returns:
        Elements (not bytes). Paper size: MHA 6144, MQA 256, GQA 1536, GTA 832, MFA 512, TPA 608,
        MLA/GLA/MLRA 576 (docs/variants.md table).
    Raises:
        ValueError: from ``cfg.resolved()`` for an invalid configuration.
    """
    return kv_elems_per_device(cfg, 1)


def kv_elems_per_device(cfg: ModelConfig, tp: int) -> int:
    """KV-cache elements per token per layer held by one device under tensor parallelism.

    Args:
        cfg: any :class:`ModelConfig` (resolved here).
        tp: tensor-parallel degree; the query heads are sharded evenly, so it must divide
            ``n_head``.
    Returns:
        Elements per token per layer per device (rules and the MLRA-2 choice in the module
        docstring; MLRA paper Table 1). ``tp=1`` gives :func:`kv_elems_per_token`.
    Raises:
        ValueError: ``tp`` not a positive integer dividing ``n_head``; ``tp`` other than 1 for a
            user's variant.
    """
    c = cfg.resolved()
    if not isinstance(tp, int) or tp <= 0 or c.n_head % tp:
        raise ValueError(f"tp must be a positive integer dividing n_head={c.n_head}, got tp={tp!r}")
    v, d_h = c.variant, c.head_dim
    if is_user_variant(v):
        if tp != 1:
            raise ValueError(f"tp={tp}: a user's variant {v!r} has no tensor-parallel rule; "
                             f"allowed: tp=1")
        from gtalib.model.attention.base import build_attention

        with torch.device("meta"):
            return build_attention(c).kv_elems_per_token()

    def per_device(n: int) -> int:  # shards of n that one device must hold (replicated if n < tp)
        return math.ceil(n / tp)

    if v in ("mha", "mqa", "gqa"):
        return 2 * per_device(c.n_kv_head) * d_h
    if v == "mfa":
        return 2 * c.v_head_dim  # one K and one V head of width 2 d_h, replicated
    if v == "gta":
        return per_device(c.n_kv_head) * d_h + c.qk_rope_head_dim
    if v == "tpa":
        return 2 * (c.n_head * c.tpa_rank // tp + c.tpa_rank * d_h)
    if v in LATENT_LAYOUT:
        n_blocks = LATENT_LAYOUT[v][0]
        return per_device(n_blocks) * (c.kv_lora_rank // n_blocks) + c.qk_rope_head_dim
    raise KeyError(f"no KV accounting for variant {v!r}; known: {', '.join(VARIANTS)}")


def kv_bytes_per_token(cfg: ModelConfig, dtype: torch.dtype = torch.bfloat16, tp: int = 1,
                       all_layers: bool = False) -> int:
    """KV-cache bytes per token: per layer (default) or summed over ``cfg.n_layer`` layers, for
    one device at TP degree ``tp`` (``tp=1``: the whole cache).

    Args:
        dtype: cache element type (bf16 = 2 bytes, the paper's decode setting).
    Raises:
        ValueError: as :func:`kv_elems_per_device`.
    """
    n = kv_elems_per_device(cfg, tp) * torch.empty((), dtype=dtype).element_size()
    return n * cfg.n_layer if all_layers else n


def kv_dh_units(cfg: ModelConfig, tp: int = 1) -> float:
    """:func:`kv_elems_per_device` in units of ``head_dim`` (the paper's Table-1 unit)."""
    return kv_elems_per_device(cfg, tp) / cfg.head_dim
