"""The paper's two tables as pandas DataFrames (printed by ``gtalib tables``).

- :func:`params_table`: parameter totals, attention parameters per layer and KV-cache elements per
  token per layer for every variant of a preset, plus the gated and double-heads configurations
  the paper trained (docs/variants.md, "Parameter matching and paper sizes" and "Ablation switches").
- :func:`kv_table`: KV-cache elements per token per layer per device at TP 1/2/4/8 in the
  paper's Table-1 setting (docs/variants.md, "KV cache per device under tensor parallelism").

Printed by :mod:`gtalib.cli.tables`::

    gtalib tables params --preset paper --csv
    gtalib tables kv --csv
"""

from __future__ import annotations


import pandas as pd

from gtalib.model.config import VARIANTS
from gtalib.model.kvcache import TP_DEGREES, kv_elems_per_device, kv_elems_per_token, table1_config

#: Variants the paper trained with the output gate (docs/variants.md, "Output gate": figure variants).
GATE_RUNS: tuple[str, ...] = ("gqa", "mla", "gla-2", "mlra-2", "mlra-4")
#: Variants the paper trained with doubled query heads (docs/variants.md, "Double heads").
DOUBLE_HEAD_RUNS: tuple[str, ...] = ("gqa", "mla", "gla-2")

PARAMS_COLUMNS = ["variant", "total_params", "attn_params_per_layer", "kv_elems_per_token_layer"]
KV_COLUMNS = ["variant", "tp", "kv_elems_per_device"]


def table_configs(preset: str = "paper") -> dict[str, dict]:
    """Row name → :func:`gtalib.model.presets.model_config` options, in table order: the eleven
    variants, then ``<variant>+gate`` for :data:`GATE_RUNS`, then ``<variant>+2xheads`` for
    :data:`DOUBLE_HEAD_RUNS`."""
    rows = {v: dict(variant=v) for v in VARIANTS}
    rows.update({f"{v}+gate": dict(variant=v, gate=True) for v in GATE_RUNS})
    rows.update({f"{v}+2xheads": dict(variant=v, head_multiplier=2) for v in DOUBLE_HEAD_RUNS})
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
    from gtalib.model.params import count_params
    from gtalib.model.presets import model_config

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
