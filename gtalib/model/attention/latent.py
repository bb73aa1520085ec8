"""The latent attention family: MLA, GLA-2, GLA-4, MLRA-2, MLRA-4 as one module.

Sources: MLA (DeepSeek-V2, arXiv 2405.04434, Sec. 2.1), GLA (Zadouri et al. 2025, arXiv
2505.21487), MLRA (Liu et al., arXiv 2603.02188). All five variants share one data path
(docs/variants.md, "The eleven variants"; MLRA paper Sec. 3-4) and differ only in three numbers from
:data:`gtalib.model.config.LATENT_LAYOUT`:

- ``n_blocks``: the KV latent ``c`` (width ``d_c``) is split into blocks of width
  ``w = d_c / n_blocks``, each with its own RMSNorm and scale ``α_kv = sqrt(d_model / w)``;
- ``n_branches``: independent softmax attentions whose outputs are summed outside the softmax,
  ``y = α_o Σ_b y_b`` with ``α_o = 1 / sqrt(n_branches)``;
- ``n_groups = n_blocks / n_branches``: within a branch, the heads are split into ``n_groups``
  contiguous groups; group ``j`` of branch ``b`` is up-projected from block ``b·n_groups + j`` only.

=========  ========  ==========  ========  ===============================================
variant    blocks    branches    groups    head ``h`` of branch ``b`` reads block
=========  ========  ==========  ========  ===============================================
MLA        1         1           1         0
GLA-2      2         1           2         ``h // (H/2)``
GLA-4      4         1           4         ``h // (H/4)``
MLRA-2     4         2           2         ``2b + h // (H/2)``
MLRA-4     4         4           1         ``b``
=========  ========  ==========  ========  ===============================================

Per token (``x̃`` the block input after the pre-attention RMSNorm, shapes ``(B, T, ·)``)::

    c_q        = α_q · RMSNorm(x̃ W_DQ)                         α_q = sqrt(d_model / d_q)
    [q_n; q_r] = c_q W_UQ               per head (d_n + d_r),  q_r ← RoPE(q_r)
    [c; k_r]   = x̃ W_DKV                (d_c + d_r),           k_r ← RoPE(k_r), one key for all heads
    c_j        = α_kv · RMSNorm_j(c[j])  per block j           α_kv = sqrt(d_model / w)
    [k_n; v]   = c_{blk(b,h)} W_UKV[blk(b,h), h]               per branch b and head h
    y_b        = softmax(τ [q_n; q_r]·[k_n; k_r] + causal) v   τ = 1/sqrt(d_n + d_r)
    out        = (gate ⊙ α_o Σ_b y_b) W_O

The RoPE key is never normalised or scaled. ``latent_scale=False`` sets α_q = α_kv = α_o = 1.

Decoding with a cache stores only the normed-and-scaled latent blocks ``(B, S, d_c)`` and the
rotated RoPE key ``(B, S, d_r)``, and attends by weight absorption (DeepSeek-V2, arXiv 2405.04434,
Sec. 2.1.2): ``q̃_n = q_n W_UK[blk]ᵀ`` lives in the block's latent space, each block acts as one
KV head of an MQA attention with key ``[c_blk; k_r]`` and value ``c_blk``, and ``W_UV[blk]`` maps the
result back to ``d_v``. The scale stays the training ``τ = 1/sqrt(d_n + d_r)``, not one derived
from the latent width.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from gtalib.model.attention.base import Attention, register
from gtalib.model.attention.functional import attend_branches, attend_latent
from gtalib.model.config import LATENT_LAYOUT, ModelConfig
from gtalib.model.layers import RMSNorm, RoPE, rms_norm


@register(*LATENT_LAYOUT)
class LatentAttention(Attention):
    """MLA / GLA-2 / GLA-4 / MLRA-2 / MLRA-4 (see the module docstring for the math).

    Args:
        cfg: a :class:`~gtalib.model.config.ModelConfig` with ``variant`` in the latent family; it is
            resolved here (``cfg.resolved()``: ``d_c = 4 head_dim``, ``d_r = head_dim/2``,
            ``d_n = d_v = head_dim``, ``d_q`` per variant, ``n_head`` multiplied by
            ``head_multiplier`` with per-head dims and latents unchanged).
        layer_idx: position in the stack (unused by the math).

    Parameters (names used by the model's initialiser and the parameter count):
        ``wq_a (d_q, d)``, ``q_norm (d_q)``, ``wq_b (H(d_n+d_r), d_q)``, ``wkv_a (d_c+d_r, d)``,
        ``kv_norms[j] (w)``, ``wkv_b (n_blocks · H/n_groups · (d_n+d_v), w)`` (the per-block
        up-projections stacked along the output axis: block ``j`` serves ``H/n_groups`` heads),
        ``o_proj (d, H d_v)`` and, with ``cfg.gate``, the output gate ``g_proj (H d_v, d)``
        (both from :meth:`Attention.init_output`).

    Raises:
        KeyError: ``cfg.variant`` not in the latent family.
        ValueError: from ``cfg.resolved()``, naming the parameter: ``kv_lora_rank`` not divisible
            by the latent blocks, ``n_head`` not divisible by the head groups, odd
            ``qk_rope_head_dim``.
    """

    def __init__(self, cfg: ModelConfig, layer_idx: int = 0):
        if cfg.builtin_variant not in LATENT_LAYOUT:
            raise KeyError(f"LatentAttention builds {', '.join(LATENT_LAYOUT)}; got variant={cfg.variant!r}")
        super().__init__(cfg, layer_idx)
        r = self.cfg  # resolved by the base class
        self.n_blocks, self.n_branches, self.n_groups = LATENT_LAYOUT[r.builtin_variant]
        d, H = r.d_model, r.n_head
        self.n_head, self.d_model = H, d
        self.d_n, self.d_r, self.d_v = r.qk_nope_head_dim, r.qk_rope_head_dim, r.v_head_dim
        self.d_c, self.d_q = r.kv_lora_rank, r.q_lora_rank
        self.block_width = self.d_c // self.n_blocks  # w
        self.heads_per_group = H // self.n_groups  # heads fed by one block within a branch

        # Scale constants (docs/variants.md, "Scale constants"): a unit-RMS latent of width r projects to
        # keys of variance r σ², a direct projection of x̃ to d σ²; sqrt(d/r) equalises them. Summing
        # n roughly independent branches multiplies the variance by n, hence 1/sqrt(n).
        on = r.latent_scale
        self.alpha_q = math.sqrt(d / self.d_q) if on else 1.0
        self.alpha_kv = math.sqrt(d / self.block_width) if on else 1.0
        self.alpha_o = 1.0 / math.sqrt(self.n_branches) if on else 1.0
        # Training softmax scale, also used by absorbed decode whatever the block width.
        self.scale = 1.0 / math.sqrt(self.d_n + self.d_r)

        self.wq_a = nn.Linear(d, self.d_q, bias=False)
        self.q_norm = RMSNorm(self.d_q)
        self.wq_b = nn.Linear(self.d_q, H * (self.d_n + self.d_r), bias=False)
        self.wkv_a = nn.Linear(d, self.d_c + self.d_r, bias=False)
        self.kv_norms = nn.ModuleList(RMSNorm(self.block_width) for _ in range(self.n_blocks))
        self.wkv_b = nn.Linear(
            self.block_width, self.n_blocks * self.heads_per_group * (self.d_n + self.d_v), bias=False
        )
        self.init_output(H, self.d_v)  # W_O and the optional output gate W_g
        self.rope = RoPE(self.d_r, r.block_size, r.rope_theta)

    # ------------------------------------------------------------------ layout
    def block_of(self, branch: int, head: int) -> int:
        """Latent block that feeds query head ``head`` in branch ``branch`` (table in the module
        docstring): ``branch · n_groups + head // (H / n_groups)``."""
        return branch * self.n_groups + head // self.heads_per_group

    def _branch_blocks(self, b: int) -> slice:
        # Branch b uses the n_groups consecutive blocks b·G .. b·G+G-1, one per head group.
        return slice(b * self.n_groups, (b + 1) * self.n_groups)

    def up_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-block up-projections ``(W_UK, W_UV)`` of shapes ``(n_blocks, H/n_groups, d_n, w)`` and
        ``(n_blocks, H/n_groups, d_v, w)``: ``k_n = c_j W_UK[j, i]ᵀ`` for the ``i``-th head of the
        group block ``j`` feeds."""
        W = self.wkv_b.weight.view(
            self.n_blocks, self.heads_per_group, self.d_n + self.d_v, self.block_width
        )  # (nb, Hg, d_n + d_v, w)
        return W[:, :, : self.d_n], W[:, :, self.d_n :]

    # ------------------------------------------------------------------ projections
    def queries(self, x: torch.Tensor, start_pos: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``x (B, T, d)`` → ``q_n (B, T, H, d_n)``, rotated ``q_r (B, T, H, d_r)``."""
        B, T, _ = x.shape
        c_q = self.alpha_q * self.q_norm(self.wq_a(x))  # (B, T, d_q)
        q = self.wq_b(c_q).view(B, T, self.n_head, self.d_n + self.d_r)  # (B, T, H, d_n + d_r)
        q_n, q_r = q.split([self.d_n, self.d_r], dim=-1)
        return q_n, self.rope(q_r, start_pos)

    def latents(self, x: torch.Tensor, start_pos: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``x (B, T, d)`` → normed-and-scaled latent blocks ``c (B, T, n_blocks, w)`` and the
        rotated shared RoPE key ``k_r (B, T, 1, d_r)`` (never normed or scaled) — exactly what the
        cache stores."""
        B, T, _ = x.shape
        c_raw, k_r = self.wkv_a(x).split([self.d_c, self.d_r], dim=-1)
        c_raw = c_raw.view(B, T, self.n_blocks, self.block_width)  # (B, T, nb, w)
        gains = torch.stack([norm.weight for norm in self.kv_norms])  # (nb, w): a norm per block
        c = rms_norm(c_raw, gains, self.kv_norms[0].eps)  # (B, T, nb, w)
        k_r = self.rope(k_r.view(B, T, 1, self.d_r), start_pos)  # (B, T, 1, d_r)
        return self.alpha_kv * c, k_r

    # ------------------------------------------------------------------ the two attention paths
    def attend_expanded(self, q_n, q_r, c, k_r, start_pos: int = 0) -> torch.Tensor:
        """Training/reference path: up-project every block to per-head keys and values.

        Args: ``q_n (B, T, H, d_n)``, ``q_r (B, T, H, d_r)``, ``c (B, S, n_blocks, w)``,
        ``k_r (B, S, 1, d_r)``; queries at positions ``start_pos ..``, keys at ``0 .. S-1``.
        Returns ``α_o Σ_b y_b`` of shape ``(B, T, H, d_v)`` (before the gate and W_O), from
        :func:`~gtalib.model.attention.functional.attend_branches` (one MLRA kernel launch on Triton).
        """
        B, S = c.shape[:2]
        W = self.wkv_b.weight.view(self.n_blocks, self.heads_per_group, -1, self.block_width)
        kv = torch.einsum("bskw,kiew->bskie", c, W)  # (B, S, nb, Hg, d_n + d_v)
        # Branch b owns blocks b·G .. b·G+G-1 and group j (block b·G+j) holds heads
        # j·Hg .. (j+1)·Hg-1, so splitting nb = (NB, G) and merging (G, Hg) = H lists each
        # branch's heads in order.
        kv = kv.reshape(B, S, self.n_branches, self.n_head, -1)  # (B, S, NB, H, d_n + d_v)
        kv = kv.permute(2, 0, 1, 3, 4)  # (NB, B, S, H, d_n + d_v), a view
        k_n, v = kv.split([self.d_n, self.d_v], dim=-1)
        q = torch.cat([q_n, q_r], dim=-1)  # (B, T, H, d_n + d_r)
        return attend_branches(q, k_n, k_r, v, self.scale, self.alpha_o, start_pos, self.impl)

    def attend_absorbed(self, q_n, q_r, c, k_r, start_pos: int = 0) -> torch.Tensor:
        """Decode path by weight absorption, MQA-style over the latent cache.

        Same arguments and result as :meth:`attend_expanded`. Per branch, each of its
        ``n_groups`` blocks is one KV head: key ``[c_j; k_r]`` (``w + d_r``), value ``c_j`` (``w``);
        head ``h`` queries with ``[q_n W_UK[j, i]; q_r]``; score scale τ = 1/sqrt(d_n + d_r) (the
        training one: the dot product equals ``q_n·k_n + q_r·k_r`` exactly). A single new token
        on the Triton path runs the ``latent_decode`` kernel
        (:func:`~gtalib.model.attention.functional.attend_latent`).
        """
        W_uk, W_uv = self.up_weights()
        y = 0
        for b in range(self.n_branches):
            blocks = self._branch_blocks(b)
            w_uk = W_uk[blocks].flatten(0, 1)  # (H, d_n, w)
            w_uv = W_uv[blocks].flatten(0, 1)  # (H, d_v, w)
            q_lat = torch.einsum("bthn,hnw->bthw", q_n, w_uk)  # (B, T, H, w)
            c_b = c[:, :, blocks]  # (B, S, G, w)
            o = attend_latent(q_lat, q_r, c_b, k_r, self.scale, start_pos, self.impl)  # (B, T, H, w)
            y = y + torch.einsum("bthw,hvw->bthv", o, w_uv)  # (B, T, H, d_v)
        return self.alpha_o * y

    # ------------------------------------------------------------------ module API
    def forward(self, x: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        """``x (B, T, d_model)`` → ``(B, T, d_model)``.

        Without a cache: causal attention over the T tokens at positions ``0 .. T-1`` (expanded
        path). With a cache (from :meth:`new_cache`): the tokens sit at positions
        ``cache["len"] ..``; their latent blocks and RoPE key are written into the cache and they
        attend over positions ``[0, cache["len"] + T)`` by weight absorption. ``cache["len"]`` is
        advanced by the model, not here.

        Raises:
            ValueError: positions beyond ``block_size`` (RoPE table) or beyond the cache's
                ``max_len``.
        """
        B, T, _ = x.shape
        start = self.cache_start(cache)
        q_n, q_r = self.queries(x, start)
        c, k_r = self.latents(x, start)
        if cache is None:
            y = self.attend_expanded(q_n, q_r, c, k_r, start)
        else:
            S = start + T
            c = self.cache_write(cache, "latent", c.flatten(2), start)  # (B, S, d_c)
            k_r = self.cache_write(cache, "k_rope", k_r.squeeze(2), start)  # (B, S, d_r)
            c = c.view(B, S, self.n_blocks, self.block_width).to(x.dtype)  # (B, S, nb, w)
            k_r = k_r.unsqueeze(2).to(x.dtype)  # (B, S, 1, d_r)
            y = self.attend_absorbed(q_n, q_r, c, k_r, start)
        return self.project_out(y, x)  # gate after the branch sum, then W_O

    def new_cache(self, batch_size: int, max_len: int, device=None, dtype=None) -> dict:
        """Empty cache: ``latent (B, max_len, d_c)`` — the normed-and-scaled blocks side by side —
        and ``k_rope (B, max_len, d_r)``, the rotated shared RoPE key; ``"len": 0``. Nothing per
        head: ``d_c + d_r`` elements per token (docs/variants.md, "Decoding with a cache")."""
        z = dict(device=device, dtype=dtype)
        return {
            "latent": torch.zeros(batch_size, max_len, self.d_c, **z),
            "k_rope": torch.zeros(batch_size, max_len, self.d_r, **z),
            "len": 0,
        }

    def kv_elems_per_token(self) -> int:
        """Cache elements per token of this layer: ``d_c + d_r`` (576 at paper size)."""
        return self.d_c + self.d_r
