"""The KV-cache chapter: the paper's two tables as DataFrames and their display.

- :func:`params_table`: parameter totals, attention parameters per layer and KV-cache elements per
  token per layer for every variant of a preset, plus the gated and double-heads configurations
  the paper trained (docs/variants.md, "Parameter matching and paper sizes" and "Ablation switches").
- :func:`kv_table`: KV-cache elements per token per layer per device at TP 1/2/4/8 in the
  paper's Table-1 setting (docs/variants.md, "KV cache per device under tensor parallelism").
- :func:`show_kv_table`, :func:`show_params_table`: each on the page (the paper's Table 1
  layout; deviations from MHA), their captions are the notebook's sentences, with
  the sizes of :func:`kv_facts`.

Also printed by :mod:`gtalib.cli.tables`::

    gtalib tables params --preset paper --csv
    gtalib tables kv --csv

Reads :mod:`gtalib.book.design` (figure variants, display names) and
:mod:`gtalib.book.analysis.style` (table styling).
"""

from __future__ import annotations

import pandas as pd
from IPython.display import display

from gtalib.book.analysis.style import style_best, table_style
from gtalib.book.design.figures import ablation
from gtalib.book.design.names import display_name
from gtalib.model.config import VARIANTS
from gtalib.model.kvcache import (
    TP_DEGREES,
    kv_elems_per_device,
    kv_elems_per_token,
    table1_config,
)
from gtalib.model.params import count_params
from gtalib.model.presets import PRESETS, model_config

PARAMS_COLUMNS = ["variant", "total_params", "attn_params_per_layer", "kv_elems_per_token_layer"]
KV_COLUMNS = ["variant", "tp", "kv_elems_per_device"]


def table_configs(preset: str = "paper") -> dict[str, dict]:
    """Row name → :func:`gtalib.model.presets.model_config` options, in table order: the eleven
    variants, then ``<variant>+gate`` for the gating figure's variants, then ``<variant>+2xheads`` for the double-heads figure's
    (:data:`gtalib.book.design.figures.ABLATIONS`)."""
    rows = {v: dict(variant=v) for v in VARIANTS}
    rows.update({f"{v}+gate": dict(variant=v, gate=True) for v in ablation("gate").variants})
    rows.update({f"{v}+2xheads": dict(variant=v, head_multiplier=2) for v in ablation("double_heads").variants})
    return rows


def params_table(preset: str = "paper") -> pd.DataFrame:
    """Parameters and KV cache of every variant of ``preset`` (FFN width solved by parameter
    matching, :func:`gtalib.model.presets.model_config`), counted on the meta device.

    Returns:
        DataFrame with columns ``variant`` (row name, e.g. ``mla``, ``mla+gate``,
        ``gqa+2xheads``), ``total_params`` (tied embedding counted once), ``attn_params_per_layer``
        (the attention module incl. its internal norms and gate), ``kv_elems_per_token_layer``
        (:func:`gtalib.model.kvcache.kv_elems_per_token`). At ``preset="paper"`` the plain rows are the
        docs/variants.md table (MHA 2,872,593,408 / 37,748,736 / 6144, ...).
    Raises:
        KeyError: unknown preset (lists the allowed names).
    """
    records = []
    for name, opts in table_configs(preset).items():
        cfg = model_config(preset, opts.pop("variant"), **opts)
        n = count_params(cfg)
        records.append((name, n["total"], n["attn_per_layer"], kv_elems_per_token(cfg)))
    return pd.DataFrame.from_records(records, columns=PARAMS_COLUMNS)


def kv_table(with_units: bool = False) -> pd.DataFrame:
    """KV-cache elements per token per layer per device for every variant at TP 1, 2, 4, 8 in the
    paper's Table-1 setting (64 heads, head_dim 128, d_r 64, GQA/GTA 8 KV heads;
    :func:`gtalib.model.kvcache.table1_config`, rules in :mod:`gtalib.model.kvcache`).

    Args:
        with_units: add a ``kv_dh_units`` column (elements / head_dim, the paper's unit).
    Returns:
        DataFrame with columns ``variant, tp, kv_elems_per_device`` (+ ``kv_dh_units``), one row per
        (variant, tp), variants in the paper's order.
    """
    records = []
    for v in VARIANTS:
        cfg = table1_config(v)
        for tp in TP_DEGREES:
            n = kv_elems_per_device(cfg, tp)
            records.append((v, tp, n, n / cfg.head_dim))
    df = pd.DataFrame.from_records(records, columns=KV_COLUMNS + ["kv_dh_units"])
    return df if with_units else df[KV_COLUMNS]


def kv_facts() -> dict[str, str]:
    """The sizes the page's captions state, by name: the Table-1 setting
    (:func:`gtalib.model.kvcache.table1_config`: ``t1_n_head``, ``t1_head_dim``, ``t1_rope_dim``
    of the latent family, ``t1_n_kv_head`` of GQA and GTA) and the paper-size models'
    ``paper_d_model`` (:data:`gtalib.model.presets.PRESETS`; their layers: prose's
    ``paper_layers``, :func:`gtalib.book.chapters.prose.facts`)."""
    gqa, mla, paper = table1_config("gqa"), table1_config("mla"), PRESETS["paper"]
    return {"t1_n_head": f"{mla.n_head}", "t1_head_dim": f"{mla.head_dim}",
            "t1_rope_dim": f"{mla.qk_rope_head_dim}", "t1_n_kv_head": f"{gqa.n_kv_head}",
            "paper_d_model": f"{paper['d_model']}"}


def show_kv_table(kv: pd.DataFrame) -> None:
    """Display per-device KV elements per token and layer under TP in units of d_h (variant ×
    TP, the paper's Table 1 layout; lowest **bold**, second underlined); ``kv``:
    :func:`kv_table` with units."""
    wide = kv.pivot(index="variant", columns="tp", values="kv_dh_units").loc[
        list(dict.fromkeys(kv["variant"]))]
    wide.index = [display_name(v) for v in wide.index]
    wide.columns = [f"TP {c}" for c in wide.columns]
    display(style_best(wide, fmt="{:g}"))


def show_params_table(params: pd.DataFrame) -> None:
    """Display the paper-size parameter table (:func:`params_table`) with each total's
    deviation from MHA."""
    p = params.set_index("variant")
    mha = p.loc["mha", "total_params"]
    p.index = [_row_label(r) for r in p.index]
    shown = pd.DataFrame({
        "total parameters": p["total_params"].map("{:,}".format),
        "vs MHA": (p["total_params"] / mha - 1).map("{:+.3%}".format),
        "attention / layer": p["attn_params_per_layer"].map("{:,}".format),
        "KV elements / token / layer": p["kv_elems_per_token_layer"],
    })
    display(table_style(shown.style))


def _row_label(name: str) -> str:
    """Paper spelling of a :func:`params_table` row name (``"gla-2+2xheads"`` → ``"GLA-2 +
    2× heads"``)."""
    head, *opts = name.split("+")
    words = {"gate": "+ gate", "2xheads": "2× heads"}
    return " ".join([display_name(head), *(words.get(o, o) for o in opts)])
