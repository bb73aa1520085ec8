"""Triton kernels of gtalib, installed as ``gtalib.kernels``, each beside its PyTorch reference.

Ground layer. May import: nothing of gtalib (the model layer dispatches to these kernels; they
know no ``ModelConfig``).

* :func:`flash_attention` / :func:`flash_attention_ref`: fused causal attention (FlashAttention-2),
  grouped KV heads, Dqk ≠ Dv, causal offset; differentiable.
* :func:`mlra_attention` / :func:`mlra_attention_ref`: MLRA multi-branch attention in one launch.
* :func:`latent_decode` / :func:`latent_decode_ref`, :func:`gqa_decode` / :func:`gqa_decode_ref`:
  split-KV decode (FlashDecoding) over contiguous or paged caches.
* :mod:`gtalib.kernels.decode_model`: bytes and FLOPs of a decode step of the paper's per-device
  shards and their roofline model (a model, not a measurement); :mod:`gtalib.kernels.bench`: GPU
  timing helpers.

Without CUDA, Triton can only run kernels in its CPU interpreter, and it must be switched on
before any kernel is defined: importing this package sets ``TRITON_INTERPRET=1`` when no CUDA
device is present (and leaves an explicit setting alone). The interpreter is 300–1000× slower than
PyTorch: use it for tests at tiny shapes only.
"""

import os
import sys

# torch 2.13 imports triton on `import torch`; Triton reads TRITON_INTERPRET when it is imported,
# so setting it here only takes effect if triton was not imported yet or it was already "1".
INTERPRETER_USABLE = os.environ.get("TRITON_INTERPRET") == "1" or "triton" not in sys.modules

import torch  # noqa: E402

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from .decode import gqa_decode, gqa_decode_ref, latent_decode, latent_decode_ref  # noqa: E402
from .flash_attn import flash_attention, flash_attention_ref  # noqa: E402
from .mlra import mlra_attention, mlra_attention_ref  # noqa: E402
from .tolerance import TOLERANCE, assert_rmse_close, rmse_ratio  # noqa: E402

__all__ = [
    "INTERPRETER_USABLE",
    "flash_attention", "flash_attention_ref", "mlra_attention", "mlra_attention_ref",
    "latent_decode", "latent_decode_ref", "gqa_decode", "gqa_decode_ref",
    "TOLERANCE", "rmse_ratio", "assert_rmse_close",
]
