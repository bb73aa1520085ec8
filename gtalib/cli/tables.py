"""``gtalib tables params|kv``: the parameter and KV-cache tables (:mod:`gtalib.book.chapters.kv_cache`)."""

from __future__ import annotations

import argparse

from gtalib.book.chapters.kv_cache import kv_table, params_table


def add_cli(subparsers) -> argparse.ArgumentParser:
    """Register ``tables params [--preset P] [--csv]`` and ``tables kv [--csv] [--units]`` on an
    ``argparse`` subparsers object; the parsed namespace's ``func`` is :func:`run_cli`."""
    from gtalib.model.presets import PRESETS

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
