"""Grouped-tied attention (GTA, Zadouri et al. 2025, "Hardware-Efficient Attention for Fast
Decoding", arXiv 2505.21487) as configured in the MLRA paper.

docs/variants.md: query heads of ``head_dim`` split into ``d_n = head_dim − d_r`` NoPE and ``d_r``
RoPE channels; per KV group one tied state ``s = x̃ W_KV`` of ``head_dim`` split
``[s_t (d_n) ; s_v (d_r)]``; one single-head RoPE key ``k_r = RoPE(x̃ W_KR)`` (``d_r``) shared by
all heads; head ``i`` of group ``j = i // g`` uses ``k = [s_t^j ; k_r]`` and ``v = s^j``.
Softmax scale ``1/sqrt(head_dim)``. Paper: 24 heads, 6 groups, d_r = 64; cache per token and layer
``6·128 + 64 = 832`` elements (tied states + the RoPE key).
"""

from __future__ import annotations

import torch
from torch import nn

from gtalib.model.attention.base import Attention, register
from gtalib.model.attention.functional import attend
from gtalib.model.layers import RoPE


@register("gta")
class GTAttention(Attention):
    """Grouped-tied attention (see module docstring).

    Shapes: ``forward(x (B, T, d_model), cache=None) -> (B, T, d_model)``.
    Cache: ``s (B, max_len, n_kv_head, head_dim)`` tied states, ``k_rope (B, max_len, 1, d_r)``
    (after RoPE), ``len``.
    """

    def __init__(self, cfg, layer_idx: int = 0):
        super().__init__(cfg, layer_idx)
        c = self.cfg
        self.n_head, self.n_kv_head, self.dim = c.n_head, c.n_kv_head, c.head_dim
        self.d_rope, self.d_nope = c.qk_rope_head_dim, c.qk_nope_head_dim
        self.q_proj = nn.Linear(c.d_model, self.n_head * self.dim, bias=False)
        self.kv_proj = nn.Linear(c.d_model, self.n_kv_head * self.dim, bias=False)
        self.kr_proj = nn.Linear(c.d_model, self.d_rope, bias=False)
        self.rope = RoPE(self.d_rope, c.block_size, c.rope_theta)
        self.init_output(self.n_head, self.dim)

    def forward(self, x: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        """Grouped attention with keys ``[s_t ; k_r]`` and values ``s`` of the head's group.

        Args:
            x: ``(B, T, d_model)``, the normed block input, at positions ``start .. start+T-1``
                with ``start = cache["len"]`` (0 without a cache).
            cache: from :meth:`new_cache`, or ``None``; the tied states and the rotated RoPE key
                of the T new tokens are written at their positions.
        Returns:
            ``(B, T, d_model)``.
        Raises:
            ValueError: positions beyond ``block_size`` or the cache's ``max_len``.
        """
        B, T, _ = x.shape
        start = self.cache_start(cache)
        q = self.q_proj(x).view(B, T, self.n_head, self.dim)  # (B, T, H, d_n + d_r)
        q = torch.cat([q[..., : self.d_nope], self.rope(q[..., self.d_nope :], start)], dim=-1)
        s = self.kv_proj(x).view(B, T, self.n_kv_head, self.dim)  # (B, T, Hkv, d_n + d_r)
        kr = self.rope(self.kr_proj(x).view(B, T, 1, self.d_rope), start)  # (B, T, 1, d_r)
        if cache is not None:
            s = self.cache_write(cache, "s", s, start)  # (B, S, Hkv, head_dim)
            kr = self.cache_write(cache, "k_rope", kr, start)  # (B, S, 1, d_r)
        # The key ties its NoPE half to the value's first half; the RoPE half is shared by all.
        k = torch.cat([s[..., : self.d_nope], kr.expand(-1, -1, self.n_kv_head, -1)], dim=-1)
        y = attend(q, k, s, self.dim**-0.5, start, self.impl)  # (B, T, H, head_dim)
        return self.project_out(y, x)

    def new_cache(self, batch_size: int, max_len: int, device=None, dtype=None) -> dict:
        """Zeroed tied states ``s (batch_size, max_len, n_kv_head, head_dim)``, the shared rotated
        RoPE key ``k_rope (batch_size, max_len, 1, d_r)`` and ``"len": 0``."""
        return {
            "s": torch.zeros(batch_size, max_len, self.n_kv_head, self.dim, device=device, dtype=dtype),
            "k_rope": torch.zeros(batch_size, max_len, 1, self.d_rope, device=device, dtype=dtype),
            "len": 0,
        }

    def kv_elems_per_token(self) -> int:
        """``n_kv_head · head_dim + d_r`` (paper: 6·128 + 64 = 832)."""
        return self.n_kv_head * self.dim + self.d_rope
