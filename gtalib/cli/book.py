"""``gtalib book``: the main job (:func:`gtalib.book.pipeline.job.build_book`)."""

from __future__ import annotations

import argparse
import math
import sys
import time

from gtalib.book.design.chapters import notebooks
from gtalib.book.design.seeds import DEFAULT_SEEDS, MAX_SEEDS, counts_words
from gtalib.book.pipeline.execute import CELL_TIMEOUT_S
from gtalib.book.pipeline.job import DEFAULT_BUDGET_MIN, build_book
from gtalib.book.pipeline.paths import BookError
from gtalib.book.pipeline.schedule import ACCELERATORS
from gtalib.cli.core import (
    CliError,
    add_cluster_args,
    batch_options,
    int_at_least,
    positive_float,
    positive_int,
    store_folder,
    variant_name,
)
from gtalib.cli.signals import stop_status, stop_words
from gtalib.training.config import TRAIN_PRESETS
from gtalib.training.runs import resolve_run_dir

CLI_DESCRIPTION = """\
Build the Jupyter Book end to end:

  1. build the preset's corpus if it is missing;
  2. predict what the missing runs cost here (a short timed calibration),
     print the predicted wall time, read from book/recorded/ the runs that
     would not fit --budget (whole ΔL pairs), and train the rest on a Dask
     cluster (an embedded LocalCluster of --jobs workers, or --cluster),
     printing which worker trains which run and an ETA (--train-recorded
     trains every run, the scale ladder's too);
  3. execute the notebooks with papermill at the preset (training off: a run
     that is still missing is reported on its page) into book/generated/,
     --jobs at once;
  4. install MathJax 3 from npm into .cache/mathjax once (offline math);
  5. build the HTML with Jupyter Book into book/_build/html.

Before it trains, the job also predicts the space the runs need in the run
store and refuses to start when its file system has less (--ignore-disk-space
goes on). A disk that fills up anyway stops the job at once: no further run
starts, no notebook is executed, and one line names the store and the space
free; the finished runs are kept, and the same command, with space, continues.

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
    p.add_argument("--preset", default="cpu", choices=list(TRAIN_PRESETS),
                   help="cpu (default), ci, gpu or paper")
    p.add_argument("--seeds", default=DEFAULT_SEEDS,
                   type=int_at_least(1, f"a positive integer up to {MAX_SEEDS}", MAX_SEEDS),
                   help=f"seeds per configuration, 1 to {MAX_SEEDS} (default {DEFAULT_SEEDS}; "
                        "a preset may run "
                        f"more, at cpu {counts_words('cpu', DEFAULT_SEEDS)})")
    p.add_argument("--max-steps", type=positive_int, default=None, help="override the preset's steps")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="torch threads per training run (default 1)")
    add_cluster_args(p, "the runs train")
    p.add_argument("--budget", type=budget_minutes, default=DEFAULT_BUDGET_MIN, metavar="MINUTES",
                   help="the job's wall-time budget: runs predicted not to fit (a short timed "
                        "calibration scales their recorded costs to this machine) are read from "
                        "their records, whole ΔL pairs at a time; 'none' trains every run the "
                        f"store lacks (default {DEFAULT_BUDGET_MIN:g})")
    p.add_argument("--predict", action="store_true",
                   help="print the calibration, the predicted wall time, what the budget reads "
                        "from records and the runs it would train by figure, then stop (nothing "
                        "is trained; a missing corpus is built, since run ids hash it)")
    p.add_argument("--run-dir", type=store_folder, default=None,
                   help="run store (default $GTALIB_RUN_DIR or runs/)")
    p.add_argument("--accelerator", default="auto", choices=ACCELERATORS,
                   help="Lightning accelerator for training (default auto: a GPU if present)")
    p.add_argument("--only", default=None,
                   help="comma-separated notebooks to execute; only the runs they read are "
                        "trained; the HTML is built only where every other page was executed "
                        "before (default: all of " + ", ".join(notebooks()) + ")")
    p.add_argument("--variants", type=user_variants, default=(), metavar="MODULE:CLASS,...",
                   help="your own attention variants (subclasses of gtalib's Attention, by import "
                        "path; docs/interfaces.md), trained and drawn beside the paper's on every "
                        "ablation page whose arms they can take, tested apart from its claims")
    p.add_argument("--cell-timeout", type=positive_float, default=None, metavar="SECONDS",
                   help="time limit per notebook cell (default by preset: " + ", ".join(
                       f"{k} {v} s" for k, v in CELL_TIMEOUT_S.items()) + ")")
    training = p.add_mutually_exclusive_group()
    training.add_argument("--no-train", action="store_true",
                          help="do not train; pages report missing runs")
    training.add_argument("--train-recorded", action="store_true",
                   help="train every run of the book and of the scale ladder, whatever "
                        "--budget, instead of reading any from book/recorded/ (hours on a CPU)")
    p.add_argument("--no-html", action="store_true", help="execute notebooks only")
    p.add_argument("--ignore-disk-space", action="store_true",
                   help="train even where the run store's file system has less space free than "
                        "the runs are predicted to need (checkpoints and results; the job checks "
                        "it before training, and stops at once if the disk fills up anyway)")
    p.set_defaults(func=_run_cli)
    return p


def budget_minutes(text: str) -> float | None:
    """``--budget``: a positive, finite number of minutes, or ``none`` (no budget)."""
    if text.strip().lower() == "none":
        return None
    try:
        minutes = positive_float(text)
    except argparse.ArgumentTypeError:
        minutes = math.nan
    if not math.isfinite(minutes):  # 'inf' parses as a float: 'none' is the one spelling
        raise argparse.ArgumentTypeError(
            f"expected a positive number of minutes or 'none', got {text!r}")
    return minutes


def user_variants(text: str) -> tuple[str, ...]:
    """``--variants``: comma-separated import paths (``module:Class``), each importable and an
    ``Attention`` subclass (:func:`gtalib.cli.core.variant_name`); whether each can be
    parameter-matched at the book's preset is checked before anything trains."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise argparse.ArgumentTypeError("name at least one variant as module:Class")
    for name in names:
        if ":" not in name:
            raise argparse.ArgumentTypeError(
                f"{name!r} is not a variant of yours (module:Class); the paper's variants are "
                f"always shown")
        variant_name(name)
    return names


def _check_user_variants(preset: str, names) -> None:
    """Refuse, in one line, a user's variant that cannot be parameter-matched at ``preset``."""
    from gtalib.model.presets import model_config

    for name in names:
        try:
            model_config(preset, name)
        except (KeyError, ValueError) as exc:
            raise CliError(f"--variants: {exc.args[0]}") from None


def _run_cli(args) -> int:
    names = notebooks() if args.only is None else tuple(
        n.strip() for n in args.only.split(",") if n.strip())
    if not names:
        raise CliError(f"--only: name at least one notebook; allowed: {', '.join(notebooks())}")
    batch = batch_options(args)
    if args.predict and args.no_train:
        raise CliError("--predict: not allowed with --no-train (a build that trains nothing has "
                       "no training to predict)")
    _check_user_variants(args.preset, args.variants)
    if args.predict:
        return _predict(args, names, batch)
    try:
        build_book(args.preset, args.seeds, args.max_steps, args.jobs, args.threads, args.run_dir,
                   names, train=not args.no_train, html=not args.no_html,
                   accelerator=args.accelerator, cell_timeout=args.cell_timeout,
                   train_recorded=args.train_recorded, cluster=args.cluster,
                   scheduler_file=args.scheduler_file, batch=batch,
                   budget_min=args.budget, ignore_disk_space=args.ignore_disk_space,
                   variants=args.variants)
    except BookError as e:  # reported like every command's errors: "gtalib book: error: ...", 2
        raise CliError(str(e)) from e
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (gtalib.cli.signals): the cluster is closed
        # and its runs cancelled on the way out
        print(f"gtalib book: {stop_words()}; the finished runs are kept in "
              f"{resolve_run_dir(args.run_dir)}: run the same command again to train the rest",
              file=sys.stderr)
        return stop_status()
    return 0


def _predict(args, names, batch: dict) -> int:
    from gtalib.book.design.plan import make_plan
    from gtalib.book.pipeline.job import check_disk_space, ensure_corpus, runs_to_train
    from gtalib.book.pipeline.schedule import (
        default_jobs,
        open_cluster,
        resolve_accelerator,
    )

    started = time.perf_counter()  # the job would count from here too
    plan = make_plan(args.preset, args.seeds, args.max_steps, names, args.variants)
    ensure_corpus(plan)  # the run ids hash the corpus
    jobs = args.jobs or default_jobs()
    # the workers that would train are timed as they would be: all at once
    accelerator = resolve_accelerator(args.accelerator, args.cluster, args.scheduler_file)
    with open_cluster(args.cluster, args.scheduler_file, jobs, batch,
                      accelerator) as (c, where):
        run_dir = resolve_run_dir(args.run_dir)
        _, _, choice = runs_to_train(plan, run_dir, jobs, args.threads, args.budget,
                                     args.train_recorded, where, client=c, list_runs=True,
                                     started=started)
    check_disk_space(choice, run_dir, ignore=True, going_on="the job would refuse to start "
                                                           "(--ignore-disk-space starts anyway)")
    return 0
