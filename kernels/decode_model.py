"""Analytic memory-bound model of decode latency: a MODEL, not a measurement.

At batch 1 a decode step of one attention layer reads the whole KV cache once and does little
arithmetic per byte, so its latency is bounded below by ``bytes of cache read / HBM bandwidth``
(docs/paper_values.md, "Physical limits").
The model counts only the cache (the query, the output and the launch overhead are left out, so
real kernels are slower, most visibly at short context).

Per-device shards of the paper's decode benchmark (docs/paper_values.md; 64 query heads, d_h 128,
RoPE 64; elements per token per device as in docs/variants.md, "KV cache per device under tensor
parallelism"):

=============  ==========  =====  ====================================  =============
shard          parallel    heads  cache per token                        elements
=============  ==========  =====  ====================================  =============
GQA            TP 8        8      1 KV head × (K 128 + V 128)           256  (2 d_h)
MLA            DP          64     latent 512 + RoPE key 64              576  (4.5 d_h)
GLA-2          TP 2        32     one latent block 256 + RoPE key 64    320  (2.5 d_h)
MLRA-4         TP 4        64     one latent block 128 + RoPE key 64    192  (1.5 d_h)
=============  ==========  =====  ====================================  =============

MLRA-4 at TP 4 shards by branch: device ``j`` holds latent block ``j`` and computes branch ``j`` for
all 64 heads; the branch sum ``Σ_b y_b W_O`` is done by the all-reduce (W_O is linear). This is the
only split that gives the paper's 1.5 d_h per device. GLA-2 at TP 2 shards by head group (32 heads
per block).

Context lengths are in binary K: "128K" is 131,072 tokens (an assumption; the paper's figure says
"K tokens"). Bandwidths: the vendor datasheets' HBM peaks (docs/paper_values.md).
"""

from __future__ import annotations

from dataclasses import dataclass

#: HBM peak bandwidth in bytes/s (vendor datasheets, as quoted in docs/paper_values.md).
HBM_BANDWIDTH: dict[str, float] = {"H100": 3.35e12, "H200": 4.8e12}

#: Context lengths of the paper's decode figure, in K (= 1024) tokens.
PAPER_CONTEXTS_K: tuple[int, ...] = (128, 256, 512, 1024, 2048)


@dataclass(frozen=True)
class DecodeShard:
    """One device's share of a decode layer (batch 1).

    Attributes:
        name: label, e.g. ``"MLRA-4 (TP 4)"``.
        variant: canonical variant name (gtalib.config.VARIANTS).
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


def bandwidth(gpu: str | float) -> float:
    """Bytes/s for a GPU name in :data:`HBM_BANDWIDTH` or a number given directly."""
    if isinstance(gpu, str):
        if gpu not in HBM_BANDWIDTH:
            raise KeyError(f"gpu: {gpu!r} unknown; allowed: {', '.join(HBM_BANDWIDTH)} or a number in bytes/s")
        return HBM_BANDWIDTH[gpu]
    if not gpu > 0:
        raise ValueError(f"gpu: bandwidth must be positive bytes/s, got {gpu}")
    return float(gpu)


def lower_bound_us(s: DecodeShard, context: int, gpu: str | float = "H100", bytes_per_elem: int = 2) -> float:
    """Memory-bound lower bound on latency in µs: ``kv_bytes / bandwidth · 1e6`` (a model)."""
    return kv_bytes(s, context, bytes_per_elem) / bandwidth(gpu) * 1e6


def model_table(gpus: tuple[str, ...] = ("H100", "H200"), contexts_k: tuple[int, ...] = PAPER_CONTEXTS_K):
    """Long-format pandas DataFrame of the model, one row per (shard, context, gpu).

    Columns: ``variant, shard, parallel, n_head, elems_per_token, context_k, context, kv_bytes,
    gpu, bandwidth, latency_us, paper_latency_us`` (the paper's H100 figure value where the context
    is one of :data:`PAPER_CONTEXTS_K`, else NaN) and ``source = "model"``.
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
                    kv_bytes=kv_bytes(s, ck * 1024), gpu=gpu, bandwidth=bandwidth(gpu),
                    latency_us=lower_bound_us(s, ck * 1024, gpu), paper_latency_us=paper,
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
