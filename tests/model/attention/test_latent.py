"""The latent family (MLA, GLA-2/4, MLRA-2/4) against a plain-torch second implementation written
from docs/variants.md, plus the properties the spec names: block-to-head routing, branch sums, scale
constants, key-variance ratios, absorbed decode with the training softmax scale, and errors."""

import math

import pytest
import torch

from gtalib.model.attention.base import build_attention
from gtalib.model.attention.latent import LatentAttention
from gtalib.model.config import ModelConfig

torch.set_num_threads(1)

LATENT = ("mla", "gla-2", "gla-4", "mlra-2", "mlra-4")
H = 8  # query heads of the small test configs


def assignment(variant: str, n_head: int = H) -> list[list[int]]:
    """Block read by head h in branch b, typed from docs/variants.md's prose (not from the module)."""
    half, quarter = n_head // 2, n_head // 4
    return {
        "mla": [[0] * n_head],
        "gla-2": [[h // half for h in range(n_head)]],
        "gla-4": [[h // quarter for h in range(n_head)]],
        # branch A: heads [0, H/2) block 0, [H/2, H) block 1; branch B the same with blocks 2, 3
        "mlra-2": [[h // half for h in range(n_head)], [2 + h // half for h in range(n_head)]],
        "mlra-4": [[b] * n_head for b in range(4)],
    }[variant]


def small_cfg(variant, **kw):
    base = dict(variant=variant, n_layer=1, d_model=64, n_head=H, head_dim=8, block_size=64)
    base.update(kw)
    return ModelConfig(**base)


def randomised(cfg, seed=0, std=0.15) -> LatentAttention:
    """A layer whose every weight (W_O and RMSNorm gains included) is random, so no term of the
    computation can vanish and hide a mistake."""
    torch.manual_seed(seed)
    m = build_attention(cfg)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.3 * torch.randn_like(p))
            else:
                p.normal_(0, std)
    return m


def unit_rms(x):
    """The attention input is the output of the pre-attention RMSNorm: unit RMS per token."""
    return x / x.pow(2).mean(-1, keepdim=True).sqrt()


# --------------------------------------------------------------------------- reference
def ref_rms(z, g):
    return z / torch.sqrt(z.pow(2).mean(-1, keepdim=True) + 1e-6) * g


def ref_rope(x, start=0, theta=10000.0):
    """Half-split RoPE of ``x (B, T, h, D)`` at positions start.. (docs/variants.md "Shared model")."""
    D, T = x.shape[-1], x.shape[1]
    inv = theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = torch.arange(start, start + T, dtype=torch.float64)[:, None] * inv  # (T, D/2)
    cos, sin = ang.cos().float()[None, :, None], ang.sin().float()[None, :, None]
    x1, x2 = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def reference(m, x, assign, scaled=True, tau=None, gate=False, n_blocks=None, alpha_o=None):
    """Plain-torch latent attention from docs/variants.md. Returns (pre-W_O y (B,T,H,d_v), output).

    Every branch b is a separate causal softmax attention in which head h uses keys
    [c_blk W_UK ; RoPE(k_r)] and values c_blk W_UV with blk = assign[b][h]; y = α_o Σ_b y_b.
    ``n_blocks`` (default: the largest block in ``assign`` + 1) sets the block width d_c/n_blocks
    and α_kv; ``alpha_o`` overrides 1/sqrt(branches)."""
    d, Hn = m.d_model, len(assign[0])
    d_n, d_r, d_v, d_c, d_q = m.d_n, m.d_r, m.d_v, m.d_c, m.d_q
    n_blocks = n_blocks or max(max(a) for a in assign) + 1
    w = d_c // n_blocks
    a_q = math.sqrt(d / d_q) if scaled else 1.0
    a_kv = math.sqrt(d / w) if scaled else 1.0
    a_o = (1 / math.sqrt(len(assign)) if scaled else 1.0) if alpha_o is None else alpha_o
    tau = 1 / math.sqrt(d_n + d_r) if tau is None else tau
    B, T, _ = x.shape

    c_q = a_q * ref_rms(x @ m.wq_a.weight.T, m.q_norm.weight)
    q = (c_q @ m.wq_b.weight.T).view(B, T, Hn, d_n + d_r)
    q = torch.cat([q[..., :d_n], ref_rope(q[..., d_n:])], -1)
    kv = x @ m.wkv_a.weight.T
    c = [a_kv * ref_rms(kv[..., j * w:(j + 1) * w], m.kv_norms[j].weight) for j in range(n_blocks)]
    k_r = ref_rope(kv[..., d_c:].view(B, T, 1, d_r))[:, :, 0]  # (B, T, d_r), not normed or scaled
    # Stacked up-projection rows: block j serves heads in order; head h is its (h mod Hg)-th.
    heads_per_block = m.wkv_b.weight.shape[0] // (n_blocks * (d_n + d_v))
    W = m.wkv_b.weight.view(n_blocks, heads_per_block, d_n + d_v, w)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    y = torch.zeros(B, T, Hn, d_v)
    for branch in assign:
        for h, j in enumerate(branch):
            Wh = W[j, h % heads_per_block]
            k = torch.cat([c[j] @ Wh[:d_n].T, k_r], -1)  # (B, T, d_n + d_r)
            v = c[j] @ Wh[d_n:].T
            s = tau * q[:, :, h] @ k.transpose(1, 2)  # (B, T, T)
            y[:, :, h] += a_o * torch.softmax(s.masked_fill(~causal, float("-inf")), -1) @ v
    flat = y.reshape(B, T, Hn * d_v)
    if gate:
        flat = torch.sigmoid(x @ m.g_proj.weight.T) * flat
    return y, flat @ m.o_proj.weight.T


def wo_input(m, x, **kw):
    """What the module feeds W_O (after gate and branch sum)."""
    seen = []
    hook = m.o_proj.register_forward_pre_hook(lambda mod, args: seen.append(args[0].detach()))
    try:
        out = m(x, **kw)
    finally:
        hook.remove()
    return seen[0], out


# --------------------------------------------------------------------------- tests
@pytest.mark.parametrize("variant", LATENT)
def test_forward_matches_reference(variant):
    m = randomised(small_cfg(variant))
    x = unit_rms(torch.randn(2, 11, 64))
    _, ref = reference(m, x, assignment(variant))
    out = m(x)
    assert out.abs().mean() > 0.05  # a non-trivial output
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("variant", LATENT)
def test_block_of_matches_spec(variant):
    m = randomised(small_cfg(variant))
    assign = assignment(variant)
    assert m.n_branches == len(assign)
    assert [[m.block_of(b, h) for h in range(H)] for b in range(m.n_branches)] == assign


def test_mlra4_is_sum_of_four_single_branch_attentions():
    """MLRA-4: y = α_o Σ_b y_b with α_o = 1/2, where y_b is an ordinary single-softmax attention
    of all H heads over block b (keys [c_b W_UK[b] ; RoPE(k_r)], values c_b W_UV[b]), computed
    here one branch at a time."""
    m = randomised(small_cfg("mlra-4"), seed=3)
    x = unit_rms(torch.randn(2, 9, 64))
    single = [reference(m, x, [[b] * H], n_blocks=4, alpha_o=1.0)[0] for b in range(4)]
    y, _ = wo_input(m, x)
    torch.testing.assert_close(y, (0.5 * sum(single)).flatten(2), rtol=1e-4, atol=1e-5)
    # each branch contributes (the four are not accidentally equal)
    assert min((single[a] - single[b]).abs().max() for a in range(4) for b in range(a)) > 1e-2


@pytest.mark.parametrize("variant", LATENT)
def test_gate_after_branch_sum_before_wo(variant):
    m = randomised(small_cfg(variant, gate=True))
    x = unit_rms(torch.randn(2, 7, 64))
    y_ref, out_ref = reference(m, x, assignment(variant), gate=True)
    fed, out = wo_input(m, x)
    torch.testing.assert_close(fed, torch.sigmoid(x @ m.g_proj.weight.T) * y_ref.flatten(2),
                               rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out, out_ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("variant", ["mla", "gla-2", "mlra-2"])
def test_latent_scale_off(variant):
    m = randomised(small_cfg(variant, latent_scale=False))
    assert (m.alpha_q, m.alpha_kv, m.alpha_o) == (1.0, 1.0, 1.0)
    x = unit_rms(torch.randn(2, 7, 64))
    torch.testing.assert_close(m(x), reference(m, x, assignment(variant), scaled=False)[1],
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("variant", ["mla", "gla-2", "gla-4", "mlra-2", "mlra-4"])
def test_double_heads(variant):
    """head_multiplier=2: H doubles, per-head dims, latents and cache unchanged; still correct."""
    one = randomised(small_cfg(variant))
    m = randomised(small_cfg(variant, head_multiplier=2))
    assert m.n_head == 2 * H
    assert (m.d_n, m.d_r, m.d_v, m.d_c, m.d_q) == (one.d_n, one.d_r, one.d_v, one.d_c, one.d_q)
    assert m.wkv_a.weight.shape == one.wkv_a.weight.shape
    assert m.kv_elems_per_token() == one.kv_elems_per_token()
    x = unit_rms(torch.randn(1, 6, 64))
    torch.testing.assert_close(m(x), reference(m, x, assignment(variant, 2 * H))[1],
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("variant", LATENT)
def test_head_group_reads_only_its_block(variant):
    """Perturb one latent block (its RMSNorm gain): exactly the heads the spec routes to that
    block change (GLA: head group j ↔ block j; MLRA-2: a head half in one branch; MLA/MLRA-4:
    all heads)."""
    m = randomised(small_cfg(variant))
    x = unit_rms(torch.randn(2, 7, 64))
    before, _ = wo_input(m, x)
    for j in range(m.n_blocks):
        with torch.no_grad():
            m.kv_norms[j].weight.mul_(1.5)
        after, _ = wo_input(m, x)
        with torch.no_grad():
            m.kv_norms[j].weight.div_(1.5)
        diff = (after - before).view(2, 7, H, m.d_v).abs().amax(dim=(0, 1, 3))  # per head
        readers = {h for branch in assignment(variant) for h, blk in enumerate(branch) if blk == j}
        for h in range(H):
            if h in readers:
                assert diff[h] > 1e-2, (j, h)
            else:
                assert diff[h] < 1e-5, (j, h)  # float rounding of batched matmuls only


def test_scale_constants_at_paper_size():
    """docs/variants.md "Scale constants" table, from the formulas in the module."""
    expected = {"mla": (2, 6, 1), "gla-2": (3, 12, 1), "gla-4": (3, 24, 1),
                "mlra-2": (3, 24, 1 / 2), "mlra-4": (3, 24, 1 / 4)}  # (α_q², α_kv², α_o²)
    with torch.device("meta"):
        for v, (q2, kv2, o2) in expected.items():
            m = LatentAttention(ModelConfig(variant=v, d_model=3072, n_head=24, head_dim=128,
                                            block_size=16))
            assert m.alpha_q**2 == pytest.approx(q2, rel=1e-12)
            assert m.alpha_kv**2 == pytest.approx(kv2, rel=1e-12)
            assert m.alpha_o**2 == pytest.approx(o2, rel=1e-12)
            assert m.scale == 1 / math.sqrt(192)


@pytest.mark.parametrize("variant", LATENT)
@pytest.mark.parametrize("scaled", [False, True])
def test_rope_nope_key_variance_ratio(variant, scaled):
    """At init, Var(RoPE key) / Var(NoPE key) ≈ d / w (w = block width) without the latent scale,
    ≈ 1 with it (docs/variants.md, "Why").

    d_model = 1024 so the unscaled ratios (16 for MLA, 32 for GLA-2, 64 for 4-block variants) are
    far from 1. Tolerance ±15 % relative: the statistic's spread comes from the random weights
    (each key column's variance is σ²·χ²_n/n, n = input width: relative SD sqrt(2/n) per column,
    averaged over 8 RoPE and 128 NoPE columns) and from the 1024 sampled tokens; together about
    3-4 % relative SD (measured over 12 seeds: 2.6 % for MLA, 3.2 % for GLA-4), so 15 % is
    about 4-5 SD.
    """
    torch.manual_seed(0)
    cfg = ModelConfig(variant=variant, n_layer=1, d_model=1024, n_head=8, head_dim=16,
                      block_size=128, latent_scale=scaled)
    m = build_attention(cfg)
    x = unit_rms(torch.randn(8, 128, 1024))
    with torch.no_grad():
        c, k_r = m.latents(x, 0)  # (B, T, nb, w), (B, T, 1, d_r)
        W_uk, _ = m.up_weights()  # (nb, Hg, d_n, w)
        k_n = torch.einsum("btkw,kinw->btkin", c, W_uk)
    ratio = (k_r.pow(2).mean() / k_n.pow(2).mean()).item()
    expected = 1.0 if scaled else 1024 / m.block_width
    assert ratio == pytest.approx(expected, rel=0.15)


# --------------------------------------------------------------------------- cache and decode
@pytest.mark.parametrize("variant", LATENT)
def test_absorbed_equals_expanded(variant):
    """The weight-absorbed attention over latents equals the expanded one, also mid-sequence."""
    m = randomised(small_cfg(variant))
    x = unit_rms(torch.randn(2, 10, 64))
    with torch.no_grad():
        c, k_r = m.latents(x, 0)
        q_n, q_r = m.queries(x[:, 6:], 6)
        a = m.attend_expanded(q_n, q_r, c, k_r, start_pos=6)
        b = m.attend_absorbed(q_n, q_r, c, k_r, start_pos=6)
    assert a.abs().mean() > 0.05
    torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("variant", LATENT)
@pytest.mark.parametrize("gate", [False, True])
def test_prefill_decode_reproduces_forward(variant, gate):
    """Odd prefill, single-token and multi-token decode through the cache reproduce the full
    forward pass; unwritten cache slots are NaN so any read past the filled prefix poisons it."""
    m = randomised(small_cfg(variant, gate=gate))
    x = unit_rms(torch.randn(2, 13, 64))
    full = m(x)
    cache = m.new_cache(2, 20)
    assert set(cache) == {"latent", "k_rope", "len"}
    assert cache["latent"].shape == (2, 20, m.d_c) and cache["k_rope"].shape == (2, 20, m.d_r)
    for k in ("latent", "k_rope"):
        cache[k].fill_(float("nan"))
    outs = []
    for lo, hi in [(0, 5), (5, 6), (6, 9), (9, 10), (10, 13)]:
        outs.append(m(x[:, lo:hi], cache=cache))
        cache["len"] += hi - lo
    torch.testing.assert_close(torch.cat(outs, 1), full, rtol=0, atol=1e-5)
    # the cache holds the normed-and-scaled blocks and the rotated, unscaled RoPE key
    with torch.no_grad():
        kv = x @ m.wkv_a.weight.T
        w = m.block_width
        c = torch.cat([m.alpha_kv * ref_rms(kv[..., j * w:(j + 1) * w], m.kv_norms[j].weight)
                       for j in range(m.n_blocks)], -1)
        k_r = ref_rope(kv[..., m.d_c:].unsqueeze(2))[:, :, 0]
    torch.testing.assert_close(cache["latent"][:, :13], c, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(cache["k_rope"][:, :13], k_r, rtol=1e-5, atol=1e-6)
    assert torch.isnan(cache["latent"][:, 13:]).all()


@pytest.mark.parametrize("variant,kw", [("mla", {}), ("gla-4", {"kv_lora_rank": 64}),
                                        ("mlra-4", {"kv_lora_rank": 96})])
def test_decode_scale_is_training_scale(variant, kw):
    """τ = 1/sqrt(d_n + d_r) in absorbed decode although the block width w ≠ d_n here
    (MLA w = 32, GLA-4 w = 16, MLRA-4 w = 24; d_n = 8): decode matches the reference at τ and
    is measurably different from the reference at the latent-width scale 1/sqrt(w + d_r)."""
    m = randomised(small_cfg(variant, **kw))
    assert m.block_width != m.d_n
    assert m.scale == 1 / math.sqrt(m.d_n + m.d_r)
    x = unit_rms(torch.randn(2, 6, 64))
    cache = m.new_cache(2, 6)
    m(x[:, :5], cache=cache)
    cache["len"] = 5
    step = m(x[:, 5:], cache=cache)
    good = reference(m, x, assignment(variant))[1][:, 5:]
    wrong = reference(m, x, assignment(variant), tau=1 / math.sqrt(m.block_width + m.d_r))[1][:, 5:]
    torch.testing.assert_close(step, good, rtol=1e-4, atol=1e-5)
    assert (step - wrong).abs().max() > 1e-3


def test_cache_overflow_raises():
    m = randomised(small_cfg("mla"))
    cache = m.new_cache(1, 4)
    with pytest.raises(ValueError, match="max_len"):
        m(torch.randn(1, 5, 64), cache=cache)


# --------------------------------------------------------------------------- bad configurations
@pytest.mark.parametrize("variant,kw,param", [
    ("gla-2", {"kv_lora_rank": 31}, "kv_lora_rank"),
    ("gla-4", {"kv_lora_rank": 30}, "kv_lora_rank"),
    ("mlra-4", {"kv_lora_rank": 42}, "kv_lora_rank"),
    ("mlra-2", {"kv_lora_rank": 18}, "kv_lora_rank"),
    ("gla-4", {"n_head": 6, "head_dim": 8}, "n_head"),
    ("gla-2", {"n_head": 3, "head_dim": 8}, "n_head"),
    ("mlra-2", {"n_head": 5, "head_dim": 8}, "n_head"),
    ("mla", {"qk_rope_head_dim": 3}, "qk_rope_head_dim"),
])
def test_bad_config_raises(variant, kw, param):
    with pytest.raises(ValueError, match=param):
        LatentAttention(small_cfg(variant, **kw))


def test_mlra4_takes_any_head_count():
    # MLRA-4 has no head groups (every block feeds all heads)
    m = LatentAttention(small_cfg("mlra-4", n_head=5))
    assert m.heads_per_group == 5


def test_not_a_latent_variant():
    with pytest.raises(KeyError, match="variant"):
        LatentAttention(small_cfg("gqa"))
