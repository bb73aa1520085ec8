"""Fused causal attention, forward and backward, with grouped KV heads and Dqk ≠ Dv.

Algorithm: FlashAttention-2 (Dao, 2023, "FlashAttention-2: Faster Attention with Better
Parallelism and Work Partitioning", Alg. 1 forward, Alg. 2 backward): tiles of queries stream over
tiles of keys with an online softmax (running row max ``m`` and row sum ``l``), the logsumexp of each
row is kept for the backward pass, which recomputes the probabilities tile by tile.

Shapes (the contract of ``gtalib.model.attention.functional.attend``):
    q ``(B, T, H, Dqk)``, k ``(B, S, Hkv, Dqk)``, v ``(B, S, Hkv, Dv)`` → out ``(B, T, H, Dv)``.
    Query head ``h`` reads KV head ``h // (H // Hkv)`` by index (MHA/MQA/GQA/GTA/MFA never build the
    expanded K/V). Query ``i`` sits at absolute position ``start_pos + i`` and sees keys
    ``j ≤ start_pos + i`` (``j < S``): ``start_pos = 0, S = T`` is plain causal training attention,
    ``start_pos = S - T`` is prefill over a cache.

Head dims need not be powers of two: 192 is computed as a 256-wide tile with the pad masked to 0.
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


@triton.jit
def softmax_step(acc, m_i, l_i, s, v, PREC: tl.constexpr):
    """Online-softmax update with one tile of base-2 scores ``s (M, N)`` and values ``v (N, Dv)``.

    Rows keep their running max ``m_i`` and sum ``l_i`` (FlashAttention-2, Alg. 1 lines 8-10);
    masked scores are ``-inf``. Shared by every kernel of gtalib.kernels.
    """
    m_new = tl.maximum(m_i, tl.max(s, 1))
    # a row whose scores so far are all -inf keeps m = -inf: shift by 0 to avoid inf - inf
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.exp2(s - m_safe[:, None])
    alpha = tl.exp2(m_i - m_safe)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PREC)
    return acc, m_new, l_i


@triton.jit
def _fwd_tile(acc, m_i, l_i, q, k_base, v_base, n0, offs_m, offs_n, offs_dk, offs_dv,
              sks, skd, svs, svd, S, start_pos, qk_scale,
              DQK: tl.constexpr, DV: tl.constexpr, MASK: tl.constexpr, PREC: tl.constexpr):
    """One key tile of the causal forward; scores in base-2 units (qk_scale includes log2 e)."""
    kn = n0 + offs_n
    kmask = kn < S
    k = tl.load(k_base + kn[None, :] * sks + offs_dk[:, None] * skd,
                mask=kmask[None, :] & (offs_dk[:, None] < DQK), other=0.0)  # (DQK_P, BLOCK_N)
    s = tl.dot(q, k, input_precision=PREC) * qk_scale  # (BLOCK_M, BLOCK_N)
    if MASK:
        visible = (kn[None, :] <= start_pos + offs_m[:, None]) & kmask[None, :]
        s = tl.where(visible, s, float("-inf"))
    v = tl.load(v_base + kn[:, None] * svs + offs_dv[None, :] * svd,
                mask=kmask[:, None] & (offs_dv[None, :] < DV), other=0.0)  # (BLOCK_N, DV_P)
    return softmax_step(acc, m_i, l_i, s, v, PREC)


@triton.jit
def _fwd_kernel(Q, K, V, O, LSE,
                sqb, sqt, sqh, sqd, skb, sks, skh, skd, svb, svs, svh, svd,
                sob, sot, soh, sod, slb, slh, slt,
                T, S, H, group, start_pos, qk_scale,
                DQK: tl.constexpr, DV: tl.constexpr, DQK_P: tl.constexpr, DV_P: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PREC: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    hk = h // group
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_dk = tl.arange(0, DQK_P)
    offs_dv = tl.arange(0, DV_P)
    qmask = offs_m < T
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqt + offs_dk[None, :] * sqd,
                mask=qmask[:, None] & (offs_dk[None, :] < DQK), other=0.0)  # (BLOCK_M, DQK_P)
    k_base = K + b * skb + hk * skh
    v_base = V + b * svb + hk * svh
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, DV_P], tl.float32)
    # Keys below the tile's first query position are visible to every row: no mask needed there.
    first_q = start_pos + pid_m * BLOCK_M
    full_hi = (tl.minimum(S, first_q) // BLOCK_N) * BLOCK_N
    hi = tl.minimum(S, first_q + BLOCK_M)
    for n0 in range(0, full_hi, BLOCK_N):
        acc, m_i, l_i = _fwd_tile(acc, m_i, l_i, q, k_base, v_base, n0, offs_m, offs_n, offs_dk,
                                  offs_dv, sks, skd, svs, svd, S, start_pos, qk_scale,
                                  DQK, DV, False, PREC)
    for n0 in range(full_hi, hi, BLOCK_N):
        acc, m_i, l_i = _fwd_tile(acc, m_i, l_i, q, k_base, v_base, n0, offs_m, offs_n, offs_dk,
                                  offs_dv, sks, skd, svs, svd, S, start_pos, qk_scale,
                                  DQK, DV, True, PREC)
    acc = acc / l_i[:, None]
    tl.store(O + b * sob + h * soh + offs_m[:, None] * sot + offs_dv[None, :] * sod,
             acc.to(O.dtype.element_ty), mask=qmask[:, None] & (offs_dv[None, :] < DV))
    # logsumexp of the row in base 2, for the backward pass
    tl.store(LSE + b * slb + h * slh + offs_m * slt, m_i + tl.log2(l_i), mask=qmask)


@triton.jit
def _bwd_dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DVv,
                     sqb, sqt, sqh, sqd, skb, sks, skh, skd, svb, svs, svh, svd,
                     sdob, sdot, sdoh, sdod, slb, slh, slt,
                     sdkb, sdks, sdkh, sdkd, sdvb, sdvs, sdvh, sdvd,
                     T, S, Hkv, group, start_pos, qk_scale, sm_scale,
                     DQK: tl.constexpr, DV: tl.constexpr, DQK_P: tl.constexpr, DV_P: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PREC: tl.constexpr):
    """dK, dV of one key tile, summed over the query heads of its group (no atomics needed)."""
    pid_n = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // Hkv
    hk = pid_bh % Hkv
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_dk = tl.arange(0, DQK_P)
    offs_dv = tl.arange(0, DV_P)
    nmask = offs_n < S
    k = tl.load(K + b * skb + hk * skh + offs_n[:, None] * sks + offs_dk[None, :] * skd,
                mask=nmask[:, None] & (offs_dk[None, :] < DQK), other=0.0)  # (BLOCK_N, DQK_P)
    v = tl.load(V + b * svb + hk * svh + offs_n[:, None] * svs + offs_dv[None, :] * svd,
                mask=nmask[:, None] & (offs_dv[None, :] < DV), other=0.0)  # (BLOCK_N, DV_P)
    dk = tl.zeros([BLOCK_N, DQK_P], tl.float32)
    dv = tl.zeros([BLOCK_N, DV_P], tl.float32)
    # query i sees key j iff i ≥ j - start_pos: earlier query tiles contribute nothing
    m_lo = (tl.maximum(pid_n * BLOCK_N - start_pos, 0) // BLOCK_M) * BLOCK_M
    for g in range(0, group):
        h = hk * group + g
        for m0 in range(m_lo, T, BLOCK_M):
            offs_m = m0 + offs_m0
            qmask = offs_m < T
            q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqt + offs_dk[None, :] * sqd,
                        mask=qmask[:, None] & (offs_dk[None, :] < DQK), other=0.0)
            do = tl.load(DO + b * sdob + h * sdoh + offs_m[:, None] * sdot + offs_dv[None, :] * sdod,
                         mask=qmask[:, None] & (offs_dv[None, :] < DV), other=0.0)
            lse = tl.load(LSE + b * slb + h * slh + offs_m * slt, mask=qmask, other=0.0)
            delta = tl.load(DELTA + b * slb + h * slh + offs_m * slt, mask=qmask, other=0.0)
            s = tl.dot(q, tl.trans(k), input_precision=PREC) * qk_scale  # (BLOCK_M, BLOCK_N)
            visible = (offs_n[None, :] <= start_pos + offs_m[:, None]) & qmask[:, None] & nmask[None, :]
            p = tl.where(visible, tl.exp2(s - lse[:, None]), 0.0)
            dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision=PREC)
            dp = tl.dot(do, tl.trans(v), input_precision=PREC)
            ds = p * (dp - delta[:, None])
            dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision=PREC)
    dk = dk * sm_scale
    tl.store(DK + b * sdkb + hk * sdkh + offs_n[:, None] * sdks + offs_dk[None, :] * sdkd,
             dk.to(DK.dtype.element_ty), mask=nmask[:, None] & (offs_dk[None, :] < DQK))
    tl.store(DVv + b * sdvb + hk * sdvh + offs_n[:, None] * sdvs + offs_dv[None, :] * sdvd,
             dv.to(DVv.dtype.element_ty), mask=nmask[:, None] & (offs_dv[None, :] < DV))


@triton.jit
def _bwd_dq_kernel(Q, K, V, DO, LSE, DELTA, DQ,
                   sqb, sqt, sqh, sqd, skb, sks, skh, skd, svb, svs, svh, svd,
                   sdob, sdot, sdoh, sdod, slb, slh, slt, sdqb, sdqt, sdqh, sdqd,
                   T, S, H, group, start_pos, qk_scale, sm_scale,
                   DQK: tl.constexpr, DV: tl.constexpr, DQK_P: tl.constexpr, DV_P: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PREC: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    hk = h // group
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_dk = tl.arange(0, DQK_P)
    offs_dv = tl.arange(0, DV_P)
    qmask = offs_m < T
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqt + offs_dk[None, :] * sqd,
                mask=qmask[:, None] & (offs_dk[None, :] < DQK), other=0.0)
    do = tl.load(DO + b * sdob + h * sdoh + offs_m[:, None] * sdot + offs_dv[None, :] * sdod,
                 mask=qmask[:, None] & (offs_dv[None, :] < DV), other=0.0)
    lse = tl.load(LSE + b * slb + h * slh + offs_m * slt, mask=qmask, other=0.0)
    delta = tl.load(DELTA + b * slb + h * slh + offs_m * slt, mask=qmask, other=0.0)
    dq = tl.zeros([BLOCK_M, DQK_P], tl.float32)
    hi = tl.minimum(S, start_pos + (pid_m + 1) * BLOCK_M)
    for n0 in range(0, hi, BLOCK_N):
        offs_n = n0 + offs_n0
        nmask = offs_n < S
        k = tl.load(K + b * skb + hk * skh + offs_n[:, None] * sks + offs_dk[None, :] * skd,
                    mask=nmask[:, None] & (offs_dk[None, :] < DQK), other=0.0)
        v = tl.load(V + b * svb + hk * svh + offs_n[:, None] * svs + offs_dv[None, :] * svd,
                    mask=nmask[:, None] & (offs_dv[None, :] < DV), other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PREC) * qk_scale
        visible = (offs_n[None, :] <= start_pos + offs_m[:, None]) & qmask[:, None] & nmask[None, :]
        p = tl.where(visible, tl.exp2(s - lse[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PREC)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PREC)
    dq = dq * sm_scale
    tl.store(DQ + b * sdqb + h * sdqh + offs_m[:, None] * sdqt + offs_dk[None, :] * sdqd,
             dq.to(DQ.dtype.element_ty), mask=qmask[:, None] & (offs_dk[None, :] < DQK))


def _configs(kind: str, dqk_p: int, dv_p: int) -> list[dict]:
    """Tile sizes, fastest first. Not autotuned (no GPU was available when they were chosen);
    the interpreter gets small tiles to keep CPU tests fast."""
    if interpreting():
        return [dict(BLOCK_M=32, BLOCK_N=32, num_warps=1, num_stages=1)]
    wide = max(dqk_p, dv_p) > 128
    if kind == "fwd":
        first = dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2) if wide else \
            dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3)
    else:
        first = dict(BLOCK_M=32, BLOCK_N=64, num_warps=4, num_stages=2) if wide else \
            dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2)
    return [first, dict(BLOCK_M=32, BLOCK_N=32, num_warps=4, num_stages=1),
            dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1)]


def _check(q, k, v, scale, start_pos):
    check_ndim("q", q, 4, "(B, T, H, Dqk)")
    check_ndim("k", k, 4, "(B, S, Hkv, Dqk)")
    check_ndim("v", v, 4, "(B, S, Hkv, Dv)")
    check_dtype("q", q)
    for name, t in (("k", k), ("v", v)):
        check_dtype(name, t, q.dtype)
        check_device(name, t, q.device)
    check_device("q", q, q.device)
    B, T, H, D = q.shape
    if k.shape[0] != B or v.shape[0] != B:
        raise ValueError(f"k, v: batch {k.shape[0]}, {v.shape[0]} differ from q's {B}")
    if k.shape[3] != D:
        raise ValueError(f"k: head dim {k.shape[3]} differs from q's {D}")
    if k.shape[1:3] != v.shape[1:3]:
        raise ValueError(f"k, v: (S, Hkv) {tuple(k.shape[1:3])} vs {tuple(v.shape[1:3])} differ")
    if H % k.shape[2] != 0:
        raise ValueError(f"k: Hkv = {k.shape[2]} must divide the query heads H = {H}")
    if not isinstance(start_pos, int) or start_pos < 0:
        raise ValueError(f"start_pos: must be an int ≥ 0, got {start_pos!r}")
    return check_scale(scale)


def visible_keys(S: int, start_pos: int, T: int) -> int:
    """Keys any query can see: ``min(S, start_pos + T)``. Kernels never read past it, so a
    preallocated cache may be passed whole even if its unwritten tail holds NaN or garbage."""
    return min(S, start_pos + T)


def flash_fwd(q, k, v, scale: float, start_pos: int = 0):
    """Forward kernel launch: returns ``out (B,T,H,Dv)`` and the base-2 logsumexp ``(B,H,T)`` fp32."""
    B, T, H, Dqk = q.shape
    S, Hkv, Dv = visible_keys(k.shape[1], start_pos, T), k.shape[2], v.shape[3]
    out = torch.empty(B, T, H, Dv, device=q.device, dtype=q.dtype)
    lse = torch.empty(B, H, T, device=q.device, dtype=torch.float32)
    dqk_p, dv_p = padded(Dqk), padded(Dv)

    def launch(BLOCK_M, BLOCK_N, num_warps, num_stages):
        _fwd_kernel[(triton.cdiv(T, BLOCK_M), B * H)](
            q, k, v, out, lse, *q.stride(), *k.stride(), *v.stride(), *out.stride(), *lse.stride(),
            T, S, H, H // Hkv, start_pos, scale * LOG2E,
            DQK=Dqk, DV=Dv, DQK_P=dqk_p, DV_P=dv_p, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
            PREC=dot_precision(q.dtype), num_warps=num_warps, num_stages=num_stages)

    launch_with_fallback(_configs("fwd", dqk_p, dv_p), launch)
    return out, lse


def flash_bwd(q, k, v, out, lse, dout, scale: float, start_pos: int = 0):
    """Backward kernel launches (FlashAttention-2 Alg. 2): returns ``dq, dk, dv`` shaped like the inputs.

    ``delta = rowsum(dout ⊙ out)`` is computed in PyTorch (one fused reduction); dK/dV are summed over
    the query heads of each KV group inside one program, so grouped heads need no atomics.
    """
    B, T, H, Dqk = q.shape
    S, Hkv, Dv = visible_keys(k.shape[1], start_pos, T), k.shape[2], v.shape[3]
    delta = (dout.float() * out.float()).sum(-1).transpose(1, 2).contiguous()  # (B, H, T)
    dq = torch.empty_like(q)
    # keys no query sees (a preallocated cache passed whole) get zero gradient, not garbage
    alloc = torch.empty_like if S == k.shape[1] else torch.zeros_like
    dk, dv = alloc(k), alloc(v)
    dqk_p, dv_p = padded(Dqk), padded(Dv)
    prec = dot_precision(q.dtype)
    common = dict(DQK=Dqk, DV=Dv, DQK_P=dqk_p, DV_P=dv_p, PREC=prec)

    def launch_dkdv(BLOCK_M, BLOCK_N, num_warps, num_stages):
        _bwd_dkdv_kernel[(triton.cdiv(S, BLOCK_N), B * Hkv)](
            q, k, v, dout, lse, delta, dk, dv, *q.stride(), *k.stride(), *v.stride(),
            *dout.stride(), *lse.stride(), *dk.stride(), *dv.stride(),
            T, S, Hkv, H // Hkv, start_pos, scale * LOG2E, scale,
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=num_warps, num_stages=num_stages, **common)

    def launch_dq(BLOCK_M, BLOCK_N, num_warps, num_stages):
        # dQ tiles are query-major: swap the roles of the tile sizes chosen for dK/dV
        _bwd_dq_kernel[(triton.cdiv(T, BLOCK_N), B * H)](
            q, k, v, dout, lse, delta, dq, *q.stride(), *k.stride(), *v.stride(),
            *dout.stride(), *lse.stride(), *dq.stride(),
            T, S, H, H // Hkv, start_pos, scale * LOG2E, scale,
            BLOCK_M=BLOCK_N, BLOCK_N=BLOCK_M, num_warps=num_warps, num_stages=num_stages, **common)

    configs = _configs("bwd", dqk_p, dv_p)
    launch_with_fallback(configs, launch_dkdv)
    launch_with_fallback(configs, launch_dq)
    return dq, dk, dv


class FlashAttention(torch.autograd.Function):
    """Autograd wrapper of :func:`flash_fwd` / :func:`flash_bwd` (inputs saved, not the probabilities)."""

    @staticmethod
    def forward(ctx, q, k, v, scale, start_pos):
        out, lse = flash_fwd(q, k, v, scale, start_pos)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.scale, ctx.start_pos = scale, start_pos
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = flash_bwd(q, k, v, out, lse, dout, ctx.scale, ctx.start_pos)
        return dq, dk, dv, None, None


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                    start_pos: int = 0) -> torch.Tensor:
    """Fused causal attention with grouped KV heads (FlashAttention-2), differentiable.

    Args:
        q: ``(B, T, H, Dqk)`` queries; any strides.
        k: ``(B, S, Hkv, Dqk)`` keys, ``H % Hkv == 0``; query head ``h`` reads KV head ``h // (H//Hkv)``.
        v: ``(B, S, Hkv, Dv)`` values; ``Dv`` may differ from ``Dqk`` (128 vs 192 for the latent family).
        scale: softmax scale (docs/variants.md: ``1/sqrt(Dqk)``), applied to ``q·k``.
        start_pos: absolute position of query 0; query ``i`` sees keys ``j ≤ start_pos + i``.
            Keys at ``j ≥ start_pos + T`` are never read (a preallocated cache may be passed whole;
            their gradients are 0).

    Returns:
        ``(B, T, H, Dv)`` in q's dtype; softmax statistics in fp32.

    Raises:
        ValueError: wrong rank, mismatched sizes/dtypes/devices, ``Hkv`` not dividing ``H``,
            ``scale ≤ 0``, negative ``start_pos``, CPU tensors without the interpreter.

    Accuracy (tests/kernels): RMSE(out − ref)/RMSE(ref) against :func:`flash_attention_ref` below
    :data:`gtalib.kernels.tolerance.TOLERANCE` (fp32 1e-5, fp16 5e-3, bf16 2e-2), outputs and gradients.
    """
    scale = _check(q, k, v, scale, start_pos)
    return FlashAttention.apply(q, k, v, scale, start_pos)


def flash_attention_ref(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                        start_pos: int = 0) -> torch.Tensor:
    """Plain PyTorch reference of :func:`flash_attention` (fp32 math, materialised scores).

    Same shapes and semantics; KV heads are expanded with ``repeat_interleave`` here on purpose,
    as an independent route to the grouped indexing of the kernel.
    """
    scale = _check(q, k, v, scale, start_pos)
    B, T, H, _ = q.shape
    S, Hkv = visible_keys(k.shape[1], start_pos, T), k.shape[2]
    kx = k[:, :S].float().repeat_interleave(H // Hkv, dim=2)  # (B, S, H, Dqk)
    vx = v[:, :S].float().repeat_interleave(H // Hkv, dim=2)  # (B, S, H, Dv)
    s = torch.einsum("bthd,bshd->bhts", q.float(), kx) * scale  # (B, H, T, S)
    qpos = start_pos + torch.arange(T, device=q.device)
    visible = torch.arange(S, device=q.device)[None, :] <= qpos[:, None]  # (T, S)
    s = s.masked_fill(~visible, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.einsum("bhts,bshd->bthd", p, vx).to(q.dtype)
