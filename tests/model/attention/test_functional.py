"""``attend`` against a loop-over-heads float64 reference, including cache offsets and GQA."""

import pytest
import torch

from gtalib.model.attention.functional import attend

from .helpers import naive_attention


@pytest.mark.parametrize("H,Hkv", [(4, 4), (4, 2), (6, 1), (6, 3)])
@pytest.mark.parametrize("T,start_pos", [(7, 0), (3, 5), (1, 9)])
def test_attend_matches_naive(H, Hkv, T, start_pos):
    g = torch.Generator().manual_seed(0)
    B, S, D, Dv = 2, start_pos + T, 10, 6
    q = torch.randn(B, T, H, D, generator=g)
    k = torch.randn(B, S, Hkv, D, generator=g)
    v = torch.randn(B, S, Hkv, Dv, generator=g)
    out = attend(q, k, v, scale=0.3, start_pos=start_pos)
    ref = naive_attention(q, k, v, 0.3, start_pos)
    assert out.shape == (B, T, H, Dv)
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)


def test_attend_ignores_keys_past_the_queries():
    """A preallocated cache may be passed whole: positions >= start_pos + T never matter."""
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, 2, 2, 4, generator=g)
    k = torch.randn(1, 8, 1, 4, generator=g)
    v = torch.randn(1, 8, 1, 4, generator=g)
    a = attend(q, k, v, 0.5, start_pos=3)
    k2, v2 = k.clone(), v.clone()
    k2[:, 5:], v2[:, 5:] = float("nan"), float("nan")
    b = attend(q, k2[:, :5], v2[:, :5], 0.5, start_pos=3)
    torch.testing.assert_close(a, b)


def test_attend_errors():
    q, k = torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 2, 4)
    with pytest.raises(ValueError, match="multiple of KV heads"):
        attend(q, k, k, 1.0)
    with pytest.raises(ValueError, match="impl"):
        attend(q, q, q, 1.0, impl="cuda")
    with pytest.raises(ValueError, match="start_pos"):
        attend(q, q, q, 1.0, start_pos=1)


def test_triton_impl_matches_torch():
    """impl="triton" dispatches to gtalib.kernels.flash_attention (Triton interpreter on CPU,
    enabled by tests/conftest.py); fp32, tiny odd shapes."""
    pytest.importorskip("triton")
    pytest.importorskip("gtalib.kernels")
    g = torch.Generator().manual_seed(2)
    q = torch.randn(1, 3, 4, 12, generator=g)
    k = torch.randn(1, 7, 2, 12, generator=g)
    v = torch.randn(1, 7, 2, 6, generator=g)
    torch.testing.assert_close(attend(q, k, v, 0.3, 4, impl="triton"), attend(q, k, v, 0.3, 4),
                               atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("start_pos", [0, 3])
def test_narrower_values_run_the_fused_cpu_kernel(start_pos):
    """Values narrower than the keys (the latent family) are zero-padded so that PyTorch's fused
    CPU kernel runs (with only that kernel allowed, an unpadded call raises "No available
    kernel"); outputs and gradients match the float64 reference."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    g = torch.Generator().manual_seed(3)
    B, T, H, D, Dv = 2, 5, 4, 12, 8
    S = start_pos + T
    q = torch.randn(B, T, H, D, generator=g, requires_grad=True)
    k = torch.randn(B, S, 2, D, generator=g, requires_grad=True)
    v = torch.randn(B, S, 2, Dv, generator=g, requires_grad=True)
    w = torch.randn(B, T, H, Dv, generator=g)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = attend(q, k, v, 0.3, start_pos)
        grads = torch.autograd.grad((out * w).sum(), (q, k, v))
    ref = naive_attention(q, k, v, 0.3, start_pos)
    ref_grads = torch.autograd.grad((ref * w.double()).sum(), (q, k, v))
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want.float(), atol=1e-5, rtol=1e-4)


def test_branches_run_the_fused_cpu_kernel_and_match_the_reference():
    """The latent family's multi-branch attention (MLRA-4's layout: 48-wide keys, 32-wide
    values, one shared RoPE key) with only the fused kernel allowed, against α_o Σ_b of the
    float64 loop reference per branch; outputs and gradients of every input."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from gtalib.model.attention.functional import attend_branches

    g = torch.Generator().manual_seed(4)
    NB, B, T, H, dn, dr, dv = 4, 2, 6, 3, 8, 4, 8
    q = torch.randn(B, T, H, dn + dr, generator=g, requires_grad=True)
    k_nope = torch.randn(NB, B, T, H, dn, generator=g, requires_grad=True)
    k_rope = torch.randn(B, T, 1, dr, generator=g, requires_grad=True)
    v = torch.randn(NB, B, T, H, dv, generator=g, requires_grad=True)
    w = torch.randn(B, T, H, dv, generator=g)
    inputs = (q, k_nope, k_rope, v)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = attend_branches(q, k_nope, k_rope, v, 0.3, 0.5)
        grads = torch.autograd.grad((out * w).sum(), inputs)
    k_r = k_rope.expand(B, T, H, dr)
    ref = 0.5 * sum(naive_attention(q, torch.cat([k_nope[b], k_r], -1), v[b], 0.3) for b in range(NB))
    ref_grads = torch.autograd.grad((ref * w.double()).sum(), inputs)
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want.float(), atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="query heads"):
        attend_branches(q[:, :, :1], k_nope, k_rope, v, 0.3, 0.5)
    with pytest.raises(ValueError, match="shape mismatch"):  # no branch: nothing to sum
        attend_branches(q, k_nope[:0], k_rope, v[:0], 0.3, 0.5)
