"""MFA, GTA and TPA against float64 re-implementations of their docs/variants.md formulas, from the
modules' own weights, plus their cache layouts."""

import pytest
import torch

from gtalib.model.attention import build_attention

from .helpers import naive_attention, tiny_cfg
from .test_dense import rope_complex


def lin(x, layer):
    return x @ layer.weight.double().T


def rms(z, w):
    return w.double() * z / (z.pow(2).mean(-1, keepdim=True) + 1e-6).sqrt()


def test_mfa_formula():
    torch.manual_seed(0)
    m = build_attention(tiny_cfg("mfa"))
    c = m.cfg
    assert c.v_head_dim == 2 * c.head_dim and m.n_kv_head == 1
    x = torch.randn(2, 8, c.d_model).double()
    B, T, H, D = 2, 8, c.n_head, c.v_head_dim
    q = rope_complex(lin(rms(lin(x, m.q_a), m.q_norm.weight), m.q_b).view(B, T, H, D))
    k = rope_complex(lin(x, m.k_proj).view(B, T, 1, D))
    v = lin(x, m.v_proj).view(B, T, 1, D)
    ref = lin(naive_attention(q, k, v, D**-0.5).reshape(B, T, H * D), m.o_proj)
    torch.testing.assert_close(m(x.float()).double(), ref, atol=1e-5, rtol=1e-4)


def test_gta_formula():
    """k_i = [s_t ; RoPE(k_r)], v_i = s = [s_t ; s_v] of head i's group; one shared RoPE key."""
    torch.manual_seed(0)
    m = build_attention(tiny_cfg("gta"))
    c = m.cfg
    B, T, H, Hkv, D, dr = 2, 8, c.n_head, c.n_kv_head, c.head_dim, c.qk_rope_head_dim
    dn = D - dr
    x = torch.randn(B, T, c.d_model).double()
    q = lin(x, m.q_proj).view(B, T, H, D)
    q = torch.cat([q[..., :dn], rope_complex(q[..., dn:])], -1)
    s = lin(x, m.kv_proj).view(B, T, Hkv, D)
    kr = rope_complex(lin(x, m.kr_proj).view(B, T, 1, dr))
    k = torch.cat([s[..., :dn], kr.expand(B, T, Hkv, dr)], -1)
    ref = lin(naive_attention(q, k, s, D**-0.5).reshape(B, T, H * D), m.o_proj)
    torch.testing.assert_close(m(x.float()).double(), ref, atol=1e-5, rtol=1e-4)
    cache = m.new_cache(1, 10)
    assert cache["s"].shape == (1, 10, Hkv, D) and cache["k_rope"].shape == (1, 10, 1, dr)


@pytest.mark.parametrize("ranks", [{}, dict(tpa_q_rank=2, tpa_rank=1), dict(tpa_q_rank=1, tpa_rank=3)],
                         ids=["paper", "rank1", "rank3"])
def test_tpa_formula(ranks):
    """q_h = (1/R_q) Σ_r A_q[h,r] RoPE(B_q[r]); k, v with 1/R (RoPE on k's B factors only), at the
    paper's ranks and at ranks that take the other contraction paths."""
    torch.manual_seed(0)
    m = build_attention(tiny_cfg("tpa", **ranks))
    c = m.cfg
    B, T, H, D, rq, r = 2, 8, c.n_head, c.head_dim, c.tpa_q_rank, c.tpa_rank
    x = torch.randn(B, T, c.d_model).double()

    def factor(a_layer, b_layer, R, rotate):
        a = lin(x, a_layer).view(B, T, H, R)
        b = lin(x, b_layer).view(B, T, R, D)
        if rotate:
            b = rope_complex(b)
        out = torch.zeros(B, T, H, D, dtype=torch.float64)
        for i in range(R):
            out += a[..., i, None] * b[:, :, None, i]
        return out / R

    q, k, v = factor(m.a_q, m.b_q, rq, True), factor(m.a_k, m.b_k, r, True), factor(m.a_v, m.b_v, r, False)
    ref = lin(naive_attention(q, k, v, D**-0.5).reshape(B, T, H * D), m.o_proj)
    torch.testing.assert_close(m(x.float()).double(), ref, atol=1e-5, rtol=1e-4)
    cache = m.new_cache(1, 10)
    assert {n: tuple(t.shape) for n, t in cache.items() if n != "len"} == {
        "a_k": (1, 10, H, r), "b_k": (1, 10, r, D), "a_v": (1, 10, H, r), "b_v": (1, 10, r, D)}
