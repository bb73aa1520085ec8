"""Split-KV decode kernels over contiguous and paged caches, with NaN-poisoned unused slots."""

import pytest
import torch

from gtalib.kernels import (
    assert_rmse_close,
    flash_attention,
    gqa_decode,
    gqa_decode_ref,
    latent_decode,
    latent_decode_ref,
)

NAN = float("nan")
SEQLENS = [70, 1, 33]  # one full cache, one single token, one partial; capacity 70


def _rand(g, dtype, device, *shape):
    return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)


def _poisoned(cache: torch.Tensor, seqlens) -> torch.Tensor:
    """Positions ≥ seqlen set to NaN: any out-of-bounds read turns the output into NaN."""
    cache = cache.clone()
    for b, n in enumerate(seqlens):
        cache[b, n:] = NAN
    return cache


def _paged(caches, seqlens, page_size: int, seed: int = 0):
    """Scatter contiguous (B, S, ...) caches into the same shuffled pages; unused pages/rows are NaN."""
    B, S = caches[0].shape[:2]
    per_seq = -(-S // page_size)
    n_pages = B * per_seq + 3  # spare pages that no sequence owns
    order = torch.randperm(n_pages, generator=torch.Generator().manual_seed(seed))
    table = order[: B * per_seq].view(B, per_seq)
    paged = []
    for cache in caches:
        pages = torch.full((n_pages, page_size, *cache.shape[2:]), NAN, dtype=cache.dtype, device=cache.device)
        for b, n in enumerate(seqlens):
            for p in range(n):
                pages[table[b, p // page_size], p % page_size] = cache[b, p]
        paged.append(pages)
    return paged, table.to(device=caches[0].device, dtype=torch.int32)


@pytest.mark.parametrize("num_splits", [1, 3, None])
@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
def test_latent_decode_matches_reference(paged, num_splits, dtype, device):
    g = torch.Generator().manual_seed(0)
    B, H, Dc, Dr, S = 3, 5, 40, 8, 70
    q_lat, q_rope = _rand(g, dtype, device, B, H, Dc), _rand(g, dtype, device, B, H, Dr)
    c, kr = _rand(g, dtype, device, B, S, Dc), _rand(g, dtype, device, B, S, Dr)
    seqlens = torch.tensor(SEQLENS, dtype=torch.int32, device=device)
    scale = (24 + 8) ** -0.5  # training scale 1/sqrt(d_n + d_r), with d_n ≠ Dc on purpose
    ref = latent_decode_ref(q_lat.float(), q_rope.float(), c.float(), kr.float(), seqlens, scale)
    if paged:
        (c, kr), table = _paged([c, kr], SEQLENS, page_size=16)
    else:
        c, kr, table = _poisoned(c, SEQLENS), _poisoned(kr, SEQLENS), None
    out = latent_decode(q_lat, q_rope, c, kr, seqlens, scale, block_table=table, num_splits=num_splits)
    assert out.shape == (B, H, Dc) and out.dtype == dtype
    assert_rmse_close(out, ref, dtype)


@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
def test_gqa_decode_matches_reference(paged, dtype, device):
    g = torch.Generator().manual_seed(1)
    B, H, Hkv, D, Dv, S = 3, 6, 2, 24, 20, 70
    q = _rand(g, dtype, device, B, H, D)
    k, v = _rand(g, dtype, device, B, S, Hkv, D), _rand(g, dtype, device, B, S, Hkv, Dv)
    seqlens = torch.tensor(SEQLENS, dtype=torch.int32, device=device)
    ref = gqa_decode_ref(q.float(), k.float(), v.float(), seqlens, D ** -0.5)
    if paged:
        (k, v), table = _paged([k, v], SEQLENS, page_size=8, seed=5)
    else:
        k, v, table = _poisoned(k, SEQLENS), _poisoned(v, SEQLENS), None
    out = gqa_decode(q, k, v, seqlens, D ** -0.5, block_table=table, num_splits=4)
    assert_rmse_close(out, ref, dtype)


def test_gqa_decode_equals_last_row_of_fused_attention(device):
    """Independent route: decoding token n-1 is row n-1 of causal attention over n tokens."""
    g = torch.Generator().manual_seed(2)
    n, H, Hkv, D = 45, 4, 2, 16
    q = _rand(g, torch.float32, device, 1, 1, H, D)
    k, v = _rand(g, torch.float32, device, 1, n, Hkv, D), _rand(g, torch.float32, device, 1, n, Hkv, D)
    full = flash_attention(q, k, v, 0.25, start_pos=n - 1)[:, 0]  # (1, H, D)
    seqlens = torch.tensor([n], dtype=torch.int32, device=device)
    assert_rmse_close(gqa_decode(q[:, 0], k, v, seqlens, 0.25, num_splits=2), full, torch.float32)


def test_latent_decode_is_absorbed_mla_attention(device):
    """docs/variants.md weight absorption: attention with k_n = c W_UK, v = c W_UV and scale
    1/sqrt(d_n + d_r) equals latent_decode(q_n W_UKᵀ, q_r, c, k_r) W_UV."""
    g = torch.Generator().manual_seed(3)
    H, Dc, Dn, Dr, Dv, n = 4, 32, 16, 8, 12, 29
    c, kr = _rand(g, torch.float32, device, 1, n, Dc), _rand(g, torch.float32, device, 1, n, Dr)
    w_uk, w_uv = _rand(g, torch.float32, device, H, Dc, Dn), _rand(g, torch.float32, device, H, Dc, Dv)
    q_n, q_r = _rand(g, torch.float32, device, 1, H, Dn), _rand(g, torch.float32, device, 1, H, Dr)
    scale = (Dn + Dr) ** -0.5
    k_full = torch.cat([torch.einsum("bsc,hcd->bshd", c, w_uk), kr[:, :, None].expand(1, n, H, Dr)], -1)
    v_full = torch.einsum("bsc,hcd->bshd", c, w_uv)  # (1, n, H, Dv)
    expected = flash_attention(torch.cat([q_n, q_r], -1)[:, None], k_full, v_full, scale, start_pos=n - 1)[:, 0]
    q_lat = torch.einsum("bhd,hcd->bhc", q_n, w_uk)  # absorbed query (1, H, Dc)
    seqlens = torch.tensor([n], dtype=torch.int32, device=device)
    lat = latent_decode(q_lat, q_r, c, kr, seqlens, scale, num_splits=2)  # (1, H, Dc)
    assert_rmse_close(torch.einsum("bhc,hcd->bhd", lat, w_uv), expected, torch.float32)


def test_latent_decode_paper_widths(device):
    """Dc = 512 latent + Dr = 64 RoPE key (the MLA shard), 64 heads in several head tiles."""
    g = torch.Generator().manual_seed(4)
    H, Dc, Dr, S = 64, 512, 64, 40
    args = (_rand(g, torch.float32, device, 1, H, Dc), _rand(g, torch.float32, device, 1, H, Dr),
            _rand(g, torch.float32, device, 1, S, Dc), _rand(g, torch.float32, device, 1, S, Dr),
            torch.tensor([37], dtype=torch.int32, device=device), 192 ** -0.5)
    assert_rmse_close(latent_decode(*args, num_splits=2), latent_decode_ref(*args), torch.float32)


def test_empty_sequence_gives_zeros(device):
    g = torch.Generator().manual_seed(6)
    q, k, v = (_rand(g, torch.float32, device, 2, 2, 16), _rand(g, torch.float32, device, 2, 8, 1, 16),
               _rand(g, torch.float32, device, 2, 8, 1, 16))
    seqlens = torch.tensor([0, 5], dtype=torch.int32, device=device)
    out = gqa_decode(q, _poisoned(k, [0, 5]), _poisoned(v, [0, 5]), seqlens, 0.25, num_splits=2)
    assert torch.equal(out[0], torch.zeros_like(out[0]))
    assert_rmse_close(out[1:], gqa_decode_ref(q, k, v, seqlens, 0.25)[1:], torch.float32)


def test_bad_input_raises(device):
    q, c = torch.randn(1, 2, 16, device=device), torch.randn(1, 8, 16, device=device)
    kr, qr = torch.randn(1, 8, 4, device=device), torch.randn(1, 2, 4, device=device)
    ok = torch.tensor([8], dtype=torch.int32, device=device)
    with pytest.raises(ValueError, match="num_splits"):
        latent_decode(q, qr, c, kr, ok, 0.2, num_splits=0)
    with pytest.raises(ValueError, match="cache_seqlens"):
        latent_decode(q, qr, c, kr, ok.float(), 0.2)
    with pytest.raises(ValueError, match="block_table"):
        latent_decode(q, qr, c, kr, ok, 0.2, block_table=torch.zeros(2, 1, dtype=torch.int32, device=device))
    with pytest.raises(ValueError, match="c_cache"):
        latent_decode(q, qr, c[..., None], kr, ok, 0.2)
    with pytest.raises(ValueError, match="divide"):
        gqa_decode(torch.randn(1, 3, 16, device=device), torch.randn(1, 8, 2, 16, device=device),
                   torch.randn(1, 8, 2, 16, device=device), ok, 0.2)
    if device == "cpu":  # the capacity check is skipped on CUDA (it would sync every step)
        with pytest.raises(ValueError, match="capacity"):
            latent_decode(q, qr, c, kr, ok + 1, 0.2)
