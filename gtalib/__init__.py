"""gtalib: the attention variants of *Multi-Head Low-Rank Attention* (MLRA, arXiv 2603.02188)
as PyTorch modules, their GPT, presets with parameter matching, KV accounting, kernels, training
and the book's analyses.

Main entry points (imported lazily so ``import gtalib`` stays cheap for the CLI):
``ModelConfig``, ``model_config(preset, variant, **options)``, ``GPT``, ``build_attention``,
``count_params``, ``match_intermediate_size``.
"""

__version__ = "0.1.0"

_LAZY = {
    "ModelConfig": "gtalib.model.config",
    "VARIANTS": "gtalib.model.config",
    "model_config": "gtalib.model.presets",
    "PRESETS": "gtalib.model.presets",
    "GPT": "gtalib.model.gpt",
    "build_attention": "gtalib.model.attention",
    "REGISTRY": "gtalib.model.attention",
    "count_params": "gtalib.model.params",
    "match_intermediate_size": "gtalib.model.params",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'gtalib' has no attribute {name!r}")


__all__ = ["__version__", *_LAZY]
