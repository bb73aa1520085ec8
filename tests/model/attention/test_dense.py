"""MHA / MQA / GQA: equalities between the three, the head-to-KV-head map, and an independent
re-implementation of the formula (docs/variants.md rows MHA, MQA, GQA)."""

import pytest
import torch

from gtalib.model.attention import build_attention

from .helpers import naive_attention, tiny_cfg


def rope_complex(x, pos0=0, theta=10000.0):
    """RoPE as complex multiplication of the pairs (i, i + D/2) (independent of gtalib.model.layers)."""
    D = x.shape[-1]
    z = torch.complex(x[..., : D // 2].double(), x[..., D // 2 :].double())
    pos = torch.arange(pos0, pos0 + x.shape[1], dtype=torch.float64)
    freq = theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    rot = torch.polar(torch.ones(len(pos), D // 2, dtype=torch.float64), torch.outer(pos, freq))
    z = z * rot[None, :, None, :]
    return torch.cat([z.real, z.imag], -1)


def dense_reference(m, x):
    """``softmax(q kᵀ/sqrt(D)) v`` per head from the module's weights, float64."""
    B, T, _ = x.shape
    H, Hkv, D = m.n_head, m.n_kv_head, m.dim
    xd = x.double()
    q = rope_complex((xd @ m.q_proj.weight.double().T).view(B, T, H, D))
    k = rope_complex((xd @ m.k_proj.weight.double().T).view(B, T, Hkv, D))
    v = (xd @ m.v_proj.weight.double().T).view(B, T, Hkv, D)
    y = naive_attention(q, k, v, D**-0.5).reshape(B, T, H * D)
    return y @ m.o_proj.weight.double().T


@pytest.mark.parametrize("variant,opts", [("mha", {}), ("gqa", {}), ("mqa", {}),
                                          ("gqa", {"gqa_group": 4})])
def test_dense_matches_formula(variant, opts):
    torch.manual_seed(0)
    m = build_attention(tiny_cfg(variant, **opts))
    x = torch.randn(2, 9, m.cfg.d_model)
    torch.testing.assert_close(m(x).double(), dense_reference(m, x), atol=1e-5, rtol=1e-4)


def _copy_and_compare(a, b, x):
    b.load_state_dict(a.state_dict())
    torch.testing.assert_close(a(x), b(x), atol=0, rtol=0)


def test_mqa_equals_gqa_with_one_kv_head():
    torch.manual_seed(0)
    mqa = build_attention(tiny_cfg("mqa"))
    gqa = build_attention(tiny_cfg("gqa", gqa_group=4))  # 4 heads / group 4 = 1 KV head
    assert gqa.n_kv_head == mqa.n_kv_head == 1
    _copy_and_compare(mqa, gqa, torch.randn(2, 7, 128))


def test_gqa_with_group_one_equals_mha():
    torch.manual_seed(0)
    mha = build_attention(tiny_cfg("mha"))
    gqa = build_attention(tiny_cfg("gqa", gqa_group=1))
    assert gqa.n_kv_head == mha.n_kv_head == 4
    _copy_and_compare(mha, gqa, torch.randn(2, 7, 128))


def test_gqa_cache_holds_kv_heads_not_expanded():
    m = build_attention(tiny_cfg("gqa"))
    c = m.new_cache(3, 11)
    assert c["k"].shape == (3, 11, m.n_kv_head, m.dim) and m.n_kv_head < m.n_head
