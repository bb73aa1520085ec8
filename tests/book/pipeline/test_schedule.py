"""Training the book's runs (:mod:`gtalib.book.pipeline.schedule`)."""

import os
import subprocess
import sys
import time

import pytest

from gtalib.book.pipeline import connect, schedule


def test_train_all_rejects_bad_input():
    with pytest.raises(ValueError, match="jobs"):
        schedule.train_all([], "/nonexistent", jobs=0)


def test_the_slurm_job_script_asks_for_what_the_flags_name():
    """dask-jobqueue's generated script (no Slurm needed to write it)."""
    c = schedule.batch_cluster("slurm", cores=2, memory="8GB", gpus=1, walltime="01:30:00",
                               account="proj", queue="gpu")
    try:
        script = c.job_script()
    finally:
        c.close()
    for line in ("#SBATCH --cpus-per-task=2", "#SBATCH --mem=8G", "#SBATCH -t 01:30:00",
                 "#SBATCH --gres=gpu:1", "#SBATCH -A proj", "#SBATCH -p gpu"):
        assert line in script, script
    assert "--resources GPU=1" in script  # GPU runs go to this worker, one per GPU
    # the worker reads the quiet settings from its environment, as Dask parses it
    assert "export DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False" in script
    with pytest.raises(ValueError, match="allowed batch systems are slurm, pbs, lsf"):
        schedule.batch_cluster("condor")


def test_dask_env_names_follow_dasks_own_parser():
    import dask.config

    for key, value in schedule.QUIET_WORKERS.items():
        env = {schedule.dask_env_name(key): str(value)}
        # dask.config.collect_env: the mapping a worker builds from DASK_* variables
        assert dask.config.get(key, config=dask.config.collect_env(env)) == value


def test_an_unknown_cluster_is_a_clear_error():
    with pytest.raises(ValueError, match="allowed: tcp://HOST:PORT, slurm, pbs, lsf"):
        schedule._client("udp://x", None, 1, None)


def test_a_cluster_that_is_not_there_is_a_clear_error_not_a_wait(tmp_path):
    """A missing scheduler file fails at once (Dask alone would wait for it forever); so does a
    tcp:// address whose host refuses the connection (Dask alone retries for its 30 s connect
    timeout), naming the address."""
    with pytest.raises(ValueError, match="no such file; start the scheduler first"):
        with schedule.open_cluster(scheduler_file=tmp_path / "nowhere.json"):
            pass
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"cluster tcp://127.0.0.1:1: no Dask scheduler answered"):
        with schedule.open_cluster("tcp://127.0.0.1:1"):
            pass
    assert time.monotonic() - start < connect.CONNECT_PROBE_S


def test_default_jobs_is_bounded_by_cores_and_memory(monkeypatch):
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    n = schedule.default_jobs()
    avail = next(int(x.split()[1]) * 1024 for x in open("/proc/meminfo") if x.startswith("MemAvailable:"))
    assert n == max(1, min(64, avail // schedule.RUN_PEAK_RSS))


def _child_exit_code() -> int:
    import multiprocessing as mp

    p = mp.get_context("spawn").Process(target=abs, args=(-1,))
    p.start()
    p.join(60)
    return p.exitcode


def _dask_settings(keys):
    import dask

    return {k: dask.config.get(k) for k in keys}


def test_a_task_on_the_embedded_cluster_may_start_child_processes():
    """Dask's worker processes are daemonic by default, and a daemonic process cannot start
    children (a DDP spawn, data-loader workers): the embedded cluster's workers are not."""
    client, cluster, _ = schedule._client(None, None, 1, None)
    try:
        assert client.submit(_child_exit_code).result(timeout=120) == 0
        # and they run without Dask's profiler and fast monitors (schedule.QUIET_WORKERS)
        seen = client.run(_dask_settings, list(schedule.QUIET_WORKERS))
        assert list(seen.values()) == [schedule.QUIET_WORKERS]
    finally:
        client.close()
        cluster.close()


def test_a_run_in_a_slurm_job_environment_is_one_plain_process(monkeypatch, tmp_path):
    """Inside a dask-jobqueue worker under Slurm the environment names Slurm's tasks; a
    one-device run must not wait for srun's other processes (Lightning's SLURMEnvironment)."""
    from gtalib.book.design.plan import make_plan
    from gtalib.training.runs import load_metrics
    from gtalib.training.train import ensure_run

    for k, v in {"SLURM_NTASKS": "2", "SLURM_JOB_ID": "42", "SLURM_JOB_NAME": "dask-worker",
                 "SLURM_NODELIST": "node1", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
                 "SLURM_PROCID": "0"}.items():
        monkeypatch.setenv(k, v)
    plan = make_plan("ci", 1)
    spec = plan.spec(plan.runs[0])
    path = ensure_run(spec, tmp_path, accelerator="cpu")
    assert len(load_metrics(path)) == spec.train.max_steps


def test_a_run_that_fails_by_itself_fails_once_and_the_others_go_on(tmp_path, caplog):
    """A diverging run (a learning rate of 10^6) comes back as one line, is not retried, and
    the other run of the job finishes. The embedded cluster of two workers then closes without a
    warning (no "Worker process still alive after 4.0 seconds, killing" from its nannies)."""
    import dataclasses
    import logging

    from gtalib.book.design.plan import make_plan
    from gtalib.training.runs import is_done, run_path

    plan = make_plan("ci", 1)
    (label, good), (_, other) = plan.specs(list(plan.runs)[:2])
    bad = dataclasses.replace(other, seed=7, train=dataclasses.replace(other.train, lr=1e6))
    lines = []
    caplog.set_level(logging.INFO, logger="distributed")
    failures = schedule.train_all([(label, good), ("diverging", bad)], tmp_path, jobs=2,
                                  log=lines.append)
    warned = [f"{r.name}: {r.getMessage()}" for r in caplog.records
              if r.name.startswith("distributed") and r.levelno >= logging.WARNING]
    assert warned == []
    assert any("Closing Nanny" in r.getMessage() for r in caplog.records)  # the log was seen
    assert len(failures) == 1 and failures[0].startswith(f"{bad.run_id} diverging")
    assert "FloatingPointError" in failures[0] and "\n" not in failures[0]
    assert is_done(run_path(good, tmp_path)) and not is_done(run_path(bad, tmp_path))
    # once: one start line for it, one result line
    assert sum(bad.run_id in ln and " trains " in ln for ln in lines) == 1, lines
    assert sum(ln.startswith("[") and bad.run_id in ln for ln in lines) == 1


def _malloc_trim_env():
    import os

    return os.environ.get("MALLOC_TRIM_THRESHOLD_")


def test_training_on_a_worker_keeps_glibc_malloc_fast(monkeypatch):
    """Dask's nanny sets MALLOC_TRIM_THRESHOLD_=65536 in its workers, which turns glibc's
    dynamic mmap threshold off: every activation is then a fresh mmap whose pages fault in, and
    a cpu-preset step took 1.8x as long (docs/cluster.md). The embedded cluster's workers do not
    have the variable; on a worker that has it, each task resets the thresholds."""
    import platform

    from gtalib.training import machine

    client, cluster, _ = schedule._client(None, None, 1, None)
    try:
        assert set(client.run(_malloc_trim_env).values()) == {None}
    finally:
        client.close()
        cluster.close()
    monkeypatch.delenv(machine.MALLOC_TRIM, raising=False)
    assert machine.untrim_malloc() is False  # nothing to undo
    monkeypatch.setenv(machine.MALLOC_TRIM, "65536")
    assert machine.untrim_malloc() is (platform.system() == "Linux"
                                         and platform.libc_ver()[0] == "glibc")


def test_the_calibration_times_each_step_shape_on_the_workers():
    """The job's calibration runs on the workers that will train, one task per step shape, as
    many at once as there are workers, so that they share the machine as the runs will
    (gtalib.book.pipeline.calibration); the calibration takes those seconds as they are."""
    from gtalib.book.design.plan import make_plan
    from gtalib.book.pipeline import calibration

    plan = make_plan("ci", 1)
    todo = [s for _, s in plan.specs()]
    specs = calibration.calibration_specs(plan, todo)
    assert len(specs) >= 3
    specs = dict(list(specs.items())[:3])  # three shapes show it; each timed in three rounds
    todo = [s for s in todo if calibration.step_shape(s) in specs]
    with schedule.open_cluster(None, None, 2, None) as (client, where):
        assert where == "embedded LocalCluster of 2 worker(s)"
        ref = calibration.reference_spec(plan)
        timed, setup_s, workers = calibration.calibrate_workers(client, specs, setup=ref)
    assert workers == 2 and set(timed) == set(specs)
    assert all(0 < t.seconds_per_step < 60 and t.basis == "timed" for t in timed.values())
    # a run's setup: its wall time less its steps and evaluations, of the order of a second
    assert 0 < setup_s < 30
    cal = calibration.calibrate(plan, timed=timed, todo=todo, workers=workers)
    assert cal.workers == 2
    assert cal.steps == timed  # the settled timings, as they are


def test_the_accelerator_is_resolved_for_the_embedded_cluster(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert schedule.resolve_accelerator("auto") == "cpu"
    with pytest.raises(ValueError, match="accelerator 'gpu': this machine has no CUDA GPU"):
        schedule.resolve_accelerator("gpu")
    # a running cluster's workers decide "auto" for themselves, and may have GPUs
    assert schedule.resolve_accelerator("auto", "tcp://h:8786") == "auto"
    assert schedule.resolve_accelerator("gpu", "slurm") == "gpu"
    with pytest.raises(ValueError, match="allowed: auto, cpu, gpu"):
        schedule.resolve_accelerator("tpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert schedule.resolve_accelerator("auto") == "gpu"
    assert schedule.resolve_accelerator("cpu") == "cpu"


def _getenv(name):  # not os.environ.get: that would pickle the client's environment along
    return os.environ.get(name)


def test_each_embedded_gpu_worker_holds_one_gpu_of_its_own(monkeypatch):
    """No GPU here: the client believes in three (CUDA_VISIBLE_DEVICES), so the embedded cluster
    has three workers, each with the Dask resource GPU=1 (one GPU run at a time), and worker i
    would train on the i-th GPU."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,4,5")
    client, cluster, where = schedule._client(None, None, 7, None, accelerator="gpu")
    try:
        workers = client.scheduler_info()["workers"].values()
        assert sorted(w["resources"].get("GPU") for w in workers) == [1, 1, 1]
        assert "3 worker(s), one GPU each" in where
        shared = client.run(_getenv, schedule.EMBEDDED_GPUS)
        assert set(shared.values()) == {"1,4,5"}
        names = sorted(w["name"] for w in workers)
        assert [schedule.worker_gpu("1,4,5", n) for n in names] == ["1", "4", "5"]
    finally:
        client.close()
        cluster.close()
    with pytest.raises(ValueError, match="worker 3 has no GPU"):
        schedule.worker_gpu("1,4,5", 3)


def _command(folder, name: str, script: str) -> None:
    """An executable ``folder/name`` running the shell ``script``."""
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


def test_a_batch_system_that_refuses_the_workers_is_one_error_not_a_wait(tmp_path, monkeypatch):
    """A Slurm whose controller does not answer: one error quoting sbatch, before any job is
    submitted. A job refused when submitted (after the check passed): the count of refused jobs.
    No sbatch at all: said so. None of them waits for workers that will never come."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    no_controller = ("sbatch: error: Batch job submission failed: Unable to contact slurm "
                     "controller (connect failure)")
    _command(bin_, "sbatch", f'echo "{no_controller}" >&2\nexit 1\n')
    start = time.monotonic()
    with pytest.raises(ValueError) as refused:
        schedule._client("slurm", None, 2, None)
    assert str(refused.value) == f"cluster slurm: sbatch refused the worker job: {no_controller}"
    _command(bin_, "sbatch", 'if [ "$1" = --test-only ]; then echo "sbatch: Job 7 to start" >&2; '
                             'exit 0; fi\necho "sbatch: error: QOSMaxSubmitJobPerUserLimit" >&2\n'
                             'exit 1\n')
    with pytest.raises(ValueError, match=r"^cluster slurm: the batch system did not accept 2 of "
                                         r"2 worker job\(s\) \(sbatch failed"):
        schedule._client("slurm", None, 2, None)
    monkeypatch.setenv("PATH", str(bin_ / "none"))
    with pytest.raises(ValueError, match="^cluster slurm: no sbatch command here"):
        schedule._client("slurm", None, 1, None)
    assert time.monotonic() - start < 60


def test_importing_the_cli_leaves_ctrl_c_to_python():
    """dask_jobqueue replaces the SIGINT handler when imported; the CLI must not import it before
    a batch cluster is asked for, or Ctrl-C would no longer stop a book."""
    code = ("import signal, gtalib.cli; "
            "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_deadline_cancels_late_tasks_and_takes_back_those_that_fit_again(tmp_path, monkeypatch):
    """Three tasks of runs on one worker. The first must be trained (no record) and is
    predicted at 100 s a run, so the two optional ones queued behind it (predicted at 1 s and
    1,000 s a run) would end after a deadline 60 s away: they are cancelled, one line says so
    naming their runs, and the progress bar's total drops by their expected work. The first
    task takes seconds, not 200: the one of 1 s a run fits again, is taken back (one line) and
    trained; the other stays dropped. Nothing is reported failed, and the report counts the
    runs dropped, taken back and read."""
    from gtalib.book.design.plan import make_plan
    from gtalib.book.pipeline.budget import groups
    from gtalib.training.runs import is_done, run_path

    bars = []

    class Bar(schedule.tqdm):  # the job's bar, kept to read its total afterwards
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            bars.append(self)

    monkeypatch.setattr(schedule, "tqdm", Bar)
    plan = make_plan("ci", 1)
    must, back, late = groups([s for _, s in plan.specs()])[:3]
    seconds = {**{s.run_id: 100.0 for s in must}, **{s.run_id: 1.0 for s in back},
               **{s.run_id: 1000.0 for s in late}}
    lines, report = [], {}
    failures = schedule.train_all([(s.model.variant, s) for g in (must, back, late) for s in g],
                                  tmp_path, jobs=1, log=lines.append, seconds=seconds,
                                  deadline=time.perf_counter() + 60,
                                  optional={s.run_id for s in back + late}, report=report)
    assert failures == []
    assert all(is_done(run_path(s, tmp_path)) for s in must + back)
    assert not any(is_done(run_path(s, tmp_path)) for s in late)
    dropped, taken = [ln for ln in lines if ln.startswith("deadline: ")]
    assert dropped.startswith(f"deadline: {len(back + late)} run(s) of 2 task(s) not started "
                              "would end after the budget")
    assert all(s.run_id in dropped for s in back + late)
    assert taken.startswith(f"deadline: {len(back)} run(s) of 1 task(s) dropped before fit "
                            "again at the pace measured since: taken back: ")
    assert all(s.run_id in taken for s in back) and not any(s.run_id in taken for s in late)
    [bar] = bars
    # the dropped tasks' work is gone from the total, the one taken back's is there again
    assert bar.total == pytest.approx(100.0 * len(must) + 1.0 * len(back))
    assert not any(ln.startswith("[") and any(s.run_id in ln for s in late) for ln in lines)
    assert report == {"dropped": len(back + late), "taken_back": len(back), "read": len(late)}


def test_a_task_dropped_before_it_starts_trains_nothing(tmp_path):
    """The deadline sets a task's drop event before it cancels it, and a task that is starting
    as it is dropped reads the event first and trains nothing (Dask cannot stop a running
    task)."""
    from distributed import Client, Event

    from gtalib.book.design.plan import make_plan
    from gtalib.training.runs import is_done, run_path

    plan = make_plan("ci", 1)
    (_, spec), = plan.specs(list(plan.runs)[:1])
    with Client(processes=False, n_workers=1, threads_per_worker=1,
                dashboard_address=":0") as client:
        key = "gtalib-test-dropped-task"
        Event(schedule.drop_event(key), client=client).set()
        rows = client.submit(schedule._train_group, [spec.to_dict()], str(tmp_path), "none",
                             1, "cpu", key=key, pure=False).result()
    assert rows == [] and not is_done(run_path(spec, tmp_path))


def test_closing_drops_only_the_nannies_kill_warning(caplog):
    """An idle worker slow to exit on a loaded machine is killed at close: that one warning is
    dropped while the embedded cluster closes, the nannies' other lines pass."""
    import logging

    from gtalib.book.pipeline.stops import dropped_messages

    caplog.set_level(logging.INFO, logger="distributed")
    log = logging.getLogger("distributed.nanny")
    with dropped_messages("nanny", "Worker process still alive"):
        log.warning("Worker process still alive after 4.0 seconds, killing")
        log.info("Closing Nanny at 'tcp://127.0.0.1:1'")
    log.warning("Worker process still alive after 4.0 seconds, killing")  # outside: kept
    assert [r.getMessage()[:13] for r in caplog.records] == ["Closing Nanny", "Worker proces"]
