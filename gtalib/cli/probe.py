"""``gtalib probe RUN_FOLDER...``: the gate probes of finished runs (:mod:`gtalib.training.probes`)."""

from __future__ import annotations

import argparse
import sys
from statistics import fmean

from gtalib.cli.core import store_folder
from gtalib.training.probes import probe_run
from gtalib.training.runs import RunIncompleteError, load_spec


def add_cli(subparsers) -> argparse.ArgumentParser:
    """Register ``gtalib probe`` on an argparse ``subparsers`` object (:mod:`gtalib.cli.core`)."""
    p = subparsers.add_parser(
        "probe", help="measure the gate probes of finished runs whose checkpoint was kept",
        description="Measure, on the fixed held-out batch, each run's mean gate score, share of "
                    "attention on the first token and largest residual activation (Qiu et al. "
                    "2025; docs/probes.md), write them to RUN_FOLDER/probes.json and print a "
                    "summary (means over layers; per-layer values in the file).")
    p.add_argument("runs", nargs="+", metavar="RUN_FOLDER", help="run folders, e.g. runs/<run_id>")
    p.add_argument("--data-dir", type=store_folder, default=None, help="data cache (default $GTALIB_DATA_DIR or <repo>/data_cache)")
    p.set_defaults(func=_cli_probe)
    return p


def _cli_probe(args) -> int:
    bad, header = 0, f"{'run_id':16}  {'gate_mean':>9}  {'first_token':>11}  {'max|h|':>9}  run"
    for folder in args.runs:
        try:
            pr = probe_run(folder, args.data_dir)
        except (RunIncompleteError, FileNotFoundError) as exc:  # unfinished, no checkpoint, absent
            named = "" if folder.strip() and folder in str(exc) else f"{folder!r}: "
            print(f"gtalib probe: error: not probed: {named}{exc}", file=sys.stderr)
            bad += 1
            continue
        if header:  # printed above the first run probed, never above errors alone
            print(header)
            header = ""
        gate = "-" if pr["gate_mean"] is None else f"{fmean(pr['gate_mean']):.3f}"
        print(f"{pr['run_id']:16}  {gate:>9}  {fmean(pr['first_token_share']):>11.3f}  "
              f"{pr['max_abs_residual_overall']:>9.2f}  {load_spec(folder).describe()}")
    return 2 if bad else 0
