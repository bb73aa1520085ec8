"""``gtalib book``: the main job (:func:`gtalib.book.job.build_book`)."""

from __future__ import annotations

import argparse

from gtalib.cli.core import CliError, positive_int

from gtalib.book.job import DEFAULT_SEEDS, NOTEBOOKS, build_book
from gtalib.book.layout import BookError
from gtalib.book.notebooks import CELL_TIMEOUT_S

CLI_DESCRIPTION = """\
Build the Jupyter Book end to end:

  1. build the preset's corpus if it is missing;
  2. train every missing run of every figure on a Dask cluster (an embedded
     LocalCluster of --jobs workers, or --cluster),
     printing which run, how many are left and an ETA; runs recorded in
     book/recorded/ are read from there (--train-recorded trains them too);
  3. execute the notebooks with papermill at the preset (training off: a run
     that is still missing is reported on its page) into book/generated/;
  4. install MathJax 3 from npm into .cache/mathjax once (offline math);
  5. build the HTML with Jupyter Book into book/_build/html.

Exit status 0 only if every run trained, every notebook executed and the HTML
build is clean (no Sphinx warning, no error output on any page); otherwise 2, with
one line "gtalib book: error: ..." saying what failed. With --no-train
nothing is trained: missing runs are listed on their pages and are not an error.

Example:
  gtalib book --preset ci --seeds 2 --jobs 2
"""


def add_cli(subparsers) -> argparse.ArgumentParser:
    """Register the ``book`` subcommand on an argparse ``subparsers`` object (``gtalib.cli.core``)."""
    p = subparsers.add_parser(
        "book", help="train missing runs, execute the notebooks, build the HTML book",
        description=CLI_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="cpu", help="cpu (default), ci, gpu or paper")
    p.add_argument("--seeds", type=int, default=DEFAULT_SEEDS,
                   help=f"seeds per configuration (default {DEFAULT_SEEDS})")
    p.add_argument("--max-steps", type=int, default=None, help="override the preset's steps")
    p.add_argument("--jobs", type=positive_int, default=None,
                   help="training workers (or batch jobs), and notebooks executed at once "
                        "(default: the usable cores, at most one per 1.5 GB of free memory)")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="torch threads per training run (default 1)")
    c = p.add_argument_group("where the runs train (Dask distributed; default: an embedded "
                             "LocalCluster on this machine)")
    c.add_argument("--cluster", default=None, metavar="tcp://HOST:PORT|slurm|pbs|lsf",
                   help="a running Dask scheduler, or workers submitted as batch jobs through "
                        "dask-jobqueue (its ~/.config/dask/jobqueue.yaml, then the --batch-* flags)")
    c.add_argument("--scheduler-file", default=None, help="a running Dask cluster's scheduler file")
    c.add_argument("--batch-cores", type=positive_int, default=1, help="cores per batch job")
    c.add_argument("--batch-memory", default="4GB", help="memory per batch job")
    c.add_argument("--batch-gpus", type=int, default=0, help="GPUs per batch job")
    c.add_argument("--batch-walltime", default="02:00:00", help="walltime per batch job")
    c.add_argument("--batch-account", default=None, help="account to charge the batch jobs to")
    c.add_argument("--batch-queue", default=None, help="queue / partition of the batch jobs")
    p.add_argument("--run-dir", default=None, help="run store (default $GTALIB_RUN_DIR or runs/)")
    p.add_argument("--accelerator", default="auto", choices=("auto", "cpu", "gpu"),
                   help="Lightning accelerator for training (default auto: a GPU if present)")
    p.add_argument("--only", default=None,
                   help="comma-separated notebooks to execute (default: all of "
                        + ", ".join(NOTEBOOKS) + ")")
    p.add_argument("--cell-timeout", type=float, default=None, metavar="SECONDS",
                   help="time limit per notebook cell (default by preset: " + ", ".join(
                       f"{k} {v} s" for k, v in CELL_TIMEOUT_S.items()) + ")")
    p.add_argument("--no-train", action="store_true", help="do not train; pages report missing runs")
    p.add_argument("--train-recorded", action="store_true",
                   help="also train the runs the repository has recorded (the scale ladder's "
                        "and the default's most expensive ones; hours on a CPU) instead of "
                        "reading their bundles")
    p.add_argument("--no-html", action="store_true", help="execute notebooks only")
    p.set_defaults(func=_run_cli)
    return p


def batch_options(args) -> dict:
    """The ``--batch-*`` flags as options of :func:`gtalib.book.schedule.batch_cluster`."""
    return {"cores": args.batch_cores, "memory": args.batch_memory, "gpus": args.batch_gpus,
            "walltime": args.batch_walltime, "account": args.batch_account,
            "queue": args.batch_queue}


def _run_cli(args) -> int:
    names = NOTEBOOKS if args.only is None else tuple(n.strip() for n in args.only.split(","))
    try:
        build_book(args.preset, args.seeds, args.max_steps, args.jobs, args.threads, args.run_dir,
                   names, train=not args.no_train, html=not args.no_html,
                   accelerator=args.accelerator, cell_timeout=args.cell_timeout,
                   train_recorded=args.train_recorded, cluster=args.cluster,
                   scheduler_file=args.scheduler_file, batch=batch_options(args))
    except BookError as e:  # reported like every command's errors: "gtalib book: error: ...", 2
        raise CliError(str(e)) from e
    return 0
