"""The interface every attention variant implements, and the registry that builds them by name.

Conventions shared by all variants (``gtalib/model/attention/*.py``):

- ``forward(x, cache=None)``: ``x`` is ``(B, T, d_model)``, the block input after the
  pre-attention RMSNorm; returns ``(B, T, d_model)`` after ``W_O``.
- A cache is a ``dict`` from :meth:`Attention.new_cache`: preallocated tensors of ``max_len``
  positions holding only what the variant needs to decode (docs/variants.md, "Decoding with a cache"),
  plus ``"len"`` (int, positions already written). The T new tokens sit at positions
  ``start_pos .. start_pos+T-1`` with ``start_pos = cache["len"]``; the module writes their
  entries at those positions and attends over ``[0, start_pos + T)``. It does **not** advance
  ``cache["len"]``: the model does, once per forward, for every layer.
- The output projection and the optional output gate live here (:meth:`Attention.init_output`,
  :meth:`Attention.project_out`) so every variant gates the same way.
- :meth:`Attention.init_weights` implements ``init="zero"|"normal"|"scaled"``; variants with special inits
  (TPA) override :meth:`Attention.init_special`.
- A variant may declare its cache instead of writing :meth:`Attention.new_cache`: the per-token
  shapes of its tensors in :attr:`Attention.cache_shapes`, from which the base class allocates
  the cache and counts it (:meth:`Attention.kv_elems_per_token`). A user's own variant, named by
  import path (:mod:`gtalib.model.user_variants`), does so.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from gtalib.model.config import VARIANT_SIZES, ModelConfig, canonical_variant, residual_init_scale
from gtalib.model.layers import RMSNorm
from gtalib.model.user_variants import is_user_variant, variant_class

REGISTRY: dict[str, type["Attention"]] = {}


def register(*names: str) -> Callable[[type], type]:
    """Class decorator: make the class buildable under each canonical variant name; its
    ``base_variant`` is the first (what a user's subclass resolves its sizes as, unless it
    declares another of them: :func:`gtalib.model.config.parent_variant`)."""

    def deco(cls):
        for n in names:
            REGISTRY[canonical_variant(n)] = cls
        cls.base_variant = canonical_variant(names[0])
        return cls

    return deco


def build_attention(cfg: ModelConfig, layer_idx: int = 0) -> "Attention":
    """Instantiate and initialise the attention module registered for ``cfg.variant``.

    ``cfg`` is resolved first (:meth:`ModelConfig.resolved`), so unresolved configs work too.

    A user's variant (``"module:Class"``) is built from its class, which must still have the
    source the config recorded (``cfg.variant_source``).

    Raises:
        KeyError: unknown variant, or a known variant whose module is not registered (message lists
            the registered names).
        ValueError: a size or option that the variant cannot take (names the parameter); a user's
            class that cannot be imported, has changed since the config was made, or cannot be
            built at these sizes (the message names the sizes left unset).
    """
    cfg = cfg.resolved()
    name = canonical_variant(cfg.variant)
    if is_user_variant(name):
        cls = variant_class(name, cfg.variant_source)
    elif name in REGISTRY:
        cls = REGISTRY[name]
    else:
        raise KeyError(f"variant {name!r} has no registered module; registered: {sorted(REGISTRY)}")
    if not is_user_variant(name):
        module = cls(cfg, layer_idx)
    else:  # a user's class that cannot be built at these sizes: one line naming what it lacks
        try:
            module = cls(cfg, layer_idx)
        except (TypeError, AttributeError, ValueError, KeyError, RuntimeError) as exc:
            unset = [f for f in VARIANT_SIZES if getattr(cfg, f) is None]
            raise ValueError(
                f"variant {name!r}: {cls.__name__} cannot be built ({type(exc).__name__}: {exc}); "
                f"sizes left unset for it: {', '.join(unset) or 'none'}: subclass the built-in "
                f"class whose sizes it reads (DenseAttention, LatentAttention, TPAttention, "
                f"GTAttention, MFAttention) or give them") from None
        if not isinstance(getattr(module, "o_proj", None), nn.Linear):
            raise ValueError(f"variant {name!r}: {cls.__name__} has no output projection: call "
                             f"self.init_output(n_head, v_head_dim) in its __init__")
    if module.o_proj.weight.device.type != "meta":  # meta tensors hold no values
        module.init_weights()
    return module


class Attention(nn.Module):
    """Base class of every variant (see the module docstring for the forward/cache contract).

    Subclasses implement ``forward(x, cache=None)`` and either set :attr:`cache_shapes` or
    implement ``new_cache(batch_size, max_len, device, dtype)`` and ``kv_elems_per_token()``,
    and call :meth:`init_output` in ``__init__``.

    Attributes:
        base_variant: the built-in variant whose sizes the class resolves as (set by
            :func:`register`; ``None`` here). A user's subclass of a built-in class inherits its
            parent's, or sets another its parent builds (``"gqa"`` under ``DenseAttention``).
        cfg: the resolved :class:`ModelConfig`.
        cache_shapes: cache tensor name → its shape per token (after the batch and position
            axes), e.g. ``{"k": (H, d), "v": (H, d)}``; empty for a variant that writes
            :meth:`new_cache` itself.
        o_proj: ``W_O``, ``n_head·d_v → d_model``, no bias.
        g_proj: ``W_g``, ``d_model → n_head·d_v`` when ``cfg.gate`` (else ``None``).
    """

    base_variant: str | None = None

    def __init__(self, cfg: ModelConfig, layer_idx: int = 0):
        super().__init__()
        self.cfg = cfg.resolved()
        self.layer_idx = layer_idx
        self.impl = self.cfg.attn_impl
        self.o_proj: nn.Linear | None = None
        self.g_proj: nn.Linear | None = None

    # ------------------------------------------------------------------ output projection + gate
    def init_output(self, n_head: int, v_head_dim: int) -> None:
        """Create ``W_O`` (``n_head·v_head_dim → d_model``) and, if ``cfg.gate``, ``W_g``."""
        d = self.cfg.d_model
        self.o_proj = nn.Linear(n_head * v_head_dim, d, bias=False)
        self.g_proj = nn.Linear(d, n_head * v_head_dim, bias=False) if self.cfg.gate else None

    def project_out(self, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``out = (g ⊙ concat_h y_h) W_O`` with ``g = sigmoid(x W_g)`` when gated (docs/variants.md,
        "Output gate": element-wise per head and channel, after any branch sum, before W_O).

        Args:
            y: ``(B, T, H, d_v)`` attention output (branches already summed).
            x: ``(B, T, d_model)`` the normed block input (the gate's input, same as q/k/v's).
        Returns:
            ``(B, T, d_model)``.
        """
        y = y.reshape(*y.shape[:2], -1)  # (B, T, H*d_v)
        if self.g_proj is not None:
            y = torch.sigmoid(self.g_proj(x)) * y
        return self.o_proj(y)

    # ------------------------------------------------------------------ initialisation
    @torch.no_grad()
    def init_weights(self) -> None:
        """docs/variants.md "Initialisation": every ``nn.Linear`` N(0, σ=init_std), RMSNorm gains 1,
        ``W_O`` zero under ``init="zero"`` (N(0, σ) under ``"normal"``, N(0, σ/√(2·n_layer))
        under ``"scaled"``); then :meth:`init_special` for variant-specific exceptions."""
        std = self.cfg.init_std
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, std)
            elif isinstance(m, RMSNorm):
                nn.init.ones_(m.weight)
        if self.cfg.init == "zero":
            nn.init.zeros_(self.o_proj.weight)
        elif self.cfg.init == "scaled":
            # Scale the draw rather than redraw: the "scaled" arm then shares every other
            # weight, and the RNG stream, with the "normal" arm of the same seed.
            self.o_proj.weight.mul_(residual_init_scale(self.cfg.n_layer))
        self.init_special()

    def init_special(self) -> None:
        """Hook for variant-specific inits (TPA: Xavier-uniform factor projections)."""

    # ------------------------------------------------------------------ cache helpers
    @staticmethod
    def cache_start(cache: dict | None) -> int:
        """``start_pos`` of the new tokens: ``cache["len"]`` or 0 without a cache."""
        return 0 if cache is None else int(cache["len"])

    @staticmethod
    def cache_write(cache: dict, name: str, value: torch.Tensor, start_pos: int) -> torch.Tensor:
        """Write ``value`` ``(B, T, ...)`` at positions ``[start_pos, start_pos+T)`` of
        ``cache[name]`` and return the filled prefix ``(B, start_pos+T, ...)``.

        Raises:
            ValueError: the cache has fewer than ``start_pos + T`` positions (``max_len``).
        """
        buf = cache[name]
        end = start_pos + value.shape[1]
        if end > buf.shape[1]:
            raise ValueError(f"cache holds max_len={buf.shape[1]} positions, needs {end}")
        buf[:, start_pos:end] = value.to(buf.dtype)
        return buf[:, :end]

    def new_cache(self, batch_size: int, max_len: int, device=None, dtype=None) -> dict:
        """Preallocated cache tensors for ``max_len`` positions plus ``"len": 0``: here, a zeroed
        ``(batch_size, max_len, *shape)`` tensor per entry of :attr:`cache_shapes`.

        Raises:
            NotImplementedError: the class declares no cache tensors.
        """
        return {**{name: torch.zeros((batch_size, max_len, *shape), device=device, dtype=dtype)
                   for name, shape in self.declared_cache().items()}, "len": 0}

    def kv_elems_per_token(self) -> int:
        """Cache elements per token for this layer (what :meth:`new_cache` stores): here, the sum
        over :attr:`cache_shapes` of each shape's product.

        Raises:
            NotImplementedError: the class declares no cache tensors.
        """
        return sum(math.prod(shape) for shape in self.declared_cache().values())

    def declared_cache(self) -> dict:
        """:attr:`cache_shapes`, checked: names to tuples of positive ints.

        Raises:
            NotImplementedError: empty (the class neither declares nor allocates its cache).
            ValueError: a shape that is not a tuple of positive ints.
        """
        shapes = getattr(self, "cache_shapes", None) or {}
        if not shapes:
            raise NotImplementedError(f"{type(self).__name__} declares no cache tensors: set "
                                      f"self.cache_shapes = {{name: per-token shape}} in __init__")
        for name, shape in shapes.items():
            if not (isinstance(shape, tuple) and all(isinstance(n, int) and n > 0 for n in shape)):
                raise ValueError(f"{type(self).__name__}.cache_shapes[{name!r}] must be a tuple of "
                                 f"positive ints, got {shape!r}")
        return dict(shapes)
