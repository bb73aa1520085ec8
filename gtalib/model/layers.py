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
        return rms_norm(x, self.weight, self.eps)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last axis of ``x (..., dim)`` with gains ``weight`` broadcast against it
    (``(dim,)`` for one norm; ``(n, dim)`` normalises each of ``x``'s ``n`` blocks ``(..., n, dim)``
    with its own gains, as the latent family's per-block norms do in one call). Arithmetic in
    fp32, result in ``x``'s dtype."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float()).to(x.dtype)


class RoPE(nn.Module):
    """Rotary position embedding (Su et al. 2021, RoFormer, arXiv 2104.09864, eq. 34), half-split
    pairs ``(i, i+D/2)``: channel pair ``j`` at position ``p`` is rotated by ``p · θ^(-2j/D)``.

    The cos/sin tables (``(max_len, D/2)`` each) are fp32 values of the formula, computed in fp64
    on the CPU, and rebuilt after every ``.to()``/``.half()``/``to_empty()``: a dtype cast never
    rounds them (bf16 tables lose relative-position exactness) and a model built on the ``meta``
    device gets exact tables once moved. They are not saved in ``state_dict``.

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
        self.dim, self.max_len, self.theta = dim, max_len, theta
        # on the default device: the meta device under deferred construction (filled by _apply)
        cos, sin = self._tables(torch.empty(0).device)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def _tables(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """``cos, sin`` of the angles ``p · θ^(-2j/D)``, ``(max_len, D/2)`` fp32 each, computed in
        fp64 on the CPU (the same bits whatever the target device) and then moved to ``device``."""
        j = torch.arange(0, self.dim, 2, dtype=torch.float64, device="cpu")
        inv_freq = 1.0 / (self.theta ** (j / self.dim))
        angles = torch.outer(torch.arange(self.max_len, dtype=torch.float64, device="cpu"), inv_freq)
        return angles.cos().float().to(device), angles.sin().float().to(device)

    def _apply(self, fn, recurse=True):
        # The tables are a function of (dim, max_len, theta), not state: whatever ``fn`` did to
        # them (a bf16 cast that rounded them, ``to_empty`` that left them uninitialised, a device
        # move), rebuild the exact fp32 values on the device they now live on.
        super()._apply(fn, recurse)
        self.cos, self.sin = self._tables(self.cos.device)
        return self

    @torch.no_grad()
    def init_weights(self) -> None:
        """Rebuild the tables in place on their device (after ``to_empty``, like ``_apply``)."""
        cos, sin = self._tables(self.cos.device)
        self.cos.copy_(cos)
        self.sin.copy_(sin)

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
