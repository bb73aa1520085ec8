"""Decode attention (one new token per sequence) over a KV cache, split across the context.

Algorithm: FlashDecoding (Dao, Haziza, Massa, Sizov, 2023, "Flash-Decoding for long-context
inference"): the cached context is cut into ``num_splits`` chunks processed by separate programs,
each leaving a partial output and its logsumexp; a combine kernel merges them exactly,
``out = Σ_s exp(lse_s − lse) o_s`` with ``lse = log Σ_s exp(lse_s)``. Within a chunk, the query heads
that share one KV head form the rows of a tile (MQA-style), so each cached key is read once per
head tile (FlashAttention-2's online softmax, shared with :mod:`gtalib.kernels.flash_attn`).

Two entry points share one kernel:

* :func:`latent_decode`: MLA / GLA / MLRA decode with weight absorption (docs/variants.md, "Decoding
  with a cache"): scores ``τ(q̃_n·c + q_r·k_r)`` over the latent cache ``c`` plus the single RoPE key,
  value = the latent itself (read once, used for both products), output in the latent space.
* :func:`gqa_decode`: MHA/MQA/GQA decode over ``(S, Hkv, D)`` caches.

Caches are contiguous ``(B, S, ...)`` or paged ``(num_pages, page_size, ...)`` with a
``block_table (B, max_pages)`` of page indices: logical position ``p`` of sequence ``b`` lives in
page ``block_table[b, p // page_size]`` at row ``p % page_size``. Only positions
``< cache_seqlens[b]`` are read.
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
from .flash_attn import softmax_step


@triton.jit
def _decode_split_kernel(Q1, Q2, K1, K2, V, BT, SEQ, OP, LP,
                         sq1b, sq1h, sq1d, sq2b, sq2h, sq2d,
                         sk1b, sk1s, sk1h, sk1d, sk2b, sk2s, sk2h, sk2d, svb, svs, svh, svd,
                         sbtb, sbtp, sopb, soph, sops, sopd, slpb, slph, slps,
                         group, n_hblk, chunk, page_size, qk_scale,
                         D1: tl.constexpr, D2: tl.constexpr, DV: tl.constexpr,
                         D1_P: tl.constexpr, D2_P: tl.constexpr, DV_P: tl.constexpr,
                         HAS_Q2: tl.constexpr, V_IS_K1: tl.constexpr, PAGED: tl.constexpr,
                         BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, PREC: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)  # int64: B·S·row stride can pass 2^31 at long context
    pid_h = tl.program_id(1)
    split = tl.program_id(2)
    hk = pid_h // n_hblk
    offs_g = (pid_h % n_hblk) * BLOCK_H + tl.arange(0, BLOCK_H)
    hmask = offs_g < group
    h = hk * group + offs_g  # query heads of this tile, all reading KV head hk
    offs_n = tl.arange(0, BLOCK_N)
    offs_d1 = tl.arange(0, D1_P)
    offs_d2 = tl.arange(0, D2_P)
    offs_dv = tl.arange(0, DV_P)
    q1 = tl.load(Q1 + b * sq1b + h[:, None] * sq1h + offs_d1[None, :] * sq1d,
                 mask=hmask[:, None] & (offs_d1[None, :] < D1), other=0.0)  # (BLOCK_H, D1_P)
    if HAS_Q2:
        q2 = tl.load(Q2 + b * sq2b + h[:, None] * sq2h + offs_d2[None, :] * sq2d,
                     mask=hmask[:, None] & (offs_d2[None, :] < D2), other=0.0)  # (BLOCK_H, D2_P)
    seqlen = tl.load(SEQ + b)
    lo = split * chunk
    hi = tl.minimum(seqlen, lo + chunk)
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, DV_P], tl.float32)
    for n0 in range(lo, hi, BLOCK_N):
        pos = (n0 + offs_n).to(tl.int64)
        valid = pos < hi
        if PAGED:
            page = tl.load(BT + b * sbtb + (pos // page_size) * sbtp, mask=valid, other=0).to(tl.int64)
            row = pos % page_size
        else:
            page = b + 0 * pos
            row = pos
        k1 = tl.load(K1 + page[:, None] * sk1b + row[:, None] * sk1s + hk * sk1h + offs_d1[None, :] * sk1d,
                     mask=valid[:, None] & (offs_d1[None, :] < D1), other=0.0)  # (BLOCK_N, D1_P)
        s = tl.dot(q1, tl.trans(k1), input_precision=PREC)  # (BLOCK_H, BLOCK_N)
        if HAS_Q2:
            k2 = tl.load(K2 + page[:, None] * sk2b + row[:, None] * sk2s + hk * sk2h + offs_d2[None, :] * sk2d,
                         mask=valid[:, None] & (offs_d2[None, :] < D2), other=0.0)  # (BLOCK_N, D2_P)
            s += tl.dot(q2, tl.trans(k2), input_precision=PREC)
        s = tl.where(valid[None, :], s * qk_scale, float("-inf"))
        if V_IS_K1:
            v = k1  # latent decode: the value is the cached latent, already in registers
        else:
            v = tl.load(V + page[:, None] * svb + row[:, None] * svs + hk * svh + offs_dv[None, :] * svd,
                        mask=valid[:, None] & (offs_dv[None, :] < DV), other=0.0)  # (BLOCK_N, DV_P)
        acc, m_i, l_i = softmax_step(acc, m_i, l_i, s, v, PREC)
    empty = l_i == 0.0  # a split past the end of a short sequence
    acc = acc / tl.where(empty, 1.0, l_i)[:, None]
    lse = tl.where(empty, float("-inf"), m_i + tl.log2(tl.where(empty, 1.0, l_i)))
    tl.store(OP + b * sopb + h[:, None] * soph + split * sops + offs_dv[None, :] * sopd, acc,
             mask=hmask[:, None] & (offs_dv[None, :] < DV))
    tl.store(LP + b * slpb + h * slph + split * slps, lse, mask=hmask)


@triton.jit
def _combine_kernel(OP, LP, OUT, sopb, soph, sops, sopd, slpb, slph, slps, sob, soh, sod,
                    NS, DV: tl.constexpr, NS_P: tl.constexpr, DV_P: tl.constexpr):
    """Merge the split partials of one (sequence, head): exact log-sum-exp weighting."""
    b = tl.program_id(0)
    h = tl.program_id(1)
    offs_s = tl.arange(0, NS_P)
    offs_d = tl.arange(0, DV_P)
    dmask = offs_d < DV
    lse_all = tl.load(LP + b * slpb + h * slph + offs_s * slps, mask=offs_s < NS, other=float("-inf"))
    m = tl.max(lse_all, 0)
    m = tl.where(m == float("-inf"), 0.0, m)
    num = tl.zeros([DV_P], tl.float32)
    den = 0.0
    for s in range(0, NS):
        w = tl.exp2(tl.load(LP + b * slpb + h * slph + s * slps) - m)  # 0 for an empty split
        num += w * tl.load(OP + b * sopb + h * soph + s * sops + offs_d * sopd, mask=dmask, other=0.0)
        den += w
    out = num / tl.where(den > 0.0, den, 1.0)
    tl.store(OUT + b * sob + h * soh + offs_d * sod, out.to(OUT.dtype.element_ty), mask=dmask)


def _configs(group: int, dv_p: int, width: int) -> list[dict]:
    """Head-tile and key-tile sizes, fastest first (not tuned on a GPU: none was available)."""
    block_h = min(max(16, triton.next_power_of_2(group)), 64)
    if interpreting():
        return [dict(BLOCK_H=block_h, BLOCK_N=32, num_warps=1, num_stages=1)]
    while block_h > 16 and block_h * dv_p > 16384:  # keep the fp32 accumulator within registers
        block_h //= 2
    block_n = 64 if width <= 256 else 32
    warps = 8 if block_h * dv_p >= 8192 else 4
    return [dict(BLOCK_H=block_h, BLOCK_N=block_n, num_warps=warps, num_stages=3),
            dict(BLOCK_H=16, BLOCK_N=32, num_warps=4, num_stages=2),
            dict(BLOCK_H=16, BLOCK_N=16, num_warps=4, num_stages=1)]


def default_num_splits(batch: int, programs_per_split: int, capacity: int, device: torch.device) -> int:
    """Enough splits to give every SM about two programs, each split at least 256 positions long."""
    n_sm = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    want = triton.cdiv(2 * n_sm, max(1, batch * programs_per_split))
    return int(max(1, min(want, triton.cdiv(capacity, 256), 1024)))


def _cache_view(name: str, cache: torch.Tensor, paged: bool, headed: bool):
    """Cache as 4 dims ``(B or pages, S or page_size, heads, D)`` (a view; latent caches get a head dim of stride 0)."""
    layout = ("(num_pages, page_size" if paged else "(B, S") + (", Hkv, D)" if headed else ", D)")
    check_ndim(name, cache, 4 if headed else 3, layout)
    return cache if headed else cache.unsqueeze(2)


def _check_common(q: torch.Tensor, caches: dict, cache_seqlens, block_table, scale):
    check_dtype("q", q)
    check_device("q", q, q.device)
    for name, t in caches.items():
        check_dtype(name, t, q.dtype)
        check_device(name, t, q.device)
    B = q.shape[0]
    if not isinstance(cache_seqlens, torch.Tensor) or cache_seqlens.shape != (B,) \
            or cache_seqlens.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"cache_seqlens: expected an int32/int64 tensor of shape ({B},)")
    check_device("cache_seqlens", cache_seqlens, q.device)
    first = next(iter(caches.values()))
    if block_table is not None:
        if not isinstance(block_table, torch.Tensor) or block_table.dim() != 2 or block_table.shape[0] != B \
                or block_table.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"block_table: expected an int32/int64 tensor of shape ({B}, max_pages)")
        check_device("block_table", block_table, q.device)
        capacity = block_table.shape[1] * first.shape[1]
    else:
        if first.shape[0] != B:
            raise ValueError(f"caches: batch {first.shape[0]} differs from the query's {B}")
        capacity = first.shape[1]
    for name, t in caches.items():
        if t.shape[:2] != first.shape[:2]:
            raise ValueError(f"{name}: leading dims {tuple(t.shape[:2])} differ from {tuple(first.shape[:2])}")
    if cache_seqlens.device.type == "cpu":  # on CUDA this check would cost a host sync per step
        if int(cache_seqlens.min()) < 0 or int(cache_seqlens.max()) > capacity:
            raise ValueError(f"cache_seqlens: values must lie in [0, {capacity}] (the cache capacity)")
    return check_scale(scale), capacity


def _decode(q1, q2, k1, k2, v, cache_seqlens, block_table, scale, num_splits, capacity, v_is_k1):
    """Launch split + combine. q1 ``(B,H,D1)``, q2 ``(B,H,D2)`` or None, k1/k2/v 4-d cache views."""
    B, H, D1 = q1.shape
    Hkv = k1.shape[2]
    group = H // Hkv
    D2 = q2.shape[2] if q2 is not None else 1
    DV = v.shape[3]
    dv_p = padded(DV)
    configs = _configs(group, dv_p, padded(D1) + (padded(D2) if q2 is not None else 0))
    seqlens = cache_seqlens.to(torch.int32)
    paged = block_table is not None
    bt = block_table.to(torch.int32) if paged else seqlens.view(B, 1)  # unused placeholder when not paged
    out = torch.empty(B, H, DV, device=q1.device, dtype=q1.dtype)
    q2_, k2_ = (q2, k2) if q2 is not None else (q1, k1)  # placeholders, never read (HAS_Q2=False)

    def launch(BLOCK_H, BLOCK_N, num_warps, num_stages):
        n_hblk = triton.cdiv(group, BLOCK_H)
        ns = num_splits or default_num_splits(B, Hkv * n_hblk, capacity, q1.device)
        chunk = triton.cdiv(triton.cdiv(capacity, ns), BLOCK_N) * BLOCK_N
        opart = torch.empty(B, H, ns, DV, device=q1.device, dtype=torch.float32)
        lpart = torch.empty(B, H, ns, device=q1.device, dtype=torch.float32)
        _decode_split_kernel[(B, Hkv * n_hblk, ns)](
            q1, q2_, k1, k2_, v, bt, seqlens, opart, lpart,
            *q1.stride(), *q2_.stride(), *k1.stride(), *k2_.stride(), *v.stride(), *bt.stride(),
            *opart.stride(), *lpart.stride(),
            group, n_hblk, chunk, k1.shape[1] if paged else 1, scale * LOG2E,
            D1=D1, D2=D2, DV=DV, D1_P=padded(D1), D2_P=padded(D2), DV_P=dv_p,
            HAS_Q2=q2 is not None, V_IS_K1=v_is_k1, PAGED=paged, BLOCK_H=BLOCK_H, BLOCK_N=BLOCK_N,
            PREC=dot_precision(q1.dtype), num_warps=num_warps, num_stages=num_stages)
        _combine_kernel[(B, H)](opart, lpart, out, *opart.stride(), *lpart.stride(), *out.stride(),
                                ns, DV=DV, NS_P=triton.next_power_of_2(ns), DV_P=dv_p,
                                num_warps=4 if dv_p >= 256 else 2)

    launch_with_fallback(configs, launch)
    return out


def _check_splits(num_splits):
    if num_splits is not None and (not isinstance(num_splits, int) or num_splits < 1):
        raise ValueError(f"num_splits: must be None (automatic) or an int ≥ 1, got {num_splits!r}")


def latent_decode(q_lat: torch.Tensor, q_rope: torch.Tensor, c_cache: torch.Tensor,
                  kr_cache: torch.Tensor, cache_seqlens: torch.Tensor, scale: float,
                  block_table: torch.Tensor | None = None, num_splits: int | None = None) -> torch.Tensor:
    """Absorbed latent decode: ``out = softmax(scale·(q_lat·c + q_rope·k_r)) c`` over the cache.

    Args:
        q_lat: ``(B, H, Dc)`` absorbed NoPE query ``q_n W_UK[b]ᵀ`` (docs/variants.md), one new token.
        q_rope: ``(B, H, Dr)`` RoPE part of the query (rotated at its position).
        c_cache: latent cache ``(B, S, Dc)``, or paged ``(num_pages, page_size, Dc)``; any strides
            (a block ``c[..., j*128:(j+1)*128]`` of a wider cache works without a copy).
        kr_cache: RoPE-key cache ``(B, S, Dr)`` or paged ``(num_pages, page_size, Dr)``.
        cache_seqlens: ``(B,)`` int, valid positions per sequence (including the new token).
        scale: the training softmax scale ``1/sqrt(d_n + d_r)``, whatever the latent width.
        block_table: ``(B, max_pages)`` int page indices for a paged cache, else None.
        num_splits: context splits (FlashDecoding); None picks one from the SM count.

    Returns:
        ``(B, H, Dc)`` in q's dtype, the attention-weighted latent (apply ``W_UV`` afterwards).

    Raises:
        ValueError: wrong ranks/shapes/dtypes/devices, ``scale ≤ 0``, bad ``num_splits``, and
            (CPU tensors only, to avoid a GPU sync) ``cache_seqlens`` outside ``[0, capacity]``.

    A sequence with ``cache_seqlens == 0`` gets a zero output. Accuracy (tests/kernels): RMSE ratio
    to :func:`latent_decode_ref` below :data:`gtalib.kernels.tolerance.TOLERANCE`
    (fp32 1e-5, fp16 5e-3, bf16 2e-2).
    """
    paged = block_table is not None
    check_ndim("q_lat", q_lat, 3, "(B, H, Dc)")
    check_ndim("q_rope", q_rope, 3, "(B, H, Dr)")
    c = _cache_view("c_cache", c_cache, paged, headed=False)  # (B|P, S|page, 1, Dc)
    kr = _cache_view("kr_cache", kr_cache, paged, headed=False)  # (B|P, S|page, 1, Dr)
    if q_rope.shape[:2] != q_lat.shape[:2]:
        raise ValueError(f"q_rope: (B, H) {tuple(q_rope.shape[:2])} differ from q_lat's {tuple(q_lat.shape[:2])}")
    if c.shape[3] != q_lat.shape[2] or kr.shape[3] != q_rope.shape[2]:
        raise ValueError(f"c_cache/kr_cache: widths {c.shape[3]}, {kr.shape[3]} must match "
                         f"q_lat's {q_lat.shape[2]} and q_rope's {q_rope.shape[2]}")
    _check_splits(num_splits)
    check_dtype("q_rope", q_rope, q_lat.dtype)
    scale, capacity = _check_common(q_lat, {"c_cache": c_cache, "kr_cache": kr_cache},
                                    cache_seqlens, block_table, scale)
    return _decode(q_lat, q_rope, c, kr, c, cache_seqlens, block_table, scale, num_splits,
                   capacity, v_is_k1=True)


def gqa_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
               cache_seqlens: torch.Tensor, scale: float, block_table: torch.Tensor | None = None,
               num_splits: int | None = None) -> torch.Tensor:
    """Grouped-query decode: query head ``h`` attends KV head ``h // (H // Hkv)`` over the cache.

    Args:
        q: ``(B, H, D)`` one new token per sequence.
        k_cache, v_cache: ``(B, S, Hkv, D)`` and ``(B, S, Hkv, Dv)``, or paged
            ``(num_pages, page_size, Hkv, D)`` / ``(..., Dv)``; ``H % Hkv == 0``.
        cache_seqlens, scale, block_table, num_splits: as in :func:`latent_decode`.

    Returns:
        ``(B, H, Dv)`` in q's dtype.

    Raises:
        ValueError: as :func:`latent_decode`, and ``Hkv`` not dividing ``H``.
    """
    paged = block_table is not None
    check_ndim("q", q, 3, "(B, H, D)")
    k = _cache_view("k_cache", k_cache, paged, headed=True)
    v = _cache_view("v_cache", v_cache, paged, headed=True)
    if k.shape[3] != q.shape[2]:
        raise ValueError(f"k_cache: head dim {k.shape[3]} differs from q's {q.shape[2]}")
    if k.shape[2] != v.shape[2] or q.shape[1] % k.shape[2] != 0:
        raise ValueError(f"k_cache/v_cache: Hkv {k.shape[2]}, {v.shape[2]} must be equal and divide H = {q.shape[1]}")
    _check_splits(num_splits)
    scale, capacity = _check_common(q, {"k_cache": k_cache, "v_cache": v_cache},
                                    cache_seqlens, block_table, scale)
    return _decode(q, None, k, None, v, cache_seqlens, block_table, scale, num_splits,
                   capacity, v_is_k1=False)


def _gather(cache: torch.Tensor, block_table, b: int, n: int) -> torch.Tensor:
    """The first ``n`` logical positions of sequence ``b`` as a contiguous ``(n, ...)`` tensor."""
    if block_table is None:
        return cache[b, :n]
    pages = cache[block_table[b].long()]  # (max_pages, page_size, ...)
    return pages.reshape(-1, *cache.shape[2:])[:n]


def _attend_one(q, k, v, scale):
    """q ``(H, Dqk)``, k ``(n, Hkv, Dqk)``, v ``(n, Hkv, Dv)`` → ``(H, Dv)`` in fp32; zeros if n = 0.

    Heads are grouped by reshaping the query (no expanded K/V: at 2M tokens an expanded latent
    cache would not fit in memory)."""
    H, Hkv = q.shape[0], k.shape[1]
    if k.shape[0] == 0:
        return q.new_zeros(H, v.shape[2], dtype=torch.float32)
    qg = q.float().view(Hkv, H // Hkv, q.shape[1])  # (Hkv, group, Dqk)
    p = torch.softmax(torch.einsum("kgd,nkd->kgn", qg, k.float()) * scale, dim=-1)  # (Hkv, group, n)
    return torch.einsum("kgn,nkd->kgd", p, v.float()).reshape(H, v.shape[2])


def latent_decode_ref(q_lat, q_rope, c_cache, kr_cache, cache_seqlens, scale, block_table=None,
                      num_splits=None):
    """PyTorch reference of :func:`latent_decode`: gathers each sequence's valid prefix, fp32 math.

    Written as plain attention with keys ``[c ; k_r]`` and values ``c`` (one KV head), i.e. the
    un-fused form of the absorbed computation. ``num_splits`` is accepted and ignored.
    """
    outs = []
    for b in range(q_lat.shape[0]):
        n = int(cache_seqlens[b])
        c = _gather(c_cache, block_table, b, n)  # (n, Dc)
        kr = _gather(kr_cache, block_table, b, n)  # (n, Dr)
        k = torch.cat([c, kr], dim=-1)[:, None]  # (n, 1, Dc+Dr)
        q = torch.cat([q_lat[b], q_rope[b]], dim=-1)  # (H, Dc+Dr)
        outs.append(_attend_one(q, k, c[:, None], scale))
    return torch.stack(outs).to(q_lat.dtype)


def gqa_decode_ref(q, k_cache, v_cache, cache_seqlens, scale, block_table=None, num_splits=None):
    """PyTorch reference of :func:`gqa_decode` (fp32 math; ``num_splits`` ignored)."""
    outs = []
    for b in range(q.shape[0]):
        n = int(cache_seqlens[b])
        outs.append(_attend_one(q[b], _gather(k_cache, block_table, b, n),
                                _gather(v_cache, block_table, b, n), scale))
    return torch.stack(outs).to(q.dtype)
