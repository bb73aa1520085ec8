"""The KV-cache chapter's display: per-device KV elements per token and layer under tensor
parallelism (the paper's Table 1 layout) and the paper-size parameter table with each total's
deviation from MHA.

Reads :mod:`gtalib.book.figures` (display names) and :mod:`gtalib.book.style` (table styling); the
tables themselves come from :mod:`gtalib.book.tables` (KV elements in units of dₕ, parameters as
counts).
"""

from __future__ import annotations

import pandas as pd

from gtalib.book import figures as F
from gtalib.book.style import _table_style, style_best


def show_kv_tables(kv: pd.DataFrame, params: pd.DataFrame) -> None:
    """Display the KV-cache chapter: per-device KV elements per token and layer under TP in
    units of d_h (variant × TP, the paper's Table 1 layout; lowest **bold**, second underlined)
    and the paper-size parameter table with each total's deviation from MHA."""
    from IPython.display import Markdown, display

    wide = kv.pivot(index="variant", columns="tp", values="kv_dh_units").loc[
        list(dict.fromkeys(kv["variant"]))]
    wide.index = [F.display_name(v) for v in wide.index]
    wide.columns = [f"TP {c}" for c in wide.columns]
    # notebook Markdown outputs are not typeset by MathJax: plain Unicode, no $...$
    display(Markdown("KV cache per device, per token and layer, in units of dₕ (64 query "
                     "heads, dₕ = 128, dᵣ = 64; GQA and GTA with 8 KV heads):"))
    display(style_best(wide, fmt="{:g}"))
    p = params.set_index("variant")
    mha = p.loc["mha", "total_params"]
    p.index = [_row_label(r) for r in p.index]
    shown = pd.DataFrame({
        "total parameters": p["total_params"].map("{:,}".format),
        "vs MHA": (p["total_params"] / mha - 1).map("{:+.3%}".format),
        "attention / layer": p["attn_params_per_layer"].map("{:,}".format),
        "KV elements / token / layer": p["kv_elems_per_token_layer"],
    })
    display(Markdown("Paper-size models (24 layers, d = 3072), parameter-matched to MHA by the "
                     "FFN width alone:"))
    display(_table_style(shown.style))


def _row_label(name: str) -> str:
    """Paper spelling of a :mod:`gtalib.book.tables` row name (``"gla-2+2xheads"`` → ``"GLA-2 +
    2× heads"``)."""
    head, *opts = name.split("+")
    words = {"gate": "+ gate", "2xheads": "2× heads"}
    return " ".join([F.display_name(head), *(words.get(o, o) for o in opts)])
