"""The paper's two tables as pandas DataFrames, and the ``gtalib tables`` command that prints them.

- :func:`params_table`: parameter totals, attention parameters per layer and KV-cache elements per
  token per layer for every variant of a preset, plus the gated and double-heads configurations
  the paper trained (docs/variants.md, "Parameter matching and paper sizes" and "Ablation switches").
- :func:`kv_table`: KV-cache elements per token per layer per device at TP 1/2/4/8 in the
  paper's Table-1 setting (docs/variants.md, "KV cache per device under tensor parallelism").

Command line (wired in :mod:`gtalib.cli` with one call to :func:`add_cli`)::

    gtalib tables params --preset paper --csv
    gtalib tables kv --csv
"""

from __future__ import annotations

import argparse

import pandas as pd

from gtalib.config import VARIANTS
from gtalib.kvcache import TP_DEGREES, kv_elems_per_device, kv_elems_per_token, table1_config

#: Variants the paper trained with the output gate (docs/variants.md, "Output gate": figure variants).
GATE_RUNS: tuple[str, ...] = ("gqa", "mla", "gla-2", "mlra-2", "mlra-4")
#: Variants the paper trained with doubled query heads (docs/variants.md, "Double heads").
DOUBLE_HEAD_RUNS: tuple[str, ...] = ("gqa", "mla", "gla-2")

PARAMS_COLUMNS = ["variant", "total_params", "attn_params_per_layer", "kv_elems_per_token_layer"]
KV_COLUMNS = ["variant", "tp", "kv_elems_per_device"]


def table_configs(preset: str = "paper") -> dict[str, dict]:
    """Row name → :func:`gtalib.presets.model_config` options, in table order: the eleven
    variants, then ``<variant>+gate`` for :data:`GATE_RUNS`, then ``<variant>+2xheads`` for
    :data:`DOUBLE_HEAD_RUNS`."""
    rows = {v: dict(variant=v) for v in VARIANTS}
    rows.update({f"{v}+gate": dict(variant=v, gate=True) for v in GATE_RUNS})
    rows.update({f"{v}+2xheads": dict(variant=v, head_multiplier=2) for v in DOUBLE_HEAD_RUNS})
    return rows


def params_table(preset: str = "paper") -> pd.DataFrame:
    """Parameters and KV cache of every variant of ``preset`` (FFN width solved by parameter
    matching, :func:`gtalib.presets.model_config`), counted on the meta device.

    Returns:
        DataFrame with columns ``variant`` (row name, e.g. ``mla``, ``mla+gate``,
        ``gqa+2xheads``), ``total_params`` (tied embedding counted once), ``attn_params_per_layer``
        (the attention module incl. its internal norms and gate), ``kv_elems_per_token_layer``
        (:func:`gtalib.kvcache.kv_elems_per_token`). At ``preset="paper"`` the plain rows are the
        docs/variants.md table (MHA 2,872,593,408 / 37,748,736 / 6144, ...).
    Raises:
        KeyError: unknown preset (lists the allowed names).
    """
    from gtalib.params import count_params
    from gtalib.presets import model_config

    records = []
    for name, opts in table_configs(preset).items():
        cfg = model_config(preset, opts.pop("variant"), **opts)
        n = count_params(cfg)
        records.append((name, n["total"], n["attn_per_layer"], kv_elems_per_token(cfg)))
    return pd.DataFrame.from_records(records, columns=PARAMS_COLUMNS)


def kv_table(with_units: bool = False) -> pd.DataFrame:
    """KV-cache elements per token per layer per device for every variant at TP 1, 2, 4, 8 in the
    paper's Table-1 setting (64 heads, head_dim 128, d_r 64, GQA/GTA 8 KV heads;
    :func:`gtalib.kvcache.table1_config`, rules in :mod:`gtalib.kvcache`).

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


def add_cli(subparsers) -> argparse.ArgumentParser:
    """Register ``tables params [--preset P] [--csv]`` and ``tables kv [--csv] [--units]`` on an
    ``argparse`` subparsers object; the parsed namespace's ``func`` is :func:`run_cli`."""
    from gtalib.presets import PRESETS

    p = subparsers.add_parser("tables", help="print the parameter table or the KV-cache table")
    sub = p.add_subparsers(dest="table", required=True)
    pp = sub.add_parser("params", help="parameters and KV cache per variant of a preset")
    pp.add_argument("--preset", default="paper", choices=list(PRESETS))
    pp.add_argument("--csv", action="store_true", help="CSV instead of an aligned table")
    pk = sub.add_parser("kv", help="KV cache per device under TP 1/2/4/8 (paper Table 1 setting)")
    pk.add_argument("--csv", action="store_true", help="CSV instead of an aligned table")
    pk.add_argument("--units", action="store_true", help="add a column in units of head_dim")
    p.set_defaults(func=run_cli)
    return p


def run_cli(args: argparse.Namespace) -> int:
    """Handler of ``gtalib tables``: print the chosen table to stdout; returns exit status 0."""
    if args.table == "params":
        df = params_table(args.preset)
    else:
        df = kv_table(with_units=getattr(args, "units", False))
    print(df.to_csv(index=False) if args.csv else df.to_string(index=False), end="" if args.csv else "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m gtalib.book.tables params --csv``), same options as
    ``gtalib tables``."""
    parser = argparse.ArgumentParser(prog="gtalib")
    add_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["tables", *(argv if argv is not None else __import__("sys").argv[1:])])
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
