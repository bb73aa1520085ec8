"""Small shared helpers for the attention tests: tiny configs and a naive attention reference."""

import math

import torch

from gtalib.presets import model_config


def tiny_cfg(variant: str, **options):
    """The ``ci`` preset of ``variant`` with ``init="normal"`` (so W_O is not zero and every
    output depends on the attention), F solved."""
    options.setdefault("init", "normal")
    return model_config("ci", variant, **options)


def naive_attention(q, k, v, scale, start_pos=0):
    """Loop-over-heads float64 reference of causal GQA attention (an independent implementation
    of ``attend``): query head h reads KV head h // (H // Hkv); query i sits at start_pos + i."""
    B, T, H, _ = q.shape
    S, Hkv = k.shape[1], k.shape[2]
    g = H // Hkv
    out = torch.empty(B, T, H, v.shape[-1], dtype=torch.float64)
    for h in range(H):
        qh, kh, vh = q[:, :, h].double(), k[:, :, h // g].double(), v[:, :, h // g].double()
        s = qh @ kh.transpose(1, 2) * scale  # (B, T, S)
        for i in range(T):
            s[:, i, start_pos + i + 1 :] = -math.inf
        out[:, :, h] = torch.softmax(s, -1) @ vh
    return out
