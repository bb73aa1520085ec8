"""The analytic memory-bound decode model against closed-form counts and the paper's numbers."""

import math

import pytest

from gtalib.kernels import decode_model as dm

CTX = 128 * 1024


@pytest.mark.parametrize("variant, elems, units_of_dh", [
    ("gqa", 2 * 1 * 128, 2.0),  # TP 8: one KV head of K and V (docs/variants.md: GQA 2 at TP 8)
    ("mla", 512 + 64, 4.5),  # DP: the whole latent + RoPE key
    ("gla-2", 256 + 64, 2.5),  # TP 2: one 256 block + RoPE key
    ("mlra-4", 128 + 64, 1.5),  # TP 4: one 128 block + RoPE key
])
def test_bytes_are_the_closed_form_count(variant, elems, units_of_dh):
    s = dm.shard(variant)
    assert s.elems_per_token == elems
    assert s.elems_per_token / 128 == units_of_dh  # docs/variants.md per-device table, in units of d_h
    assert dm.kv_bytes(s, CTX) == CTX * elems * 2
    assert dm.kv_bytes(s, CTX, bytes_per_elem=4) == CTX * elems * 4


def test_mla_over_mlra4_bytes_is_three_at_every_context():
    for ck in dm.PAPER_CONTEXTS_K:
        ratio = dm.kv_bytes(dm.shard("mla"), ck * 1024) / dm.kv_bytes(dm.shard("mlra-4"), ck * 1024)
        assert ratio == (512 + 64) / (128 + 64) == 3.0


def test_lower_bound_values():
    # 131072 tokens · 576 elements · 2 bytes = 150,994,944 B; / 3.35e12 B/s = 45.07 µs
    assert dm.lower_bound_us(dm.shard("mla"), CTX, "H100") == pytest.approx(150_994_944 / 3.35e12 * 1e6)
    assert dm.lower_bound_us(dm.shard("mla"), CTX, "H100") == pytest.approx(45.07, abs=0.01)
    assert dm.lower_bound_us(dm.shard("mla"), CTX, "H200") == pytest.approx(150_994_944 / 4.8e12 * 1e6)
    assert dm.lower_bound_us(dm.shard("gqa"), CTX, 1e12) == pytest.approx(CTX * 512 / 1e6)


def test_paper_measurements_respect_the_memory_bound():
    """A measured H100 latency cannot beat bytes / 3.35 TB/s; the paper's figure must not either."""
    for v, lat in dm.PAPER_LATENCY_US.items():
        for ck, us in zip(dm.PAPER_CONTEXTS_K, lat):
            assert us > dm.lower_bound_us(dm.shard(v), ck * 1024, "H100")
    # and at 2M tokens the paper's MLA kernel runs at ≥ 80 % of the H100 peak (721 µs of 874 µs)
    assert dm.lower_bound_us(dm.shard("mla"), 2048 * 1024, "H100") / 874.2 > 0.8


def test_tables():
    t = dm.model_table()
    assert len(t) == 4 * 5 * 2 and set(t.source) == {"model"}
    row = t[(t.variant == "mla") & (t.context_k == 128) & (t.gpu == "H100")].iloc[0]
    assert row.kv_bytes == 150_994_944 and row.paper_latency_us == 136.0
    p = dm.paper_table()
    assert len(p) == 20 and p[(p.variant == "mlra-4") & (p.context_k == 2048)].latency_us.item() == 308.2
    assert math.isnan(dm.model_table(contexts_k=(64,)).paper_latency_us.iloc[0])


def test_bad_input_raises():
    with pytest.raises(KeyError, match="allowed"):
        dm.shard("mha")
    with pytest.raises(KeyError, match="H100"):
        dm.lower_bound_us(dm.shard("mla"), CTX, "A100")
    with pytest.raises(ValueError, match="context"):
        dm.kv_bytes(dm.shard("mla"), 0)
