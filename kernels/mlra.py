"""Multi-branch MLRA attention in one launch (docs/variants.md, MLRA-2/4; paper eq. for
``y = α_o Σ_b y_b``).

Each branch ``b`` is a causal attention with its own keys ``[k_nope_b ; k_rope]`` and values ``v_b``,
sharing the query and the single RoPE key; each branch has its own softmax, and the outputs are
summed with ``α_o`` inside the kernel.

Forward (fused, one launch): a program owns one query tile of one head; it loads the query tile once
(NoPE and RoPE parts) and runs the branches one after the other over the key range, keeping two
accumulators (the branch's and the running α_o-weighted sum). The RoPE key tile is re-read for each
branch: it is one 64-wide head shared by all H heads, so these reads hit L2; holding all branches'
accumulators at once instead would multiply register use by the branch count.

Backward: reuses the single-branch FlashAttention-2 backward (:func:`gtalib.kernels.flash_attn.flash_bwd`)
once per branch, with keys ``[k_nope_b ; k_rope]`` materialised per branch (the RoPE key expanded to
H heads) and the per-branch outputs and logsumexps stored by the forward.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import (
    LOG2E,
    check_device,
    check_dtype,
    check_ndim,
    check_scale,
    dot_precision,
    interpreting,
    launch_with_fallback,
    padded,
)
from .flash_attn import flash_bwd, softmax_step, visible_keys


@triton.jit
def _mlra_tile(acc, m_i, l_i, qn, qr, kn_base, kr_base, v_base, n0, offs_m, offs_n, offs_dn,
               offs_dr, offs_dv, sks, skd, srs, srd, svs, svd, S, start_pos, qk_scale,
               DN: tl.constexpr, DR: tl.constexpr, DV: tl.constexpr, MASK: tl.constexpr,
               PREC: tl.constexpr):
    kpos = n0 + offs_n
    kmask = kpos < S
    kn = tl.load(kn_base + kpos[None, :] * sks + offs_dn[:, None] * skd,
                 mask=kmask[None, :] & (offs_dn[:, None] < DN), other=0.0)  # (DN_P, BLOCK_N)
    kr = tl.load(kr_base + kpos[None, :] * srs + offs_dr[:, None] * srd,
                 mask=kmask[None, :] & (offs_dr[:, None] < DR), other=0.0)  # (DR_P, BLOCK_N)
    s = (tl.dot(qn, kn, input_precision=PREC) + tl.dot(qr, kr, input_precision=PREC)) * qk_scale
    if MASK:
        visible = (kpos[None, :] <= start_pos + offs_m[:, None]) & kmask[None, :]
        s = tl.where(visible, s, float("-inf"))
    v = tl.load(v_base + kpos[:, None] * svs + offs_dv[None, :] * svd,
                mask=kmask[:, None] & (offs_dv[None, :] < DV), other=0.0)  # (BLOCK_N, DV_P)
    return softmax_step(acc, m_i, l_i, s, v, PREC)


@triton.jit
def _mlra_fwd_kernel(Q, KN, KR, V, O, OB, LSE,
                     sqb, sqt, sqh, sqd, skn, skb, sks, skh, skd, srb, srs, srd,
                     svn, svb, svs, svh, svd, sob, sot, soh, sod,
                     sbn, sbb, sbt, sbh, sbd, sln, slb, slh, slt,
                     T, S, H, start_pos, qk_scale, alpha_o,
                     NB: tl.constexpr, DN: tl.constexpr, DR: tl.constexpr, DV: tl.constexpr,
                     DN_P: tl.constexpr, DR_P: tl.constexpr, DV_P: tl.constexpr,
                     STORE_BRANCH: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     PREC: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_dn = tl.arange(0, DN_P)
    offs_dr = tl.arange(0, DR_P)
    offs_dv = tl.arange(0, DV_P)
    qmask = offs_m < T
    q_base = Q + b * sqb + h * sqh + offs_m[:, None] * sqt
    qn = tl.load(q_base + offs_dn[None, :] * sqd,
                 mask=qmask[:, None] & (offs_dn[None, :] < DN), other=0.0)  # (BLOCK_M, DN_P)
    qr = tl.load(q_base + (DN + offs_dr[None, :]) * sqd,
                 mask=qmask[:, None] & (offs_dr[None, :] < DR), other=0.0)  # (BLOCK_M, DR_P)
    kr_base = KR + b * srb
    first_q = start_pos + pid_m * BLOCK_M
    full_hi = (tl.minimum(S, first_q) // BLOCK_N) * BLOCK_N
    hi = tl.minimum(S, first_q + BLOCK_M)
    out = tl.zeros([BLOCK_M, DV_P], tl.float32)
    omask = qmask[:, None] & (offs_dv[None, :] < DV)
    for br in tl.static_range(NB):
        kn_base = KN + br * skn + b * skb + h * skh
        v_base = V + br * svn + b * svb + h * svh
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, DV_P], tl.float32)
        for n0 in range(0, full_hi, BLOCK_N):
            acc, m_i, l_i = _mlra_tile(acc, m_i, l_i, qn, qr, kn_base, kr_base, v_base, n0, offs_m,
                                       offs_n, offs_dn, offs_dr, offs_dv, sks, skd, srs, srd, svs,
                                       svd, S, start_pos, qk_scale, DN, DR, DV, False, PREC)
        for n0 in range(full_hi, hi, BLOCK_N):
            acc, m_i, l_i = _mlra_tile(acc, m_i, l_i, qn, qr, kn_base, kr_base, v_base, n0, offs_m,
                                       offs_n, offs_dn, offs_dr, offs_dv, sks, skd, srs, srd, svs,
                                       svd, S, start_pos, qk_scale, DN, DR, DV, True, PREC)
        acc = acc / l_i[:, None]
        out += alpha_o * acc
        tl.store(LSE + br * sln + b * slb + h * slh + offs_m * slt, m_i + tl.log2(l_i), mask=qmask)
        if STORE_BRANCH:
            tl.store(OB + br * sbn + b * sbb + h * sbh + offs_m[:, None] * sbt + offs_dv[None, :] * sbd,
                     acc.to(OB.dtype.element_ty), mask=omask)
    tl.store(O + b * sob + h * soh + offs_m[:, None] * sot + offs_dv[None, :] * sod,
             out.to(O.dtype.element_ty), mask=omask)


def _configs(width: int) -> list[dict]:
    """Tile sizes, fastest first; chosen without a GPU to tune on (see flash_attn._configs)."""
    if interpreting():
        return [dict(BLOCK_M=32, BLOCK_N=32, num_warps=1, num_stages=1)]
    first = dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2) if width > 128 else \
        dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2)
    return [first, dict(BLOCK_M=32, BLOCK_N=32, num_warps=4, num_stages=1)]


def _check(q, k_nope, k_rope, v, scale, alpha_o, start_pos):
    check_ndim("q", q, 4, "(B, T, H, Dn+Dr)")
    check_ndim("k_nope", k_nope, 5, "(NB, B, S, H, Dn)")
    check_ndim("k_rope", k_rope, 4, "(B, S, 1, Dr)")
    check_ndim("v", v, 5, "(NB, B, S, H, Dv)")
    check_dtype("q", q)
    check_device("q", q, q.device)
    for name, t in (("k_nope", k_nope), ("k_rope", k_rope), ("v", v)):
        check_dtype(name, t, q.dtype)
        check_device(name, t, q.device)
    B, T, H, D = q.shape
    NB, _, S, _, Dn = k_nope.shape
    Dr = k_rope.shape[3]
    if tuple(k_nope.shape[:4]) != (NB, B, S, H):
        raise ValueError(f"k_nope: shape {tuple(k_nope.shape)} does not match (NB, B={B}, S, H={H}, Dn)")
    if tuple(v.shape[:4]) != (NB, B, S, H):
        raise ValueError(f"v: shape {tuple(v.shape)} must be (NB={NB}, B={B}, S={S}, H={H}, Dv)")
    if tuple(k_rope.shape[:3]) != (B, S, 1):
        raise ValueError(f"k_rope: shape {tuple(k_rope.shape)} must be (B={B}, S={S}, 1, Dr)")
    if Dn + Dr != D:
        raise ValueError(f"q: head dim {D} must equal Dn + Dr = {Dn} + {Dr}")
    if not isinstance(start_pos, int) or start_pos < 0:
        raise ValueError(f"start_pos: must be an int ≥ 0, got {start_pos!r}")
    return check_scale(scale), float(alpha_o)


def mlra_fwd(q, k_nope, k_rope, v, scale, alpha_o, start_pos=0, store_branch=False):
    """Forward launch: ``out (B,T,H,Dv)``, per-branch outputs ``(NB,B,T,H,Dv)`` (or None) and
    per-branch base-2 logsumexp ``(NB,B,H,T)`` fp32."""
    B, T, H, _ = q.shape
    NB, _, S, _, Dn = k_nope.shape
    S = visible_keys(S, start_pos, T)
    Dr, Dv = k_rope.shape[3], v.shape[4]
    out = torch.empty(B, T, H, Dv, device=q.device, dtype=q.dtype)
    lse = torch.empty(NB, B, H, T, device=q.device, dtype=torch.float32)
    ob = torch.empty(NB, B, T, H, Dv, device=q.device, dtype=q.dtype) if store_branch else out.new_empty(1, 1, 1, 1, 1)
    kr = k_rope[:, :, 0, :]  # (B, S, Dr)

    def launch(BLOCK_M, BLOCK_N, num_warps, num_stages):
        _mlra_fwd_kernel[(triton.cdiv(T, BLOCK_M), B * H)](
            q, k_nope, kr, v, out, ob, lse, *q.stride(), *k_nope.stride(), *kr.stride(),
            *v.stride(), *out.stride(), *ob.stride(), *lse.stride(),
            T, S, H, start_pos, scale * LOG2E, alpha_o,
            NB=NB, DN=Dn, DR=Dr, DV=Dv, DN_P=padded(Dn), DR_P=padded(Dr), DV_P=padded(Dv),
            STORE_BRANCH=store_branch, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
            PREC=dot_precision(q.dtype), num_warps=num_warps, num_stages=num_stages)

    launch_with_fallback(_configs(max(padded(Dn) + padded(Dr), padded(Dv))), launch)
    return out, (ob if store_branch else None), lse


class MLRAAttention(torch.autograd.Function):
    """Autograd wrapper: fused forward, per-branch FlashAttention-2 backward."""

    @staticmethod
    def forward(ctx, q, k_nope, k_rope, v, scale, alpha_o, start_pos):
        store = any(ctx.needs_input_grad[:4])
        out, ob, lse = mlra_fwd(q, k_nope, k_rope, v, scale, alpha_o, start_pos, store_branch=store)
        if store:
            ctx.save_for_backward(q, k_nope, k_rope, v, ob, lse)
        ctx.scale, ctx.alpha_o, ctx.start_pos = scale, alpha_o, start_pos
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k_nope, k_rope, v, ob, lse = ctx.saved_tensors
        NB, B, _, H, Dn = k_nope.shape
        S = visible_keys(k_nope.shape[2], ctx.start_pos, q.shape[1])  # later keys: zero gradient
        dbranch = (dout * ctx.alpha_o).to(q.dtype)  # d y_b = α_o · d y
        kr = k_rope[:, :S].expand(B, S, H, k_rope.shape[3])  # (B, S, H, Dr)
        dq = torch.zeros(q.shape, device=q.device, dtype=torch.float32)
        dk_nope = torch.zeros_like(k_nope)
        dk_rope = torch.zeros(k_rope.shape, device=q.device, dtype=torch.float32)
        dv = torch.zeros_like(v)
        for b in range(NB):
            kb = torch.cat([k_nope[b, :, :S], kr], dim=-1)  # (B, S, H, Dn+Dr)
            dq_b, dk_b, dv_b = flash_bwd(q, kb, v[b, :, :S], ob[b], lse[b], dbranch, ctx.scale, ctx.start_pos)
            dq += dq_b.float()
            dk_nope[b, :, :S] = dk_b[..., :Dn]
            dk_rope[:, :S] += dk_b[..., Dn:].float().sum(dim=2, keepdim=True)  # shared key: sum over heads
            dv[b, :, :S] = dv_b
        return dq.to(q.dtype), dk_nope, dk_rope.to(k_rope.dtype), dv, None, None, None


def mlra_attention(q: torch.Tensor, k_nope: torch.Tensor, k_rope: torch.Tensor, v: torch.Tensor,
                   scale: float, alpha_o: float, start_pos: int = 0) -> torch.Tensor:
    """MLRA multi-branch causal attention, ``y = α_o Σ_b softmax(scale·[q_n;q_r]·[k_n^b;k_r]ᵀ) v_b``.

    Args:
        q: ``(B, T, H, Dn + Dr)`` queries, NoPE part first then RoPE part (RoPE already applied).
        k_nope: ``(NB, B, S, H, Dn)`` per-branch NoPE keys; any strides, so a view of a
            ``(B, S, NB, H, Dn)`` tensor permuted to this order works without a copy.
        k_rope: ``(B, S, 1, Dr)`` the single RoPE key shared by all heads and branches.
        v: ``(NB, B, S, H, Dv)`` per-branch values.
        scale: softmax scale (docs/variants.md: ``1/sqrt(Dn + Dr)``).
        alpha_o: branch-sum scale (docs/variants.md: ``1/sqrt(NB)``, 1 with latent scaling off).
        start_pos: absolute position of query 0 (causal offset, as in :func:`flash_attention`;
            keys at ``j ≥ start_pos + T`` are never read).

    Returns:
        ``(B, T, H, Dv)`` in q's dtype.

    Raises:
        ValueError: wrong ranks/shapes, ``Dn + Dr`` ≠ q's head dim, dtype/device mismatch,
            ``scale ≤ 0``, negative ``start_pos``.

    Accuracy (tests/kernels): RMSE ratio to :func:`mlra_attention_ref` below
    :data:`gtalib.kernels.tolerance.TOLERANCE` (fp32 1e-5, fp16 5e-3, bf16 2e-2), outputs and gradients.
    """
    scale, alpha_o = _check(q, k_nope, k_rope, v, scale, alpha_o, start_pos)
    return MLRAAttention.apply(q, k_nope, k_rope, v, scale, alpha_o, start_pos)


def mlra_attention_ref(q, k_nope, k_rope, v, scale, alpha_o, start_pos: int = 0):
    """Plain PyTorch reference of :func:`mlra_attention` (fp32 math, one branch at a time)."""
    scale, alpha_o = _check(q, k_nope, k_rope, v, scale, alpha_o, start_pos)
    B, T, H, _ = q.shape
    NB, _, S, _, Dn = k_nope.shape
    S = visible_keys(S, start_pos, T)
    k_nope, k_rope, v = k_nope[:, :, :S], k_rope[:, :S], v[:, :, :S]
    qf = q.float()
    qpos = start_pos + torch.arange(T, device=q.device)
    visible = torch.arange(S, device=q.device)[None, :] <= qpos[:, None]  # (T, S)
    out = 0.0
    for b in range(NB):
        s = torch.einsum("bthd,bshd->bhts", qf[..., :Dn], k_nope[b].float())
        s = s + torch.einsum("bthd,bsd->bhts", qf[..., Dn:], k_rope[:, :, 0].float())
        p = torch.softmax((s * scale).masked_fill(~visible, float("-inf")), dim=-1)  # (B, H, T, S)
        out = out + torch.einsum("bhts,bshd->bthd", p, v[b].float())
    return (alpha_o * out).to(q.dtype)
