"""The interface every attention variant implements, and the registry that builds them by name."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from gtalib.config import ModelConfig, canonical_variant

REGISTRY: dict[str, type["Attention"]] = {}


def register(*names: str) -> Callable[[type], type]:
    """Class decorator: make the class buildable under each canonical variant name."""

    def deco(cls):
        for n in names:
            REGISTRY[canonical_variant(n)] = cls
        return cls

    return deco


def build_attention(cfg: ModelConfig, layer_idx: int = 0) -> "Attention":
    """Instantiate the attention module registered for ``cfg.variant``.

    Raises:
        KeyError: unknown variant (message lists the allowed names).
        ValueError: a size or option that the variant cannot take (names the parameter).
    """
    return REGISTRY[canonical_variant(cfg.variant)](cfg, layer_idx)


class Attention(nn.Module):
    """Base class. Subclasses implement the variant's math for training, prefill and decode.

    ``forward(x, rope_start=0, cache=None)``:
        x: ``(B, T, d_model)``, the block input after the pre-attention RMSNorm.
        cache: ``None`` (plain causal forward over the T tokens) or the dict returned by
            :meth:`new_cache`; then the T new tokens sit at positions ``start_pos .. start_pos+T-1``
            where ``start_pos = cache["len"]``; their entries are written into the cache, they attend
            causally over positions ``[0, start_pos + T)``, and ``cache["len"]`` is advanced by the
            model (not here).
        returns ``(B, T, d_model)`` (after W_O).

    ``new_cache(batch_size, max_len, device, dtype) -> dict[str, Tensor]``: only the tensors the
    variant needs to decode (variants.md, "Decoding with a cache").

    ``kv_elems_per_token() -> int``: analytic cache elements per token for this layer.
    """

    def __init__(self, cfg: ModelConfig, layer_idx: int = 0):
        super().__init__()
        self.cfg = cfg
        self.layer_idx = layer_idx
