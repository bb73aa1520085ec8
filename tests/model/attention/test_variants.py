"""Properties every registered variant must have (parametrized over the registry, so variants
added later are covered automatically): causality under every option, RoPE inside the module
(relative positions only, every RoPE channel rotates, along the position axis), the GQA/GTA head
to KV-head map, the output gate before W_O, zero-init, option errors."""

import pytest
import torch

from gtalib.model.attention import REGISTRY, build_attention
from gtalib.model.attention import functional
from gtalib.model.config import VARIANTS, ModelConfig
from gtalib.model.layers import RoPE

from .helpers import OPTION_IDS, WITH_OPTIONS, tiny_cfg
from .test_dense import rope_complex

ALL = sorted(REGISTRY)


def test_registry_has_every_variant():
    assert set(REGISTRY) == set(VARIANTS)


@pytest.mark.parametrize("variant,options", WITH_OPTIONS, ids=OPTION_IDS)
def test_causal(variant, options):
    """Changing token t changes no output before t, and does change the output at t (init
    "normal", so W_O is not zero; every option the variant accepts)."""
    torch.manual_seed(0)
    m = build_attention(tiny_cfg(variant, **options))
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


# --------------------------------------------------------------------------- RoPE inside the modules
def spy_on_attend(monkeypatch) -> list:
    """Record the (q, k) every variant attends with, as ``(B, T, heads, D)``: every torch path
    (``attend``, and ``attend_branches`` once per branch) ends in ``functional._sdpa``."""
    calls = []
    sdpa = functional._sdpa

    def spy(qt, kt, vt, *args, **kwargs):
        calls.append((qt.detach().transpose(1, 2), kt.detach().transpose(1, 2)))
        return sdpa(qt, kt, vt, *args, **kwargs)

    monkeypatch.setattr(functional, "_sdpa", spy)
    return calls


def check_rope_in_module(m, calls):
    """Feed one token vector at every position 0..block_size-1, so all positional dependence of
    the module's q and k comes from RoPE, and check, for every (q, k) pair it attends with:

    - the NoPE channels (all but the last ``qk_rope_head_dim``) are the same at every position;
    - the RoPE channels at position t are the position-0 vector rotated by t (pairs (i, i+D/2),
      base 10000, an independent complex-number rotation): every RoPE channel rotates, along the
      position axis (a rotation along the head axis or not at all fails here);
    - the scores q_i·k_j depend only on i - j (shift by one along both axes), and do depend on it.
    """
    torch.manual_seed(1)
    T, d, dr = m.cfg.block_size, m.cfg.d_model, m.cfg.qk_rope_head_dim
    m(torch.randn(1, 1, d).expand(1, T, d))
    assert calls, "the module never called attend"
    for q, k in calls:
        for t in (q, k):
            rope, nope = t[..., -dr:], t[..., :-dr]
            torch.testing.assert_close(nope, nope[:, :1].expand_as(nope), atol=0, rtol=0)
            expected = rope_complex(rope[:, :1].expand_as(rope))  # (B, T, heads, dr)
            torch.testing.assert_close(rope.double(), expected, atol=1e-5, rtol=1e-4)
            moved = (rope[:, -1] - rope[:, 0]).abs().amax(dim=(0, 1))  # per RoPE channel
            assert (moved > 1e-4).all(), moved
        k = k.repeat_interleave(q.shape[2] // k.shape[2], dim=2)  # (B, T, H, D)
        s = torch.einsum("bthd,bshd->bhts", q.double(), k.double())  # (B, H, T, T)
        torch.testing.assert_close(s[..., 1:, 1:], s[..., :-1, :-1], atol=1e-4, rtol=1e-4)
        diag = s[..., torch.arange(T - 1, 0, -1), 0]  # (B, H, T-1): score at offsets T-1 .. 1
        assert (diag - s[..., :1, 0]).abs().amax() > 1e-2  # relative position matters


@pytest.mark.parametrize("variant", ALL)
def test_rope_relative_positions_inside_module(variant, monkeypatch):
    torch.manual_seed(0)
    m = build_attention(tiny_cfg(variant))
    check_rope_in_module(m, spy_on_attend(monkeypatch))


@pytest.mark.parametrize("variant", ALL)
def test_rope_along_the_head_axis_is_caught(variant, monkeypatch):
    """The known trap: RoPE indexing positions along the head axis of ``(B, T, H, D)`` (or the
    rank axis of TPA's factors). The check above must fail on it for every variant."""
    rotate = RoPE.forward

    def wrong_axis(self, x, start_pos=0):
        return rotate(self, x.transpose(1, 2), 0).transpose(1, 2)  # positions = head index

    torch.manual_seed(0)
    m = build_attention(tiny_cfg(variant))
    calls = spy_on_attend(monkeypatch)
    monkeypatch.setattr(RoPE, "forward", wrong_axis)
    with pytest.raises(AssertionError):
        check_rope_in_module(m, calls)


# --------------------------------------------------------------------------- head -> KV head map
@pytest.mark.parametrize("variant,options,proj,group", [
    ("gqa", {}, "v_proj", 2),                      # ci: 4 heads, 2 KV heads
    ("gqa", {"gqa_group": 4}, "v_proj", 4),        # 1 KV head
    ("gqa", {"head_multiplier": 2}, "v_proj", 4),  # 8 heads, KV heads kept at 2
    ("gta", {}, "kv_proj", 2),                     # 2 tied states
    ("gta", {"head_multiplier": 2}, "kv_proj", 4),
])
def test_query_head_i_reads_kv_head_i_div_g(variant, options, proj, group):
    """Perturb the projection of one KV head (GQA: its value; GTA: its tied state): exactly the
    query heads h with h // g == that head change (repeat_interleave order h0,h0,h1,h1, not tile
    order h0,h1,h0,h1)."""
    torch.manual_seed(0)
    m = build_attention(tiny_cfg(variant, **options))
    H, Hkv, D = m.n_head, m.n_kv_head, m.cfg.head_dim
    assert H // Hkv == group
    x = torch.randn(1, 5, m.cfg.d_model)
    seen = []
    m.o_proj.register_forward_hook(lambda mod, inp, out: seen.append(inp[0].view(1, 5, H, -1)))
    m(x)
    weight = getattr(m, proj).weight
    for kv in range(Hkv):
        with torch.no_grad():
            weight[kv * D : (kv + 1) * D] += 1.0
        m(x)
        with torch.no_grad():
            weight[kv * D : (kv + 1) * D] -= 1.0
        changed = [(seen[-1][:, :, h] - seen[0][:, :, h]).abs().max().item() > 1e-3 for h in range(H)]
        assert changed == [h // group == kv for h in range(H)]


# --------------------------------------------------------------------------- errors
def test_unknown_variant_lists_the_allowed_names():
    with pytest.raises(KeyError, match="unknown variant") as err:
        build_attention(ModelConfig(variant="mlra-3"))
    assert all(v in str(err.value) for v in VARIANTS)


@pytest.mark.parametrize("variant", ALL)
def test_sequence_longer_than_block_size_raises(variant):
    m = build_attention(tiny_cfg(variant))
    B = m.cfg.block_size
    m(torch.randn(1, B, m.cfg.d_model))  # the longest allowed
    with pytest.raises(ValueError, match="block_size"):
        m(torch.randn(1, B + 1, m.cfg.d_model))
    cache = m.new_cache(1, B + 8)  # a cache longer than the RoPE table still stops at block_size
    cache["len"] = B
    with pytest.raises(ValueError, match="block_size"):
        m(torch.randn(1, 1, m.cfg.d_model), cache=cache)


@pytest.mark.parametrize("kwargs,match", [
    (dict(variant="mha", kv_lora_rank=64), "kv_lora_rank"),
    (dict(variant="gta", q_lora_rank=32), "q_lora_rank"),
    (dict(variant="mla", n_kv_head=2), "n_kv_head"),
    (dict(variant="tpa", n_kv_head=4), "n_kv_head"),
    (dict(variant="gqa", qk_rope_head_dim=16), "qk_rope_head_dim"),
    (dict(variant="mqa", v_head_dim=16), "v_head_dim"),
    (dict(variant="mfa", qk_nope_head_dim=16), "qk_nope_head_dim"),
])
def test_sizes_a_variant_does_not_use_raise(kwargs, match):
    """A size typed for a variant that ignores or fixes it is refused, not silently dropped."""
    with pytest.raises(ValueError, match=match):
        build_attention(ModelConfig(**kwargs))
