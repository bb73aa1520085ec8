"""Attention variants of the MLRA paper behind one registry.

Importing this package registers every variant module; ``build_attention(cfg)`` builds one by
(case-insensitive) name, e.g. ``build_attention(ModelConfig(variant="mlra-4"))``.
"""

import importlib.util

from gtalib.model.attention.base import REGISTRY, Attention, build_attention, register
from gtalib.model.attention.functional import attend
from gtalib.model.attention import dense, gta, mfa, tpa  # noqa: F401  (registration)

if importlib.util.find_spec("gtalib.model.attention.latent") is not None:
    from gtalib.model.attention import latent  # noqa: F401  (MLA, GLA-2/4, MLRA-2/4)

__all__ = ["REGISTRY", "Attention", "attend", "build_attention", "register"]
