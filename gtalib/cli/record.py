"""``gtalib record {add,list,check,costs}``: the recorded runs of ``book/recorded/``
(:mod:`gtalib.training.records`)."""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from gtalib.book.pipeline.schedule import train_all
from gtalib.cli.core import add_cluster_args, batch_options, folder, store_folder
from gtalib.cli.signals import stop_status, stop_words
from gtalib.training import records
from gtalib.training import runs as store
from gtalib.training.record_costs import costs_markdown
from gtalib.training.records import (
    OUTCOMES,
    check_record,
    default_record_dir,
    list_records,
    load_record_info,
    record_label,
    record_run,
)


def add_cli(subparsers) -> argparse.ArgumentParser:
    """Register ``gtalib record`` on an argparse ``subparsers`` object (:mod:`gtalib.cli.core`)."""
    p = subparsers.add_parser("record", help="recorded runs: add, list, re-train and check",
                              description=records.__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="record_command", metavar="ACTION", required=True)
    a = sub.add_parser("add", help="record finished runs (run folders of a run store)")
    a.add_argument("runs", nargs="+", help="run folders, e.g. runs/<run_id>")
    a.add_argument("--record-dir", type=store_folder, default=None,
                   help="default $GTALIB_RECORD_DIR or book/recorded")
    a.add_argument("--replace", action="store_true",
                   help="overwrite a record of the same run id whose metrics differ (default: "
                        "keep it and report the run as not recorded)")
    a.set_defaults(func=_cli_add)
    ls = sub.add_parser("list", help="list the recorded runs")
    ls.add_argument("--record-dir", type=folder, default=None,
                    help="default $GTALIB_RECORD_DIR or book/recorded")
    ls.set_defaults(func=_cli_list)
    c = sub.add_parser("check", help="re-train recorded runs and compare them with the record: "
                       "bit-identical, within the cross-machine envelope, or mismatch")
    c.add_argument("run_ids", nargs="*", help="run ids (default: all; see `gtalib record list`)")
    c.add_argument("--record-dir", type=folder, default=None,
                   help="default $GTALIB_RECORD_DIR or book/recorded")
    c.add_argument("--keep", metavar="RUN_DIR", type=store_folder, default=None,
                   help="re-train into this run store and keep the runs there (a run already "
                        "finished there is compared as it is), e.g. to `gtalib record add` a "
                        "bit-identical re-training so that the record names this machine kind "
                        "(docs/cross_cpu.md); default: a temporary folder, deleted")
    add_cluster_args(c, "the records are re-trained")
    c.set_defaults(func=_cli_check)
    k = sub.add_parser("costs", help="what each recorded configuration cost, in core-seconds, "
                       "and on which CPU (Markdown, as docs/recorded_runs.md)")
    k.add_argument("--record-dir", type=folder, default=None,
                   help="default $GTALIB_RECORD_DIR or book/recorded")
    k.set_defaults(func=lambda args: print(costs_markdown(_record_dir(args)), end="") or 0)
    return p


def _cli_add(args) -> int:
    bad = 0
    for r in args.runs:
        try:
            print(record_run(r, args.record_dir, replace=args.replace))
        except (store.RunIncompleteError, FileNotFoundError, FileExistsError) as exc:
            # unfinished, corrupt or absent; or a record with other metrics, kept. The other
            # runs given are still recorded.
            print(f"gtalib record add: error: not recorded: {exc}", file=sys.stderr)
            bad += 1
    return 2 if bad else 0


def _record_dir(args) -> Path:
    """``--record-dir`` (default :func:`default_record_dir`), which must be a folder."""
    record_dir = Path(args.record_dir) if args.record_dir else default_record_dir()
    if not record_dir.is_dir():
        raise ValueError(f"--record-dir {record_dir}: no such folder")
    return record_dir


def _cli_list(args) -> int:
    rows = [("run_id", "n_layer", "d_model", "run", "recorded")]
    for bundle in list_records(_record_dir(args)):
        spec = store.load_spec(bundle)
        rows.append((bundle.name, str(spec.model.n_layer), str(spec.model.d_model), spec.describe(),
                     record_label(load_record_info(bundle))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    return 0


def check_cost_line(record_dir, n_runs: int, jobs: int | None) -> str:
    """What re-training every record of ``record_dir`` costs, as recorded
    (:func:`gtalib.training.record_costs.cost_table`: core-seconds, each run's wall time × its
    threads), in core-hours and in hours on ``jobs`` one-thread workers (default: the embedded
    cluster's size)."""
    from gtalib.book.pipeline.schedule import default_jobs
    from gtalib.training.record_costs import cost_table

    table = cost_table(record_dir)
    core_h = float(table["core_s_total"].sum()) / 3600
    workers = jobs or default_jobs()
    return (f"record check: re-training all {n_runs} recorded run(s) of {len(table)} "
            f"configuration(s) in {record_dir}: {'at least ' if table['lower_bound'].any() else ''}"
            f"{core_h:,.1f} core-hours as recorded, ≈ {core_h / workers:,.1f} h on {workers} "
            "one-thread worker(s) at the recorded pace (give run ids to check fewer)")


def _cli_check(args) -> int:
    record_dir = _record_dir(args)
    if any(not rid.strip() or "/" in rid for rid in args.run_ids):
        raise ValueError(f"run ids {args.run_ids}: each must be a run id as `gtalib record "
                         f"list` prints it (16 hex digits), not empty or a path")
    folders = [record_dir / rid for rid in args.run_ids] if args.run_ids else list_records(record_dir)
    if not folders:
        raise ValueError(f"--record-dir {record_dir}: no recorded run there")
    missing = [f.name for f in folders if not (f / "record.json").is_file()]
    if missing:
        raise ValueError(f"no recorded run {', '.join(missing)} in {record_dir} "
                         f"(see `gtalib record list`)")
    if not args.run_ids:  # every record: say what that costs before it starts
        print(check_cost_line(record_dir, len(folders), args.jobs), flush=True)
    counts = dict.fromkeys(OUTCOMES, 0)
    work_dir = (contextlib.nullcontext(str(Path(args.keep).resolve())) if args.keep else
                tempfile.TemporaryDirectory(prefix="gtalib-check-"))
    try:
        _check_all(args, folders, counts, work_dir)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (gtalib.cli.signals): the cluster is closed
        # and the work store deleted on the way out
        print(f"gtalib record check: {stop_words()}"
              + (f"; the re-trained runs are kept in {args.keep}" if args.keep else
                 "; its temporary work store is deleted"), file=sys.stderr)
        return stop_status()
    print(f"recorded runs checked: {counts['bit-identical']} bit-identical, "
          f"{counts['within envelope']} within envelope, {counts['mismatch']} mismatch")
    return 1 if counts["mismatch"] else 0


def _check_all(args, folders, counts: dict, work_dir) -> None:
    """Re-train ``folders`` (record bundles) in ``work_dir`` (a context giving the work store)
    and compare each with its record, counting the outcomes in ``counts``."""
    with work_dir as work:
        # every record re-trained at once on the cluster (each with its card's thread count),
        # then each compared with the run found finished in the work store
        by_threads = defaultdict(list)
        for folder in folders:
            spec = store.load_spec(folder)
            by_threads[store.load_card(folder).get("threads") or 1].append(
                (spec.describe().split(" seed=")[0], spec))
        failed = {}
        for threads, specs in by_threads.items():
            for message in train_all(specs, work, args.jobs, threads, "cpu", cluster=args.cluster,
                                     scheduler_file=args.scheduler_file,
                                     batch=batch_options(args)):
                failed[message.split()[0]] = message
        for folder in folders:
            if folder.name in failed:  # its re-training failed: nothing to compare
                print(f"{folder.name}: mismatch: re-training failed: {failed[folder.name]}")
                counts["mismatch"] += 1
                continue
            res = check_record(folder, work_dir=work)
            print(res.message(), flush=True)
            counts[res.outcome] += 1

