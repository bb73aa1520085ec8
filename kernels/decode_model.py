"""Decode latency of the paper's per-device shards: the bytes and FLOPs of one decode step, and a
roofline model of its time on any machine (a MODEL, not a measurement).

At batch 1 a decode step of one attention layer reads the whole KV cache once: for each of the
``H`` query heads of the shard it scores the new token against every cached key and sums the
values. Per step, over a context of ``S`` tokens (``e`` bytes per cache element):

- **bytes** ``B(S) = S · E · e`` with ``E`` the cache elements per token on the device
  (:attr:`DecodeShard.elems_per_token`; the query and the output, ``O(H · d)``, are left out);
- **FLOPs** ``F(S) = 2 · H · S · (D_k + D_v)``: one multiply-add (2 FLOPs) per head, cached token
  and channel for the scores ``q kᵀ`` (width ``D_k``) and for the weighted sum ``p v`` (width
  ``D_v``). GQA: ``D_k = D_v = d_h``. Latent family, by weight absorption (DeepSeek-V2, arXiv
  2405.04434, Sec. 2.1.2): the key is ``[c_j; k_r]`` (``D_k = w + d_r``) and the value the latent
  block itself (``D_v = w``). The softmax (``≈ 5 H S`` FLOPs) is left out.
- **roofline** (Williams, Waterman & Patterson 2009, "Roofline", CACM 52(4)):
  ``t(S) = max(F(S) / P, B(S) / W)`` with ``P`` the compute ceiling (FLOP/s) and ``W`` the
  memory bandwidth (bytes/s) of the machine. The arithmetic intensity ``F / B`` decides the bound:
  above ``P / W`` (the machine's balance) a shard is compute-bound, below it memory-bound.

:func:`lower_bound_us` is the memory term alone (``B / W``), the bound the paper's figure is about
(the MLRA paper, arXiv 2603.02188, decoding-speed experiment, Figure 5: decoding at batch 1 is
bound by the KV cache read).

Per-device shards of the paper's decode benchmark (its Figure 5; 64 query heads, d_h 128, RoPE 64;
elements per token per device as in :mod:`gtalib.model.kvcache`, paper Table 1):

=============  ==========  =====  ====================================  =============  ==========
shard          parallel    heads  cache per token                        elements       FLOPs / S
=============  ==========  =====  ====================================  =============  ==========
GQA            TP 8        8      1 KV head × (K 128 + V 128)           256  (2 d_h)   4,096
MLA            DP          64     latent 512 + RoPE key 64              576  (4.5 d_h) 139,264
GLA-2          TP 2        32     one latent block 256 + RoPE key 64    320  (2.5 d_h) 36,864
MLRA-4         TP 4        64     one latent block 128 + RoPE key 64    192  (1.5 d_h) 40,960
=============  ==========  =====  ====================================  =============  ==========

Arithmetic intensity in bf16 (FLOPs per byte): GQA 8, MLA 121, GLA-2 58, MLRA-4 107. The H100's
balance is 989 TFLOP/s / 3.35 TB/s ≈ 295 FLOP/byte, so on it every shard is memory-bound and the
ranking follows the bytes; a CPU's balance is a few FLOP/byte, so there the latent shards are
compute-bound and the ranking follows the FLOPs (GQA at TP 8 has 8 heads, the latent shards 32-64).

MLRA-4 at TP 4 shards by branch: device ``j`` holds latent block ``j`` and computes branch ``j`` for
all 64 heads; the branch sum ``Σ_b y_b W_O`` is done by the all-reduce (W_O is linear;
:mod:`gtalib.decode.tp`). This is the only split that gives the paper's 1.5 d_h per device. GLA-2 at TP 2
shards by head group (32 heads per block).

Context lengths are in binary K: "128K" is 131,072 tokens (an assumption; the paper's figure says
"K tokens"). Bandwidths and peaks: NVIDIA's H100 SXM5 and H200 SXM datasheets.
"""

from __future__ import annotations

from dataclasses import dataclass

#: HBM peak bandwidth in bytes/s (vendor datasheets, as quoted in docs/paper_values.md).
HBM_BANDWIDTH: dict[str, float] = {"H100": 3.35e12, "H200": 4.8e12}

#: Dense (no sparsity) bf16 tensor-core peak in FLOP/s: NVIDIA H100 SXM5 datasheet, 1,979 TFLOP/s
#: "with sparsity", half of it dense; the H200 has the same compute.
PEAK_FLOPS: dict[str, float] = {"H100": 989.4e12, "H200": 989.4e12}

#: Context lengths of the paper's decode figure, in K (= 1024) tokens.
PAPER_CONTEXTS_K: tuple[int, ...] = (128, 256, 512, 1024, 2048)


@dataclass(frozen=True)
class DecodeShard:
    """One device's share of a decode layer (batch 1).

    Attributes:
        name: label, e.g. ``"MLRA-4 (TP 4)"``.
        variant: canonical variant name (gtalib.model.config.VARIANTS).
        parallel: ``"TP 8"``, ``"DP"``, ...
        n_head: query heads computed on the device.
        n_kv_head: KV heads cached on the device (GQA); 1 for the latent family (MQA-style).
        head_dim: GQA K and V head width; 0 for the latent family.
        kv_lora_rank: latent width cached on the device (latent family); 0 for GQA.
        qk_rope_head_dim: width of the shared RoPE key (latent family); 0 for GQA.
    """

    name: str
    variant: str
    parallel: str
    n_head: int
    n_kv_head: int
    head_dim: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0

    @property
    def latent(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def key_width(self) -> int:
        """``D_k``: ``d_h`` (GQA) or latent block + RoPE key ``w + d_r`` (latent, absorbed)."""
        return self.kv_lora_rank + self.qk_rope_head_dim if self.latent else self.head_dim

    @property
    def value_width(self) -> int:
        """``D_v``: ``d_h`` (GQA) or the latent block ``w`` (latent, absorbed)."""
        return self.kv_lora_rank if self.latent else self.head_dim

    @property
    def flops_per_token(self) -> int:
        """Decode FLOPs per cached token: ``2 · H · (D_k + D_v)`` (module docstring)."""
        return 2 * self.n_head * (self.key_width + self.value_width)

    @property
    def elems_per_token(self) -> int:
        """Cache elements read per context token: ``2·Hkv·d_h`` (GQA) or ``d_c + d_r`` (latent)."""
        if self.latent:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.n_kv_head * self.head_dim


#: The paper's four decode shards (docs/paper_values.md, "Decoding speed"), keyed by variant.
PAPER_SHARDS: dict[str, DecodeShard] = {
    "gqa": DecodeShard("GQA (TP 8)", "gqa", "TP 8", n_head=8, n_kv_head=1, head_dim=128),
    "mla": DecodeShard("MLA (DP)", "mla", "DP", n_head=64, n_kv_head=1, kv_lora_rank=512, qk_rope_head_dim=64),
    "gla-2": DecodeShard("GLA-2 (TP 2)", "gla-2", "TP 2", n_head=32, n_kv_head=1, kv_lora_rank=256,
                         qk_rope_head_dim=64),
    "mlra-4": DecodeShard("MLRA-4 (TP 4)", "mlra-4", "TP 4", n_head=64, n_kv_head=1, kv_lora_rank=128,
                          qk_rope_head_dim=64),
}

#: Paper's measured latency (µs, one H100, one layer, batch 1), read off its figure
#: (docs/paper_values.md).
PAPER_LATENCY_US: dict[str, tuple[float, ...]] = {
    "gqa": (50.8, 75.8, 120.4, 208.4, 386.5),
    "mla": (136.0, 188.6, 293.0, 490.7, 874.2),
    "gla-2": (63.5, 93.0, 152.3, 267.1, 493.4),
    "mlra-4": (48.4, 68.4, 103.5, 173.2, 308.2),
}


def shard(variant: str) -> DecodeShard:
    """The paper shard of ``variant``; ``KeyError`` listing the allowed names otherwise."""
    if variant not in PAPER_SHARDS:
        raise KeyError(f"variant: {variant!r} has no paper decode shard; allowed: {', '.join(PAPER_SHARDS)}")
    return PAPER_SHARDS[variant]


def kv_bytes(s: DecodeShard, context: int, bytes_per_elem: int = 2) -> int:
    """Bytes of KV cache one decode step reads: ``context · elems_per_token · bytes_per_elem``.

    ``bytes_per_elem`` is 2 for the bf16/fp16 caches of the paper. Raises ``ValueError`` for a
    context < 1 or a non-positive element size.
    """
    if context < 1:
        raise ValueError(f"context: must be ≥ 1 token, got {context}")
    if bytes_per_elem < 1:
        raise ValueError(f"bytes_per_elem: must be ≥ 1, got {bytes_per_elem}")
    return int(context) * s.elems_per_token * int(bytes_per_elem)


def _rate(table: dict[str, float], gpu: str | float, what: str, unit: str) -> float:
    """``table[gpu]`` for a GPU name, or the positive number ``gpu`` itself."""
    if isinstance(gpu, str):
        if gpu not in table:
            raise KeyError(f"gpu: {gpu!r} unknown; allowed: {', '.join(table)} or a number in {unit}")
        return table[gpu]
    if not gpu > 0:
        raise ValueError(f"gpu: {what} must be positive {unit}, got {gpu}")
    return float(gpu)


def bandwidth(gpu: str | float) -> float:
    """Bytes/s for a GPU name in :data:`HBM_BANDWIDTH` or a number given directly."""
    return _rate(HBM_BANDWIDTH, gpu, "bandwidth", "bytes/s")


def lower_bound_us(s: DecodeShard, context: int, gpu: str | float = "H100", bytes_per_elem: int = 2) -> float:
    """Memory-bound lower bound on latency in µs: ``kv_bytes / bandwidth · 1e6`` (a model)."""
    return kv_bytes(s, context, bytes_per_elem) / bandwidth(gpu) * 1e6


def step_flops(s: DecodeShard, context: int) -> int:
    """FLOPs of one decode step over ``context`` cached tokens: ``2 · H · S · (D_k + D_v)``.

    Raises ``ValueError`` for a context < 1.
    """
    if context < 1:
        raise ValueError(f"context: must be ≥ 1 token, got {context}")
    return int(context) * s.flops_per_token


def peak_flops(gpu: str | float) -> float:
    """FLOP/s for a GPU name in :data:`PEAK_FLOPS` or a number given directly."""
    return _rate(PEAK_FLOPS, gpu, "peak", "FLOP/s")


def roofline_us(s: DecodeShard, context: int, flops_per_s: str | float = "H100",
                bytes_per_s: str | float = "H100", bytes_per_elem: int = 2) -> float:
    """Roofline time of one decode step in µs: ``max(F / P, B / W) · 1e6`` (module docstring).

    Args:
        flops_per_s: compute ceiling ``P``, a GPU name of :data:`PEAK_FLOPS` or FLOP/s.
        bytes_per_s: bandwidth ``W``, a GPU name of :data:`HBM_BANDWIDTH` or bytes/s.
        bytes_per_elem: cache element size (2: bf16, the paper's; 4: fp32).
    Raises:
        ValueError / KeyError: as :func:`kv_bytes`, :func:`peak_flops`, :func:`bandwidth`.
    """
    t_compute = step_flops(s, context) / peak_flops(flops_per_s)
    t_memory = kv_bytes(s, context, bytes_per_elem) / bandwidth(bytes_per_s)
    return max(t_compute, t_memory) * 1e6


def model_table(gpus: tuple[str, ...] = ("H100", "H200"), contexts_k: tuple[int, ...] = PAPER_CONTEXTS_K):
    """Long-format pandas DataFrame of the model, one row per (shard, context, gpu), bf16 caches.

    Columns: ``variant, shard, parallel, n_head, elems_per_token, context_k, context, kv_bytes,
    flops, gpu, bandwidth, peak_flops, memory_us`` (:func:`lower_bound_us`), ``latency_us``
    (:func:`roofline_us` at the GPU's datasheet peaks), ``paper_latency_us`` (the paper's H100
    figure value where the context is one of :data:`PAPER_CONTEXTS_K`, else NaN) and
    ``source = "model"``.
    """
    import pandas as pd

    rows = []
    for v, s in PAPER_SHARDS.items():
        for ck in contexts_k:
            paper = PAPER_LATENCY_US[v][PAPER_CONTEXTS_K.index(ck)] if ck in PAPER_CONTEXTS_K else float("nan")
            for gpu in gpus:
                rows.append(dict(
                    variant=v, shard=s.name, parallel=s.parallel, n_head=s.n_head,
                    elems_per_token=s.elems_per_token, context_k=ck, context=ck * 1024,
                    kv_bytes=kv_bytes(s, ck * 1024), flops=step_flops(s, ck * 1024), gpu=gpu,
                    bandwidth=bandwidth(gpu), peak_flops=peak_flops(gpu),
                    memory_us=lower_bound_us(s, ck * 1024, gpu),
                    latency_us=roofline_us(s, ck * 1024, gpu, gpu), paper_latency_us=paper,
                    source="model"))
    return pd.DataFrame(rows)


def paper_table():
    """The paper's measured decode latencies (H100) as a long pandas DataFrame:
    ``variant, shard, context_k, context, latency_us, source = "paper (H100)"``."""
    import pandas as pd

    return pd.DataFrame([
        dict(variant=v, shard=PAPER_SHARDS[v].name, context_k=ck, context=ck * 1024, latency_us=us,
             source="paper (H100)")
        for v, lat in PAPER_LATENCY_US.items() for ck, us in zip(PAPER_CONTEXTS_K, lat)
    ])


def cpu_results_path():
    """Where ``benchmarks/decode_cpu.py`` records its results: ``benchmarks/decode_cpu.json`` of
    this checkout."""
    from pathlib import Path

    return Path(__file__).resolve().parents[1] / "benchmarks" / "decode_cpu.json"


def load_cpu_results(path=None, remeasure: bool = False) -> dict:
    """The recorded CPU decode measurement (``benchmarks/decode_cpu.py``; default
    :func:`cpu_results_path`): a dict with the provenance (``date_utc, cpu, threads, torch, ...``),
    the machine rates (``peak_flops``, ``bandwidth``, per-shard ``gemm_flops``, ``softmax_rate``)
    and ``rows`` (one per shard and context: ``measured_us``, ``predicted_us``, ``rel_error``, ...).

    With ``remeasure`` the benchmark runs first (default ladder, about two minutes on one core),
    writing to ``path`` or, without one, to a temporary file (the recorded one is left alone).

    Raises:
        FileNotFoundError: nothing recorded at ``path`` (the message gives the command that
            records it).
        subprocess.CalledProcessError: the benchmark failed (``remeasure``).
    """
    import json
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    if remeasure:
        path = Path(path) if path is not None else Path(tempfile.mkdtemp()) / "decode_cpu.json"
        subprocess.run([sys.executable, str(cpu_results_path().parent / "decode_cpu.py"), "--out", str(path)],
                       check=True, capture_output=True)
    path = Path(path) if path is not None else cpu_results_path()
    if not path.exists():
        raise FileNotFoundError(f"no CPU decode results at {path}: record them with "
                                f"`python benchmarks/decode_cpu.py --out {path}`")
    return json.loads(path.read_text())


def latency_ratios(frame, value: str = "latency_us"):
    """MLA / MLRA-4 and GQA / MLRA-4 latency ratios per context of a long table with columns
    ``variant, context_k`` and ``value``: a DataFrame indexed by ``context_k`` with columns
    ``MLA / MLRA-4`` and ``GQA / MLRA-4``."""
    import pandas as pd

    wide = frame.pivot_table(index="context_k", columns="variant", values=value)
    return pd.DataFrame({"MLA / MLRA-4": wide["mla"] / wide["mlra-4"],
                         "GQA / MLRA-4": wide["gqa"] / wide["mlra-4"]})
