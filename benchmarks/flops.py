"""FLOPs of a forward + backward, counted by ``torch.utils.flop_counter.FlopCounterMode``, with
PyTorch's fused CPU attention kernel counted too.

FlopCounterMode counts every matrix product by its shape (2·m·n·k) and the CUDA attention
kernels by formula, but has no formula for ``aten._scaled_dot_product_flash_attention_for_cpu``
(forward and backward; torch 2.13): on CPU an attention call that takes the fused kernel (equal
query/key/value head widths: MHA, MQA, GQA, GTA, MFA, TPA) would count zero FLOPs, while one that
takes the unfused path (the latent family) is counted through its batched matrix products. This
module counts the CPU kernel as the unfused path computes the same attention: the forward's two
products (scores Q·Kᵀ and output P·V, full T×S, causal or not: PyTorch's ``sdpa_flop_count``)
and the backward's four (dV, dP, dQ, dK: twice the forward). The fused backward's recomputation
of the scores is the kernel's choice, not work the model asks for, and is not counted. Grouped
key/value heads count once per query head. Both paths then count the same work.
"""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

_aten = torch.ops.aten


def _per_query_head(query_shape, shape):
    """``shape`` (B, Hkv, S, D) with the query's head count (grouped KV heads do the work of
    one head per query head)."""
    b, _, s, d = shape
    return (b, query_shape[1], s, d)


def _cpu_flash_forward(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs):
    return sdpa_flop_count(query_shape, _per_query_head(query_shape, key_shape),
                           _per_query_head(query_shape, value_shape))


def _cpu_flash_backward(grad_out_shape, query_shape, key_shape, value_shape, *args,
                        out_shape=None, **kwargs):
    return 2 * _cpu_flash_forward(query_shape, key_shape, value_shape)


CPU_ATTENTION_FLOPS = {
    _aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_forward,
    _aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_backward,
}


def count_flops(fn) -> int:
    """FLOPs of everything ``fn()`` runs (forward and any backward it calls), fused CPU
    attention included (module docstring)."""
    with FlopCounterMode(display=False, custom_mapping=CPU_ATTENTION_FLOPS) as counter:
        fn()
    return counter.get_total_flops()
