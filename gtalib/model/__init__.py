"""The model layer: what a model computes, and its sizes.

Ground layer. May import: ``gtalib.kernels`` only (the Triton kernels the attention variants
dispatch to on a GPU). Nothing here trains, reads a corpus or knows the run store.

=================  ===========================================================================
module             what
=================  ===========================================================================
``config``         ``ModelConfig`` (frozen), ``VARIANTS``, ``canonical_variant``, the rules
                   that derive every variant's sizes (``ModelConfig.resolved()``)
``layers``         ``RMSNorm``, ``RoPE``, ``SwiGLU``
``attention/``     the attention variants behind one registry (``build_attention``)
``gpt``            ``GPT``: embedding, blocks, tied head, loss, cached prefill/decode
``params``         parameter counting (meta device) and FFN matching (``match_intermediate_size``)
``presets``        the named model families (``PRESETS``) and ``model_config(preset, variant)``
``kvcache``        analytic KV-cache accounting per token and per device under TP
``flops``          FLOPs of a forward + backward as counted (``count_flops``, ``step_flops``)
=================  ===========================================================================

The names below are importable from here (loaded on first use, so importing the package is cheap).
"""

_LAZY = {
    "ModelConfig": "config", "VARIANTS": "config", "canonical_variant": "config",
    "GPT": "gpt", "build_attention": "attention", "REGISTRY": "attention",
    "count_params": "params", "match_intermediate_size": "params",
    "PRESETS": "presets", "model_config": "presets",
    "kv_elems_per_token": "kvcache", "kv_elems_per_device": "kvcache",
    "count_flops": "flops", "step_flops": "flops",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_LAZY)
