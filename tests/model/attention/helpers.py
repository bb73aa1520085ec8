"""Small shared helpers for the attention and model tests: tiny configs, every (variant, option)
pair, and a naive attention reference."""

import math

import torch

from gtalib.model.attention import REGISTRY
from gtalib.model.config import LATENT_VARIANTS
from gtalib.model.presets import model_config


def tiny_cfg(variant: str, **options):
    """The ``ci`` preset of ``variant`` with ``init="normal"`` (so W_O is not zero and every
    output depends on the attention), F solved."""
    options.setdefault("init", "normal")
    return model_config("ci", variant, **options)


def naive_attention(q, k, v, scale, start_pos=0):
    """Loop-over-heads float64 reference of causal GQA attention (an independent implementation
    of ``attend``): query head h reads KV head h // (H // Hkv); query i sits at start_pos + i."""
    B, T, H, _ = q.shape
    Hkv = k.shape[2]
    g = H // Hkv
    out = torch.empty(B, T, H, v.shape[-1], dtype=torch.float64)
    for h in range(H):
        qh, kh, vh = q[:, :, h].double(), k[:, :, h // g].double(), v[:, :, h // g].double()
        s = qh @ kh.transpose(1, 2) * scale  # (B, T, S)
        for i in range(T):
            s[:, i, start_pos + i + 1 :] = -math.inf
        out[:, :, h] = torch.softmax(s, -1) @ vh
    return out


def variant_options(variant: str):
    """The ablation options ``variant`` accepts (docs/variants.md "Ablation switches"), one at a time:
    none, the gate, double heads (not MHA/TPA, whose cache grows with the heads), latent scale off
    (latent family only)."""
    yield {}
    yield {"gate": True}
    if variant not in ("mha", "tpa"):
        yield {"head_multiplier": 2}
    if variant in LATENT_VARIANTS:
        yield {"latent_scale": False}


#: (variant, options) for every registered variant and option, with readable pytest ids.
WITH_OPTIONS = [(v, o) for v in sorted(REGISTRY) for o in variant_options(v)]
OPTION_IDS = [v + "".join(f"-{k}={val}" for k, val in o.items()) for v, o in WITH_OPTIONS]
