"""Multi-branch MLRA attention (gtalib.kernels.mlra_attention) against independent routes."""

import pytest
import torch

from gtalib.kernels import assert_rmse_close, flash_attention, mlra_attention, mlra_attention_ref

# (NB, B, T, S, H, Dn, Dr, Dv, start_pos)
SHAPES = [
    pytest.param((4, 1, 63, 63, 2, 24, 8, 20, 0), id="mlra4-T63"),
    pytest.param((2, 2, 17, 40, 2, 32, 16, 16, 23), id="mlra2-prefill-cache"),
    pytest.param((4, 1, 20, 20, 2, 128, 64, 128, 0), id="paper-dims"),
    pytest.param((4, 1, 1, 6, 2, 16, 16, 16, 5), id="T1-offset"),
]


def _inputs(shape, dtype, device, seed=0):
    NB, B, T, S, H, Dn, Dr, Dv, _ = shape
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g).to(device=device, dtype=dtype)  # noqa: E731
    return mk(B, T, H, Dn + Dr), mk(NB, B, S, H, Dn), mk(B, S, 1, Dr), mk(NB, B, S, H, Dv), mk(B, T, H, Dv)


@pytest.mark.parametrize("shape", SHAPES)
def test_forward_and_gradients_match_reference(shape, dtype, device):
    q, kn, kr, v, dout = _inputs(shape, dtype, device)
    NB, Dn, Dr, start_pos = shape[0], shape[5], shape[6], shape[8]
    scale, alpha_o = (Dn + Dr) ** -0.5, NB ** -0.5
    leaves = [t.clone().requires_grad_() for t in (q, kn, kr, v)]
    out = mlra_attention(*leaves, scale, alpha_o, start_pos)
    grads = torch.autograd.grad(out, leaves, dout)
    leaves32 = [t.float().requires_grad_() for t in (q, kn, kr, v)]
    ref = mlra_attention_ref(*leaves32, scale, alpha_o, start_pos)
    grads_ref = torch.autograd.grad(ref, leaves32, dout.float())
    assert_rmse_close(out, ref, dtype, "out")
    for name, g, gr in zip(("dq", "dk_nope", "dk_rope", "dv"), grads, grads_ref):
        assert g.shape == gr.shape and g.dtype == dtype
        assert_rmse_close(g, gr, dtype, name)


def test_is_alpha_weighted_sum_of_single_branch_attentions(device):
    """Independent route: each branch as plain attention over [k_nope_b ; k_rope] (flash kernel)."""
    q, kn, kr, v, _ = _inputs((3, 1, 30, 30, 2, 16, 16, 24, 0), torch.float32, device, seed=1)
    out = mlra_attention(q, kn, kr, v, 0.2, 0.7)
    expected = sum(flash_attention(q, torch.cat([kn[b], kr.expand(-1, -1, 2, -1)], -1), v[b], 0.2)
                   for b in range(3)) * 0.7
    assert_rmse_close(out, expected, torch.float32)


def test_branch_major_view_of_token_major_tensor(device):
    """k_nope/v may be permuted views of (B, S, NB, H, D) tensors: no copy needed, same result."""
    q, kn, kr, v, _ = _inputs((2, 1, 12, 12, 2, 16, 16, 16, 0), torch.float32, device, seed=2)
    kn_view = kn.permute(1, 2, 0, 3, 4).contiguous().permute(2, 0, 1, 3, 4)  # (NB, B, S, H, Dn) view
    v_view = v.permute(1, 2, 0, 3, 4).contiguous().permute(2, 0, 1, 3, 4)
    assert not kn_view.is_contiguous()
    torch.testing.assert_close(mlra_attention(q, kn_view, kr, v_view, 0.25, 0.5),
                               mlra_attention(q, kn, kr, v, 0.25, 0.5))


def test_bad_input_raises(device):
    q, kn, kr, v, _ = _inputs((2, 1, 8, 8, 2, 16, 16, 16, 0), torch.float32, device)
    with pytest.raises(ValueError, match="Dn \\+ Dr"):
        mlra_attention(q[..., :20], kn, kr, v, 0.25, 0.5)
    with pytest.raises(ValueError, match="k_rope"):
        mlra_attention(q, kn, kr.expand(-1, -1, 2, -1), v, 0.25, 0.5)
    with pytest.raises(ValueError, match="v: shape"):
        mlra_attention(q, kn, kr, v[:1], 0.25, 0.5)


def test_preallocated_cache_tail_is_never_read(device):
    q, kn, kr, v, dout = _inputs((2, 1, 5, 20, 2, 16, 16, 16, 8), torch.float32, device, seed=3)
    kn[:, :, 13:], kr[:, 13:], v[:, :, 13:] = float("nan"), float("nan"), float("nan")  # start_pos + T = 13
    leaves = [t.clone().requires_grad_() for t in (q, kn, kr, v)]
    out = mlra_attention(*leaves, 0.25, 0.5, start_pos=8)
    grads = torch.autograd.grad(out, leaves, dout)
    ref = mlra_attention_ref(q, kn[:, :, :13], kr[:, :13], v[:, :, :13], 0.25, 0.5, start_pos=8)
    assert_rmse_close(out, ref, torch.float32)
    assert all(torch.isfinite(g).all() for g in grads)
    assert grads[1][:, :, 13:].abs().sum() == 0 and grads[2][:, 13:].abs().sum() == 0
