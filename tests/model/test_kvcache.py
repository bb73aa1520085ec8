"""KV-cache accounting against the paper's numbers (docs/variants.md; MLRA paper Table 1) and against
what the modules actually allocate."""

import pytest
import torch

from gtalib.model.attention import build_attention
from gtalib.model.config import VARIANTS, ModelConfig
from gtalib.model.kvcache import (
    TP_DEGREES,
    kv_bytes_per_token,
    kv_dh_units,
    kv_elems_per_device,
    kv_elems_per_token,
    table1_config,
)

torch.set_num_threads(1)

PAPER = dict(n_layer=24, d_model=3072, n_head=24, head_dim=128, vocab_size=50304, block_size=2048)

# docs/variants.md, "Parameter matching and paper sizes": KV elements / token / layer.
PAPER_KV = {"mha": 6144, "mqa": 256, "gqa": 1536, "gta": 832, "mfa": 512, "tpa": 608,
            "mla": 576, "gla-2": 576, "gla-4": 576, "mlra-2": 576, "mlra-4": 576}

# docs/variants.md, "KV cache per device under tensor parallelism", units of d_h at TP 1/2/4/8.
# MLRA-2 beyond TP 2: our documented choice (shard by head group and branch) -> 1.5.
# GTA, MFA, TPA: derived rules of gtalib.model.kvcache (no paper values).
TABLE1_DH = {
    "mha": (128, 64, 32, 16),
    "gqa": (16, 8, 4, 2),
    "mqa": (2, 2, 2, 2),
    "mla": (4.5, 4.5, 4.5, 4.5),
    "gla-2": (4.5, 2.5, 2.5, 2.5),
    "gla-4": (4.5, 2.5, 1.5, 1.5),
    "mlra-4": (4.5, 2.5, 1.5, 1.5),
    "mlra-2": (4.5, 2.5, 1.5, 1.5),
    "gta": (8.5, 4.5, 2.5, 1.5),
    "mfa": (4, 4, 4, 4),
    "tpa": (6, 5, 4.5, 4.25),
}


def test_every_variant_has_a_table1_row():
    assert set(TABLE1_DH) == set(VARIANTS) == set(PAPER_KV)


@pytest.mark.parametrize("variant", VARIANTS)
def test_paper_size_elements_per_token(variant):
    assert kv_elems_per_token(ModelConfig(variant=variant, **PAPER)) == PAPER_KV[variant]


@pytest.mark.parametrize("variant", VARIANTS)
def test_table1_per_device(variant):
    cfg = table1_config(variant)
    assert (cfg.n_head, cfg.head_dim) == (64, 128)
    got = tuple(kv_dh_units(cfg, tp) for tp in TP_DEGREES)
    assert got == TABLE1_DH[variant]  # exact: every value is a multiple of 1/4 d_h
    assert kv_elems_per_device(cfg, 1) == kv_elems_per_token(cfg)


def test_table1_paper_claims():
    """MLRA-2/4 total cache equals MLA's; MLRA-4 has the lowest per-device load at TP >= 4
    among the latent family and GQA (GLA-4 ties it)."""
    e = {v: [kv_elems_per_device(table1_config(v), tp) for tp in TP_DEGREES] for v in VARIANTS}
    assert e["mlra-2"][0] == e["mlra-4"][0] == e["mla"][0] == 512 + 64
    for i in (2, 3):  # TP 4, 8
        assert e["mlra-4"][i] == e["gla-4"][i]
        assert all(e["mlra-4"][i] <= e[v][i] for v in ("mla", "gla-2", "gqa", "mha"))


def test_double_heads_keep_the_cache():
    # docs/variants.md "Double heads": latents and GQA's KV heads unchanged, so the cache is unchanged.
    for v in ("gqa", "mla", "gla-2"):
        one = ModelConfig(variant=v, **PAPER)
        two = one.replace(head_multiplier=2)
        assert two.resolved().n_head == 48
        assert kv_elems_per_token(two) == kv_elems_per_token(one)


def test_bytes():
    cfg = ModelConfig(variant="mla", **PAPER)
    assert kv_bytes_per_token(cfg) == 576 * 2  # bf16
    assert kv_bytes_per_token(cfg, torch.float32) == 576 * 4
    assert kv_bytes_per_token(cfg, all_layers=True) == 576 * 2 * 24
    assert kv_bytes_per_token(table1_config("gla-4"), tp=4) == (128 + 64) * 2


@pytest.mark.parametrize("tp", [0, 3, -2, 2.0])
def test_bad_tp(tp):
    with pytest.raises(ValueError, match="tp"):
        kv_elems_per_device(table1_config("mla"), tp)


def test_unknown_variant():
    with pytest.raises(KeyError, match="mlra-4"):
        table1_config("mlra-3")


@pytest.mark.parametrize("variant", VARIANTS)
def test_module_cache_matches_accounting(variant):
    """The cache a module allocates holds exactly the analytic number of elements per token
    (docs/variants.md: only what the variant needs — never expanded heads)."""
    cfg = ModelConfig(variant=variant, d_model=64, n_head=8, head_dim=16, block_size=32)
    attn = build_attention(cfg)
    cache = attn.new_cache(batch_size=3, max_len=5)
    stored = sum(t.numel() for t in cache.values() if isinstance(t, torch.Tensor))
    assert stored == 3 * 5 * kv_elems_per_token(cfg)
    assert attn.kv_elems_per_token() == kv_elems_per_token(cfg)
