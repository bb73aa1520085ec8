"""The one accuracy criterion used for every kernel: the RMSE ratio against the fp32 reference.

``rmse_ratio(out, ref) = sqrt(mean((out − ref)²)) / sqrt(mean(ref²))``, computed in fp64. A ratio is
scale-free (it does not care whether outputs are O(1) or O(1e-3), as gradients often are) and
averages over all elements, so one rounding outlier in fp16 does not fail a correct kernel while a
wrong mask or a wrong row of the softmax does (those give ratios of order 0.1–1).

Tolerances (per input dtype) sit ~10–20× above what the kernels were observed to reach in the CPU
interpreter (fp32 ≈ 3e-7, fp16 ≈ 5e-4); bf16 has 3 fewer mantissa bits than fp16
(8× the rounding error), so its bound is 4× fp16's; it was not measured here (no GPU, and the
interpreter's bf16 ``tl.dot`` is wrong, triton issue 11584).
"""

from __future__ import annotations

import torch

TOLERANCE: dict[torch.dtype, float] = {
    torch.float32: 1e-5,
    torch.float16: 5e-3,
    torch.bfloat16: 2e-2,
}


def rmse_ratio(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``RMSE(out − ref) / RMSE(ref)`` in fp64; raises ``ValueError`` on a shape mismatch or a zero ref."""
    if out.shape != ref.shape:
        raise ValueError(f"out: shape {tuple(out.shape)} differs from ref's {tuple(ref.shape)}")
    o, r = out.detach().double(), ref.detach().double()
    denom = r.pow(2).mean().sqrt()
    if not denom > 0:
        raise ValueError("ref: all zeros, an RMSE ratio is undefined; compare absolutely instead")
    return float((o - r).pow(2).mean().sqrt() / denom)


def assert_rmse_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype | None = None,
                      what: str = "output") -> None:
    """Assert ``rmse_ratio(out, ref) < TOLERANCE[dtype]`` (dtype defaults to ``out.dtype``); NaN fails."""
    tol = TOLERANCE[dtype or out.dtype]
    ratio = rmse_ratio(out, ref)
    assert ratio < tol, f"{what}: RMSE ratio {ratio:.3g} ≥ tolerance {tol:g} ({dtype or out.dtype})"
