"""RoPE (docs/variants.md: half-split pairs (i, i + D/2), base 10000, fp32 angles)."""

import pytest
import torch

from gtalib.model.layers import RoPE

from .test_dense import rope_complex


def test_matches_complex_rotation():
    x = torch.randn(2, 9, 3, 16)
    torch.testing.assert_close(RoPE(16, 64)(x, start_pos=4).double(), rope_complex(x, 4), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("shift", [1, 7, 40])
def test_scores_depend_only_on_relative_position(shift):
    """<R_a q, R_b k> = <R_{a+s} q, R_{b+s} k> for every shift s."""
    rope = RoPE(32, 128)
    q, k = torch.randn(1, 1, 1, 32).expand(1, 10, 1, 32), torch.randn(1, 1, 1, 32).expand(1, 10, 1, 32)
    s0 = torch.einsum("bthd,bshd->ts", rope(q, 0), rope(k, 0))
    s1 = torch.einsum("bthd,bshd->ts", rope(q, shift), rope(k, shift))
    torch.testing.assert_close(s0, s1, atol=1e-5, rtol=1e-5)
    # and it does depend on the relative position (else the test above could not fail)
    assert (s0 - s0[0, 0]).abs().max() > 1e-2


def test_every_dim_rotates_and_norms_are_kept():
    D, pos = 64, 100
    rope = RoPE(D, 128)
    x = torch.eye(D).view(D, 1, 1, D)  # each unit vector as its own batch row, T = 1
    y = rope(x, start_pos=pos)[:, 0, 0]  # (D, D)
    assert ((y - torch.eye(D)).abs().amax(dim=1) > 1e-3).all()  # no dim is left unrotated
    torch.testing.assert_close(y.norm(dim=1), torch.ones(D))
    # the rotation mixes dim i only with its partner i ± D/2
    partner = torch.eye(D).roll(D // 2, dims=1) + torch.eye(D)
    assert (y.abs() * (1 - partner)).max() < 1e-6


def test_tables_stay_fp32_under_bf16_cast():
    rope = RoPE(16, 32).to(torch.bfloat16)
    assert rope.cos.dtype == torch.float32 and rope.sin.dtype == torch.float32


def test_errors():
    with pytest.raises(ValueError, match="qk_rope_head_dim"):
        RoPE(15, 8)
    with pytest.raises(ValueError, match="block_size"):
        RoPE(16, 8)(torch.zeros(1, 5, 1, 16), start_pos=4)


def _formula(D, L, theta=10000.0):
    """The tables from the formula, written independently: angle(p, j) = p / theta^(2j/D) in fp64."""
    ang = torch.tensor([[p / theta ** (2 * j / D) for j in range(D // 2)] for p in range(L)],
                       dtype=torch.float64)
    return ang.cos().float(), ang.sin().float()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_tables_exact_after_a_low_precision_round_trip(dtype):
    cos, sin = _formula(16, 40)
    rope = RoPE(16, 40).to(dtype).float()
    assert torch.equal(rope.cos, cos) and torch.equal(rope.sin, sin)
    # the stored values were really rounded before the fix (else this test could not fail)
    assert not torch.equal(cos.to(dtype).float(), cos)


def test_tables_exact_after_meta_construction_and_to_empty():
    with torch.device("meta"):
        rope = RoPE(16, 40)
    assert rope.cos.is_meta
    rope.to_empty(device="cpu")
    cos, sin = _formula(16, 40)
    assert torch.equal(rope.cos, cos) and torch.equal(rope.sin, sin)
    rope.cos.zero_()  # init_weights rebuilds them in place as well
    rope.init_weights()
    assert torch.equal(rope.cos, cos)
