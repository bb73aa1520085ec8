"""Decode latency on this CPU of the paper's per-device attention shards (Figure 5: GQA TP 8, MLA DP,
GLA-2 TP 2, MLRA-4 TP 4; paper shapes, batch 1, one new token) over a context ladder, with the
machine's peak FLOP/s and memory bandwidth measured in the same run, against the roofline model of
``gtalib.kernels.decode_model``.

Usage: ``.venv/bin/python benchmarks/decode_cpu.py [--contexts-k 16,32,64,128,256,512]
[--threads 1] [--repeats 7] [--out benchmarks/decode_cpu.json]`` (about 2 minutes on one core
of this machine when idle). Writes the JSON the decode chapter reads (``notebooks/decode_speed.ipynb``)
and a Markdown summary beside it (same name, ``.md``).

Method:

- A shard's step is split-KV attention (FlashDecoding, Dao et al. 2023) in PyTorch, fp32:
  :func:`split_kv_decode` walks the context in chunks; per chunk one GEMM scores the ``H`` heads
  against the chunk's keys, one GEMM adds its weighted values, and the chunks are merged by
  their softmax statistics (online softmax: a running max, denominator and output). The latent
  shards use the absorbed form (query ``[q_n W_UK; q_r]``, key ``[c_j; k_r]``, value ``c_j``: the
  value is a view of the key rows, read while they are still in cache). Chunks are sized so a chunk's keys fit in 1 MiB (this CPU's per-core L2 is 1 MiB).
- Times are CPU time of this process (``time.process_time``; one thread, so equal to wall time on
  an idle machine), the minimum over ``--repeats`` runs after one warm-up (``128 / K`` times as
  many below 128K tokens, where a step is short): the machine is shared, and CPU time leaves out
  the time the scheduler gives to other processes, which wall time would count (the minimum wall
  time is recorded beside it). The shards are interleaved within each
  context.
- Machine rates, measured in the same run, best of ``2 × --repeats``: **peak FLOP/s**, a 1024³ fp32
  GEMM; **bandwidth** ``W``, ``sum`` over a 512 MiB buffer (a streaming read, what a decode step
  does); and, per shard, two rates of its building blocks: the **GEMM rate** ``P_H`` of its two
  per-chunk GEMMs with the keys streamed from memory (:func:`gemm_rate`; a GEMM with 8 rows, GQA
  at TP 8, runs at a fraction of the square GEMM's rate: a computational ceiling below the peak
  in the sense of Williams et al. 2009), and the **softmax rate** (scores/s, :func:`softmax_rate`).
- Model (:func:`predicted_us`): ``max(F / P_H, B / W) + H · S / softmax rate``, checked against
  the measurement (``rel_error``); the plain roofline with the square-GEMM peak,
  ``max(F / P, B / W)``, is recorded beside it (``predicted_peak_us``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gtalib.kernels.decode_model import PAPER_SHARDS, DecodeShard, kv_bytes, roofline_us, step_flops  # noqa: E402
from gtalib.training.runs import cpu_model, git_commit  # noqa: E402

DEFAULT_CONTEXTS_K = (16, 32, 64, 128, 256, 512)
CHUNK_BYTES = 1 << 20  # keys of one chunk: this CPU's per-core L2


def chunk_tokens(s: DecodeShard, elem_bytes: int = 4) -> int:
    """Tokens per chunk: the largest power of two whose keys fit in :data:`CHUNK_BYTES`."""
    return 1 << int(math.log2(CHUNK_BYTES / (s.key_width * elem_bytes)))


def split_kv_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, chunk: int) -> torch.Tensor:
    """One decode step of ``H`` query heads sharing one KV head, split over the context.

    Args:
        q: ``(H, D_k)`` the new token's queries (latent: ``[q_n W_UK; q_r]``).
        k: ``(S, D_k)`` cached keys; v: ``(S, D_v)`` cached values (latent: ``k[:, :w]``).
        scale: softmax scale. chunk: tokens per chunk.
    Returns:
        ``(H, D_v)`` = ``softmax(scale · q kᵀ) v``.
    """
    H = q.shape[0]
    qs = q * scale
    m = torch.full((H, 1), -math.inf)  # running row max
    l = torch.zeros(H, 1)  # running softmax denominator
    o = torch.zeros(H, v.shape[1])  # running unnormalised output
    for i in range(0, k.shape[0], chunk):
        p = online_softmax(qs @ k[i:i + chunk].T, m, l, o)  # (H, L) scores -> weights
        o.addmm_(p, v[i:i + chunk])  # (H, D_v)
    return o / l


def online_softmax(s: torch.Tensor, m: torch.Tensor, l: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
    """The non-GEMM part of one chunk (online softmax, Milakov & Gimelshein 2018): scores
    ``s (H, L)`` become the weights ``exp(s − m_new)`` (in place, returned); the running max
    ``m (H, 1)``, denominator ``l (H, 1)`` and output ``o (H, D_v)`` are rescaled to the new max."""
    m_new = torch.maximum(m, s.amax(-1, keepdim=True))
    alpha = (m - m_new).exp_()  # (H, 1), 0 on the first chunk
    p = s.sub_(m_new).exp_()
    l.mul_(alpha).add_(p.sum(-1, keepdim=True))
    o.mul_(alpha)
    m.copy_(m_new)
    return p


def shard_tensors(s: DecodeShard, context: int, gen: torch.Generator) -> tuple:
    """Random fp32 ``(q, k, v)`` of the shard at ``context`` tokens (latent: ``v`` a view of ``k``)."""
    q = torch.randn(s.n_head, s.key_width, generator=gen)
    k = torch.randn(context, s.key_width, generator=gen)
    v = k[:, :s.value_width] if s.latent else torch.randn(context, s.value_width, generator=gen)
    return q, k, v


def best_time(fn, repeats: int, clock=time.process_time) -> float:
    """Minimum time of ``fn()`` in seconds over ``repeats`` runs after one warm-up, by ``clock``
    (default: CPU time of this process, see the module docstring)."""
    fn()
    best = math.inf
    for _ in range(repeats):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def measure_peaks(repeats: int) -> dict:
    """Peak fp32 GEMM FLOP/s (1024³) and streaming-read bandwidth (sum over 512 MiB)."""
    n = 1024
    a, b = torch.randn(n, n), torch.randn(n, n)
    flops = 2 * n**3 / best_time(lambda: a @ b, max(repeats, 5))
    x = torch.randn(128 * 2**20)  # 512 MiB
    bw = x.numel() * 4 / best_time(lambda: x.sum(), repeats)
    return dict(peak_flops=flops, bandwidth=bw)


CALIBRATION_BYTES = 64 << 20  # keys streamed by the calibration: twice this CPU's 32 MiB L3


def gemm_rate(s: DecodeShard, repeats: int, gen: torch.Generator) -> float:
    """FLOP/s of the shard's two GEMMs per chunk, ``(H, D_k) @ (D_k, L)`` and ``(H, L) @ (L, D_v)``,
    over :data:`CALIBRATION_BYTES` of keys streamed from memory (softmax left out): the compute
    ceiling of a GEMM with ``H`` rows on this machine."""
    L = chunk_tokens(s)
    n = max(L, CALIBRATION_BYTES // (4 * s.key_width) // L * L)
    q, k, v = shard_tensors(s, n, gen)
    p = torch.rand(s.n_head, L, generator=gen)

    def gemms():
        for i in range(0, n, L):
            q @ k[i:i + L].T
            p @ v[i:i + L]
    return step_flops(s, n) / best_time(gemms, repeats)


def softmax_rate(s: DecodeShard, repeats: int, gen: torch.Generator) -> float:
    """Scores per second through :func:`online_softmax` on the shard's ``(H, L)`` chunk tile."""
    L, reps, H = chunk_tokens(s), 32, s.n_head
    tile = torch.randn(H, L, generator=gen)
    m, l, o = torch.zeros(H, 1), torch.zeros(H, 1), torch.zeros(H, s.value_width)
    t = best_time(lambda: [online_softmax(tile.clone(), m, l, o) for _ in range(reps)], repeats)
    t_clone = best_time(lambda: [tile.clone() for _ in range(reps)], repeats)
    return reps * s.n_head * L / max(t - t_clone, 1e-9)


def predicted_us(s: DecodeShard, context: int, gemm: float, bandwidth: float, softmax: float) -> float:
    """CPU model of one step in µs: the roofline of the two GEMMs, ``max(F / P_H, B / W)``
    (:func:`~gtalib.kernels.decode_model.roofline_us`, fp32), plus the softmax's ``H · S`` scores
    at ``softmax`` scores/s (on a CPU core the exponentials do not overlap the GEMMs)."""
    return roofline_us(s, context, gemm, bandwidth, 4) + s.n_head * context / softmax * 1e6


def check_kernel() -> float:
    """Largest error of :func:`split_kv_decode` against a one-shot softmax on a small case."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(8, 96, generator=gen), torch.randn(1000, 96, generator=gen), torch.randn(1000, 64, generator=gen)
    ref = torch.softmax(q @ k.T * 0.1, -1) @ v
    return (split_kv_decode(q, k, v, 0.1, 128) - ref).abs().max().item()


def run(contexts_k=DEFAULT_CONTEXTS_K, threads: int = 1, repeats: int = 7) -> dict:
    """Measure everything; returns the results dict written by :func:`main` (see the module doc)."""
    import numpy

    torch.set_num_threads(threads)
    t_start = time.time()
    load_before = os.getloadavg()
    err = check_kernel()
    if err > 1e-5:
        raise RuntimeError(f"split_kv_decode differs from the one-shot softmax by {err:.2e}")
    gen = torch.Generator().manual_seed(0)
    calib = 2 * repeats  # the rates set every prediction and are cheap to measure: more runs
    peaks = measure_peaks(calib)
    gemm = {v: gemm_rate(s, calib, gen) for v, s in PAPER_SHARDS.items()}
    softmax = {v: softmax_rate(s, calib, gen) for v, s in PAPER_SHARDS.items()}
    rows = []
    for ck in contexts_k:
        S = ck * 1024
        tensors = {v: shard_tensors(s, S, gen) for v, s in PAPER_SHARDS.items()}
        times = {v: math.inf for v in PAPER_SHARDS}
        walls = dict(times)
        for v in PAPER_SHARDS:  # warm-up
            split_kv_decode(*tensors[v], 0.1, chunk_tokens(PAPER_SHARDS[v]))
        for _ in range(repeats * max(1, 128 // ck)):  # short steps: more runs, same total time
            # interleaved: drift on a shared machine hits every shard alike
            for v, s in PAPER_SHARDS.items():
                w0, t0 = time.perf_counter(), time.process_time()
                split_kv_decode(*tensors[v], 0.1, chunk_tokens(s))
                times[v] = min(times[v], time.process_time() - t0)
                walls[v] = min(walls[v], time.perf_counter() - w0)
        for v, s in PAPER_SHARDS.items():
            pred = predicted_us(s, S, gemm[v], peaks["bandwidth"], softmax[v])
            rows.append(dict(
                variant=v, shard=s.name, context_k=ck, context=S, measured_us=times[v] * 1e6,
                wall_us=walls[v] * 1e6,
                flops=step_flops(s, S), bytes=kv_bytes(s, S, 4), chunk=chunk_tokens(s),
                predicted_us=pred, predicted_peak_us=roofline_us(s, S, peaks["peak_flops"], peaks["bandwidth"], 4),
                bound="compute" if step_flops(s, S) / gemm[v] > kv_bytes(s, S, 4) / peaks["bandwidth"] else "memory",
                rel_error=times[v] * 1e6 / pred - 1))
        del tensors
    return dict(
        date_utc=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        cpu=cpu_model(), logical_cpus=os.cpu_count(), threads=threads, repeats=repeats,
        dtype="float32", python=platform.python_version(), torch=torch.__version__, numpy=numpy.__version__,
        platform=platform.platform(), git_commit=git_commit() or "unknown",
        load_average_before=[round(x, 2) for x in load_before],
        load_average_after=[round(x, 2) for x in os.getloadavg()],
        seconds=round(time.time() - t_start, 1), kernel_max_error=err,
        peak_flops=peaks["peak_flops"], bandwidth=peaks["bandwidth"], gemm_flops=gemm, softmax_rate=softmax,
        command="python benchmarks/decode_cpu.py " + " ".join(sys.argv[1:]),
        rows=rows)


def markdown(res: dict) -> str:
    """Human-readable summary of a results dict."""
    lines = [
        "# Decode step on CPU: the paper's Figure-5 shards (batch 1, fp32)",
        "",
        f"- date (UTC): {res['date_utc']}; {res['seconds']} s; commit {res['git_commit']}",
        f"- CPU: {res['cpu']} ({res['logical_cpus']} logical CPUs, {res['threads']} thread(s)); "
        f"load average before / after: {res['load_average_before']} / {res['load_average_after']}",
        f"- python {res['python']}, torch {res['torch']}, numpy {res['numpy']}; {res['platform']}",
        f"- measured: peak {res['peak_flops'] / 1e9:.1f} GFLOP/s (1024³ GEMM), bandwidth "
        f"{res['bandwidth'] / 1e9:.1f} GB/s (streaming read); per shard, GEMM GFLOP/s and softmax "
        "Mscores/s: " + ", ".join(f"{v} {res['gemm_flops'][v] / 1e9:.1f} / {res['softmax_rate'][v] / 1e6:.0f}"
                                  for v in res["gemm_flops"]),
        f"- best of {res['repeats']} interleaved runs ({res['repeats']} · 128 / K below 128K); produced by `{res['command'].strip()}`",
        "",
        "| shard | context (K) | measured ms (CPU time) | wall ms | model ms | error | GEMMs | peak-roofline ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in res["rows"]:
        lines.append(f"| {r['shard']} | {r['context_k']} | {r['measured_us'] / 1e3:.2f} | "
                     f"{r['wall_us'] / 1e3:.2f} | {r['predicted_us'] / 1e3:.2f} | {r['rel_error']:+.0%} | {r['bound']} | "
                     f"{r['predicted_peak_us'] / 1e3:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--contexts-k", default=",".join(map(str, DEFAULT_CONTEXTS_K)),
                    help="comma-separated context lengths in K (1024) tokens")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=7,
                    help="timed runs per shard and context (more below 128K), 2× for the machine rates")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "decode_cpu.json")
    a = ap.parse_args(argv)
    try:
        contexts = tuple(int(c) for c in a.contexts_k.split(","))
    except ValueError:
        ap.error(f"--contexts-k: comma-separated integers, got {a.contexts_k!r}")
    if any(c < 1 for c in contexts) or a.threads < 1 or a.repeats < 1:
        ap.error("--contexts-k, --threads and --repeats must be positive")
    res = run(contexts, a.threads, a.repeats)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1) + "\n")
    a.out.with_suffix(".md").write_text(markdown(res))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
