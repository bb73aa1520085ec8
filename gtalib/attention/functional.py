"""The one causal attention op every variant calls, with GQA broadcasting and a cache offset.

All variants reduce to ``attend``: dense/GQA/MQA directly; MFA with one KV head; TPA and GTA after
assembling their keys/values from factors / tied states; the latent family per softmax branch
(and MQA-style over the latent cache in absorbed decode). One op means one place for the Triton
dispatch (``gtalib.kernels``) and one reference for the kernels' tests.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

IMPLS = ("auto", "torch", "triton")


def _triton_available(q: torch.Tensor) -> bool:
    if not q.is_cuda:
        return False
    try:
        from gtalib import kernels  # noqa: F401  (written by the kernels engineer)

        return hasattr(kernels, "flash_attention")
    except ImportError:
        return False


def causal_mask(T: int, S: int, start_pos: int, device=None) -> torch.Tensor:
    """Boolean ``(T, S)`` mask, True where query ``i`` (absolute position ``start_pos + i``) may
    read key ``j`` (absolute position ``j``): ``j <= start_pos + i``."""
    qpos = torch.arange(start_pos, start_pos + T, device=device)[:, None]
    kpos = torch.arange(S, device=device)[None, :]
    return kpos <= qpos


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    start_pos: int = 0,
    impl: str = "torch",
) -> torch.Tensor:
    """Causal softmax attention ``softmax(scale · q kᵀ + mask) v`` with grouped KV heads.

    Args:
        q: ``(B, T, H, Dqk)`` queries of the T new tokens, at absolute positions
            ``start_pos .. start_pos + T - 1``.
        k: ``(B, S, Hkv, Dqk)`` keys at positions ``0 .. S-1`` (``S >= start_pos + T``; keys past
            a query's position are masked, so a preallocated cache may be passed whole).
        v: ``(B, S, Hkv, Dv)`` values.
        scale: softmax temperature, ``1/sqrt(D_qk)`` of the training model (variants.md, "Shared
            model"; absorbed latent decode passes the training ``1/sqrt(d_n + d_r)``).
        start_pos: absolute position of the first query (cache length before this call).
        impl: ``"torch"`` (PyTorch SDPA, the reference), ``"triton"``
            (``gtalib.kernels.flash_attention``, same signature; on CPU only under
            ``TRITON_INTERPRET=1``, tiny shapes) or ``"auto"`` (Triton when ``q`` is on CUDA and the kernels
            import, PyTorch otherwise).

    Returns:
        ``(B, T, H, Dv)``, in ``q``'s dtype. Query head ``h`` reads KV head ``h // (H // Hkv)``
        (``repeat_interleave`` semantics: heads h0,h0,h1,h1 for H=4, Hkv=2).

    Raises:
        ValueError: ``H`` not a multiple of ``Hkv``, mismatched shapes, ``S < start_pos + T``,
            or an unknown ``impl``.
    """
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
    B, T, H, Dqk = q.shape
    Bk, S, Hkv, Dk = k.shape
    if k.shape[:3] != v.shape[:3] or Bk != B or Dk != Dqk:
        raise ValueError(f"shape mismatch: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if H % Hkv:
        raise ValueError(f"query heads ({H}) must be a multiple of KV heads ({Hkv})")
    if S < start_pos + T:
        raise ValueError(f"keys cover {S} positions, queries need start_pos + T = {start_pos + T}")
    if impl == "triton" or (impl == "auto" and _triton_available(q)):
        from gtalib import kernels

        return kernels.flash_attention(q, k, v, scale, start_pos)
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))  # (B, H|Hkv, T|S, D)
    if start_pos == 0 and S == T:
        out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, scale=scale,
                                             enable_gqa=Hkv != H)
    else:
        mask = causal_mask(T, S, start_pos, device=q.device)
        out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, scale=scale,
                                             enable_gqa=Hkv != H)
    return out.transpose(1, 2)  # (B, T, H, Dv)
