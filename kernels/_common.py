"""Helpers shared by the kernels: padded tile widths, launch configurations, input checks."""

from __future__ import annotations

import os

import torch
import triton

LOG2E = 1.4426950408889634  # softmax runs in base 2 inside the kernels: exp(x) = exp2(x·log2 e)

_SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def interpreting() -> bool:
    """True when Triton runs kernels in its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def padded(dim: int) -> int:
    """Tile width for a head dimension: the next power of two, at least 16.

    ``tl.arange`` needs powers of two and ``tl.dot`` needs every dimension ≥ 16, so a head dim of
    192 is processed as a 256-wide tile with the top 64 lanes masked off (loaded as 0).
    """
    return max(16, triton.next_power_of_2(int(dim)))


def dot_precision(dtype: torch.dtype) -> str:
    """``tl.dot`` input precision: exact fp32 for fp32 inputs (no TF32), native for fp16/bf16."""
    return "ieee" if dtype == torch.float32 else "tf32"


def check_dtype(name: str, t: torch.Tensor, dtype: torch.dtype | None = None) -> None:
    """Raise ``ValueError`` unless ``t`` is fp32/fp16/bf16 (and equal to ``dtype`` when given)."""
    if t.dtype not in _SUPPORTED_DTYPES:
        raise ValueError(f"{name}: dtype {t.dtype} not supported; allowed: float32, float16, bfloat16")
    if dtype is not None and t.dtype != dtype:
        raise ValueError(f"{name}: dtype {t.dtype} differs from the query's {dtype}")


def check_device(name: str, t: torch.Tensor, device: torch.device) -> None:
    """Raise ``ValueError`` unless ``t`` lives on ``device``; on CPU the interpreter must be on."""
    if t.device != device:
        raise ValueError(f"{name}: on {t.device}, expected {device} (the query's device)")
    if t.device.type == "cpu" and not interpreting():
        raise ValueError(
            f"{name}: CPU tensors need the Triton interpreter; set TRITON_INTERPRET=1 before "
            "importing gtalib.kernels (it is set automatically when CUDA is absent)"
        )


def check_ndim(name: str, t: torch.Tensor, ndim: int, layout: str) -> None:
    """Raise ``ValueError`` naming the expected layout unless ``t.dim() == ndim``."""
    if t.dim() != ndim:
        raise ValueError(f"{name}: expected {ndim} dims {layout}, got shape {tuple(t.shape)}")


def check_scale(scale) -> float:
    """The softmax scale as a positive float, else ``ValueError``."""
    scale = float(scale)
    if not scale > 0.0:
        raise ValueError(f"scale: must be a positive float (e.g. 1/sqrt(D_qk)), got {scale}")
    return scale


def launch_with_fallback(configs: list[dict], launch) -> None:
    """Call ``launch(**config)`` for the first config whose tiles fit the GPU's shared memory.

    Configs are ordered fastest-first; Triton raises ``OutOfResources`` at compile time when a
    tile set exceeds shared memory, and the next, smaller config is tried.
    """
    last = None
    for cfg in configs:
        try:
            launch(**cfg)
            return
        except triton.runtime.errors.OutOfResources as err:  # pragma: no cover - GPU only
            last = err
    raise last  # pragma: no cover - GPU only
