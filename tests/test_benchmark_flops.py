"""gtalib.model.flops: an attention call counts the FLOPs of the same attention written as
explicit matrix products (a second implementation) and of the closed form, grouped heads and
narrower values included."""

import pytest
import torch
import torch.nn.functional as F

from gtalib.model import flops


@pytest.mark.parametrize("n_kv_head", [4, 1])
def test_attention_counts_as_its_explicit_matrix_products(n_kv_head):
    torch.manual_seed(0)
    B, H, T, D = 2, 4, 16, 8
    q = torch.randn(B, H, T, D, requires_grad=True)
    k = torch.randn(B, n_kv_head, T, D, requires_grad=True)
    v = torch.randn(B, n_kv_head, T, D, requires_grad=True)

    def fused():
        F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                       enable_gqa=n_kv_head != H).sum().backward()

    def explicit():
        kk, vv = (t.repeat_interleave(H // n_kv_head, dim=1) for t in (k, v))
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        s = (q @ kk.transpose(-1, -2) / D ** 0.5).masked_fill(~mask, float("-inf"))
        (s.softmax(-1) @ vv).sum().backward()

    # closed form: forward Q·Kᵀ and P·V, 2·B·H·T·T·D each; backward twice the forward
    expected = 3 * 2 * (2 * B * H * T * T * D)
    assert flops.count_flops(fused) == flops.count_flops(explicit) == expected


def test_narrower_values_count_their_own_width_not_the_padding():
    # The latent family's values (d_v) are narrower than its queries/keys (d_n + d_r); attend
    # zero-pads them for the fused CPU kernel, and the count must not include that padding.
    from gtalib.model.attention.functional import attend

    torch.manual_seed(0)
    B, T, H, Dqk, Dv = 2, 16, 4, 12, 8
    q, k = (torch.randn(B, T, H, Dqk, requires_grad=True) for _ in range(2))
    v = torch.randn(B, T, H, Dv, requires_grad=True)
    expected = 3 * (2 * B * H * T * T * Dqk + 2 * B * H * T * T * Dv)
    assert flops.count_flops(lambda: attend(q, k, v, Dqk ** -0.5).sum().backward()) == expected
