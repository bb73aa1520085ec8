"""Names and colours of the variants and of their configurations, as the book spells them: the
paper's display names, its figure colours (``docs/paper_values.md``, "The ablation figures"), the
option defaults and a configuration's label. Reads nothing of the package.
"""

from __future__ import annotations

#: Colours of the initialisation figure (docs/paper_values.md: MHA purple, MQA brown, GQA teal, MLA blue,
#: MFA pink, TPA orange, GLA-2 gray, GLA-4 light blue, GTA green).
INIT_COLORS: dict[str, str] = {
    "mha": "tab:purple", "mqa": "tab:brown", "gqa": "teal", "mla": "tab:blue",
    "mfa": "tab:pink", "tpa": "tab:orange", "gla-2": "tab:gray", "gla-4": "lightskyblue",
    "gta": "tab:green",
}
#: Colours of the gating figure (docs/paper_values.md: GQA teal, MLA blue, GLA-2 gray, MLRA-2 orange,
#: MLRA-4 red); reused by the latent-scaling and double-heads figures, whose colours the paper
#: text does not list.
GATE_COLORS: dict[str, str] = {
    "gqa": "teal", "mla": "tab:blue", "gla-2": "tab:gray", "mlra-2": "tab:orange",
    "mlra-4": "tab:red",
}
#: One colour per variant for plots that show all eleven (main results, decode speed).
VARIANT_COLORS: dict[str, str] = {**INIT_COLORS, "mlra-2": "tab:orange", "mlra-4": "tab:red"}
# MLRA-2 and TPA are both orange in the paper (different figures); in all-variant plots TPA
# takes gold so the two stay distinguishable.
VARIANT_COLORS["tpa"] = "goldenrod"

DISPLAY = {
    "mha": "MHA", "mqa": "MQA", "gqa": "GQA", "mla": "MLA", "mfa": "MFA", "tpa": "TPA",
    "gla-2": "GLA-2", "gla-4": "GLA-4", "gta": "GTA", "mlra-2": "MLRA-2", "mlra-4": "MLRA-4",
}



#: Colours of a user's own variants (``module:Class``), in the order they are given: none of
#: them is a colour of the paper's figures.
USER_COLORS = ("black", "tab:olive", "tab:cyan", "darkgoldenrod", "indigo")


def is_user_variant(variant) -> bool:
    """Whether ``variant`` is a user's own, named by import path ``module:Class``
    (:mod:`gtalib.model.user_variants`) rather than one of the paper's."""
    return isinstance(variant, str) and ":" in variant


def display_name(variant: str) -> str:
    """The paper's spelling of a canonical variant name (``"mlra-4"`` → ``"MLRA-4"``); a user's
    variant (``"my_attention:NoPE"``) by its class name (``"NoPE"``).

    Raises:
        KeyError: unknown variant; the message lists the known ones.
    """
    if is_user_variant(variant):
        return variant.rpartition(":")[2]
    return lookup(DISPLAY, variant, f"unknown variant {variant!r}; known")


def lookup(table: dict, key, message: str):
    """``table[key]``, or a KeyError ``"<message>: <the allowed keys>"``."""
    try:
        return table[key]
    except KeyError:
        raise KeyError(f"{message}: {', '.join(table)}") from None


def config_label(variant: str, options: dict) -> str:
    """Human label of a configuration: ``"MLRA-4 + gate"``, ``"MLA (normal init)"``."""
    parts = []
    for k, v in sorted(options.items()):
        if k == "gate":
            parts.append("+ gate" if v else "no gate")
        elif k == "init":
            parts.append(f"{v} init")
        elif k == "latent_scale":
            parts.append("scale" if v else "no scale")
        elif k == "head_multiplier":
            parts.append(f"{v}× heads")
        else:
            parts.append(f"{k}={v}")
    return " ".join([display_name(variant), *parts])



#: Option defaults of ``gtalib.model.presets.model_config`` (docs/variants.md "Ablation switches").
OPTION_DEFAULTS = {"init": "zero", "gate": False, "latent_scale": True, "head_multiplier": 1}


def canonical_options(options) -> tuple:
    """Options with defaults dropped, so ``{"gate": False}`` and ``{}`` name the same model."""
    d = dict(options)
    return option_pairs({k: v for k, v in d.items() if OPTION_DEFAULTS.get(k, object()) != v})


def option_pairs(options: dict) -> tuple:
    """``options`` as sorted ``(key, value)`` pairs: hashable, one spelling per configuration."""
    return tuple(sorted(options.items()))


def and_join(names) -> str:
    """``"GQA, MLA and MLRA-2"``: names joined by commas and a final "and"."""
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
