"""Tensor-parallel decoding (gtalib.decode.tp) against the single-process model and the analytic cache
accounting: spawned gloo ranks at TP 1/2/4 give the single-process logits for all eleven variants
with and without the gate; each rank's cache equals gtalib.model.kvcache (paper Table 1 at paper shapes);
degrees a variant cannot take are refused by name."""

import pytest
import torch

from gtalib.model.attention import build_attention
from gtalib.model.config import VARIANTS, ModelConfig
from gtalib.model.kvcache import TP_DEGREES, kv_elems_per_device, table1_config
from gtalib.model.gpt import GPT
from gtalib.model.presets import model_config
from gtalib.decode.tp import (
    allowed_tp_degrees,
    allreduce_bytes_per_token,
    reference_decode,
    shard_attention,
    shard_model,
    shard_plan,
    spawn_decode,
)
from model.test_kvcache import TABLE1_DH  # the paper's Table 1 (and our documented MLRA-2/GTA/MFA/TPA rules)

PROMPT, STEPS, BATCH = 12, 8, 2
# the ci preset's attention shapes (4 heads of 32, GQA group 2)
SMALL = dict(n_layer=1, d_model=128, n_head=4, head_dim=32, vocab_size=256, block_size=64, gqa_group=2)


def make(variant, gate, **opts):
    torch.manual_seed(0)  # init="normal": with the default zero W_O every layer would output 0
    return GPT(model_config("ci", variant, init="normal", gate=gate, **opts)).eval()


@pytest.fixture(scope="module")
def models():
    return {(v, g): make(v, g) for v in VARIANTS for g in (False, True)}


@pytest.fixture(scope="module")
def tokens():
    return torch.randint(0, 256, (BATCH, PROMPT + STEPS), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_spawned_decode_equals_single_process(tp, models, tokens, tmp_path):
    """Prefill 12 tokens + 8 decode steps on `tp` spawned gloo processes, every variant, gate on
    and off: every rank's logits equal the single-process model's within 1e-5 (fp32); each rank's
    cache holds kv_elems_per_device elements per token and layer; the all-reduce moved one
    (B, T, d_model) fp32 tensor per layer and forward."""
    named = {f"{v}/{'gate' if g else 'nogate'}": m for (v, g), m in models.items()}
    ranks = spawn_decode(named, tokens, PROMPT, tp, workdir=tmp_path)
    assert len(ranks) == tp
    for name, m in named.items():
        ref = reference_decode(m, tokens, PROMPT)
        assert ref.abs().max() > 0.1  # a real signal, not a zero model
        for r, res in enumerate(ranks):
            got = res[name]
            torch.testing.assert_close(got["logits"], ref, atol=1e-5, rtol=0, msg=f"{name} rank {r}")
            assert got["kv_elems_per_token"] == [kv_elems_per_device(m.cfg, tp)] * m.cfg.n_layer, name
            assert got["reduced_bytes"] == allreduce_bytes_per_token(m.cfg, tp) * tokens.numel(), name


@pytest.mark.parametrize("gate", [False, True], ids=["nogate", "gate"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_shards_sum_to_the_layer(variant, gate):
    """In one process: the sum of every rank's shard output equals the full layer, prefill and
    decode, at every degree the variant takes with 8 query heads (up to TP 8: MLRA-4 then splits
    each branch's heads over two ranks, MLA its heads over eight)."""
    opts = {} if variant in ("mha", "tpa") else {"head_multiplier": 2}
    cfg = ModelConfig(variant=variant, init="normal", gate=gate, **SMALL, **opts)
    torch.manual_seed(0)
    attn = build_attention(cfg).eval()
    x = torch.randn(2, 10, cfg.d_model)
    full = attn.new_cache(2, 10)
    with torch.no_grad():
        ref = [attn(x[:, :7], full)]
        full["len"] = 7
        ref.append(attn(x[:, 7:], full))
        degrees = [t for t in allowed_tp_degrees(cfg) if t > 1]
        assert degrees  # every variant splits at least two ways here
        for tp in degrees:
            shards = [shard_attention(attn, tp, r) for r in range(tp)]
            caches = [s.new_cache(2, 10) for s in shards]
            pre = sum(s(x[:, :7], c) for s, c in zip(shards, caches))
            for c in caches:
                c["len"] = 7
            dec = sum(s(x[:, 7:], c) for s, c in zip(shards, caches))
            torch.testing.assert_close(pre, ref[0], atol=1e-6, rtol=1e-5, msg=f"tp {tp} prefill")
            torch.testing.assert_close(dec, ref[1], atol=1e-6, rtol=1e-5, msg=f"tp {tp} decode")


@pytest.mark.parametrize("variant", VARIANTS)
def test_rank_cache_is_table1_at_paper_shapes(variant):
    """Table-1 setting (64 heads, d_h 128; GQA/GTA 8 KV heads) on the meta device: every rank's
    allocated cache, in elements per token and layer, equals kv_elems_per_device and the paper's
    Table 1 value in d_h units, at TP 1, 2, 4 and 8."""
    cfg = table1_config(variant)
    with torch.device("meta"):
        attn = build_attention(cfg)
    for tp, dh_units in zip(TP_DEGREES, TABLE1_DH[variant]):
        for r in range(tp):
            cache = shard_attention(attn, tp, r).new_cache(1, 4, device="meta")
            elems = sum(t.numel() for t in cache.values() if torch.is_tensor(t)) // 4
            assert elems == kv_elems_per_device(cfg, tp), (tp, r)
            assert elems == dh_units * cfg.head_dim, (tp, r)


def test_mlra_shards_follow_the_documented_split():
    """MLRA-2 at TP 2: a rank serves one head group in both branches (blocks j and 2 + j);
    at TP 4 one (branch, group) pair. MLRA-4 at TP 4: one branch (block) for all heads."""
    cfg = table1_config("mlra-2")
    assert [shard_plan(cfg, 2, r).blocks for r in range(2)] == [(0, 2), (1, 3)]
    assert [shard_plan(cfg, 2, r).heads[::31] for r in range(2)] == [(0, 31), (32, 63)]
    assert [shard_plan(cfg, 4, r).blocks for r in range(4)] == [(0,), (2,), (1,), (3,)]
    cfg4 = table1_config("mlra-4")
    assert [shard_plan(cfg4, 4, r).blocks for r in range(4)] == [(0,), (1,), (2,), (3,)]
    assert all(shard_plan(cfg4, 4, r).heads == tuple(range(64)) for r in range(4))


def test_refused_degrees_name_variant_degree_and_allowed():
    paper = dict(n_layer=1, d_model=3072, n_head=24, head_dim=128, block_size=64)
    # MLRA-2's two head groups cannot be split three ways although 3 divides the 24 heads.
    with pytest.raises(ValueError, match=r"tp=3 .*'mlra-2'.*allowed degrees: 1, 2, 4, 8, 12, 24"):
        shard_plan(ModelConfig(variant="mlra-2", **paper), 3, 0)
    # GQA's 6 KV heads (paper) cannot serve 4 ranks evenly.
    with pytest.raises(ValueError, match=r"tp=4 .*'gqa'.*6 KV heads.*allowed degrees: 1, 2, 3, 6, 12, 24"):
        shard_plan(ModelConfig(variant="gqa", **paper), 4, 0)
    with pytest.raises(ValueError, match=r"tp=5 .*'mla'.*n_head=24"):
        shard_plan(ModelConfig(variant="mla", **paper), 5, 0)
    with pytest.raises(ValueError, match=r"tp=0 .*positive integer"):
        shard_plan(ModelConfig(variant="mha", **paper), 0, 0)
    with pytest.raises(ValueError, match=r"rank must be an integer in \[0, tp=2\)"):
        shard_plan(ModelConfig(variant="mha", **paper), 2, 2)
    m = make("mlra-2", False)
    with pytest.raises(ValueError, match=r"tp=3 .*'mlra-2'"):
        shard_model(m, 3, 0)
    with pytest.raises(ValueError, match="tp=8"):
        spawn_decode({"m": m}, torch.zeros(1, 4, dtype=torch.long), 2, 8)  # refused before spawning
    with pytest.raises(ValueError, match="device must be 'cpu' or 'cuda'"):
        spawn_decode({"m": m}, torch.zeros(1, 4, dtype=torch.long), 2, 2, device="tpu")
    with pytest.raises(ValueError, match="backend must be"):
        spawn_decode({"m": m}, torch.zeros(1, 4, dtype=torch.long), 2, 2, backend="mpi")


def test_allreduce_bytes_per_token():
    cfg = model_config("ci", "mlra-4")
    assert allreduce_bytes_per_token(cfg, 1) == 0
    assert allreduce_bytes_per_token(cfg, 4) == cfg.n_layer * cfg.d_model * 4
    assert allreduce_bytes_per_token(cfg, 4, torch.bfloat16) == cfg.n_layer * cfg.d_model * 2


def test_command_refuses_a_degree_in_one_line():
    import os
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "gtalib", "decode", "--variant", "mlra-4", "--tp", "3"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        "gtalib decode: error: tp=3 is not a tensor-parallel degree variant 'mlra-4' can "
        "take (n_head=4): tp must divide n_head=4; allowed degrees: 1, 2, 4"]
