"""The analytic decode model (bytes, FLOPs, roofline) against closed-form counts and the paper's numbers;
the recorded CPU measurement against the model's formulas."""

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


@pytest.mark.parametrize("variant, heads, dk, dv", [
    ("gqa", 8, 128, 128), ("mla", 64, 576, 512), ("gla-2", 32, 320, 256), ("mlra-4", 64, 192, 128),
])
def test_step_flops_closed_form(variant, heads, dk, dv):
    """Scores (2·H·D_k per token) plus weighted sum (2·H·D_v); latent shards by absorption: key =
    block + RoPE key, value = block (paper shapes: d_c 512, d_r 64, 64 heads)."""
    s = dm.shard(variant)
    assert (s.n_head, s.key_width, s.value_width) == (heads, dk, dv)
    assert dm.step_flops(s, CTX) == CTX * 2 * heads * (dk + dv)


def test_roofline_takes_the_slower_of_compute_and_memory():
    mla = dm.shard("mla")
    # H100: intensity 139264 / 1152 ≈ 121 FLOP/B < 989.4e12 / 3.35e12 ≈ 295: memory-bound
    assert dm.roofline_us(mla, CTX, "H100", "H100") == pytest.approx(dm.lower_bound_us(mla, CTX, "H100"))
    # a CPU-like machine (50 GFLOP/s, 20 GB/s, fp32): compute-bound, F / P
    assert dm.roofline_us(mla, CTX, 50e9, 20e9, 4) == pytest.approx(CTX * 139_264 / 50e9 * 1e6)
    gqa = dm.shard("gqa")  # 4096 FLOPs / 1024 B = 4 FLOP/B < 50 / 5: memory-bound there
    assert dm.roofline_us(gqa, CTX, 50e9, 5e9, 4) == pytest.approx(CTX * 1024 / 5e9 * 1e6)
    with pytest.raises(KeyError, match="H100"):
        dm.roofline_us(mla, CTX, "A100", "H100")
    with pytest.raises(ValueError, match="peak"):
        dm.roofline_us(mla, CTX, -1.0, "H100")


def test_every_paper_shard_is_memory_bound_on_the_h100():
    t = dm.model_table(gpus=("H100",))
    assert (t.flops / t.kv_bytes < t.peak_flops / t.bandwidth).all()
    assert (t.latency_us == t.memory_us).all()


def test_paper_ratios_are_the_papers_claims():
    """The paper's figure values give MLA / MLRA-4 ≈ 2.8 and GQA / MLRA-4 1.05–1.26 (the paper's
    Figure-5 discussion)."""
    r = dm.latency_ratios(dm.paper_table())
    assert r["MLA / MLRA-4"].between(2.75, 2.85).all()
    assert r["GQA / MLRA-4"].min() == pytest.approx(1.05, abs=0.005)
    assert r["GQA / MLRA-4"].max() == pytest.approx(1.254, abs=0.005)
    h = dm.latency_ratios(dm.model_table(gpus=("H100",)))
    assert list(h["MLA / MLRA-4"]) == pytest.approx([3.0] * 5)  # the byte ratios 576 / 192
    assert list(h["GQA / MLRA-4"]) == pytest.approx([256 / 192] * 5)


def test_recorded_cpu_results_are_consistent():
    """The committed CPU record: provenance present, the four shards on a ladder from 16K to 512K,
    and every model value recomputed from the rates recorded in the same run."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "decode_cpu", Path(__file__).resolve().parents[2] / "benchmarks" / "decode_cpu.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    res = dm.load_cpu_results()
    for key in ("date_utc", "cpu", "threads", "torch", "numpy", "git_commit", "load_average_before"):
        assert res[key] not in (None, ""), key
    rows = res["rows"]
    assert {r["variant"] for r in rows} == set(dm.PAPER_SHARDS)
    assert min(r["context_k"] for r in rows) == 16 and max(r["context_k"] for r in rows) == 512
    for r in rows:
        s = dm.shard(r["variant"])
        pred = bench.predicted_us(s, r["context"], res["gemm_flops"][r["variant"]], res["bandwidth"],
                                  res["softmax_rate"][r["variant"]])
        assert r["predicted_us"] == pytest.approx(pred)
        assert r["rel_error"] == pytest.approx(r["measured_us"] / pred - 1)
    with pytest.raises(FileNotFoundError, match="decode_cpu.py"):
        dm.load_cpu_results("/nonexistent/decode_cpu.json")
