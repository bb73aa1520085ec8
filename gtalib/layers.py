"""Building blocks shared by every variant: RMSNorm, rotary position embedding, SwiGLU.

Semantics follow ``docs/variants.md`` ("Shared model"): RMSNorm in fp32 with eps 1e-6,
RoPE with half-split pairs ``(i, i + D/2)`` and base 10000 computed in fp32, SwiGLU MLP, no biases.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    """``w ⊙ z / sqrt(mean(z²) + eps)``, computed in fp32 and cast back (Zhang & Sennrich 2019,
    arXiv 1910.07467).

    Args:
        dim: size of the last axis.
        eps: added to the mean square (1e-6, the MLRA reference's value).

    Shapes: ``(..., dim) -> (..., dim)``.
    """

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., dim) -> (..., dim)`` in ``x``'s dtype (the arithmetic is fp32)."""
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


class RoPE(nn.Module):
    """Rotary position embedding (Su et al. 2021, RoFormer, arXiv 2104.09864, eq. 34), half-split
    pairs ``(i, i+D/2)``: channel pair ``j`` at position ``p`` is rotated by ``p · θ^(-2j/D)``.

    The cos/sin tables are built in fp32 for ``max_len`` positions and never stored in a lower
    precision (a known trap: bf16 tables lose relative-position exactness).

    Args:
        dim: rotated width D (even).
        max_len: positions supported; ``apply`` raises ``ValueError`` beyond it.
        theta: base (10000).

    Raises:
        ValueError: odd ``dim`` or non-positive ``max_len``.
    """

    def __init__(self, dim: int, max_len: int, theta: float = 10000.0):
        super().__init__()
        if dim <= 0 or dim % 2:
            raise ValueError(f"RoPE dim must be a positive even number, got qk_rope_head_dim={dim}")
        if max_len <= 0:
            raise ValueError(f"RoPE max_len (block_size) must be positive, got {max_len}")
        self.dim, self.max_len = dim, max_len
        inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        angles = torch.outer(torch.arange(max_len, dtype=torch.float64), inv_freq)  # (L, D/2)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def _apply(self, fn, recurse=True):
        # Keep the tables fp32 when the module is cast with .half()/.to(bfloat16).
        super()._apply(fn, recurse)
        self.cos, self.sin = self.cos.float(), self.sin.float()
        return self

    def forward(self, x: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        """Rotate ``x`` of shape ``(B, T, H, D)`` at positions ``start_pos .. start_pos+T-1``.

        Raises:
            ValueError: if ``start_pos + T`` exceeds ``max_len`` (the model's ``block_size``).
        """
        T, D = x.shape[1], x.shape[-1]
        if D != self.dim:
            raise ValueError(f"RoPE expects last dim {self.dim}, got {D}")
        if start_pos < 0 or start_pos + T > self.max_len:
            raise ValueError(
                f"sequence positions [{start_pos}, {start_pos + T}) exceed block_size={self.max_len}"
            )
        cos = self.cos[start_pos : start_pos + T][None, :, None, :]  # (1, T, 1, D/2)
        sin = self.sin[start_pos : start_pos + T][None, :, None, :]
        xf = x.float()
        x1, x2 = xf[..., : D // 2], xf[..., D // 2 :]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


class SwiGLU(nn.Module):
    """``W_down(SiLU(z W_1) ⊙ (z W_2))`` (Shazeer 2020, "GLU Variants Improve Transformer",
    arXiv 2002.05202, eq. 6), no biases.

    Shapes: ``(B, T, d_model) -> (B, T, d_model)``; ``intermediate_size`` is the hidden width F.
    """

    def __init__(self, d_model: int, intermediate_size: int):
        super().__init__()
        self.w1 = nn.Linear(d_model, intermediate_size, bias=False)
        self.w2 = nn.Linear(d_model, intermediate_size, bias=False)
        self.w_down = nn.Linear(intermediate_size, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, d_model) -> (B, T, d_model)``."""
        return self.w_down(F.silu(self.w1(x)) * self.w2(x))
