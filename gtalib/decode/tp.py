"""Tensor-parallel (TP) decoding for every variant: shard a single-process :class:`~gtalib.model.gpt.GPT`
for one rank, decode with ``torch.distributed`` (gloo on CPU, NCCL on GPU), and check the result
against the single-process model.

How a layer is split (Megatron-style: Shoeybi et al. 2019, arXiv 1909.08053, Sec. 3; the split of
each variant is the MLRA paper's Table-1 setting, arXiv 2603.02188, and the rules of
:mod:`gtalib.model.kvcache`):

- The query-side projections are **column-parallel**: a rank computes only its query heads (or its
  latent blocks); the output projection ``W_O`` is **row-parallel**: the rank multiplies its heads'
  slice of ``W_O`` and one ``all_reduce(SUM)`` per layer completes ``out = Σ_ranks y_r W_O[r]``. The
  output gate ``g = sigmoid(x W_g)`` is element-wise per head and channel, so its columns go with
  the heads (``g ⊙ Σ_b y_b = Σ_b g ⊙ y_b``).
- MHA / GQA / GTA: each rank holds the KV heads (GTA: tied states) its query heads read; when the
  degree exceeds the KV heads, a KV head is replicated on every rank whose heads read it. MQA and
  MFA: the single KV head is replicated. GTA's one RoPE key is replicated.
- TPA: the head factors ``A_q, A_k, A_v`` split with the heads; the token factors ``B_q, B_k, B_v``
  are shared by all heads and replicated.
- Latent family (MLA, GLA-2/4, MLRA-2/4): a rank serves a set of (branch, head group) pairs, each
  reading one latent block, plus the replicated RoPE key. The degree is spent first on head groups
  (GLA, MLRA-2), then on branches (MLRA-4, MLRA-2 beyond TP 2: the branch sum ``Σ_b y_b W_O`` is
  completed by the same all-reduce, since ``W_O`` is linear), then on heads within a pair (MLA at
  any degree: its single latent is replicated). The query down-projection ``W_DQ`` and its norm
  are replicated (every rank needs the whole ``c_q``).
- Embedding, MLP, norms and the LM head are replicated: only attention is split (the paper's
  Table 1 is about the attention cache); the MLP is left whole so that the all-reduce per layer is
  the attention's alone.

Degrees (:func:`allowed_tp_degrees`): ``t`` divides ``n_head``; where KV heads are split, ``t``
divides them or is a multiple of them (the paper's GQA, 6 KV heads of 24 query heads: not TP 4 or
8); in the latent family ``t`` divides the head groups or is a multiple of them, and likewise for
the branches and then the heads of a (branch, group) pair (MLRA-2, 2 groups: not TP 3; MLRA-2 at
TP 8 is allowed, each rank serving half the heads of one pair, as :mod:`gtalib.model.kvcache` counts).
Any other degree raises ``ValueError`` naming the variant, the degree and the allowed degrees.

Each rank's attention is the variant's own module class with narrowed weights and head counts
(:func:`shard_attention`), so decoding runs the very same forward and cache code as the
single-process model. The cache a rank allocates holds :func:`gtalib.model.kvcache.kv_elems_per_device`
elements per token and layer (tested at the paper's Table-1 shapes).

All-reduce traffic per decoded token: one ``(B, T, d_model)`` tensor per layer, i.e.
``n_layer · d_model · bytes_per_element`` bytes of payload per token (:func:`allreduce_bytes_per_token`);
a ring all-reduce moves ``2 (t − 1) / t`` times the payload in and out of each rank (Patarasuk &
Yuan 2009, "Bandwidth optimal all-reduce algorithms").

Usage::

    gtalib decode --variant mlra-4 --tp 4          # spawn 4 gloo ranks, compare, report
    # or, one rank per process under torchrun:
    torchrun --nproc-per-node 4 -m gtalib decode --variant mlra-4
"""

from __future__ import annotations

import copy
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from gtalib.model.attention.base import Attention
from gtalib.model.attention.dense import DenseAttention
from gtalib.model.attention.gta import GTAttention
from gtalib.model.attention.latent import LatentAttention
from gtalib.model.attention.mfa import MFAttention
from gtalib.model.attention.tpa import TPAttention
from gtalib.model.config import LATENT_LAYOUT, ModelConfig
from gtalib.model.gpt import GPT
from gtalib.model.user_variants import is_user_variant


# ---------------------------------------------------------------------------------------------
# Which part of a layer a rank owns
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ShardPlan:
    """What rank ``rank`` of ``tp`` computes in one attention layer (global indices).

    Attributes:
        heads: query heads of the rank, in the order of the shard's head axis.
        kv_heads: KV heads (MHA/GQA/MQA/MFA) or tied-state groups (GTA) it caches; ``()`` otherwise.
        blocks: latent blocks it caches, in the shard's block order (latent family; else ``()``).
        layout: the shard's ``(n_blocks, n_branches, n_groups)`` (latent family; else ``None``).
        heads_per_group: query heads per (branch, head group) pair on the shard (latent family).
    """

    heads: tuple[int, ...]
    kv_heads: tuple[int, ...] = ()
    blocks: tuple[int, ...] = ()
    layout: tuple[int, int, int] | None = None
    heads_per_group: int = 0


def _refuse(cfg: ModelConfig, tp, why: str) -> ValueError:
    allowed = allowed_tp_degrees(cfg)
    return ValueError(f"tp={tp!r} is not a tensor-parallel degree variant {cfg.variant!r} can take "
                      f"(n_head={cfg.n_head}): {why}; allowed degrees: {', '.join(map(str, allowed))}")


def _plan(cfg: ModelConfig, tp: int, rank: int) -> ShardPlan | str:
    """The rank's :class:`ShardPlan`, or a string saying why the degree cannot be taken."""
    H, v = cfg.n_head, cfg.variant
    if H % tp:
        return f"tp must divide n_head={H}"
    h_loc = H // tp
    heads = tuple(range(rank * h_loc, (rank + 1) * h_loc))
    if v in LATENT_LAYOUT:
        nb, NB, G = LATENT_LAYOUT[v]
        hpg = H // G  # heads fed by one block within a branch
        # Spend the degree on head groups, then branches, then heads within a (branch, group) pair.
        if tp <= G:
            if G % tp:
                return f"tp must divide the {G} head groups, or be a multiple of them"
            t_g, t_b, t_h = tp, 1, 1
        else:
            if tp % G:
                return f"tp must divide the {G} head groups, or be a multiple of them"
            rest = tp // G
            if rest <= NB:
                if NB % rest:
                    return f"tp / {G} head groups must divide the {NB} branches, or be a multiple of them"
                t_g, t_b, t_h = G, rest, 1
            else:
                if rest % NB or hpg % (rest // NB):
                    return (f"tp / ({G} head groups · {NB} branches) must divide the {hpg} heads of a "
                            f"group")
                t_g, t_b, t_h = G, NB, rest // NB
        i_h = rank % t_h  # rank = (i_g · t_b + i_b) · t_h + i_h
        i_b = (rank // t_h) % t_b
        i_g = rank // (t_h * t_b)
        G_loc, NB_loc, hpg_loc = G // t_g, NB // t_b, hpg // t_h
        groups = range(i_g * G_loc, (i_g + 1) * G_loc)
        branches = range(i_b * NB_loc, (i_b + 1) * NB_loc)
        heads = tuple(g * hpg + i_h * hpg_loc + i for g in groups for i in range(hpg_loc))
        blocks = tuple(b * G + g for b in branches for g in groups)  # shard block b'·G' + j'
        return ShardPlan(heads, blocks=blocks, layout=(NB_loc * G_loc, NB_loc, G_loc),
                         heads_per_group=hpg_loc)
    if v in ("mha", "mqa", "gqa", "mfa", "gta"):
        Hkv = cfg.n_kv_head
        g = H // Hkv  # query heads per KV head
        if Hkv % tp == 0:
            kv = tuple(range(rank * Hkv // tp, (rank + 1) * Hkv // tp))
        elif tp % Hkv == 0:
            kv = (heads[0] // g,)  # replicated: every head of this rank reads the same KV head
        else:
            return f"tp must divide the {Hkv} KV heads, or be a multiple of them"
        return ShardPlan(heads, kv_heads=kv)
    if v == "tpa":
        return ShardPlan(heads)
    if is_user_variant(v):
        return ShardPlan(heads) if tp == 1 else "a user's variant has no tensor-parallel rule"
    raise KeyError(f"no tensor-parallel rule for variant {v!r}")


def allowed_tp_degrees(cfg: ModelConfig) -> tuple[int, ...]:
    """Every TP degree ``cfg``'s attention can be split into (divisors of ``n_head`` that the
    variant's rule accepts, see the module docstring), ascending."""
    c = cfg.resolved()
    return tuple(t for t in range(1, c.n_head + 1)
                 if c.n_head % t == 0 and isinstance(_plan(c, t, 0), ShardPlan))


def shard_plan(cfg: ModelConfig, tp: int, rank: int) -> ShardPlan:
    """What rank ``rank`` of a TP group of ``tp`` computes (see :class:`ShardPlan`).

    Raises:
        ValueError: ``tp`` not a positive integer the variant can take (the message names the
            variant, the degree and the allowed degrees), or ``rank`` not in ``[0, tp)``.
    """
    c = cfg.resolved()
    if not isinstance(tp, int) or isinstance(tp, bool) or tp <= 0:
        raise _refuse(c, tp, "tp must be a positive integer")
    if not isinstance(rank, int) or not 0 <= rank < tp:
        raise ValueError(f"rank must be an integer in [0, tp={tp}), got {rank!r}")
    plan = _plan(c, tp, rank)
    if isinstance(plan, str):
        raise _refuse(c, tp, plan)
    return plan


# ---------------------------------------------------------------------------------------------
# Narrowing a module's weights
# ---------------------------------------------------------------------------------------------

def _rows(unit: int, index) -> torch.Tensor:
    """Row indices of the units ``index`` when each unit spans ``unit`` consecutive rows."""
    return torch.tensor([u * unit + i for u in index for i in range(unit)], dtype=torch.long)


def _linear(weight: torch.Tensor) -> nn.Linear:
    """A bias-free ``nn.Linear`` holding a copy of ``weight (out, in)``."""
    lin = nn.Linear(weight.shape[1], weight.shape[0], bias=False, device=weight.device,
                    dtype=weight.dtype)
    with torch.no_grad():
        lin.weight.copy_(weight)
    return lin


def _pick(lin: nn.Linear, unit: int, index, dim: int = 0) -> nn.Linear:
    """``lin`` keeping only the output rows (``dim=0``, column-parallel) or input columns
    (``dim=1``, row-parallel) of the units ``index``, each ``unit`` wide."""
    rows = _rows(unit, index).to(lin.weight.device)
    return _linear(lin.weight.detach().index_select(dim, rows))


def shard_attention(attn: Attention, tp: int, rank: int) -> Attention:
    """Rank ``rank``'s share of the attention layer ``attn`` under TP degree ``tp``.

    The result is a copy of ``attn`` (same class, same forward and cache code) with the weights of
    the rank's heads / KV heads / latent blocks only (rules in the module docstring). Its output
    ``(B, T, d_model)`` is a partial sum: the sum over ranks equals ``attn``'s output. Its cache
    (``new_cache``) holds :func:`gtalib.model.kvcache.kv_elems_per_device` elements per token.

    Works on the meta device (no values are read). ``tp=1`` gives an equal copy.

    Raises:
        ValueError: as :func:`shard_plan`.
    """
    cfg = attn.cfg
    p = shard_plan(cfg, tp, rank)
    s = copy.deepcopy(attn)
    if is_user_variant(cfg.variant):  # tp=1 only (shard_plan): the copy is the whole layer
        return s
    H_loc = len(p.heads)
    if isinstance(attn, LatentAttention):
        qk = attn.d_n + attn.d_r
        s.wq_b = _pick(attn.wq_b, qk, p.heads)
        # W_DKV rows: the rank's latent blocks, then the shared RoPE key (replicated).
        w, d_c = attn.block_width, attn.d_c
        rows = torch.cat([_rows(w, p.blocks), torch.arange(d_c, d_c + attn.d_r)])
        s.wkv_a = _linear(attn.wkv_a.weight.detach().index_select(0, rows.to(attn.wkv_a.weight.device)))
        s.kv_norms = nn.ModuleList(copy.deepcopy(attn.kv_norms[k]) for k in p.blocks)
        W = attn.wkv_b.weight.detach().view(attn.n_blocks, attn.heads_per_group, -1, w)  # (nb, Hg, d_n+d_v, w)
        first = p.heads[0] % attn.heads_per_group  # the rank's heads start here within each group
        W = W[list(p.blocks), first:first + p.heads_per_group]  # (nb', Hg', d_n+d_v, w)
        s.wkv_b = _linear(W.reshape(-1, w))
        s.n_blocks, s.n_branches, s.n_groups = p.layout
        s.heads_per_group, s.n_head, s.d_c = p.heads_per_group, H_loc, len(p.blocks) * w
        # alpha_o = 1/sqrt(n_branches) of the whole model stays (copied): the shard's partial
        # branch sums add up to the full α_o Σ_b y_b after the all-reduce.
        d_v = attn.d_v
    elif isinstance(attn, (DenseAttention, GTAttention)):
        D = attn.dim
        if isinstance(attn, MFAttention):  # low-rank query: W_qa and its norm replicated
            s.q_b = _pick(attn.q_b, D, p.heads)
        else:
            s.q_proj = _pick(attn.q_proj, D, p.heads)
        if isinstance(attn, GTAttention):
            s.kv_proj = _pick(attn.kv_proj, D, p.kv_heads)  # kr_proj (one RoPE key) replicated
        else:
            s.k_proj = _pick(attn.k_proj, D, p.kv_heads)
            s.v_proj = _pick(attn.v_proj, D, p.kv_heads)
        s.n_head, s.n_kv_head = H_loc, len(p.kv_heads)
        d_v = D
    elif isinstance(attn, TPAttention):
        s.a_q = _pick(attn.a_q, attn.rq, p.heads)  # B_q, B_k, B_v replicated
        s.a_k = _pick(attn.a_k, attn.r, p.heads)
        s.a_v = _pick(attn.a_v, attn.r, p.heads)
        s.n_head = H_loc
        d_v = attn.dim
    else:
        raise KeyError(f"no tensor-parallel rule for {type(attn).__name__}")
    s.o_proj = _pick(attn.o_proj, d_v, p.heads, dim=1)  # row-parallel W_O
    if attn.g_proj is not None:
        s.g_proj = _pick(attn.g_proj, d_v, p.heads)  # the gate's columns go with the heads
    return s


# ---------------------------------------------------------------------------------------------
# A rank's model
# ---------------------------------------------------------------------------------------------

class ParallelAttention(nn.Module):
    """One rank's attention layer: the shard's partial output, summed over the group by
    ``all_reduce``. Same contract as :class:`~gtalib.model.attention.base.Attention`:
    ``forward(x (B, T, d_model), cache=None) -> (B, T, d_model)``, ``new_cache``.

    Attributes:
        shard: the rank's module from :func:`shard_attention`.
        reduced_bytes: payload bytes passed to ``all_reduce`` so far (0 when the group has one
            rank: nothing is reduced).
    """

    def __init__(self, shard: Attention, group=None):
        super().__init__()
        self.shard, self.group, self.reduced_bytes = shard, group, 0

    def forward(self, x: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        y = self.shard(x, cache)  # (B, T, d_model), this rank's heads only
        if dist.is_initialized() and dist.get_world_size(self.group) > 1:
            dist.all_reduce(y, op=dist.ReduceOp.SUM, group=self.group)
            self.reduced_bytes += y.numel() * y.element_size()
        return y

    def new_cache(self, batch_size: int, max_len: int, device=None, dtype=None) -> dict:
        """The shard's cache (only the rank's KV heads / latent blocks)."""
        return self.shard.new_cache(batch_size, max_len, device=device, dtype=dtype)

    def kv_elems_per_token(self) -> int:
        """Cache elements per token this rank holds for the layer."""
        return self.shard.kv_elems_per_token()


def shard_model(model: GPT, tp: int, rank: int, group=None) -> GPT:
    """A copy of ``model`` for rank ``rank``: every attention layer replaced by a
    :class:`ParallelAttention` over its shard; everything else replicated. Its ``forward_cached``
    returns the single-process logits when all ``tp`` ranks of ``group`` call it together.

    Raises:
        ValueError: as :func:`shard_plan`.
    """
    shards = [shard_attention(b.attn, tp, rank) for b in model.blocks]  # raises before copying
    attns = [b.attn for b in model.blocks]
    for b in model.blocks:  # copy everything but the full attention layers
        b.attn = None
    try:
        out = copy.deepcopy(model)
    finally:
        for b, a in zip(model.blocks, attns):
            b.attn = a
    for b, s in zip(out.blocks, shards):
        b.attn = ParallelAttention(s, group)
    return out


def allreduce_bytes_per_token(cfg: ModelConfig, tp: int, dtype: torch.dtype = torch.float32) -> int:
    """All-reduce payload per token: ``n_layer · d_model · bytes`` for ``tp > 1`` (one reduce of
    the attention output per layer), 0 for ``tp = 1``. A ring all-reduce moves
    ``2 (tp − 1) / tp`` times this in and out of each rank."""
    if tp == 1:
        return 0
    return cfg.n_layer * cfg.d_model * torch.empty((), dtype=dtype).element_size()


# ---------------------------------------------------------------------------------------------
# Running it: spawned ranks (or torchrun) against the single-process model
# ---------------------------------------------------------------------------------------------

def rank_device(backend: str, rank: int, device: str = "cpu") -> torch.device:
    """The rank's device: its own GPU under NCCL; ``device`` (``"cpu"``, or ``"cuda"``: the
    current GPU, shared by every rank) under gloo, which reduces CPU and CUDA tensors alike."""
    if backend == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device(device)


def decode_on_rank(models: dict[str, GPT], tokens: torch.Tensor, prompt_len: int, rank: int,
                   world: int, device=None) -> dict:
    """Prefill ``tokens[:, :prompt_len]`` then decode the rest one token at a time (teacher forced)
    on this rank, for each model. Every rank of the (initialised) default group must call it.

    Returns ``{name: {"logits": (B, T, vocab) fp32 on CPU, "kv_elems_per_token": [per layer],
    "reduced_bytes": int}}``.
    """
    out = {}
    device = torch.device("cpu") if device is None else device
    for name, model in models.items():
        m = shard_model(model, world, rank).to(device).eval()
        tok = tokens.to(device)
        B, T = tok.shape
        cache = m.new_cache(B, T)
        with torch.no_grad():
            logits = [m.forward_cached(tok[:, :prompt_len], cache)]
            for t in range(prompt_len, T):
                logits.append(m.forward_cached(tok[:, t:t + 1], cache))
        elems = [sum(v.numel() for v in lc.values() if torch.is_tensor(v)) // (B * T)
                 for lc in cache["layers"]]
        out[name] = dict(logits=torch.cat(logits, 1).cpu(), kv_elems_per_token=elems,
                         reduced_bytes=sum(b.attn.reduced_bytes for b in m.blocks))
    return out


def _spawned(rank: int, world: int, init_method: str, backend: str, workdir: str, device: str) -> None:
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        job = torch.load(Path(workdir) / "job.pt", weights_only=False)
        res = decode_on_rank(job["models"], job["tokens"], job["prompt_len"], rank, world,
                             rank_device(backend, rank, device))
        torch.save(res, Path(workdir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def spawn_decode(models: dict[str, GPT], tokens: torch.Tensor, prompt_len: int, tp: int,
                 backend: str = "gloo", workdir: str | os.PathLike | None = None,
                 device: str = "cpu") -> list[dict]:
    """Run :func:`decode_on_rank` on ``tp`` freshly spawned processes (``torch.multiprocessing``)
    joined by ``torch.distributed`` (``backend`` gloo on CPU, nccl with one GPU per rank;
    rendezvous through a file in ``workdir``). Returns the per-rank results, rank order.

    ``device="cuda"`` with gloo puts every rank on the current GPU (several ranks on one GPU,
    which NCCL refuses); NCCL always uses GPU ``rank``.

    Args:
        models: name → single-process :class:`GPT` (pickled to the ranks through ``workdir``).
        tokens: ``(B, T)`` token ids; ``prompt_len`` of them are prefilled, the rest decoded.
    Raises:
        ValueError: a degree some model cannot take (before anything is spawned); ``prompt_len``
            not in ``[1, T]``; ``backend`` not gloo/nccl.
    """
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' (CPU) or 'nccl' (GPU), got {backend!r}")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if not 1 <= prompt_len <= tokens.shape[1]:
        raise ValueError(f"prompt_len must be in [1, {tokens.shape[1]}], got {prompt_len}")
    for m in models.values():
        shard_plan(m.cfg, tp, 0)
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        torch.save(dict(models=models, tokens=tokens, prompt_len=prompt_len), Path(tmp) / "job.pt")
        init = (Path(tmp) / "rendezvous").resolve().as_uri()
        mp.spawn(_spawned, args=(tp, init, backend, tmp, device), nprocs=tp, join=True)
        return [torch.load(Path(tmp) / f"rank{r}.pt", weights_only=False) for r in range(tp)]


def reference_decode(model: GPT, tokens: torch.Tensor, prompt_len: int) -> torch.Tensor:
    """The single-process logits ``(B, T, vocab)`` of the same prefill + teacher-forced decode."""
    cache = model.new_cache(tokens.shape[0], tokens.shape[1])
    with torch.no_grad():
        out = [model.forward_cached(tokens[:, :prompt_len], cache)]
        out += [model.forward_cached(tokens[:, t:t + 1], cache) for t in range(prompt_len, tokens.shape[1])]
    return torch.cat(out, 1)
