"""The GPT: zero-init identity, loss, cached decoding == full forward for every registered
variant, greedy generation with and without the cache, cache sizes, length errors."""

import math

import pytest
import torch
import torch.nn.functional as F

from model.attention.helpers import OPTION_IDS, WITH_OPTIONS  # tests/model/attention/helpers.py
from gtalib.model.attention import REGISTRY
from gtalib.model.gpt import GPT
from gtalib.model.presets import model_config

ALL = sorted(REGISTRY)


def make(variant, **opts):
    torch.manual_seed(0)
    opts.setdefault("init", "normal")
    return GPT(model_config("ci", variant, **opts)).eval()


@pytest.mark.parametrize("gate", [False, True], ids=["nogate", "gate"])
@pytest.mark.parametrize("variant", ALL)
def test_zero_init_blocks_are_identity(variant, gate):
    """With W_O and W_down zero every block is the identity (exactly, on any input), so
    logits = norm(embed) · Eᵀ; the gate and every other projection are still N(0, σ)."""
    m = make(variant, init="zero", gate=gate)
    h = torch.randn(2, 9, m.cfg.d_model)
    for blk in m.blocks:
        torch.testing.assert_close(blk(h), h, atol=0, rtol=0)
        attn = blk.attn
        assert (attn.g_proj is not None) == gate
        if gate:
            assert abs(attn.g_proj.weight.std().item() - 0.02) < 0.002
    idx = torch.randint(0, 256, (4, 32))
    logits, loss = m(idx, torch.randint(0, 256, (4, 32)))
    ref = F.linear(m.norm(m.wte(idx)), m.wte.weight)
    torch.testing.assert_close(logits, ref, atol=1e-6, rtol=1e-6)
    # Tied embedding, σ = 0.02, d = 128: a random target's logit is ~N(0, (0.02·√128)²) = N(0, 0.23²)
    # and the input token's own logit is ≈ 0.02·128 = 2.6, so loss ≈ ln V + 0.03 + ln(1 + e^2.6/V)
    # ≈ ln V + 0.08; 128 sampled targets put a standard error of ≈ 0.02 on that.
    assert abs(loss.item() - math.log(256) - 0.08) < 0.1


def test_loss_is_mean_cross_entropy_over_every_position():
    m = make("gqa")
    idx, tgt = torch.randint(0, 256, (2, 9)), torch.randint(0, 256, (2, 9))
    logits, loss = m(idx, tgt)
    assert logits.dtype == torch.float32
    logp = torch.log_softmax(logits.double(), -1)
    ref = -logp.gather(-1, tgt[..., None]).mean()
    assert abs(loss.item() - ref.item()) < 1e-5


@pytest.mark.parametrize("variant,options", WITH_OPTIONS, ids=OPTION_IDS)
def test_prefill_and_decode_reproduce_full_forward(variant, options):
    """Odd prefill (7), then a 3-token step, single-token steps and a 2-token step, fp32: max
    abs logit difference <= 1e-4."""
    m = make(variant, **options)
    idx = torch.randint(0, 256, (2, 15))
    full, _ = m(idx)
    cache = m.new_cache(2, 15)
    parts, pos = [], 0
    for step in (7, 3, 1, 1, 2, 1):
        parts.append(m.forward_cached(idx[:, pos : pos + step], cache))
        pos += step
        assert cache["len"] == pos
    diff = (torch.cat(parts, 1) - full).abs().max().item()
    assert diff <= 1e-4, diff


@pytest.mark.parametrize("variant", ALL)
def test_greedy_generation_with_and_without_cache(variant):
    m = make(variant)
    prompt = torch.randint(0, 256, (2, 5))
    a = m.generate(prompt, 12, use_cache=True)
    b = m.generate(prompt, 12, use_cache=False)
    assert a.shape == (2, 17)
    assert torch.equal(a, b)
    assert torch.equal(a[:, :5], prompt)


@pytest.mark.parametrize("variant,options", WITH_OPTIONS, ids=OPTION_IDS)
def test_cache_bytes_equal_analytic_count(variant, options):
    """bytes = kv elements per token per layer × tokens × layers × bytes per element, with the
    count from the module and from gtalib.model.kvcache (both closed forms of the config)."""
    from gtalib.model import kvcache

    m = make(variant, **options)
    cfg = m.cfg
    per_token = m.blocks[0].attn.kv_elems_per_token()
    assert per_token == kvcache.kv_elems_per_token(cfg)
    for dtype in (torch.float32, torch.bfloat16):
        cache = m.new_cache(3, 40, dtype=dtype)
        itemsize = torch.tensor([], dtype=dtype).element_size()
        assert GPT.cache_nbytes(cache) == per_token * 40 * 3 * cfg.n_layer * itemsize


def test_sequence_longer_than_block_size_raises():
    m = make("mha")
    B = m.cfg.block_size
    with pytest.raises(ValueError, match="block_size"):
        m(torch.zeros(1, B + 1, dtype=torch.long))
    with pytest.raises(ValueError, match="block_size"):
        m.new_cache(1, B + 1)
    cache = m.new_cache(1, B)
    m.forward_cached(torch.zeros(1, B - 1, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="block_size"):
        m.forward_cached(torch.zeros(1, 2, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="block_size"):
        m.generate(torch.zeros(1, B, dtype=torch.long), 1)


def test_missing_intermediate_size_raises():
    from gtalib.model.config import ModelConfig

    with pytest.raises(ValueError, match="intermediate_size"):
        GPT(ModelConfig())


def test_normal_init_statistics():
    """docs/variants.md "Initialisation": W_down N(0, σ) under normal, exactly 0 under zero."""
    assert make("gqa", init="zero").blocks[1].mlp.w_down.weight.abs().max() == 0
    w = make("gqa", init="normal").blocks[1].mlp.w_down.weight
    assert abs(w.std().item() - 0.02) < 0.002


@pytest.mark.parametrize("variant", ["mha", "mla", "tpa", "mlra-4"])
def test_scaled_init_is_the_normal_draw_scaled(variant):
    """init="scaled" (GPT-2 §2.3): every W_O and W_down is the "normal" arm's draw of the same
    seed times 1/√(2·n_layer); every other weight is identical, and the std is σ/√(2L)."""
    n_layer = 8
    torch.manual_seed(3)
    a = GPT(model_config("cpu", variant, init="normal", n_layer=n_layer))
    torch.manual_seed(3)
    b = GPT(model_config("cpu", variant, init="scaled", n_layer=n_layer))
    scaled = 0
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        if name.endswith(("o_proj.weight", "w_down.weight")):
            torch.testing.assert_close(q, p / math.sqrt(2 * n_layer), rtol=1e-6, atol=0)
            scaled += 1
        else:
            assert torch.equal(p, q), name
    assert scaled == 2 * n_layer
    w = torch.cat([blk.mlp.w_down.weight.flatten() for blk in b.blocks])
    assert abs(w.std().item() - 0.02 / math.sqrt(2 * n_layer)) < 0.05 * 0.02 / math.sqrt(2 * n_layer)


@pytest.mark.parametrize("variant", ["gqa", "mla"])
def test_triton_attention_impl_matches_torch(variant):
    """attn_impl="triton" routes every attention through gtalib.kernels (Triton interpreter on
    CPU) and gives the PyTorch logits."""
    pytest.importorskip("triton")
    pytest.importorskip("gtalib.kernels")
    a = make(variant)
    b = make(variant, attn_impl="triton")
    idx = torch.randint(0, 256, (1, 9))
    assert (a(idx)[0] - b(idx)[0]).abs().max() <= 1e-4


def _bf16_exact(model):
    """Round every parameter to a bf16-representable fp32 value (so a bf16 cast is lossless)."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.bfloat16().float())
    return model


@pytest.mark.parametrize("variant", REGISTRY)
def test_bf16_round_trip_gives_bit_identical_logits(variant):
    """model.to(bfloat16).float() with bf16-exact weights changes nothing, the RoPE tables included."""
    torch.manual_seed(0)
    model = _bf16_exact(make(variant))
    idx = torch.randint(0, 256, (2, 64))
    ref = model(idx)[0]
    model.to(torch.bfloat16).float()
    assert torch.equal(model(idx)[0], ref)


@pytest.mark.parametrize("variant", REGISTRY)
def test_meta_device_construction_gives_same_logits(variant):
    """Built on ``meta``, moved with ``to_empty`` and initialised, the model computes what a normally
    built one with the same weights computes (RoPE tables are not in the state dict)."""
    torch.manual_seed(0)
    ref_model = make(variant)
    with torch.device("meta"):
        model = GPT(ref_model.cfg)
    model.to_empty(device="cpu")
    model.init_weights()
    model.load_state_dict(ref_model.state_dict())
    idx = torch.randint(0, 256, (2, 64))
    assert torch.equal(model(idx)[0], ref_model(idx)[0])
