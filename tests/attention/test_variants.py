"""Properties every registered variant must have (parametrized over the registry, so variants
added later are covered automatically): causality, the output gate before W_O, option errors."""

import pytest
import torch

from gtalib.attention import REGISTRY, build_attention
from gtalib.config import VARIANTS, ModelConfig

from .helpers import tiny_cfg

ALL = sorted(REGISTRY)


def test_registry_has_every_variant():
    assert set(REGISTRY) == set(VARIANTS)


@pytest.mark.parametrize("variant", ALL)
def test_causal(variant):
    """Changing token t changes no output before t, and does change the output at t."""
    torch.manual_seed(0)
    m = build_attention(tiny_cfg(variant))
    x = torch.randn(2, 11, m.cfg.d_model)
    y = m(x)
    x2 = x.clone()
    x2[:, 6] += torch.randn(2, m.cfg.d_model)
    y2 = m(x2)
    torch.testing.assert_close(y2[:, :6], y[:, :6], atol=0, rtol=0)
    assert (y2[:, 6:] - y[:, 6:]).abs().amax(dim=-1).min() > 1e-6


@pytest.mark.parametrize("variant", ALL)
def test_gate_multiplies_before_output_projection(variant):
    """The input of W_O with the gate equals sigmoid(x W_g) ⊙ (the input of W_O without it)."""
    torch.manual_seed(0)
    m = build_attention(tiny_cfg(variant, gate=True))
    assert m.g_proj is not None and m.g_proj.in_features == m.cfg.d_model
    x = torch.randn(2, 5, m.cfg.d_model)
    seen = []
    m.o_proj.register_forward_hook(lambda mod, inp, out: seen.append(inp[0]))
    out_gated = m(x)
    g_proj, m.g_proj = m.g_proj, None
    m(x)
    m.g_proj = g_proj
    gate = torch.sigmoid(x @ g_proj.weight.T)
    torch.testing.assert_close(seen[0], gate * seen[1], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(out_gated, seen[0] @ m.o_proj.weight.T, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("variant", ALL)
def test_zero_init_output_projection(variant):
    zero = build_attention(tiny_cfg(variant, init="zero"))
    normal = build_attention(tiny_cfg(variant, init="normal"))
    assert zero.o_proj.weight.abs().max() == 0
    assert zero(torch.randn(1, 3, zero.cfg.d_model)).abs().max() == 0
    assert 0.015 < normal.o_proj.weight.std() < 0.025  # N(0, 0.02)


def test_tpa_factor_projections_are_xavier_uniform():
    m = build_attention(tiny_cfg("tpa", init="zero"))
    for lin in (m.a_q, m.b_q, m.a_k, m.b_k, m.a_v, m.b_v):
        bound = (6 / (lin.in_features + lin.out_features)) ** 0.5
        w = lin.weight
        assert w.abs().max() <= bound and w.abs().max() > 0.9 * bound  # uniform, not N(0, 0.02)


@pytest.mark.parametrize("name", ["MLRA-4", "mlra_4", "Gqa", "gla2"])
def test_variant_names_case_insensitive(name):
    assert build_attention(ModelConfig(variant=name)).cfg.variant in VARIANTS


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(variant="gpt"), "unknown variant"),
        (dict(variant="gqa", n_head=6, gqa_group=4), "gqa_group"),
        (dict(variant="gqa", n_head=4, n_kv_head=3), "n_kv_head"),
        (dict(variant="mqa", n_kv_head=2), "n_kv_head"),
        (dict(variant="gla-4", n_head=6), "n_head"),
        (dict(variant="gla-4", kv_lora_rank=66), "kv_lora_rank"),
        (dict(variant="mlra-2", kv_lora_rank=130), "kv_lora_rank"),
        (dict(variant="mha", head_multiplier=2), "head_multiplier"),
        (dict(variant="tpa", head_multiplier=2), "head_multiplier"),
        (dict(variant="gqa", head_multiplier=3), "head_multiplier"),
        (dict(variant="gqa", latent_scale=False), "latent_scale"),
        (dict(variant="mha", init="xavier"), "init"),
        (dict(variant="mla", qk_rope_head_dim=7), "qk_rope_head_dim"),
        (dict(variant="gta", qk_rope_head_dim=32, head_dim=32), "qk_rope_head_dim"),
    ],
)
def test_bad_configs_raise_naming_the_parameter(kwargs, match):
    with pytest.raises((ValueError, KeyError), match=match):
        build_attention(ModelConfig(**kwargs))
