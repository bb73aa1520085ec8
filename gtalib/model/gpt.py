"""The GPT every attention variant plugs into (docs/variants.md, "Shared model").

Pre-norm blocks ``h ← h + Attn(RMSNorm(h))``, ``h ← h + MLP(RMSNorm(h))``, final RMSNorm, SwiGLU
MLP, token embedding tied with the LM head, no biases, no dropout, no position embedding (RoPE
lives in the attention), cross-entropy on fp32 logits over every position.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gtalib.model.attention import build_attention
from gtalib.model.config import ModelConfig, residual_init_scale
from gtalib.model.layers import RMSNorm, RoPE, SwiGLU


class Block(nn.Module):
    """One pre-norm transformer block. Shapes: ``(B, T, d_model) -> (B, T, d_model)``."""

    def __init__(self, cfg: ModelConfig, layer_idx: int):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model)
        self.attn = build_attention(cfg, layer_idx)
        self.mlp_norm = RMSNorm(cfg.d_model)
        self.mlp = SwiGLU(cfg.d_model, cfg.intermediate_size)

    def forward(self, h: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        """``h + Attn(RMSNorm(h))`` then ``+ MLP(RMSNorm(·))``; ``cache`` is this layer's dict
        (see :meth:`GPT.new_cache`) or ``None``. ``(B, T, d_model) -> (B, T, d_model)``."""
        h = h + self.attn(self.attn_norm(h), cache)
        return h + self.mlp(self.mlp_norm(h))


class GPT(nn.Module):
    """Decoder-only language model.

    Args:
        cfg: a :class:`ModelConfig` with ``intermediate_size`` set (presets solve it:
            :func:`gtalib.model.presets.model_config`); resolved here.

    Raises:
        ValueError: ``cfg.intermediate_size`` is ``None``, or any error of
            :meth:`ModelConfig.resolved` / the variant's module.

    Initialisation (docs/variants.md, "Initialisation"): embedding and every projection N(0, σ), RMSNorm
    gains 1; ``W_O`` and the MLP ``W_down`` exactly zero under ``init="zero"`` (every block is then
    the identity at step 0), N(0, σ) under ``"normal"``, N(0, σ/√(2·n_layer)) under ``"scaled"``
    (GPT-2's residual scaling, :func:`gtalib.model.config.residual_init_scale`); TPA's factor projections Xavier-uniform.
    Built on the meta device the model is not initialised (call :meth:`init_weights` after
    ``to_empty``).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.intermediate_size is None:
            raise ValueError(
                "intermediate_size is None: solve it first (gtalib.model.presets.model_config or "
                "gtalib.model.params.match_intermediate_size)"
            )
        self.cfg = cfg = cfg.resolved()
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layer))
        self.norm = RMSNorm(cfg.d_model)
        if self.wte.weight.device.type != "meta":  # meta tensors hold no values (count_params)
            self.init_weights()

    @torch.no_grad()
    def init_weights(self) -> None:
        """(Re)initialise every parameter per ``cfg.init`` (see the class docstring) and rebuild
        the RoPE tables from their formula (exact fp32, also after ``to_empty``)."""
        std = self.cfg.init_std
        for mod in self.modules():
            if isinstance(mod, RoPE):
                mod.init_weights()
        nn.init.normal_(self.wte.weight, 0.0, std)
        nn.init.ones_(self.norm.weight)
        for blk in self.blocks:
            nn.init.ones_(blk.attn_norm.weight)
            nn.init.ones_(blk.mlp_norm.weight)
            blk.attn.init_weights()
            for lin in (blk.mlp.w1, blk.mlp.w2, blk.mlp.w_down):
                nn.init.normal_(lin.weight, 0.0, std)
            if self.cfg.init == "zero":
                nn.init.zeros_(blk.mlp.w_down.weight)
            elif self.cfg.init == "scaled":
                blk.mlp.w_down.weight.mul_(residual_init_scale(self.cfg.n_layer))

    def num_params(self) -> int:
        """Total parameters, the tied embedding counted once."""
        return sum(p.numel() for p in self.parameters())

    def _check_len(self, end: int) -> None:
        if end > self.cfg.block_size:
            raise ValueError(f"sequence of {end} positions exceeds block_size={self.cfg.block_size}")

    def _head(self, h: torch.Tensor) -> torch.Tensor:
        # Logits in fp32 whatever the autocast dtype (docs/variants.md: loss on fp32 logits).
        return F.linear(self.norm(h).float(), self.wte.weight.float())  # (B, T, V)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """Full causal forward.

        Args:
            idx: ``(B, T)`` token ids, ``T <= block_size``.
            targets: optional ``(B, T)`` next-token ids (``-1`` ignored).
        Returns:
            ``(logits (B, T, vocab) fp32, loss)`` with ``loss`` the mean cross-entropy in nats
            per token, or ``None`` without targets.
        Raises:
            ValueError: ``T > block_size``.
        """
        self._check_len(idx.shape[1])
        h = self.wte(idx)  # (B, T, d)
        for blk in self.blocks:
            h = blk(h)
        logits = self._head(h)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1),
                                   ignore_index=-1)
        return logits, loss

    # ------------------------------------------------------------------ cached decoding
    def new_cache(self, batch_size: int, max_len: int | None = None, device=None, dtype=None) -> dict:
        """Empty decoding cache: ``{"len": 0, "layers": [per-layer dict, ...]}``.

        Each layer dict holds only what its variant needs (see each module's ``new_cache``),
        preallocated for ``max_len`` positions (default ``block_size``) in ``dtype`` (default the
        parameters' dtype) on ``device`` (default the parameters' device).

        Raises:
            ValueError: ``max_len > block_size``.
        """
        max_len = self.cfg.block_size if max_len is None else max_len
        self._check_len(max_len)
        p = self.wte.weight
        device = p.device if device is None else device
        dtype = p.dtype if dtype is None else dtype
        layers = [b.attn.new_cache(batch_size, max_len, device=device, dtype=dtype) for b in self.blocks]
        return {"len": 0, "layers": layers}

    @staticmethod
    def cache_nbytes(cache: dict) -> int:
        """Bytes held by a cache's tensors (all layers)."""
        return sum(t.numel() * t.element_size() for layer in cache["layers"]
                   for t in layer.values() if torch.is_tensor(t))

    def forward_cached(self, idx: torch.Tensor, cache: dict) -> torch.Tensor:
        """Prefill or decode: run the ``T`` new tokens ``idx (B, T)`` at positions
        ``cache["len"] .. cache["len"]+T-1`` against the cache, write them into it, advance
        ``cache["len"]`` by T, and return their logits ``(B, T, vocab)`` (fp32).

        Raises:
            ValueError: the new length exceeds ``block_size`` or the cache's ``max_len``.
        """
        start, T = cache["len"], idx.shape[1]
        self._check_len(start + T)
        h = self.wte(idx)  # (B, T, d)
        for blk, lc in zip(self.blocks, cache["layers"]):
            lc["len"] = start
            h = blk(h, lc)
        for lc in cache["layers"]:
            lc["len"] = start + T
        cache["len"] = start + T
        return self._head(h)

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, max_new_tokens: int, use_cache: bool = True) -> torch.Tensor:
        """Greedy (argmax) continuation of ``idx (B, T0)`` by ``max_new_tokens`` tokens.

        With ``use_cache`` the prompt is prefilled once and each new token decoded against the
        cache; without it the full forward is rerun on the growing sequence. Both give the same
        tokens. Returns ``(B, T0 + max_new_tokens)``.

        Raises:
            ValueError: ``T0 + max_new_tokens > block_size``.
        """
        self._check_len(idx.shape[1] + max_new_tokens)
        if max_new_tokens <= 0:
            return idx
        if not use_cache:
            for _ in range(max_new_tokens):
                nxt = self(idx)[0][:, -1].argmax(-1, keepdim=True)
                idx = torch.cat([idx, nxt], dim=1)
            return idx
        cache = self.new_cache(idx.shape[0], idx.shape[1] + max_new_tokens)
        logits = self.forward_cached(idx, cache)
        for i in range(max_new_tokens):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            idx = torch.cat([idx, nxt], dim=1)
            if i + 1 < max_new_tokens:
                logits = self.forward_cached(nxt, cache)
        return idx
