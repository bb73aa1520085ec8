"""Multi-matrix factorisation attention (MFA, Hu et al. 2024, arXiv 2412.19255) as configured in
the MLRA paper.

docs/variants.md: the query goes through a low-rank bottleneck ``c = RMSNorm(x̃ W_qa)`` (rank
``q_lora_rank`` = 2048 at paper size, no latent scale), ``q = c W_qb``; H heads of width
``v_head_dim = 2·head_dim`` (256); **one** KV head of the same width broadcast to every head;
full-width RoPE; softmax scale ``1/sqrt(256)``. The cache holds the single KV head.
"""

from __future__ import annotations

import torch
from torch import nn

from gtalib.model.attention.base import register
from gtalib.model.attention.dense import DenseAttention
from gtalib.model.layers import RMSNorm


@register("mfa")
class MFAttention(DenseAttention):
    """MQA with wide heads and a low-rank, RMS-normed query path (see module docstring).

    Shapes: ``forward(x (B, T, d_model), cache=None) -> (B, T, d_model)``.
    Cache: ``k, v`` of ``(B, max_len, 1, v_head_dim)``.
    """

    def head_width(self) -> int:
        """Per-head q/k/v width: ``v_head_dim`` (``2·head_dim`` = 256 at paper size)."""
        return self.cfg.v_head_dim

    def build_query(self) -> None:
        """Create the low-rank query path ``W_qa: d → d_q``, ``RMSNorm(d_q)``, ``W_qb: d_q → H·D``
        (``d_q = q_lora_rank``, 2048 at paper size)."""
        c = self.cfg
        self.q_a = nn.Linear(c.d_model, c.q_lora_rank, bias=False)
        self.q_norm = RMSNorm(c.q_lora_rank)
        self.q_b = nn.Linear(c.q_lora_rank, self.n_head * self.dim, bias=False)

    def query(self, x: torch.Tensor) -> torch.Tensor:
        """``q = RMSNorm(x W_qa) W_qb`` (no latent scale): ``(B, T, d) -> (B, T, H, D)`` before
        RoPE."""
        return self.q_b(self.q_norm(self.q_a(x))).view(*x.shape[:2], self.n_head, self.dim)
