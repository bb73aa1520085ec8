#!/usr/bin/env python
"""Train the declared data-order runs that the repository has not recorded yet, and record each.

Two designs (docs/curve_features.md): ``--design repeat`` (``seeds.DATA_ORDERS_DECLARED``)
repeats the pair at initialisation seed 0 of every variant of each ablation figure at data
orders 1-4; ``--design joint`` (``seeds.JOINT_DECLARED``, the default) trains
pair k of every variant at initialisation seed k and data order k, k = 1-9 (pair 0 is recorded
with the figure), the gating figure first (its runs are the longest). This command trains those
of its runs that ``book/recorded/`` lacks (an arm that is already another figure's recorded run,
the same configuration, seed and data order, has the same run id and is not trained again)
through the book's own scheduler (Dask; both arms of a pair on one worker, one thread per run),
into a run store (a rerun resumes there), and records every finished run with
``gtalib record add``'s function. Once a figure's whole set is recorded, add it to
``seeds.DATA_ORDERS`` (``seeds.JOINT``) so that the book reads it.

Usage::

    .venv/bin/python scripts/record_data_orders.py [--design joint] [--figure gate]
        [--run-dir DIR] [--jobs 2]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gtalib.book.design.figures import ABLATIONS
from gtalib.book.design.plan import make_plan
from gtalib.book.design.seeds import DATA_ORDERS_DECLARED, JOINT_DECLARED
from gtalib.book.pipeline.schedule import train_all
from gtalib.training import records
from gtalib.training.runs import is_done, run_path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--design", choices=("joint", "repeat"), default="joint",
                    help="joint: pair k at seed k and data order k (default); repeat: the pair "
                         "at seed 0 at data orders 1-4")
    ap.add_argument("--figure", choices=tuple(ABLATIONS), action="append",
                    help="the figure(s) whose set to train (default: all, in the declared order)")
    ap.add_argument("--run-dir", type=Path, default=Path("runs"), help="run store (default runs/)")
    ap.add_argument("--jobs", type=int, default=2, help="training processes (default 2)")
    args = ap.parse_args(argv)
    plan = make_plan("cpu", 1)
    declared = JOINT_DECLARED["cpu"] if args.design == "joint" else DATA_ORDERS_DECLARED["cpu"]
    # the gating runs first: they are the longest
    for key in args.figure or sorted(declared, key=lambda k: k != "gate"):
        fig = ABLATIONS[key]
        refs = (fig.joint_runs("cpu", pairs=declared[key])[2 * len(fig.variants_at("cpu")):]
                if args.design == "joint" else fig.data_order_runs("cpu", orders=declared[key]))
        specs = [(f"{r.label} seed {r.seed} data order {dict(r.train)['data_seed']}",
                  plan.spec(r)) for r in refs]
        todo = [(label, s) for label, s in specs if records.find_record(s) is None]
        print(f"{key}: {len(specs) - len(todo)} of {len(specs)} data-order runs recorded, "
              f"{len(todo)} to train into {args.run_dir}")
        failed = train_all(todo, args.run_dir, jobs=args.jobs, threads=1) if todo else []
        for _, spec in todo:
            if is_done(run_path(spec, args.run_dir)):
                print("recorded", records.record_run(run_path(spec, args.run_dir)))
        if failed:
            print("\n".join(failed))
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
