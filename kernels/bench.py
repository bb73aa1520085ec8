"""GPU timing of the kernels: fused attention vs SDPA, decode latency and achieved bandwidth.

Importable without a GPU (the FLOP and byte formulas are plain functions); the ``bench_*`` functions
need CUDA. Times are medians of ``triton.testing.do_bench`` (CUDA events; the L2 cache is flushed
between repetitions), in milliseconds from Triton, reported here in ms or µs as named.

FLOP convention (FlashAttention-2 paper, Sec. 4): a causal forward costs
``2·B·H·T²·(Dqk + Dv) / 2`` (two matmuls over the lower triangle), the backward 2.5× the forward
(five matmuls instead of two), so forward+backward is 3.5× the forward.
"""

from __future__ import annotations

import contextlib
import math

import torch

from .decode_model import HBM_BANDWIDTH, kv_bytes, shard
from .tolerance import rmse_ratio


def attention_flops(batch: int, seqlen: int, n_head: int, dqk: int, dv: int, causal: bool = True) -> dict:
    """FLOPs of one attention call: ``{"fwd": ..., "bwd": ..., "fwd+bwd": ...}`` (see module doc)."""
    fwd = 2.0 * batch * n_head * seqlen * seqlen * (dqk + dv) / (2.0 if causal else 1.0)
    return {"fwd": fwd, "bwd": 2.5 * fwd, "fwd+bwd": 3.5 * fwd}


def _do_bench(fn, grad_to_none=None) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=10, rep=50, grad_to_none=grad_to_none,
                                         return_mode="median"))


def _sdpa_backends():
    from torch.nn.attention import SDPBackend

    # the math backend is left out: it materialises the scores and is never the fastest
    return {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION}


def bench_attention(batch: int, seqlen: int, n_head: int, n_kv_head: int, dqk: int, dv: int,
                    dtype: torch.dtype = torch.bfloat16, device: str = "cuda") -> list[dict]:
    """Time gtalib's fused attention and every SDPA backend that accepts the shape, causal.

    Returns rows ``impl, pass ("fwd" | "fwd+bwd"), ms, tflops, rmse_ratio`` (the forward output's
    RMSE ratio against gtalib's fp32 reference on the same inputs), or ``error`` for a backend that
    refused the shape. Scale ``1/sqrt(dqk)``.
    """
    from torch.nn.attention import sdpa_kernel

    from .flash_attn import flash_attention, flash_attention_ref

    gen = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(batch, seqlen, n_head, dqk, device=device, dtype=dtype, generator=gen)
    k = torch.randn(batch, seqlen, n_kv_head, dqk, device=device, dtype=dtype, generator=gen)
    v = torch.randn(batch, seqlen, n_kv_head, dv, device=device, dtype=dtype, generator=gen)
    dout = torch.randn(batch, seqlen, n_head, dv, device=device, dtype=dtype, generator=gen)
    scale = 1.0 / math.sqrt(dqk)
    flops = attention_flops(batch, seqlen, n_head, dqk, dv)
    ref = flash_attention_ref(q, k, v, scale) if batch * n_head * seqlen * seqlen <= 2**31 else None

    def sdpa(qq, kk, vv):
        out = torch.nn.functional.scaled_dot_product_attention(
            qq.transpose(1, 2), kk.transpose(1, 2), vv.transpose(1, 2), is_causal=True, scale=scale,
            enable_gqa=n_kv_head != n_head)  # (B, H, T, Dv)
        return out.transpose(1, 2)  # (B, T, H, Dv)

    impls = {"gtalib-triton": (lambda a, b, c: flash_attention(a, b, c, scale), None)}
    impls.update({f"sdpa-{name}": (sdpa, backend) for name, backend in _sdpa_backends().items()})
    rows = []
    for name, (fn, backend) in impls.items():
        base = dict(impl=name, batch=batch, seqlen=seqlen, n_head=n_head, n_kv_head=n_kv_head,
                    dqk=dqk, dv=dv, dtype=str(dtype).replace("torch.", ""))
        try:
            ctx = sdpa_kernel([backend]) if backend is not None else contextlib.nullcontext()
            with ctx:
                with torch.no_grad():
                    out = fn(q, k, v)
                err = rmse_ratio(out, ref) if ref is not None else float("nan")
                ms_f = _do_bench(lambda: fn(q, k, v))
                qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
                ms_fb = _do_bench(lambda: fn(qg, kg, vg).backward(dout), grad_to_none=[qg, kg, vg])
            rows.append(dict(base, **{"pass": "fwd"}, ms=ms_f, tflops=flops["fwd"] / ms_f / 1e9, rmse_ratio=err))
            rows.append(dict(base, **{"pass": "fwd+bwd"}, ms=ms_fb, tflops=flops["fwd+bwd"] / ms_fb / 1e9,
                             rmse_ratio=err))
        except Exception as exc:  # a backend refusing a head dim is a result, not a failure
            rows.append(dict(base, **{"pass": "-"}, error=f"{type(exc).__name__}: {str(exc)[:200]}"))
        torch.cuda.empty_cache()
    return rows


def bench_decode(variant: str, context: int, dtype: torch.dtype = torch.bfloat16, device: str = "cuda",
                 num_splits: int | None = None, check: bool = True) -> dict:
    """Latency of one decode step (batch 1) for the paper shard of ``variant`` at ``context`` tokens.

    Returns ``variant, shard, context, latency_us, kv_bytes, gbps`` (cache bytes / time),
    ``peak_fraction`` (of the H200's 4.8 TB/s datasheet peak) and ``rmse_ratio`` against the
    PyTorch reference (when ``check``; NaN if the reference ran out of memory). Softmax scale: ``1/sqrt(d_n + d_r) = 1/sqrt(192)`` for the
    latent shards (training scale, whatever the block width), ``1/sqrt(128)`` for GQA.
    """
    from .decode import gqa_decode, gqa_decode_ref, latent_decode, latent_decode_ref

    s = shard(variant)
    gen = torch.Generator(device=device).manual_seed(0)

    def rnd(*shape):
        return torch.randn(*shape, device=device, dtype=dtype, generator=gen)

    seqlens = torch.full((1,), context, device=device, dtype=torch.int32)
    if s.latent:
        args = (rnd(1, s.n_head, s.kv_lora_rank), rnd(1, s.n_head, s.qk_rope_head_dim),
                rnd(1, context, s.kv_lora_rank), rnd(1, context, s.qk_rope_head_dim), seqlens,
                1.0 / math.sqrt(128 + 64))
        kernel, ref = latent_decode, latent_decode_ref
    else:
        args = (rnd(1, s.n_head, s.head_dim), rnd(1, context, s.n_kv_head, s.head_dim),
                rnd(1, context, s.n_kv_head, s.head_dim), seqlens, 1.0 / math.sqrt(s.head_dim))
        kernel, ref = gqa_decode, gqa_decode_ref
    ms = _do_bench(lambda: kernel(*args, num_splits=num_splits))
    err = float("nan")
    if check:  # after timing: a reference that runs out of memory must not lose the measurement
        try:
            err = rmse_ratio(kernel(*args, num_splits=num_splits), ref(*args))
        except torch.OutOfMemoryError:
            pass
    nbytes = kv_bytes(s, context, torch.finfo(dtype).bits // 8)
    gbps = nbytes / (ms * 1e-3) / 1e9
    return dict(variant=variant, shard=s.name, context=context, context_k=context // 1024,
                latency_us=ms * 1e3, kv_bytes=nbytes, gbps=gbps,
                peak_fraction=gbps * 1e9 / HBM_BANDWIDTH["H200"], rmse_ratio=err,
                dtype=str(dtype).replace("torch.", ""))


def recorded_results(name: str = "decode", root=None):
    """The newest recorded GPU results ``<root>/*/<name>.csv`` with their provenance, or None.

    ``root`` defaults to ``benchmarks/results`` of this checkout, where a session with a GPU commits
    the folder written by ``benchmarks/gpu_check.py`` (``decode.csv``, ``attention.csv``,
    ``env.json`` with date, GPU and versions). Returns ``(DataFrame, provenance dict)``; folders are
    ordered by the ``date_utc`` in their env.json. ``name`` is one of ``decode``, ``attention``.
    """
    import json
    from pathlib import Path

    import pandas as pd

    if name not in ("decode", "attention"):
        raise ValueError(f"name: {name!r}; allowed: decode, attention")
    root = Path(root) if root is not None else Path(__file__).resolve().parents[1] / "benchmarks" / "results"
    found = []
    for csv_path in root.glob(f"*/{name}.csv"):
        env_path = csv_path.parent / "env.json"
        env = json.loads(env_path.read_text()) if env_path.exists() else {}
        found.append((env.get("date_utc", ""), csv_path, env))
    if not found:
        return None
    _, csv_path, env = max(found, key=lambda t: (t[0], str(t[1])))
    return pd.read_csv(csv_path), dict(env, folder=str(csv_path.parent))
