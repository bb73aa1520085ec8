"""Fused causal attention (gtalib.kernels.flash_attention) against independent routes."""

import pytest
import torch

from gtalib.kernels import assert_rmse_close, flash_attention, flash_attention_ref

# (B, T, S, H, Hkv, Dqk, Dv, start_pos)
SHAPES = [
    pytest.param((1, 1, 6, 2, 1, 24, 20, 5), id="T1-offset"),  # one query at position 5 over 6 keys
    pytest.param((2, 63, 63, 4, 2, 24, 40, 0), id="T63-gqa"),  # odd T, grouped heads, Dv > Dqk
    pytest.param((1, 100, 100, 2, 1, 48, 32, 0), id="T100-mqa"),  # several query and key tiles
    pytest.param((1, 17, 40, 3, 3, 20, 20, 23), id="prefill-cache"),  # start_pos = S - T
    pytest.param((1, 33, 33, 2, 2, 192, 128, 0), id="latent-192-128"),  # 192 padded to a 256 tile
    pytest.param((1, 20, 20, 2, 1, 256, 256, 0), id="mfa-256"),  # MFA: one KV head of 256
]


def _inputs(shape, dtype, device, seed=0):
    B, T, S, H, Hkv, Dqk, Dv, _ = shape
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g).to(device=device, dtype=dtype)  # noqa: E731
    return mk(B, T, H, Dqk), mk(B, S, Hkv, Dqk), mk(B, S, Hkv, Dv), mk(B, T, H, Dv)


@pytest.mark.parametrize("shape", SHAPES)
def test_forward_and_gradients_match_reference(shape, dtype, device):
    q, k, v, dout = _inputs(shape, dtype, device)
    scale, start_pos = shape[5] ** -0.5, shape[7]
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = flash_attention(*leaves, scale, start_pos)
    grads = torch.autograd.grad(out, leaves, dout)
    # the reference runs on fp32 copies of the same inputs: the better-rounded answer
    leaves32 = [t.float().requires_grad_() for t in (q, k, v)]
    ref = flash_attention_ref(*leaves32, scale, start_pos)
    grads_ref = torch.autograd.grad(ref, leaves32, dout.float())
    assert out.dtype == dtype
    assert_rmse_close(out, ref, dtype, "out")
    for name, g, gr in zip(("dq", "dk", "dv"), grads, grads_ref):
        assert g.dtype == dtype
        assert_rmse_close(g, gr, dtype, name)


def test_matches_torch_sdpa(device):
    """A second, independent implementation: PyTorch's own causal SDPA with grouped heads."""
    q, k, v, _ = _inputs((2, 37, 37, 4, 2, 32, 32, 0), torch.float32, device, seed=1)
    out = flash_attention(q, k, v, 0.3)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, scale=0.3,
        enable_gqa=True).transpose(1, 2)
    assert_rmse_close(out, ref, torch.float32)


def test_future_keys_do_not_matter(device):
    """Causality checked directly: changing keys/values at positions > start_pos + i leaves row i."""
    q, k, v, _ = _inputs((1, 40, 40, 2, 1, 16, 16, 0), torch.float32, device, seed=2)
    out = flash_attention(q, k, v, 0.25)
    k2, v2 = k.clone(), v.clone()
    k2[:, 20:] += 5.0
    v2[:, 20:] -= 3.0
    out2 = flash_attention(q, k2, v2, 0.25)
    assert torch.equal(out[:, :20], out2[:, :20])
    assert (out[:, 20:] - out2[:, 20:]).abs().max() > 0.1


def test_single_key_returns_its_value_and_zero_key_gradients(device):
    """T = S = 1: softmax over one key is 1, so out = v and dq = dk = 0 (closed form)."""
    q, k, v, dout = _inputs((2, 1, 1, 2, 1, 16, 24, 0), torch.float32, device, seed=3)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = flash_attention(*leaves, 0.5)
    torch.testing.assert_close(out, v.expand(2, 1, 2, 24), rtol=1e-6, atol=1e-6)
    dq, dk, dv = torch.autograd.grad(out, leaves, dout)
    assert dq.abs().max() < 1e-5 and dk.abs().max() < 1e-5
    torch.testing.assert_close(dv, dout.sum(dim=2, keepdim=True), rtol=1e-5, atol=1e-5)


def test_strided_inputs_give_the_same_result(device):
    q, k, v, _ = _inputs((1, 21, 21, 2, 2, 16, 16, 0), torch.float32, device, seed=4)
    q_t = q.transpose(1, 2).contiguous().transpose(1, 2)  # same values, (B, H, T, D) memory order
    k_t = k.transpose(1, 2).contiguous().transpose(1, 2)
    assert not q_t.is_contiguous()
    torch.testing.assert_close(flash_attention(q_t, k_t, v, 0.25), flash_attention(q, k, v, 0.25))


@pytest.mark.parametrize("change, message", [
    (dict(k=(1, 8, 3, 16)), "Hkv = 3 must divide"),
    (dict(scale=0.0), "scale"),
    (dict(start_pos=-1), "start_pos"),
    (dict(v_dtype=torch.float16), "dtype"),
    (dict(q=(8, 4, 16)), "expected 4 dims"),
])
def test_bad_input_raises(change, message, device):
    q = torch.randn(change.get("q", (1, 8, 4, 16)), device=device)
    k = torch.randn(change.get("k", (1, 8, 2, 16)), device=device)
    v = torch.randn(1, 8, k.shape[2], 16, device=device, dtype=change.get("v_dtype", torch.float32))
    with pytest.raises(ValueError, match=message):
        flash_attention(q, k, v, change.get("scale", 0.25), change.get("start_pos", 0))


def test_preallocated_cache_tail_is_never_read(device):
    """Keys at positions ≥ start_pos + T (an unwritten cache tail) are NaN here: the output and the
    gradients must equal attention over the written prefix, with zero gradient on the tail."""
    q, k, v, dout = _inputs((1, 7, 30, 2, 1, 16, 16, 10), torch.float32, device, seed=5)
    k[:, 17:], v[:, 17:] = float("nan"), float("nan")  # start_pos + T = 17
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = flash_attention(*leaves, 0.25, start_pos=10)
    dq, dk, dv = torch.autograd.grad(out, leaves, dout)
    ref = flash_attention_ref(q, k[:, :17], v[:, :17], 0.25, start_pos=10)
    assert_rmse_close(out, ref, torch.float32)
    assert torch.isfinite(dq).all() and torch.equal(dk[:, 17:], torch.zeros_like(dk[:, 17:]))
    assert torch.equal(dv[:, 17:], torch.zeros_like(dv[:, 17:]))
