"""MHA, MQA and GQA: one module, differing only in the number of KV heads.

Sources: MHA (Vaswani et al. 2017), MQA (Shazeer 2019, arXiv 1911.02150), GQA (Ainslie et al. 2023,
arXiv 2305.13245), as configured in the MLRA paper (arXiv 2603.02188; GQA group 4 = 6 KV heads).

docs/variants.md: ``q, k, v = x̃ W_{Q,K,V}``, H query heads and ``n_kv_head`` KV heads of ``head_dim``
(MHA ``n_kv_head = H``, MQA 1, GQA ``H / g``), full-width RoPE on q and k, softmax scale
``1/sqrt(head_dim)``; query head ``i`` reads KV head ``i // g``. The cache holds the
``n_kv_head`` KV heads, never the expanded ones.
"""

from __future__ import annotations

import torch
from torch import nn

from gtalib.model.attention.base import Attention, register
from gtalib.model.attention.functional import attend
from gtalib.model.layers import RoPE


@register("mha", "mqa", "gqa")
class DenseAttention(Attention):
    """Grouped-query attention (Ainslie et al. 2023); MHA and MQA are its two extremes.

    Subclasses (MFA) change the head width (:meth:`head_width`) and the query path
    (:meth:`build_query` / :meth:`query`) and keep everything else.

    Shapes: ``forward(x (B, T, d_model), cache=None) -> (B, T, d_model)``.
    Cache: ``k, v`` of ``(B, max_len, n_kv_head, D)`` (k stored after RoPE) and ``len``.
    """

    def __init__(self, cfg, layer_idx: int = 0):
        super().__init__(cfg, layer_idx)
        c = self.cfg
        self.n_head, self.n_kv_head, self.dim = c.n_head, c.n_kv_head, self.head_width()
        self.build_query()
        self.k_proj = nn.Linear(c.d_model, self.n_kv_head * self.dim, bias=False)
        self.v_proj = nn.Linear(c.d_model, self.n_kv_head * self.dim, bias=False)
        self.rope = RoPE(self.dim, c.block_size, c.rope_theta)
        self.init_output(self.n_head, self.dim)

    def head_width(self) -> int:
        """Per-head q/k/v width D (``head_dim``)."""
        return self.cfg.head_dim

    def build_query(self) -> None:
        """Create the query projection ``W_Q: d_model → n_head·D`` (MFA overrides it)."""
        self.q_proj = nn.Linear(self.cfg.d_model, self.n_head * self.dim, bias=False)

    def query(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, d_model) -> (B, T, H, D)`` before RoPE."""
        return self.q_proj(x).view(*x.shape[:2], self.n_head, self.dim)

    def forward(self, x: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        """``softmax(q kᵀ / sqrt(D) + causal) v`` per head, then ``W_O`` (and the gate).

        Args:
            x: ``(B, T, d_model)``, the normed block input, at positions ``start .. start+T-1``
                with ``start = cache["len"]`` (0 without a cache).
            cache: from :meth:`new_cache`, or ``None``; the T new keys (after RoPE) and values are
                written at their positions and the queries attend over ``[0, start + T)``.
        Returns:
            ``(B, T, d_model)``.
        Raises:
            ValueError: positions beyond ``block_size`` (RoPE table) or the cache's ``max_len``.
        """
        B, T, _ = x.shape
        start = self.cache_start(cache)
        q = self.rope(self.query(x), start)  # (B, T, H, D)
        k = self.rope(self.k_proj(x).view(B, T, self.n_kv_head, self.dim), start)  # (B, T, Hkv, D)
        v = self.v_proj(x).view(B, T, self.n_kv_head, self.dim)  # (B, T, Hkv, D)
        if cache is not None:
            k = self.cache_write(cache, "k", k, start)  # (B, start+T, Hkv, D)
            v = self.cache_write(cache, "v", v, start)
        y = attend(q, k, v, self.dim**-0.5, start, self.impl)  # (B, T, H, D)
        return self.project_out(y, x)

    def new_cache(self, batch_size: int, max_len: int, device=None, dtype=None) -> dict:
        """Zeroed ``k`` (after RoPE) and ``v`` of shape ``(batch_size, max_len, n_kv_head, D)``
        (the KV heads, never the expanded query heads) and ``"len": 0``."""
        shape = (batch_size, max_len, self.n_kv_head, self.dim)
        return {
            "k": torch.zeros(shape, device=device, dtype=dtype),
            "v": torch.zeros(shape, device=device, dtype=dtype),
            "len": 0,
        }

    def kv_elems_per_token(self) -> int:
        """``2 · n_kv_head · D`` (paper: MHA 6144, GQA 1536, MQA 256; MFA 512)."""
        return 2 * self.n_kv_head * self.dim
