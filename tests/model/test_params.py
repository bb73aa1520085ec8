"""Parameter counts at paper size (docs/variants.md, "Parameter matching and paper sizes") and the
FFN-matching rule at every preset."""

import pytest

from gtalib.model.config import VARIANTS
from gtalib.model.params import count_params, match_intermediate_size
from gtalib.model.presets import PRESETS, model_config

# docs/variants.md table: total parameters, attention params per layer, published FFN width F.
PAPER = {
    "mha": (2_872_593_408, 37_748_736, 8192),
    "mqa": (2_872_003_584, 19_660_800, 10152),
    "gqa": (2_872_593_408, 23_592_960, 9728),
    "gta": (2_872_003_584, 21_430_272, 9960),
    "mfa": (2_873_232_384, 39_323_648, 8024),
    "tpa": (2_873_183_232, 14_106_624, 10760),
    "mla": (2_872_052_736, 26_150_912, 9448),
    "gla-2": (2_872_630_272, 20_645_376, 10048),
    "gla-4": (2_873_220_096, 19_858_944, 10136),
    "mlra-2": (2_872_630_272, 20_645_376, 10048),
    "mlra-4": (2_873_220_096, 22_218_240, 9880),
}
D, L, V = 3072, 24, 50304


def closed_form_total(attn_per_layer, F):
    """Embedding (tied, once) + final norm + per layer (attention + SwiGLU 3·d·F + two norms)."""
    return V * D + D + L * (attn_per_layer + 3 * D * F + 2 * D)


def test_table_is_self_consistent():
    for total, attn, F in PAPER.values():
        assert closed_form_total(attn, F) == total


@pytest.mark.parametrize("variant", VARIANTS)
def test_paper_preset_counts_exactly(variant):
    total, attn, F = PAPER[variant]
    cfg = model_config("paper", variant)
    assert cfg.intermediate_size == F
    got = count_params(cfg)
    assert (got["total"], got["attn_per_layer"]) == (total, attn)


@pytest.mark.parametrize("variant", ["gqa", "mla", "gla-2", "mlra-2", "mlra-4"])
def test_paper_gate_shrinks_F_by_exactly_1024(variant):
    """W_g adds d·(H·d_v) = 3072² per layer = 3·3072·1024 (docs/variants.md, "Output gate")."""
    total, attn, F = PAPER[variant]
    cfg = model_config("paper", variant, gate=True)
    assert cfg.intermediate_size == F - 1024
    got = count_params(cfg)
    assert got["attn_per_layer"] == attn + D * D
    assert got["total"] == total


# Double heads: H = 48, per-head dims unchanged. Attention params per layer by hand:
# GQA:   q 3072·6144 + k,v 2·3072·768 + o 6144·3072                       = 42,467,328
# MLA:   W_DQ 3072·1536 + W_UQ 1536·48·192 + W_DKV 3072·576 + W_UKV 512·48·256 + o 6144·3072
#        + norms 1536 + 512                                                 = 45,811,712
# GLA-2: W_DQ 3072·1024 + W_UQ 1024·48·192 + W_DKV 3072·576 + 2 blocks 256·24·256 + o
#        + norms 1024 + 2·256                                               = 36,374,016
DOUBLE = {"gqa": (42_467_328, 7680), "mla": (45_811_712, 7320), "gla-2": (36_374_016, 8344)}


@pytest.mark.parametrize("variant", sorted(DOUBLE))
def test_paper_double_heads(variant):
    attn, F = DOUBLE[variant]
    cfg = model_config("paper", variant, head_multiplier=2)
    assert cfg.n_head == 48 and cfg.intermediate_size == F
    got = count_params(cfg)
    assert got["attn_per_layer"] == attn
    assert got["total"] == closed_form_total(attn, F)
    assert abs(got["total"] - PAPER["mha"][0]) / PAPER["mha"][0] < 1e-3


def _options(variant):
    yield {}
    yield {"gate": True}
    if variant not in ("mha", "tpa"):
        yield {"head_multiplier": 2}


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_variant_within_0p1_percent_of_mha(preset):
    base = count_params(model_config(preset, "mha"))["total"]
    for v in VARIANTS:
        for opts in _options(v):
            total = count_params(model_config(preset, v, **opts))["total"]
            assert abs(total - base) / base < 1e-3, (preset, v, opts, total, base)


def test_count_params_matches_materialised_model():
    from gtalib.model.gpt import GPT

    cfg = model_config("ci", "mlra-2")
    assert count_params(cfg)["total"] == sum(p.numel() for p in GPT(cfg).parameters())
    assert count_params(cfg)["total"] == GPT(cfg).num_params()


def test_match_errors_when_attention_alone_is_too_big():
    cfg = model_config("ci", "mfa").replace(intermediate_size=None)
    with pytest.raises(ValueError, match="intermediate_size"):
        match_intermediate_size(cfg, reference_intermediate_size=1)


def test_variant_sizes_do_not_leak_into_the_reference():
    """The MHA reference derives its own sizes: a latent config with a typed latent rank (which
    MHA would refuse) is still matched, within 0.1 % of the plain MHA model."""
    cfg = model_config("ci", "mla", kv_lora_rank=64, q_lora_rank=48)
    assert (cfg.kv_lora_rank, cfg.q_lora_rank) == (64, 48)
    base = count_params(model_config("ci", "mha"))["total"]
    assert abs(count_params(cfg)["total"] - base) / base < 1e-3
