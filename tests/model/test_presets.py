"""Presets: shared sizes as specified, sizes derived by the paper's ratios, clear errors."""

import pytest

from model.attention.helpers import variant_options  # tests/model/attention/helpers.py
from gtalib.model.config import VARIANTS, ModelConfig
from gtalib.model.params import count_params
from gtalib.model.presets import PRESETS, model_config
from gtalib.training.config import train_config


def test_paper_shared_sizes():
    c = model_config("paper", "mha")
    assert (c.n_layer, c.d_model, c.n_head, c.head_dim, c.vocab_size, c.block_size) == (
        24, 3072, 24, 128, 50304, 2048)


def test_paper_derived_sizes():
    """docs/variants.md notation: d_c 512, d_r 64, d_n 128, d_q 1024 (1536 for MLA), MFA 2048 / 256,
    GQA 6 KV heads, GTA 6 groups with 64 + 64 split."""
    mla, gla, mfa = (model_config("paper", v) for v in ("mla", "gla-2", "mfa"))
    assert (mla.kv_lora_rank, mla.qk_rope_head_dim, mla.qk_nope_head_dim, mla.q_lora_rank) == (
        512, 64, 128, 1536)
    assert gla.q_lora_rank == 1024
    assert (mfa.q_lora_rank, mfa.v_head_dim, mfa.n_kv_head) == (2048, 256, 1)
    assert model_config("paper", "gqa").n_kv_head == 6
    gta = model_config("paper", "gta")
    assert (gta.n_kv_head, gta.qk_rope_head_dim, gta.qk_nope_head_dim) == (6, 64, 64)
    dbl = model_config("paper", "gqa", head_multiplier=2)
    assert (dbl.n_head, dbl.n_kv_head, dbl.gqa_group) == (48, 6, 8)
    assert model_config("paper", "mla", head_multiplier=2).kv_lora_rank == 512


def test_small_presets_keep_ratios():
    for name in ("gpu", "cpu", "ci"):
        c = model_config(name, "mlra-4")
        assert c.kv_lora_rank == 4 * c.head_dim and c.qk_rope_head_dim == c.head_dim // 2
        assert c.kv_lora_rank % 4 == 0


def test_sizes():
    gpu = count_params(model_config("gpu", "mha"))["total"]
    assert 10e6 < gpu < 100e6  # "tens of millions"
    cpu = model_config("cpu", "gqa")
    assert (cpu.vocab_size, cpu.n_layer, cpu.d_model, cpu.n_head, cpu.head_dim, cpu.n_kv_head) == (
        256, 8, 128, 4, 32, 2)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_variant_builds_resolved(preset):
    """Resolving is idempotent (run specs store resolved configs and rebuild them), also with
    every option, and a resolved config survives a round trip through its dict."""
    for v in VARIANTS:
        c = model_config(preset, v.upper())
        assert c.variant == v and c.intermediate_size > 0 and c.resolved() == c
        for opts in variant_options(v):
            c = model_config(preset, v, **opts)
            assert c.resolved() == c and ModelConfig(**c.to_dict()).resolved() == c


def test_explicit_intermediate_size_is_kept():
    assert model_config("ci", "gqa", intermediate_size=77).intermediate_size == 77


def test_errors():
    with pytest.raises(KeyError, match="preset"):
        model_config("huge", "mha")
    with pytest.raises(KeyError, match="variant"):
        model_config("ci", "flash")
    with pytest.raises(ValueError, match="latent_scale"):
        model_config("ci", "gqa", latent_scale=False)


@pytest.mark.parametrize("field, value, needle", [
    ("gate", "yes", "ModelConfig.gate must be True or False (a bool), got 'yes' (str)"),
    ("gate", None, "ModelConfig.gate must be True or False (a bool), got None"),
    ("latent_scale", 1, "ModelConfig.latent_scale must be True or False (a bool), got 1 (int)"),
    ("latent_scale", "false", "ModelConfig.latent_scale must be True or False (a bool), got 'false'"),
    ("n_layer", True, "ModelConfig.n_layer must be an integer >= 1, got True (bool)"),
    ("d_model", 128.0, "ModelConfig.d_model must be an integer >= 1, got 128.0 (float)"),
    ("kv_lora_rank", "64", "ModelConfig.kv_lora_rank must be an integer >= 1 or None, got '64'"),
    ("intermediate_size", 0, "ModelConfig.intermediate_size must be an integer >= 1 or None, got 0"),
    ("tpa_rank", 0, "ModelConfig.tpa_rank must be an integer >= 1, got 0"),
    ("head_multiplier", True, "head_multiplier must be 1 or 2, got True"),
    ("head_multiplier", 2.0, "head_multiplier must be 1 or 2, got 2.0"),
    ("rope_theta", float("nan"), "ModelConfig.rope_theta must be a finite number in (0, inf), got nan"),
    ("init_std", -0.02, "ModelConfig.init_std must be a finite number in (0, inf), got -0.02"),
])
def test_model_options_of_the_wrong_type_are_refused(field, value, needle):
    import re

    with pytest.raises(ValueError, match=re.escape(needle)):
        model_config("ci", "mla", **{field: value})


@pytest.mark.parametrize("field, value, needle", [
    ("data_seed", -1, "TrainConfig.data_seed must be an integer >= 0, got -1"),
    ("max_steps", True, "TrainConfig.max_steps must be an integer >= 1, got True (bool)"),
    ("micro_batch_size", 2.0, "TrainConfig.micro_batch_size must be an integer >= 1 or None, got 2.0"),
    ("warmup_steps", False, "TrainConfig.warmup_steps must be an integer >= 0, got False (bool)"),
    ("lr", float("nan"), "TrainConfig.lr must be a finite number in (0, inf), got nan"),
    ("lr", "1e-3", "TrainConfig.lr must be a finite number in (0, inf), got '1e-3' (str)"),
    ("weight_decay", float("nan"), "TrainConfig.weight_decay must be a finite number in [0, inf), got nan"),
    ("beta1", 1.0, "TrainConfig.beta1 must be a finite number in [0, 1), got 1.0"),
    ("eps", 0, "TrainConfig.eps must be a finite number in (0, inf), got 0"),
    ("min_lr_ratio", 1.5, "TrainConfig.min_lr_ratio must be a finite number in [0, 1], got 1.5"),
])
def test_train_options_of_the_wrong_type_are_refused(field, value, needle):
    import re

    with pytest.raises(ValueError, match=re.escape(needle)):
        train_config("ci", **{field: value})
    train_config("ci")  # the preset itself passes


def test_the_mha_reference_width_follows_one_rule_at_every_width():
    """The MHA baseline's F is 8·d/3 rounded to a multiple of 8 at every preset (the paper's 8192
    at d 3072) and at a width the preset does not have, so a wider model is matched to the MHA
    model of its own width: at d 256 (4 heads of 64) MHA has F = 680, not the d-128 preset's 344,
    and every variant is within 0.1 % of that MHA model's parameters."""
    from gtalib.model.presets import mha_intermediate_size

    assert {name: model_config(name, "mha").intermediate_size for name in PRESETS} == {
        "paper": 8192, "gpu": 1368, "cpu": 344, "ci": 344}
    assert all(mha_intermediate_size(p["d_model"]) == model_config(name, "mha").intermediate_size
               for name, p in PRESETS.items())
    wide = dict(d_model=256, head_dim=64)
    mha = model_config("cpu", "mha", **wide)
    assert (mha.intermediate_size, mha.n_head, mha.head_dim) == (680, 4, 64)
    base = count_params(mha)["total"]
    for v in VARIANTS:
        total = count_params(model_config("cpu", v, **wide))["total"]
        assert abs(total - base) / base < 1e-3, (v, total, base)
    with pytest.raises(ValueError, match="d_model"):
        mha_intermediate_size(0)
