"""FLOPs of a forward + backward, counted by ``torch.utils.flop_counter.FlopCounterMode``, with
attention counted at each variant's own head widths.

FlopCounterMode counts every matrix product by its shape (2·m·n·k), but has no formula for
PyTorch's fused CPU attention kernel (``aten._scaled_dot_product_flash_attention_for_cpu`` and
its backward; torch 2.13): an attention call that takes it would count zero FLOPs. And where the
value heads are narrower than the query/key heads (the latent family: ``d_n + d_r`` against
``d_v``), ``gtalib.model.attention.functional`` zero-pads the values so that the fused kernel can run;
counting that kernel's shapes would count the padding as work. So :func:`count_flops` runs its
function with PyTorch's unfused ("math") attention, which computes the same attention as
explicit matrix products at the true widths and which FlopCounterMode counts: the forward's
scores Q·Kᵀ and output P·V (full T×S, the causal mask saving nothing) and the backward's four
products (dV, dP, dQ, dK: twice the forward). Grouped key/value heads count once per query
head. The fused backward's recomputation of the scores is the kernel's choice, not work the
model asks for, and is not counted. Elementwise work is not counted either, which includes TPA's
rank-2 factor contraction (two broadcast products, ``gtalib.model.attention.tpa``; higher ranks use a
matrix product, which is counted).
"""

from __future__ import annotations

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode


def count_flops(fn) -> int:
    """FLOPs of everything ``fn()`` runs (forward and any backward it calls), attention counted
    as its unfused matrix products at the unpadded widths (module docstring)."""
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def step_flops(cfg, batch_size: int, seq_len: int) -> int:
    """FLOPs of one training step's forward + backward of ``batch_size`` sequences of
    ``seq_len`` tokens through a :class:`gtalib.model.gpt.GPT` of ``cfg`` (a ``ModelConfig``),
    loss included (:func:`count_flops`). Counted on PyTorch's ``meta`` device (shapes only,
    nothing computed, no memory) and on one sequence, multiplied: every counted product is linear
    in the batch (``m`` of its ``2·m·n·k`` is batch × tokens, attention's ``B·H·T·S·D``). The
    optimizer's update is elementwise and not counted.

    Raises:
        ValueError: ``batch_size`` or ``seq_len`` < 1.
    """
    if batch_size < 1 or seq_len < 1:
        raise ValueError(f"batch_size and seq_len must be >= 1, got {batch_size!r}, {seq_len!r}")
    from gtalib.model.gpt import GPT  # the model only where FLOPs are counted

    with torch.device("meta"):
        model = GPT(cfg)
        idx = torch.zeros(1, seq_len + 1, dtype=torch.long)

    def step():
        _, loss = model(idx[:, :-1], idx[:, 1:])
        loss.backward()

    return count_flops(step) * batch_size
