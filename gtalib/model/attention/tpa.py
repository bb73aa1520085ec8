"""Tensor product attention (TPA, Zhang et al. 2025, "Tensor Product Attention Is All You Need",
arXiv 2501.06425).

docs/variants.md: per token, head factors ``A_q (H, R_q)``, ``A_k, A_v (H, R)`` and token factors
``B_q (R_q, d_h)``, ``B_k, B_v (R, d_h)``, each a linear map of ``x̃``;
``q_h = (1/R_q) Σ_r A_q[h, r] B_q[r]`` and the same for k, v with ``1/R``. RoPE rotates the B
factors of q and k (equivalent to rotating q, k since RoPE is linear at a fixed position).
Paper: R_q = 6, R = 2; softmax scale ``1/sqrt(d_h)``; the factor projections are
Xavier-uniform-initialised under both inits. The cache holds the k/v factors:
``2·(H·R + R·d_h)`` = 608 elements per token and layer.
"""

from __future__ import annotations

import torch
from torch import nn

from gtalib.model.attention.base import Attention, register
from gtalib.model.attention.functional import attend
from gtalib.model.layers import RoPE


@register("tpa")
class TPAttention(Attention):
    """Tensor product attention (see module docstring).

    Shapes: ``forward(x (B, T, d_model), cache=None) -> (B, T, d_model)``.
    Cache: ``a_k, a_v (B, max_len, H, R)``, ``b_k (B, max_len, R, d_h)`` (after RoPE),
    ``b_v (B, max_len, R, d_h)``, ``len``.
    """

    def __init__(self, cfg, layer_idx: int = 0):
        super().__init__(cfg, layer_idx)
        c = self.cfg
        self.n_head, self.dim, self.rq, self.r = c.n_head, c.head_dim, c.tpa_q_rank, c.tpa_rank
        d = c.d_model
        self.a_q = nn.Linear(d, self.n_head * self.rq, bias=False)
        self.b_q = nn.Linear(d, self.rq * self.dim, bias=False)
        self.a_k = nn.Linear(d, self.n_head * self.r, bias=False)
        self.b_k = nn.Linear(d, self.r * self.dim, bias=False)
        self.a_v = nn.Linear(d, self.n_head * self.r, bias=False)
        self.b_v = nn.Linear(d, self.r * self.dim, bias=False)
        self.rope = RoPE(self.dim, c.block_size, c.rope_theta)
        self.init_output(self.n_head, self.dim)

    @torch.no_grad()
    def init_special(self) -> None:
        """Xavier-uniform factor projections under both inits (docs/variants.md, "Initialisation":
        the MLRA reference keeps TPA's own init)."""
        for lin in (self.a_q, self.b_q, self.a_k, self.b_k, self.a_v, self.b_v):
            nn.init.xavier_uniform_(lin.weight)

    @staticmethod
    def _contract(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """``(B, S, H, R) × (B, S, R, D) -> (B, S, H, D)``, divided by the rank R.

        The division is applied to the small head factor ``a``. A rank of at most 2 (the paper's
        k/v rank) is summed as R broadcast products: on CPU that took half the time of a batched
        matrix product of B·S tiny ``(H, R) × (R, D)`` matrices (forward + backward at the
        ``cpu`` preset's shapes, one thread: 0.6 against 1.2 ms); larger ranks use the product.
        """
        R = a.shape[-1]
        a = a / R
        if R > 2:
            return a @ b  # (B, S, H, D)
        terms = [a_r[..., None] * b_r[:, :, None] for a_r, b_r in zip(a.unbind(-1), b.unbind(2))]
        return terms[0] if R == 1 else terms[0] + terms[1]  # (B, S, H, D)

    def forward(self, x: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        """Assemble q, k, v from their factors, attend causally, then ``W_O`` (and the gate).

        Args:
            x: ``(B, T, d_model)``, the normed block input, at positions ``start .. start+T-1``
                with ``start = cache["len"]`` (0 without a cache).
            cache: from :meth:`new_cache`, or ``None``; the k/v factors of the T new tokens
                (``B_k`` after RoPE) are written at their positions.
        Returns:
            ``(B, T, d_model)``.
        Raises:
            ValueError: positions beyond ``block_size`` or the cache's ``max_len``.
        """
        B, T, _ = x.shape
        H, D, rq, r = self.n_head, self.dim, self.rq, self.r
        start = self.cache_start(cache)
        # RoPE treats the rank axis like a head axis: every factor row sits at the token's position.
        q = self._contract(self.a_q(x).view(B, T, H, rq), self.rope(self.b_q(x).view(B, T, rq, D), start))
        a_k, a_v = self.a_k(x).view(B, T, H, r), self.a_v(x).view(B, T, H, r)  # (B, T, H, R)
        b_k = self.rope(self.b_k(x).view(B, T, r, D), start)  # (B, T, R, D)
        b_v = self.b_v(x).view(B, T, r, D)
        if cache is not None:
            a_k, a_v = (self.cache_write(cache, n, t, start) for n, t in (("a_k", a_k), ("a_v", a_v)))
            b_k, b_v = (self.cache_write(cache, n, t, start) for n, t in (("b_k", b_k), ("b_v", b_v)))
        k, v = self._contract(a_k, b_k), self._contract(a_v, b_v)  # (B, S, H, D)
        y = attend(q, k, v, D**-0.5, start, self.impl)  # (B, T, H, D)
        return self.project_out(y, x)

    def new_cache(self, batch_size: int, max_len: int, device=None, dtype=None) -> dict:
        """Zeroed factors ``a_k, a_v (batch_size, max_len, H, R)``, ``b_k`` (after RoPE),
        ``b_v (batch_size, max_len, R, d_h)`` and ``"len": 0``: never the assembled k, v."""
        H, D, r = self.n_head, self.dim, self.r
        z = lambda *s: torch.zeros(batch_size, max_len, *s, device=device, dtype=dtype)  # noqa: E731
        return {"a_k": z(H, r), "b_k": z(r, D), "a_v": z(H, r), "b_v": z(r, D), "len": 0}

    def kv_elems_per_token(self) -> int:
        """``2·(H·R + R·d_h)`` (paper: 2·(24·2 + 2·128) = 608)."""
        return 2 * (self.n_head * self.r + self.r * self.dim)
