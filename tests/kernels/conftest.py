"""Kernel-test setup: the device (CUDA when present, else the Triton CPU interpreter) and the dtypes.

fp32 and fp16 run everywhere; bf16 runs on CUDA only (the interpreter's bf16 ``tl.dot`` is wrong,
triton issue 11584). The top-level tests/conftest.py sets ``TRITON_INTERPRET=1`` without CUDA.
"""

import pytest
import torch

CUDA = torch.cuda.is_available()


@pytest.fixture
def device() -> str:
    return "cuda" if CUDA else "cpu"


@pytest.fixture(params=[
    pytest.param(torch.float32, id="fp32"),
    pytest.param(torch.float16, id="fp16"),
    pytest.param(torch.bfloat16, id="bf16", marks=[
        pytest.mark.gpu,
        pytest.mark.skipif(not CUDA, reason="bf16 needs CUDA: the Triton interpreter's bf16 tl.dot is "
                                            "wrong (triton issue 11584)")]),
])
def dtype(request) -> torch.dtype:
    return request.param
