"""Shared test setup: single-threaded torch, Triton's CPU interpreter when there is no GPU.

``TRITON_INTERPRET`` must be set before any module decorates a function with ``@triton.jit``, so it
is set here at import time (pytest imports conftest before collecting test modules). Importing
torch does not import triton.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
torch.set_num_threads(1)
