"""The main job: corpus → training runs → papermill notebooks → Jupyter Book HTML.

``gtalib book [--preset cpu|ci|gpu] [--seeds N] [--jobs J] ...``:

1. builds the preset's corpus if it is missing (:mod:`gtalib.data`);
2. predicts what each missing run of every figure costs on this machine (a short timed
   calibration, :mod:`gtalib.book.pipeline.calibration`; the costs,
   :mod:`gtalib.book.pipeline.budget`), prints the predicted wall time on its ``J`` workers,
   keeps within ``--budget MINUTES`` (default 60) by reading from the repository's recorded runs
   (``book/recorded/``, :mod:`gtalib.training.records`) the tasks that would not fit, whole ΔL
   pairs at a time, and trains the rest on a Dask cluster
   (:mod:`gtalib.book.pipeline.schedule`), printing which worker trains which run and an ETA;
   ``--train-recorded`` trains every run, the scale ladder's too, whatever the budget;
3. computes each ablation figure's result once, into a folder private to the build
   (:data:`gtalib.book.chapters.shared.ENV_SHARED_RESULTS`), then executes every notebook of
   ``notebooks/`` with papermill at the preset (parameters injected, training off: a run that
   is still missing is reported on its page), writing the executed copies to
   ``book/generated/``; the figure pages, the claims page and the generated snippets of the
   methods chapter read those results;
4. installs MathJax 3 from npm into ``.cache/mathjax`` (once) so that math renders offline;
5. builds the HTML with Jupyter Book 1.x (execution off, ``-W -n --keep-going``) into
   ``book/_build/html`` and fails if a notebook raised, Sphinx warned, or any rendered page
   contains an error output.

Exit status 0 only if every run trained, every notebook executed and the HTML is clean (with
``--no-train`` nothing is trained and missing runs are reported on their pages, not as an error).
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gtalib.book.analysis.collect import OUTCOME_WORDS
from gtalib.book.analysis.style import plural
from gtalib.book.chapters.ablation import ablation_results
from gtalib.book.chapters.against_records import AgainstRecords, against_records
from gtalib.book.chapters.shared import ENV_SHARED_RESULTS
from gtalib.book.design.chapters import notebooks as all_notebooks
from gtalib.book.design.chapters import toc_yaml
from gtalib.book.design.figures import ABLATIONS
from gtalib.book.design.plan import Plan, make_plan
from gtalib.book.design.figure_plan import DEFAULT_SEEDS, check_seeds
from gtalib.book.design.seeds import counts_words
from gtalib.book.design.spot_check import training_tiers
from gtalib.book.pipeline import budget, calibration
from gtalib.book.pipeline.execute import (
    execute_notebooks,
    notebook_errors,
    notebook_parameters,
)
from gtalib.book.pipeline.paths import BOOK_DIR, REPO, BookError
from gtalib.book.pipeline.schedule import (
    BATCH_SYSTEMS,
    default_jobs,
    open_cluster,
    resolve_accelerator,
    train_all,
    usable_cores,
)
from gtalib.book.pipeline.snippets import write_chapter_snippets
from gtalib.data.archives import default_data_dir
from gtalib.training import record_costs, records, runs
from gtalib.training.disk import StoreFullError, check_space, held_bytes
from gtalib.training.machine import machine_label
from gtalib.training.runs import is_done, resolve_run_dir, run_path

MATHJAX_VERSION = "3.2.2"
#: The job's default time budget in minutes (``--budget``): the README's promise for the default
#: book, installation aside.
DEFAULT_BUDGET_MIN = 60.0


# ---------------------------------------------------------------------------------------------
# 1. corpus


def ensure_corpus(plan: Plan, log=print) -> None:
    """Build the plan's default corpus if it is missing, saying so (:meth:`Plan.data`)."""

    path = runs.make_datamodule("default", plan.tokenizer, plan.train).path
    if not (path / "manifest.json").is_file():
        log(f"building the corpus {path} (once) ...")
    plan.data(build=True)


# ---------------------------------------------------------------------------------------------
# 2. runs: which to train (:func:`runs_to_train`), then :func:`gtalib.book.pipeline.schedule.train_all`


def runs_to_train(plan: Plan, run_dir, workers: int, threads: int | None = None,
                  budget_min: float | None = DEFAULT_BUDGET_MIN, train_recorded: bool = False,
                  where: str | None = None, log=print, client=None, list_runs: bool = False,
                  started: float | None = None):
    """The runs the job trains and their expected seconds: ``(specs, seconds, choice)``.

    Every run of the plan (and of its ladder with ``train_recorded``) that the local store lacks
    is a candidate, offered in :func:`gtalib.book.design.spot_check.training_tiers` (the
    spot-check set, seed 0 of the other variants, the other seeds); :func:`gtalib.book.pipeline.budget.choose` keeps those without a
    record and adds the others while the predicted job fits ``budget_min`` (``None``, or
    ``train_recorded``: all), counting the seconds since ``started`` (the job's
    ``time.perf_counter()`` at its start; ``None``: a prediction made before the job). The
    calibration (one run per step shape to train,
    :func:`gtalib.book.pipeline.calibration.calibration_specs`) runs on the workers of
    ``client``, as many at once as there are
    (:func:`gtalib.book.pipeline.calibration.calibrate_workers`),
    else in this process; ``workers`` is then the number that answered. Prints the calibration, the prediction and what is read
    from records; with ``list_runs`` also the runs it would train, by figure
    (:func:`runs_by_figure`).
    """

    tiers = training_tiers(plan)
    refs = [r for t in tiers for r in t] + (list(plan.ladder_refs) if train_recorded else [])
    labelled = [(r.label, plan.spec(r)) for r in refs]
    label = {s.run_id: lab for lab, s in labelled}
    todo = list({s.run_id: s for _, s in labelled
                 if not is_done(run_path(s, run_dir))}.values())
    costs = record_costs.cost_table()
    ref = calibration.reference_spec(plan)
    step_s = calibration.timed_step_s(ref, costs)
    if step_s > calibration.MAX_TIMED_STEP_S:  # the paper's 2.9 B model: its step is not timed
        cal = calibration.flops_calibration(plan, costs)
    else:
        shapes = calibration.calibration_specs(plan, todo)
        timed, setup_s, answered = (
            calibration.calibrate_workers(client, shapes, threads or 1, setup=ref) if client
            else ({}, None, 0))
        if setup_s is None:  # no worker: this process trains the runs
            setup_s = calibration.time_setup(ref.to_dict(), threads or 1)
        cal = calibration.calibrate(plan, costs, threads or 1, timed=timed, todo=todo,
                                    workers=answered, setup_s=setup_s)
    measured = cal.workers > 0
    if measured and not str(where).startswith(BATCH_SYSTEMS):  # a batch system grows to `workers`
        workers = cal.workers
    embedded = where is None or where.startswith("embedded")
    if embedded and workers > usable_cores():
        log(f"jobs: {workers} workers on {usable_cores()} core(s) share them, each run slower "
            f"(the calibration timed them sharing); --jobs {usable_cores()} gives each its own")
    recorded = {s.run_id: records.find_record(s) is not None for s in todo}
    tier = {plan.spec(r).run_id: i for i, t in enumerate(tiers) for r in t}
    choice = budget.choose(todo, recorded, cal, costs, workers,
                           None if train_recorded or budget_min is None else budget_min * 60,
                           {rid for rid, i in tier.items() if i == 0}, tier,
                           None if started is None else time.perf_counter() - started)
    here = f"this machine ({machine_label(cpus=False)})"
    where = here if embedded else (
        f"{where}, workers as fast as measured" if measured
        else f"{where}, workers assumed as fast as {here}")
    log(f"runs: {len(plan.runs)} in the book, {len(plan.runs) - len(todo)} in {run_dir}"
        if not train_recorded else f"runs: {len(label)} with the ladder's, "
                                   f"{len(label) - len(todo)} in {run_dir}")
    log(budget.describe(choice, cal, where))
    if cal.steps:
        log(budget.step_lines(cal))
    if not cal.timed:
        log(budget.gpu_words([s for g in choice.train for s in g]))
    specs = [(label[s.run_id], s) for g in choice.train for s in g]
    if list_runs:
        log(runs_by_figure(plan, specs, choice.first))
    return specs, choice.seconds, choice


def check_disk_space(choice, run_dir, ignore: bool = False, log=print,
                     going_on: str = "going on (--ignore-disk-space)") -> None:
    """Say what the runs of ``choice`` need in the run store and what its file system has free
    (:attr:`gtalib.book.pipeline.budget.Choice.store_bytes`, less the checkpoints of interrupted
    runs, which are there already); refuse to start when it has less.

    Raises:
        StoreFullError: less space free than predicted, unless ``ignore``
            (``--ignore-disk-space``), when one line says so, ending with ``going_on``.
    """
    specs = [s for g in choice.train for s in g]
    if not specs:
        return
    # an interrupted run's checkpoint is space used already, which it needs no more of
    held = sum(held_bytes(run_path(s, run_dir)) for s in specs)
    try:
        log(check_space(run_dir, max(0, choice.store_bytes - held),
                        f"the {len(specs)} run(s) to train"))
    except StoreFullError as e:
        if not ignore:
            raise
        log(f"disk: {e.args[0].split('; free space,')[0]}; {going_on}")


def runs_by_figure(plan: Plan, specs, first=frozenset()) -> str:
    """The runs ``specs`` (``(label, RunSpec)``) under the figure or table that reads them, in
    book order, one line per run (``*``: of the spot-check set, ``first``); a run that two
    figures read (MLA at default options, say) is listed under each; a figure's runs include
    those its page reads beside its design (its pairs at data order 0 beside the joint design,
    its other data orders)."""
    ids = {s.run_id for _, s in specs}
    parts = [*((ABLATIONS[k].heading, (*refs, *plan.one_order_refs.get(k, ()),
                                         *plan.data_order_refs.get(k, ())))
               for k, refs in plan.figure_refs.items() if k != "main" and k in plan.reads),
             ("Main results", plan.figure_refs["main"] if "main" in plan.reads else ()),
             ("Scale ladder (its own runs)", plan.ladder_refs)]
    lines, listed = [f"the {len(ids)} run(s) it would train, by figure (* spot-check set):"], set()
    for title, refs in parts:
        ladder = title.startswith("Scale ladder")
        mine = {}  # run id -> ref, each run once per figure
        for r in refs:
            rid = plan.spec(r).run_id
            if rid in ids and not (ladder and rid in listed):
                mine.setdefault(rid, r)
        listed |= set(mine)
        if mine:
            lines.append(f"  {title}: {len(mine)}")
            lines += [f"    {'*' if rid in first else ' '} {r.label}, seed {r.seed} ({rid})"
                      for rid, r in mine.items()]
    return "\n".join(lines)


# 3. notebooks:
# :func:`gtalib.book.pipeline.execute.execute_notebooks`, then the chapters' Markdown snippets:
# :func:`gtalib.book.pipeline.snippets.write_chapter_snippets`


@contextlib.contextmanager
def _environment(**values):
    """Set environment variables (inherited by the kernels started meanwhile), then restore."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def write_toc(book_dir: Path = BOOK_DIR) -> None:
    """Write ``<book_dir>/_toc.yml`` from the chapter registry
    (:func:`gtalib.book.design.chapters.toc_yaml`) when it differs; the committed file is the
    same text (a test holds them equal)."""
    toc = Path(book_dir) / "_toc.yml"
    text = toc_yaml()
    if not toc.is_file() or toc.read_text() != text:
        tmp = toc.with_suffix(".yml.tmp")
        tmp.write_text(text)
        tmp.replace(toc)


# ---------------------------------------------------------------------------------------------
# 4. MathJax (offline)


def ensure_mathjax(book_dir: Path = BOOK_DIR, cache: Path = REPO / ".cache" / "mathjax",
                   log=print) -> Path:
    """``npm install mathjax@MATHJAX_VERSION`` into ``cache`` (once) and copy its ``es5/`` to
    ``book/generated/static/mathjax/`` (served through ``html_static_path``; not ``_static/``,
    which Sphinx would scan and inject every .js of).

    Raises:
        BookError: npm missing or the install failed.
    """
    es5 = cache / "node_modules" / "mathjax" / "es5"
    if not (es5 / "tex-chtml.js").exists():
        npm = shutil.which("npm")
        if npm is None:
            raise BookError("npm not found: it is needed once to install MathJax for offline math")
        cache.mkdir(parents=True, exist_ok=True)
        log(f"installing mathjax@{MATHJAX_VERSION} from npm into {cache}")
        r = subprocess.run([npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund",
                            "--no-save", f"mathjax@{MATHJAX_VERSION}"], capture_output=True,
                           text=True)
        if r.returncode != 0 or not (es5 / "tex-chtml.js").exists():
            raise BookError(f"npm install mathjax failed:\n{r.stdout}\n{r.stderr}")
    dest = Path(book_dir) / "generated" / "static" / "mathjax"
    if not (dest / "tex-chtml.js").exists():
        shutil.copytree(es5, dest, dirs_exist_ok=True)
    return dest


# ---------------------------------------------------------------------------------------------
# 5. HTML


def build_html(book_dir: Path = BOOK_DIR, log=print) -> Path:
    """``jupyter-book build`` (HTML, ``-W -n --keep-going``; execution is off in _config.yml).

    Raises:
        BookError: the build failed or warned (its output is in the message).
    """
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(book_dir), "--builder",
           "html", "-W", "-n", "--keep-going"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise BookError(f"jupyter-book build failed ({' '.join(cmd)}):\n{r.stdout[-6000:]}\n"
                        f"{r.stderr[-6000:]}")
    log(f"HTML built in {time.perf_counter() - t0:.1f} s")
    return Path(book_dir) / "_build" / "html"


#: Markers of an error output in HTML rendered by myst-nb (error outputs are rendered as
#: tracebacks; stderr streams carry the ``stderr`` class).
_TRACEBACK = re.compile(r'class="[^"]*\boutput\b[^"]*\btraceback\b')
_STDERR = re.compile(r'<div class="[^"]*\boutput\b[^"]*\bstderr\b[^"]*">(.*?)</div>', re.S)


def html_error_outputs(html_dir: Path) -> list[str]:
    """Pages of ``html_dir`` with an error output: a rendered traceback, or a stderr stream that
    mentions an error or exception. Returns ``"<page>: <what>"`` strings."""
    found = []
    for page in sorted(Path(html_dir).rglob("*.html")):
        text = page.read_text(errors="replace")
        rel = page.relative_to(html_dir)
        if _TRACEBACK.search(text):
            found.append(f"{rel}: traceback output")
        for m in _STDERR.finditer(text):
            body = html.unescape(re.sub(r"<[^>]+>", "", m.group(1)))
            if re.search(r"error|exception|traceback", body, re.I):
                found.append(f"{rel}: stderr output: {body.strip()[:200]}")
    return found


def machine_paths(html_dir: Path, paths) -> list[str]:
    """Files of a built book that name a folder of the build machine: ``"<file>: <path>"`` for
    every text file under ``html_dir`` (pages, their published sources, the search index) that
    contains one of ``paths`` as a whole path component (``/tmp`` matches ``/tmp/x``, not
    ``/tmpx``). A reader needs the parameters and the results, not the builder's file system."""
    needles = sorted({str(Path(p)).rstrip("/") for p in paths if str(p).strip("/")}, key=len,
                     reverse=True)
    pattern = re.compile("|".join(re.escape(n) + r"(?![\w.-])" for n in needles))
    found = []
    for f in sorted(Path(html_dir).rglob("*")):
        if f.suffix not in (".html", ".ipynb", ".md", ".txt", ".js", ".json") or not f.is_file():
            continue
        if "mathjax" in f.parts:
            continue
        for m in sorted(set(pattern.findall(f.read_text(errors="replace")))):
            found.append(f"{f.relative_to(html_dir)}: {m}")
    return found


def build_machine_folders(run_dir: Path, book_dir: Path) -> list[Path]:
    """Folders whose paths must not appear in the book: the repository, the home and temporary
    folders, the run store, the book sources and the data cache."""
    return [REPO, Path.home(), Path(tempfile.gettempdir()), Path(run_dir),
            Path(book_dir).resolve(), default_data_dir()]


# ---------------------------------------------------------------------------------------------
# The job


def build_book(preset: str = "cpu", seeds: int = DEFAULT_SEEDS, max_steps=None, jobs: int | None = None,
               threads: int | None = None, run_dir=None, notebooks=None,
               train: bool = True, html: bool = True, book_dir=BOOK_DIR,
               accelerator: str = "auto", cell_timeout: float | None = None,
               train_recorded: bool = False, log=print, cluster: str | None = None,
               scheduler_file=None, batch: dict | None = None,
               budget_min: float | None = DEFAULT_BUDGET_MIN,
               ignore_disk_space: bool = False, variants=()) -> dict:
    """The main job (module docstring). Returns a timing summary (seconds per phase:
    ``corpus_s``, ``calibration_s`` (the cluster's start and the calibration; absent without
    training), ``train_s`` (the training the prediction's ``predicted_train_s`` covers),
    ``notebooks_s``, ``html_s``, ``total_s``), with a budget the deadline's ``runs_dropped``
    and ``runs_taken_back`` (:mod:`gtalib.book.pipeline.pace`), which the job's last lines say
    with the budget's minutes left.

    Args:
        book_dir: Jupyter Book source folder (``_config.yml``, ``_toc.yml``, chapters); the
            executed notebooks go to ``<book_dir>/generated``, the HTML to
            ``<book_dir>/_build/html``.
        cell_timeout: seconds a notebook cell may run (default
            :data:`gtalib.book.pipeline.execute.CELL_TIMEOUT_S` of the preset); a cell past it fails
            the job, naming the notebook and the cell.
        jobs: training workers of the embedded cluster (or batch jobs), and notebooks executed
            at once (default :func:`gtalib.book.pipeline.schedule.default_jobs`).
        cluster, scheduler_file, batch: where the runs are trained (:func:`train_all`: an
            embedded LocalCluster by default, ``tcp://...``, or ``slurm``/``pbs``/``lsf``).
        accelerator: ``"auto"``, ``"cpu"`` or ``"gpu"``
            (:func:`gtalib.book.pipeline.schedule.resolve_accelerator`: on a machine with GPUs the
            embedded cluster has one worker per GPU, each training one run at a time).
        train_recorded: train every run of the book and of the scale ladder into the run store,
            whatever the budget, instead of reading any from records.
        budget_min: the job's wall-time budget in minutes (:func:`runs_to_train`); ``None``:
            train every run of the book that the store lacks. A recorded run not trained is read
            from its bundle (the pages say so).
        ignore_disk_space: train even where the run store's file system has less space free
            than the runs are predicted to need (:func:`check_disk_space`).
        variants: the user's own variants (``module:Class``), trained and drawn beside the
            paper's on every ablation page whose arms they can take, apart from its claims
            (:func:`gtalib.book.design.plan.make_plan`).

    Raises:
        StoreFullError: the run store has less space free than the runs need (unless
            ``ignore_disk_space``), or filled up while they trained: the job stops at once,
            starting no further run and executing no notebook; the finished runs are kept, and
            the same command, with space, trains the rest.
        BookError: any run failed, a notebook raised, the HTML build warned, or a rendered page
            has an error output (the book is still built as far as possible first).
        KeyError: unknown preset or notebook.
    """
    for name, value, optional in (("seeds", seeds, False), ("jobs", jobs, True),
                                  ("threads", threads, True), ("max_steps", max_steps, True)):
        if not (optional and value is None) and (
                not isinstance(value, int) or isinstance(value, bool) or value < 1):
            flag = "--" + name.replace("_", "-")
            raise ValueError(f"{name} ({flag}) must be a positive integer"
                             f"{' or None' if optional else ''}, got {value!r}")
    check_seeds(seeds)
    if budget_min is not None and not budget_min > 0:
        raise ValueError(f"budget_min (--budget) must be a positive number of minutes or None "
                         f"(none), got {budget_min!r}")
    if cell_timeout is not None and not cell_timeout > 0:
        raise ValueError(f"cell_timeout must be a positive number of seconds, got {cell_timeout!r}")
    if train_recorded and not train:
        raise ValueError("train_recorded (--train-recorded) trains runs, train=False (--no-train) "
                         "trains none: give one of them")
    jobs = jobs or default_jobs()
    plan = make_plan(preset, seeds, max_steps, notebooks, variants)
    raised = counts_words(preset, seeds, max_steps)
    if seeds != DEFAULT_SEEDS and raised:  # the pages say it too (NotebookParams.seed_notice)
        log(f"seeds: --seeds {seeds}; at {preset} {raised}: each count was fixed before the "
            "runs, and a lower --seeds does not lower it")
    run_dir = resolve_run_dir(run_dir)
    times, problems = {}, []
    t_all = t0 = time.perf_counter()
    ensure_corpus(plan, log=log)
    times["corpus_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    predicted = {}
    if train:
        # one cluster for the calibration (on its workers) and the training
        accelerator = resolve_accelerator(accelerator, cluster, scheduler_file)
        with open_cluster(cluster, scheduler_file, jobs, batch, accelerator) as (client, where):
            specs, seconds, choice = runs_to_train(plan, run_dir, jobs, threads, budget_min,
                                                   train_recorded, where, log, client,
                                                   started=t_all)
            check_disk_space(choice, run_dir, ignore_disk_space, log)
            # the cluster's start and the calibration: before the training that was predicted
            times["calibration_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            deadline = budget.train_deadline_s(choice)
            # the runs the deadline may leave to their records
            optional = {s.run_id for _, s in specs if records.find_record(s) is not None}
            paced = {}  # what the deadline dropped and took back
            problems += [f"run {m}" for m in train_all(
                specs, run_dir, jobs, threads, accelerator, log, cluster=cluster,
                seconds=seconds, client=client, where=where,
                deadline=None if deadline is None else t_all + deadline, optional=optional,
                first=choice.first, report=paced)]
        trained = [s for _, s in specs if is_done(run_path(s, run_dir))]
        walls = {s.run_id: runs.load_card(run_path(s, run_dir))["wall_time_s"] for s in trained}
        families = budget.family_times(trained, seconds, walls)
        configurations = budget.family_times(trained, seconds, walls, per="configuration")
        dropped = sum(s.run_id in optional and not is_done(run_path(s, run_dir)) for _, s in specs)
        predicted = {"predicted_train_s": choice.train_wall_s,
                     "predicted_total_s": choice.job_wall_s, "budget_min": budget_min,
                     "runs_trained": len(trained),
                     # what the budget left to the records, and what the deadline then dropped
                     "runs_read": len(choice.read) + dropped, "families": families,
                     "configurations": configurations}
        if deadline is not None:  # the deadline's runs dropped and taken back
            predicted.update(runs_dropped=paced.get("dropped", 0),
                             runs_taken_back=paced.get("taken_back", 0))
    else:  # say here what the pages will report as missing
        specs = [s for _, s in plan.specs()]
        absent = [s for s in specs if not is_done(run_path(s, run_dir))]
        recorded = sum(records.find_record(s) is not None for s in absent)
        missing = len(absent) - recorded
        log(f"runs: {len(specs)} needed, {len(specs) - len(absent)} in {run_dir}, {recorded} "
            f"recorded, {missing} missing"
            + (" (not trained: --no-train; their pages list them)" if missing else ""))
    times["train_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    # run_dir=None: the notebooks resolve the store from $GTALIB_RUN_DIR, set for their kernels,
    # so no path of this machine is written into the executed notebooks
    params = notebook_parameters(preset, seeds, None, max_steps, plan.user_variants)
    book_dir = Path(book_dir)
    nb_dir = book_dir / "generated"
    with tempfile.TemporaryDirectory(prefix="gtalib-results-") as shared, _environment(
            GTALIB_RUN_DIR=str(run_dir), **{ENV_SHARED_RESULTS: shared}):
        # each figure's result once, before the pages that read it (its own, the claims page)
        # run side by side; the snippets below read the same
        try:
            ablation_results(plan, run_dir)
        except Exception as e:  # noqa: BLE001 - each page then computes its own, and reports
            log(f"figures: their results could not be computed before the pages ({e}); "
                "each page computes its own")
        executed = execute_notebooks(params, plan.notebooks, nb_dir, jobs, log, cell_timeout)
        problems += [r.message for r in executed if r.message]
        problems += [f"error output in {e}" for e in notebook_errors(nb_dir)]
        times["notebooks_s"] = time.perf_counter() - t0

        summary = {"preset": preset, "seeds": seeds, "max_steps": max_steps, "jobs": jobs,
                   **times, **predicted}
        trained_ids = {s.run_id for s in trained} if train else set()
        against = against_records(plan, run_dir, trained_ids)
        summary["against_records"] = {k: int((against.runs["outcome"] == k).sum())
                                      for k in records.OUTCOMES}
        write_chapter_snippets(summary, plan, run_dir, nb_dir, executed, trained_ids, against)
    # --only on a book never built whole: the other pages' links cannot resolve, and Sphinx's
    # -W build would fail on them after the notebooks ran; say so instead
    unbuilt = [] if notebooks is None else [
        n for n in all_notebooks() if not (book_dir / "generated" / f"{n}.ipynb").exists()]
    if html and unbuilt:
        log(f"html: not built: {', '.join(unbuilt)} have no executed copy in "
            f"{book_dir / 'generated'} for the book's links (build the whole book once, then "
            "--only rebuilds pages); the executed notebooks are there")
        html = False
    if html:
        t0 = time.perf_counter()
        write_toc(book_dir)
        ensure_mathjax(book_dir, log=log)
        try:
            html_dir = build_html(book_dir, log=log)
            problems += [f"error output in {e}" for e in html_error_outputs(html_dir)]
            problems += [f"machine-specific path in {e}" for e in machine_paths(
                html_dir, build_machine_folders(run_dir, book_dir))]
            log(f"book: {html_dir / 'index.html'}")
        except BookError as e:
            problems.append(str(e))
        times["html_s"] = time.perf_counter() - t0
    times["total_s"] = time.perf_counter() - t_all
    log("times: " + ", ".join(f"{k[:-2]} {v:.1f} s" for k, v in times.items()))
    for line in budget.family_lines(predicted.get("families", []),
                                    predicted.get("configurations", [])):
        log(line)
    if "runs_dropped" in predicted:
        log(budget.deadline_line(predicted, times["total_s"]))
    for line in summary_lines(against):  # last: a run outside its envelope is not missed
        log(line)
    summary.update(times)
    (nb_dir / "build_summary.json").write_text(json.dumps(summary, indent=2))
    if problems:
        raise BookError("the book has problems:\n  " + "\n  ".join(problems))
    return summary


def summary_lines(found: AgainstRecords) -> list[str]:
    """The job's last lines about its records: how the re-trained runs compare, the largest
    difference, every run outside the envelope by name and every verdict that differs."""
    runs = found.runs
    if runs.empty:
        return ["against records: no run of this build's store has a record to compare with"]
    counts = runs["outcome"].value_counts()
    val = runs["max |Δ| val_loss"]
    worst = runs.loc[val.idxmax()] if val.notna().any() else None
    equal = bool((runs[["max |Δ| train_loss", "max |Δ| val_loss"]].fillna(0) == 0).all().all())
    lines = [f"against records: {plural(len(runs), 'run')} of the store compared with their "
             "records: " + ", ".join(f"{counts.get(k, 0)} {w}" for k, w in OUTCOME_WORDS.items())
             + (f"; largest |Δ val_loss| {worst['max |Δ| val_loss']:.3g} nats "
                f"({worst['run_id']} {worst['configuration']}, seed {worst['seed']})"
                if worst is not None and worst["max |Δ| val_loss"] > 0 else
                "; every train and validation loss cell equal" if equal else "")]
    lines += [f"  OUTSIDE THE ENVELOPE: {r.message}" for r in found.outside.itertuples()]
    differ = found.verdicts[found.verdicts["changed"]] if len(found.verdicts) else found.verdicts
    checked = len(found.verdicts)
    if checked:
        lines.append(f"against records: {checked} verdict(s) of the figures with re-trained runs "
                     f"read from records and from this build: {len(differ)} changed"
                     + "".join(f"\n  CHANGED: {r['figure']} {r['variant']}: from records "
                               f"{r['records']!r}, from this build {r['this build']!r}"
                               for _, r in differ.iterrows()))
    return lines
