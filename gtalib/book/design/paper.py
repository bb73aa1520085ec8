"""The paper's reference values that the book shows beside its own: the main table's perplexities,
gated MLRA-4's average, and Qiu et al.'s gate probes. Every value is taken from
``docs/paper_values.md`` (facts from *Multi-Head Low-Rank Attention*, arXiv 2603.02188, its tables,
and from Qiu et al., arXiv 2505.06708). The ablation figures' own values (curves, perplexity
pairs) sit with each figure in :mod:`gtalib.book.design.figures`. Reads nothing of the package.
"""

from __future__ import annotations

import math

import pandas as pd

#: The paper's models and training lengths (docs/paper_values.md): about 2.9 B parameters, every
#: variant matched to MHA's ≈ 2.87 B by the FFN width alone ("Claims a reproduction checks", 2;
#: 2.872–2.873 B counted, docs/variants.md), the ablations trained on 100 B tokens, the main
#: table's runs on 98.3 B ("Main results": 100k steps of 983,040 tokens).
PAPER_PARAMS_B = 2.9
PAPER_MATCHED_PARAMS_B = 2.87
PAPER_ABLATION_TOKENS_B = 100
PAPER_MAIN_TOKENS_B = 98.3

#: The seven held-out validation sets of the paper's main table, in its column order.
PAPER_SOURCES = ("Wikipedia", "C4", "Pile", "RefinedWeb", "Cosmopedia", "FineWeb", "FineWeb-Edu")

#: Paper main table: validation perplexity, 7 sets and their average (docs/paper_values.md,
#: "Main results", 2.9 B parameters, 98.3 B tokens, zero init, no gate).
PAPER_MAIN_PPL = pd.DataFrame(
    [
        ("mha", 14.624, 16.575, 12.929, 18.698, 9.102, 15.656, 9.434, 13.860),
        ("mqa", 15.134, 16.837, 14.008, 19.202, 9.484, 15.942, 9.533, 14.306),
        ("gqa", 15.057, 16.628, 13.758, 18.885, 9.504, 15.713, 9.427, 14.139),
        ("mla", 14.567, 16.345, 12.965, 18.523, 8.966, 15.440, 9.284, 13.727),
        ("mfa", 15.693, 16.738, 13.903, 19.125, 9.423, 15.815, 9.506, 14.315),
        ("tpa", 14.789, 16.622, 13.333, 18.971, 9.130, 15.717, 9.333, 13.985),
        ("gla-2", 14.605, 16.323, 13.225, 18.509, 9.118, 15.424, 9.249, 13.779),
        ("gla-4", 14.547, 16.436, 13.229, 18.578, 9.076, 15.535, 9.307, 13.815),
        ("gta", 14.733, 16.599, 13.402, 18.924, 9.129, 15.672, 9.346, 13.972),
        ("mlra-2", 14.615, 16.342, 13.236, 18.602, 9.153, 15.439, 9.242, 13.804),
        ("mlra-4", 14.407, 16.286, 13.124, 18.398, 8.937, 15.361, 9.193, 13.672),
    ],
    columns=["variant", *PAPER_SOURCES, "avg"],
).set_index("variant")

#: Paper: gated MLRA-4, average perplexity over the 7 sets (docs/paper_values.md, gating table).
PAPER_MLRA4_GATED_AVG_PPL = 13.621

# Gated attention (Qiu et al. 2025). Not the MLRA paper's values: the book labels them "Qiu et
# al.". Source: Qiu et al., "Gated Attention for Large Language Models: Non-linearity, Sparsity,
# and Attention-Sink-Free", arXiv 2505.06708, Table 4 (docs/paper_values.md, "Gated attention
# (Qiu et al. 2025)"; what each probe measures here: docs/probes.md).

#: Qiu et al.'s values of the gate probes of :mod:`gtalib.training.probes`, keyed by the ``probes.json``
#: key, as ``(without the gate, with the gate)``: mean gate score ``σ(x̃ W_g)`` (gated model
#: only, NaN without the gate), attention on the first token (0.467 → 0.048), largest residual
#: activation ``|h|`` (1053 → 94, their "massive activations").
QIU_PROBES: dict[str, tuple[float, float]] = {
    "gate_mean": (math.nan, 0.116),
    "first_token_share": (0.467, 0.048),
    "max_abs_residual": (1053.0, 94.0),
}
#: The scale of Qiu et al.'s Table 4, as the book names it next to their values.
QIU_SCALE = "1.7 B+ parameters, 400 B–3.5 T tokens"
