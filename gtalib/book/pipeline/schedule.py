"""Training the runs the book needs on a Dask cluster: the one place the book's scheduler of runs
lives (step 2 of :mod:`gtalib.book.pipeline.job`).

Every run that is not done is submitted to a ``distributed.Client`` (Dask distributed,
https://distributed.dask.org), which comes from one of:

- nothing given: an embedded ``LocalCluster`` of one-thread worker processes, started and closed
  here, as many as :func:`default_jobs` (the usable cores, bounded by memory) or ``jobs``;
- ``cluster="tcp://HOST:8786"`` or ``scheduler_file=...``: a running Dask cluster;
- ``cluster="slurm"`` (``"pbs"``, ``"lsf"``): workers submitted as batch jobs by dask-jobqueue,
  configured by its own YAML (``~/.config/dask/jobqueue.yaml``) and the ``batch`` options
  (:func:`batch_cluster`).

The runs that share a variant, a seed and a training length (both arms of every ΔL pair among
them) form one task, so each pair is trained on one worker, one machine kind. A worker that can
see the run store (a shared file system, or the embedded cluster) trains into it directly, with
its checkpoints, so a retried task resumes; one that cannot trains into its own scratch store
and hands each finished run back as files (:mod:`gtalib.training.bundles`), which are written
into the local store and checked like any run. Dask trains a task again elsewhere when its
worker is lost; a run that fails by itself (a diverged loss, a bad spec) returns its one-line
error instead and is not retried. A run that meets a full disk stops the job: the tasks not
started are cancelled, the running ones start no further run (a Dask ``Event``), and one
:class:`gtalib.training.disk.StoreFullError` says what is kept (``docs/faults.md``). Ctrl-C
cancels the tasks on the cluster; nothing half-written reaches the store (runs write atomically).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import dask
import torch
from distributed import Client, Event, LocalCluster, as_completed, get_worker
from distributed.core import Status
from tqdm import tqdm

from gtalib.book.pipeline.budget import groups, start_order
from gtalib.book.pipeline.calibration import training_flops
from gtalib.book.pipeline.connect import connect_scheduler, scheduler_address
from gtalib.book.pipeline.pace import ClusterDeadline, drop_event
from gtalib.book.pipeline.stops import (
    SchedulerLost,
    dropped_messages,
    quiet_closing,
    quiet_loggers,
    scheduler_gone,
    scheduler_lost,
    stop_event,
    store_full,
)
from gtalib.training import bundles, runs
from gtalib.training.disk import StoreFullError, disk_full
from gtalib.training.machine import MALLOC_TRIM, available_memory, untrim_malloc, usable_cores
from gtalib.training.runs import RunSpec
from gtalib.training.train import ensure_run

#: Peak resident memory of one ``cpu``-preset training process, with margin (bytes): bounds the
#: embedded cluster's size on a machine with more cores than memory for them.
RUN_PEAK_RSS = 1_500_000_000

BATCH_SYSTEMS = ("slurm", "pbs", "lsf")

#: Environment variable of a worker that must train into its own scratch store and hand its
#: runs back, whatever it can see of the client's.
SCRATCH_ONLY = "GTALIB_SCRATCH_ONLY"

#: Dask event topic on which a worker says which run it starts (``distributed.Worker.log_event``).
START_TOPIC = "gtalib-run-start"


#: Environment variable of the embedded cluster's GPU workers: the GPUs, comma-separated, that
#: its workers share out, one each (worker ``i`` of the ``LocalCluster`` trains on the ``i``-th).
EMBEDDED_GPUS = "GTALIB_EMBEDDED_GPUS"

ACCELERATORS = ("auto", "cpu", "gpu")

#: Dask settings of the workers the job starts (embedded or batch jobs). Dask's defaults suit
#: short tasks on idle cores; a worker that trains for minutes on a core of its own pays for
#: them: the statistical profiler wakes a thread every 10 ms to walk the training thread's stack,
#: the event loop ticks every 20 ms and the memory monitor polls every 100 ms, each taking the
#: CPU and the GIL from the run. With them, two workers of a 2-core AMD EPYC (family 25) trained
#: 24 % slower than two plain processes (``benchmarks/jobs_speedup.md``); an idle worker used
#: 3 % of a core, 0.4 % without.
QUIET_WORKERS = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
}


def default_jobs() -> int:
    """Worker processes of the embedded cluster: the cores this process may use
    (:func:`usable_cores`), at most one per :data:`RUN_PEAK_RSS` of available memory."""
    avail = available_memory()
    return usable_cores() if avail is None else max(1, min(usable_cores(), avail // RUN_PEAK_RSS))


def resolve_accelerator(accelerator: str, cluster=None, scheduler_file=None) -> str:
    """The accelerator the runs ask for. For the embedded cluster, ``"auto"`` becomes ``"gpu"``
    on a machine with a CUDA GPU (one worker per GPU, each holding the Dask resource ``GPU``) and
    ``"cpu"`` elsewhere; a running or batch cluster's workers decide ``"auto"`` for themselves
    (give ``"gpu"`` to send the runs one at a time to the workers started with ``GPU=1``).

    Raises:
        ValueError: ``accelerator`` not one of :data:`ACCELERATORS`, or ``"gpu"`` for the
            embedded cluster on a machine without a CUDA GPU.
    """

    if accelerator not in ACCELERATORS:
        raise ValueError(f"accelerator {accelerator!r}: allowed: {', '.join(ACCELERATORS)}")
    if cluster is not None or scheduler_file is not None:
        return accelerator
    if torch.cuda.is_available():
        return "cpu" if accelerator == "cpu" else "gpu"
    if accelerator == "gpu":
        raise ValueError("accelerator 'gpu': this machine has no CUDA GPU for the embedded "
                         "cluster; allowed here: auto, cpu (or a --cluster with GPU workers)")
    return "cpu"


def worker_gpu(devices: str, name) -> str:
    """The GPU of the embedded cluster's worker ``name`` (``LocalCluster`` names them 0, 1, …)
    among ``devices`` (:data:`EMBEDDED_GPUS`): its ``CUDA_VISIBLE_DEVICES``.

    Raises:
        ValueError: ``name`` is not an index of ``devices``.
    """
    ids = devices.split(",")
    try:
        return ids[int(name)]
    except (ValueError, IndexError):
        raise ValueError(f"worker {name!r} has no GPU among {devices!r}") from None


def batch_cluster(system: str, *, cores: int = 1, memory: str = "4GB", gpus: int = 0,
                  walltime: str = "02:00:00", account: str | None = None, queue: str | None = None):
    """A dask-jobqueue cluster whose every job is one worker of ``cores`` threads (``system`` in
    :data:`BATCH_SYSTEMS`); the options not given here come from dask-jobqueue's YAML. ``gpus``
    asks the batch system for that many GPUs per job (``--gres=gpu:N`` on Slurm) and gives the
    worker the Dask resource ``GPU``, so GPU runs go one at a time to a worker that has one. The
    job script exports :data:`QUIET_WORKERS` as ``DASK_*`` variables after the YAML's own
    ``job-script-prologue``.

    Raises:
        ValueError: ``system`` not one of :data:`BATCH_SYSTEMS`.
    """

    # imported only here: importing dask_jobqueue replaces Python's SIGINT handler, after which
    # Ctrl-C no longer interrupts a book trained on the embedded or a tcp:// cluster
    import dask_jobqueue

    if system not in BATCH_SYSTEMS:
        raise ValueError(f"cluster {system!r}: allowed batch systems are {', '.join(BATCH_SYSTEMS)}")
    kind = {"slurm": dask_jobqueue.SLURMCluster, "pbs": dask_jobqueue.PBSCluster,
            "lsf": dask_jobqueue.LSFCluster}[system]
    extra = {}
    if gpus:
        extra["job_extra_directives"] = [f"--gres=gpu:{gpus}"] if system == "slurm" else []
        extra["worker_extra_args"] = ["--resources", f"GPU={gpus}"]
    prologue = list(dask.config.get(f"jobqueue.{system}.job-script-prologue", None) or [])
    prologue += [f"export {dask_env_name(k)}={v}" for k, v in QUIET_WORKERS.items()]
    return kind(cores=cores, processes=1, memory=memory, walltime=walltime, account=account,
                queue=queue, job_script_prologue=prologue, **extra)


#: Seconds the batch system has to answer the submission of the worker jobs (a job it queues
#: has answered; only one it refuses is an error).
SUBMIT_TIMEOUT_S = 120


def submit_jobs(cluster, system: str, jobs: int) -> None:
    """Submit ``jobs`` worker jobs of the dask-jobqueue ``cluster`` and wait until the batch
    system has answered each. dask-jobqueue submits in the background and only logs a refused
    job, after which a book would wait for its workers forever; here a refusal is one error. On
    Slurm the job script is first checked by ``sbatch --test-only`` (Slurm validates it and asks
    its controller, submitting nothing), whose own message the error quotes.

    Raises:
        ValueError: the submit command is missing, or the batch system refused a job or did not
            answer within :data:`SUBMIT_TIMEOUT_S` seconds.
    """
    submit = cluster.job_cls.submit_command
    if system == "slurm":
        with tempfile.NamedTemporaryFile("w", suffix=".sh") as script:
            script.write(cluster.job_script())
            script.flush()
            test = subprocess.run([submit, "--test-only", script.name], capture_output=True,
                                  text=True, timeout=SUBMIT_TIMEOUT_S)
        if test.returncode != 0:
            why = (test.stderr.strip() or test.stdout.strip()).splitlines()[-1:] or ["no message"]
            raise ValueError(f"cluster {system}: {submit} refused the worker job: {why[0]}")
    cluster.scale(jobs=jobs)
    deadline = time.monotonic() + SUBMIT_TIMEOUT_S
    while len(cluster.workers) < jobs and time.monotonic() < deadline:  # each submission tried
        time.sleep(0.1)
    refused = [job for job in cluster.workers.values() if getattr(job, "job_id", None) is None]
    for job in refused:  # dask-jobqueue leaves them "created", which the cluster's close refuses
        job.status = Status.failed
    accepted = len(cluster.workers) - len(refused)
    if accepted < jobs:
        raise ValueError(f"cluster {system}: the batch system did not accept {jobs - accepted} "
                         f"of {jobs} worker job(s) ({submit} failed; its message is logged above)")


def dask_env_name(key: str) -> str:
    """The environment variable that sets Dask config ``key`` (``a.b-c`` → ``DASK_A__B_C``)."""
    return "DASK_" + "__".join(part.upper().replace("-", "_") for part in key.split("."))


def _client(cluster, scheduler_file, jobs: int, batch: dict | None, accelerator: str = "cpu"):
    """(client, owned cluster or None, where) for the options of :func:`train_all`; with
    ``accelerator="gpu"`` the embedded cluster has one worker per visible GPU instead of ``jobs``."""

    if scheduler_file is not None:
        return (connect_scheduler(scheduler_address(scheduler_file),
                                  f"scheduler file {scheduler_file}"), None,
                f"scheduler file {scheduler_file}")
    if cluster is None:
        gpus = {}
        if accelerator == "gpu":  # one run at a time per GPU

            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            ids = visible.split(",") if visible else [str(i) for i in range(torch.cuda.device_count())]
            if not ids:
                raise ValueError("accelerator 'gpu': no CUDA GPU for the embedded cluster")
            jobs = len(ids)
            gpus = {"resources": {"GPU": 1}, "env": {EMBEDDED_GPUS: ",".join(ids)}}
        # non-daemonic workers may start child processes (a DDP spawn, loader workers); no
        # MALLOC_TRIM_THRESHOLD_ (Dask's default for the workers it spawns: see untrim_malloc)
        # worker-saturation 1.0: the many tasks of a large plan wait on the scheduler rather
        # than queued on a worker, so the longest-first priority holds as workers free up;
        # the workers log critical errors only: a run's own failure is reported by its task and
        # a lost worker by the client; otherwise Ctrl-C's cancelled tasks are each a worker's
        # warning, and a stop's closed scheduler each worker's heartbeat traceback
        with dask.config.set({"distributed.worker.daemon": False,
                              "distributed.scheduler.worker-saturation": 1.0,
                              f"distributed.nanny.pre-spawn-environ.{MALLOC_TRIM}": None,
                              **QUIET_WORKERS}), _workers_ignore_sigint():
            local = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                 dashboard_address=":0", silence_logs=logging.CRITICAL, **gpus)
        return Client(local), local, (f"embedded LocalCluster of {jobs} worker(s)"
                                      + (", one GPU each" if gpus else ""))
    if cluster in BATCH_SYSTEMS:
        submit = {"slurm": "sbatch", "pbs": "qsub", "lsf": "bsub"}[cluster]
        if shutil.which(submit) is None:
            raise ValueError(f"cluster {cluster}: no {submit} command here; run the book on a "
                             f"node that submits {cluster} jobs")
        owned = batch_cluster(cluster, **(batch or {}))
        try:
            submit_jobs(owned, cluster, jobs)
        except BaseException:
            owned.close()
            raise
        return Client(owned), owned, f"{cluster} through dask-jobqueue ({jobs} job(s))"
    if str(cluster).startswith("tcp://"):
        return connect_scheduler(cluster, f"cluster {cluster}"), None, f"Dask cluster at {cluster}"
    raise ValueError(f"cluster {cluster!r}: allowed: tcp://HOST:PORT, "
                     f"{', '.join(BATCH_SYSTEMS)}; leave it out for an embedded LocalCluster")


@contextlib.contextmanager
def _workers_ignore_sigint():
    """Start the embedded workers with SIGINT ignored (an ignored signal stays ignored in the
    processes they are spawned as). A terminal's Ctrl-C reaches the whole process group; the
    client alone stops the book, cancelling the runs and closing the workers, and no worker
    prints a traceback of its own. Ctrl-C is ignored while the workers start (seconds)."""
    if threading.current_thread() is not threading.main_thread():  # signals: main thread only
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def open_cluster(cluster=None, scheduler_file=None, jobs: int | None = None,
                 batch: dict | None = None, accelerator: str = "cpu"):
    """``(client, where)`` for the options of :func:`train_all` (module docstring), closing on
    exit what it started (the embedded cluster, the batch jobs; never a running cluster).
    ``accelerator``: as :func:`resolve_accelerator` returns it."""
    client, owned, where = _client(cluster, scheduler_file, jobs or default_jobs(), batch,
                                   accelerator)
    try:
        yield client, where
    except BaseException:
        # the job stops on an error: a worker still training is killed (its run's files are
        # written atomically, so it resumes), which Dask's nannies would each warn of
        with quiet_loggers("nanny"):
            client.close()
            if owned is not None:
                owned.close()
        raise
    # an idle worker slow to exit on a loaded machine is killed after Dask's few seconds;
    # nothing is lost, so that one warning is dropped (the nannies' other lines are kept)
    with dropped_messages("nanny", "Worker process still alive"):
        client.close()
        if owned is not None:
            owned.close()


def _train_group(spec_dicts: list[dict], run_dir: str, marker: str, threads: int,
                 accelerator: str) -> list[dict]:
    """Task: train the runs of one group, in order, on this worker. Trains into ``run_dir`` when
    this worker sees the client's store (its ``marker`` file), else into a scratch store whose
    finished runs are handed back as files. One dict per run: ``run_id``, ``seconds``,
    ``error`` (one line, or None), ``files`` (the bundle, or None when written in place),
    ``worker`` (host and pid), and ``store_full`` (``store``, ``free``, ``kept``) for a run that
    met a full disk, after which it sets the job's stop event and starts no further run (nor
    does a task that finds the event set)."""
    torch.set_num_threads(max(1, threads))
    untrim_malloc()
    if accelerator == "gpu" and os.environ.get(EMBEDDED_GPUS):
        # before CUDA starts in this process; Lightning's devices=1 is then this worker's GPU
        os.environ["CUDA_VISIBLE_DEVICES"] = worker_gpu(os.environ[EMBEDDED_GPUS],
                                                        get_worker().name)
    # a worker started with GTALIB_SCRATCH_ONLY=1 never writes the client's store, even where
    # it could see it (a read-only share; the tests' stand-in for another machine)
    with contextlib.suppress(ValueError):  # ValueError: not on a Dask worker (a direct call)
        # the deadline cancels tasks whose start it has not yet heard of, and Dask cannot stop
        # one that already runs: a task dropped before it got here trains nothing
        if Event(drop_event(get_worker().get_current_task())).is_set():
            return []
    shared = (Path(run_dir) / marker).is_file() and os.environ.get(SCRATCH_ONLY) != "1"
    # a scratch store is removed as the task ends (its runs are handed back as bytes)
    scratch = None if shared else tempfile.TemporaryDirectory(prefix="gtalib-scratch-")
    store = Path(run_dir) if shared else Path(scratch.name)
    out = []
    for d in spec_dicts:
        with contextlib.suppress(ValueError):  # not on a Dask worker (a direct call): no event
            if Event(stop_event(marker)).is_set():  # the store is full: start nothing more
                break
        spec, t0 = RunSpec.from_dict(d), time.perf_counter()
        row = {"run_id": spec.run_id, "error": None, "files": None,
               "worker": f"{socket.gethostname()} pid {os.getpid()}"}
        with contextlib.suppress(ValueError):  # not on a Dask worker (a direct call): no event
            # (Dask adds the worker's address to the event as "worker")
            get_worker().log_event(START_TOPIC, {"run_id": spec.run_id, "process": row["worker"]})
        try:
            path = ensure_run(spec, store, accelerator=accelerator)
            if not shared:
                row["files"] = bundles.export_run(path)
        except StoreFullError as e:  # the job stops (_train): this task starts nothing more,
            row["error"] = str(e)  # nor, once they read the event, do the job's other tasks
            row["store_full"] = {"store": str(e.store), "free": e.free, "kept": e.kept}
            with contextlib.suppress(ValueError):  # not on a Dask worker (a direct call)
                Event(stop_event(marker)).set()
        except Exception as e:  # noqa: BLE001 - a run's own failure: reported, not retried
            row["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        row["seconds"] = time.perf_counter() - t0
        out.append(row)
        if "store_full" in row:
            break
    if scratch is not None:
        scratch.cleanup()
    return out


def train_all(specs, run_dir, jobs: int | None = None, threads: int | None = None,
              accelerator: str = "auto", log=print, cluster: str | None = None,
              scheduler_file=None, batch: dict | None = None,
              seconds: dict | None = None, client=None, where: str = "the given cluster",
              deadline: float | None = None, optional=frozenset(),
              first=frozenset(), report: dict | None = None) -> list[str]:
    """Train the runs among ``specs`` that are not done on a Dask cluster (module docstring),
    the tasks of the spot-check set first and longest first within each class
    (:func:`gtalib.book.pipeline.budget.start_order`), with one progress bar weighted by each
    run's expected seconds (its ETA is the expected work left at the rate seen so far), a line
    when a worker starts a run and one per finished run.

    Args:
        specs: ``(label, RunSpec)`` pairs; the label names the run in progress lines.
        jobs: worker processes of the embedded cluster, or batch jobs (default
            :func:`default_jobs`); a running cluster keeps its own size.
        threads: torch threads per run (default 1).
        accelerator: Lightning accelerator (:func:`resolve_accelerator`; the device does not
            enter the run hash, the run card records it). ``"gpu"`` asks for a worker with the
            Dask resource ``GPU`` (one run at a time per GPU).
        cluster, scheduler_file, batch: where the client comes from (module docstring;
            ``batch``: options of :func:`batch_cluster`).
        seconds: run id → expected seconds on one worker
            (:func:`gtalib.book.pipeline.budget.expected_seconds`); default: each run's training FLOPs
            (:func:`gtalib.book.pipeline.calibration.training_flops`), in units of 10^10.
        client, where: a client already open (:func:`open_cluster`) and what it is; the other
            cluster options are then ignored and the client is left open.
        deadline, optional: a ``time.perf_counter()`` value by which training should end, and
            the ids of the runs that may then be left untrained (they have records). At the
            start and whenever a task ends, the tasks not yet started whose every run is
            ``optional`` and that would end after the deadline
            (:class:`gtalib.book.pipeline.pace.Deadline`: ``seconds`` scaled by the pace
            measured so far per step shape, never below 1) are cancelled, and those dropped
            that fit again are submitted again, with one line each time saying how many runs
            they hold, which it names. Needs ``seconds``. The progress bar's total drops (and
            rises) by their expected work.
        first: the run ids of the spot-check set (:mod:`gtalib.book.design.spot_check`),
            started before the others, so that a deadline drops the others first.
        report: a dict that a deadline fills with the runs it ``dropped`` at least once,
            ``taken_back`` of them, and ``read`` from records in the end.

    Returns:
        messages of the runs that failed (empty if all succeeded). A failing run does not stop
        the others; its figure page reports it.

    Raises:
        StoreFullError: a run met a full disk (the store, or a worker's scratch store): the
            tasks not started are cancelled and the running ones start no further run; the
            message names the store, the space free, the run stopped and the runs kept.
        ValueError: ``jobs`` < 1, an unknown ``cluster`` or ``accelerator``, or ``"gpu"`` for the
            embedded cluster on a machine without a GPU.
    """

    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs!r}")
    if client is None:
        accelerator = resolve_accelerator(accelerator, cluster, scheduler_file)
    unique = {s.run_id: (label, s) for label, s in specs}
    todo = [s for _, s in unique.values() if not runs.is_done(runs.run_path(s, run_dir))]
    name = {s.run_id: f"{label} seed={s.seed} steps={s.train.max_steps}"
            for label, s in unique.values()}
    if not todo:
        log(f"runs: {len(unique)} to train, all already done in {run_dir}" if unique
            else "runs: none to train")
        return []
    jobs = jobs or default_jobs()
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    marker = f".gtalib-store-{uuid.uuid4().hex}"
    try:
        (run_dir / marker).write_text("the run store of a gtalib book job\n")
    except OSError as e:
        if disk_full(e) is None:
            raise
        (run_dir / marker).unlink(missing_ok=True)
        raise StoreFullError(run_dir, "no run could start; free space and run the same command "
                                      "again") from e
    cost = {s.run_id: (seconds[s.run_id] if seconds else training_flops(s) / 1e10) for s in todo}
    tasks = start_order(groups(todo), cost, first)
    with contextlib.ExitStack() as stack:
        if client is None:
            client, where = stack.enter_context(open_cluster(cluster, scheduler_file, jobs, batch,
                                                             accelerator))
        try:
            return _train(client, where, tasks, cost, name, len(unique), run_dir, marker,
                          threads, accelerator, log, cluster, seconds, deadline,
                          {i for i, g in enumerate(tasks)
                           if all(s.run_id in optional for s in g)}, report)
        except OSError as e:  # here, not on a worker: a bundle handed back could not be written
            if disk_full(e) is None:
                raise
            raise store_full(run_dir, todo, {"store": str(run_dir), "free": None,
                                              "kept": None}, "") from e
        finally:
            (run_dir / marker).unlink(missing_ok=True)


def _train(client, where, tasks, cost, name, needed, run_dir, marker, threads, accelerator, log,
           cluster, seconds, deadline=None, optional=frozenset(), report=None) -> list[str]:
    """:func:`train_all`'s loop over the tasks on ``client``; returns the failure messages.
    ``optional``: indices of the tasks that may be dropped at the ``deadline``.

    Raises:
        SchedulerLost: the client lost its scheduler (Dask cancels every future at once then);
            the message counts the runs in the store and those left.
        StoreFullError: a task's run met a full disk (:func:`train_all`).
    """
    todo = [s for g in tasks for s in g]
    failures, futures = [], []
    try:
        with tqdm(total=round(sum(cost.values()), 1), unit="s" if seconds else "×10¹⁰ FLOP",
                  desc="training", disable=None, dynamic_ncols=True,
                  bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} {unit} of expected work "
                             "[{elapsed}<{remaining}]") as bar:
            say = bar.write if not bar.disable else log
            dashboard = getattr(client, "dashboard_link", None)
            say(f"runs: {needed} needed, {needed - len(todo)} cached, {len(todo)} to "
                f"train in {run_dir} on {where}"
                + (f"; dashboard {dashboard}" if cluster and dashboard else ""))
            started = {}  # run id -> when its worker said it starts (perf_counter, here)

            def on_start(event):  # event: (time, message); runs in the client's event thread
                started.setdefault(event[1]["run_id"], time.perf_counter())
                say(f"  worker {event[1].get('worker', '?')} ({event[1]['process']}) trains "
                    f"{event[1]['run_id']} {name.get(event[1]['run_id'], '')}")

            client.subscribe_topic(START_TOPIC, on_start)
            resources = {"GPU": 1} if accelerator == "gpu" else None
            index = {}  # future key -> task

            def submit(i):  # longest task first (priority), so the last to finish is a short one
                g = tasks[i]
                fut = client.submit(_train_group, [s.to_dict() for s in g], str(run_dir), marker,
                                    threads or 1, accelerator, resources=resources, pure=False,
                                    priority=len(tasks) - i,
                                    key=f"gtalib-{g[0].run_id}-{uuid.uuid4().hex[:8]}")
                index[fut.key] = i
                return fut

            futures = [submit(i) for i in range(len(tasks))]
            pending = as_completed(futures)
            pace = ClusterDeadline(client, tasks, futures, cost, started, optional, deadline, say,
                                   bar, name, submit)
            if seconds and deadline is not None:
                pace.review(pending)
            done = 0
            for fut in pending:
                if fut.key in pace.dropped:
                    continue
                try:
                    rows = fut.result()
                except Exception as e:  # noqa: BLE001 - the task itself was lost for good
                    if scheduler_gone(client, e):  # every future goes at once: say it once
                        raise scheduler_lost(client, where, todo, run_dir) from None
                    rows = [{"run_id": s.run_id, "error": f"{type(e).__name__}: {e}", "files": None,
                             "seconds": 0.0, "worker": "?"} for s in tasks[index[fut.key]]]
                full = next((r for r in rows if "store_full" in r), None)
                if full is not None:  # start nothing more: Dask's cancel for what is queued,
                    # the event for the tasks running now (Dask cannot stop them), between runs;
                    # a task running now ends with the job (its runs write atomically)
                    Event(stop_event(marker), client=client).set()
                    client.cancel([f for i, f in enumerate(futures) if not f.done() and not any(
                        s.run_id in started for s in tasks[i])])
                    raise store_full(run_dir, todo, full["store_full"],
                                      f"{full['run_id']} {name[full['run_id']]}")
                for row in rows:
                    done += 1
                    rid, error = row["run_id"], row["error"]
                    if error is None and row["files"] is not None:
                        try:
                            bundles.import_run(row["files"], run_dir)
                        except (ValueError, runs.RunCorruptError) as e:
                            error = f"handed back a bundle that does not check out: {e}"
                    place = ("in the shared store" if row["files"] is None
                             else "handed back from the worker's scratch store")
                    state = (f"{row['seconds']:.1f} s on {row['worker']} ({place})"
                             if error is None else f"FAILED ({error})")
                    if error is not None:
                        failures.append(f"{rid} {name[rid]}: {error}")
                    bar.update(cost[rid])
                    say(f"[{done}/{len(todo)}] {rid} {name[rid]}: {state}")
                if seconds and deadline is not None:
                    pace.finished(index[fut.key], rows)
                    pace.review(pending)
            if report is not None and deadline is not None:
                report.update(dropped=pace.deadline.runs_dropped(),
                              taken_back=pace.deadline.runs_taken_back(),
                              read=pace.deadline.runs_read())
    except SchedulerLost:
        quiet_closing(client)
        raise
    except StoreFullError:  # what was queued is cancelled already; the running end with the job
        raise
    except BaseException:
        client.cancel(futures)  # Ctrl-C: nothing keeps training on the cluster
        raise
    finally:
        if client.status == "running":
            client.unsubscribe_topic(START_TOPIC)
    return failures
