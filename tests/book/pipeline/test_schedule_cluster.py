"""The book's runs on a real Dask cluster on this machine: ``dask scheduler`` and two ``dask
worker`` processes over TCP, each in its own working folder and training into its own scratch
store (``GTALIB_SCRATCH_ONLY``: they hand every run back), one of them killed with SIGKILL while
it trains. Every run finishes, and equals the ci book's run cell for cell. Then the same
through ``gtalib book`` with the scheduler itself killed mid-plan: one error line, exit status
2, and the finished runs kept. And Ctrl-C on the embedded cluster."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from gtalib.book.design.plan import make_plan
from gtalib.book.pipeline.schedule import SCRATCH_ONLY, train_all
from gtalib.training.runs import load_metrics, run_path
from gtalib.training.train import ensure_run

DASK = str(Path(sys.executable).with_name("dask"))


def _start(args, cwd, env, log):
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([DASK, *args], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)


@pytest.mark.slow
def test_the_init_runs_train_on_a_scheduler_and_two_workers_one_killed(tmp_path, built):
    from distributed import Client

    env = {**os.environ, SCRATCH_ONLY: "1", "OMP_NUM_THREADS": "1"}
    sched_file = tmp_path / "scheduler.json"
    log = open(tmp_path / "cluster.log", "w")
    procs = [_start(["scheduler", "--scheduler-file", str(sched_file), "--port", "0",
                     "--dashboard-address", ":0"], tmp_path / "scheduler", env, log)]
    try:
        deadline = time.time() + 60
        while not sched_file.exists() and time.time() < deadline:
            time.sleep(0.2)
        workers = [_start(["worker", "--scheduler-file", str(sched_file), "--nthreads", "1",
                           "--no-nanny", "--local-directory", str(tmp_path / f"w{i}")],
                          tmp_path / f"w{i}", env, log) for i in range(2)]
        procs += workers
        watch = Client(scheduler_file=str(sched_file))
        watch.wait_for_workers(2, timeout=60)
        pid_of = watch.run(os.getpid)  # worker address -> its process
        killed = []

        def kill_one_while_it_trains():
            while not killed and time.time() < deadline + 300:
                busy = [a for a, tasks in watch.processing().items() if tasks]
                if busy:
                    time.sleep(1.0)  # inside a run
                    os.kill(pid_of[busy[0]], signal.SIGKILL)
                    killed.append(pid_of[busy[0]])
                time.sleep(0.1)

        # the initialisation figure's 8 runs (2 variants × 2 arms × 2 seeds), as in test_slurm:
        # four a worker, so one is killed inside a run with runs still to come
        plan = make_plan("ci", 2, None, ("init_ablation",))
        specs = plan.specs(list(plan.runs))
        store, lines = tmp_path / "store", []
        killer = threading.Thread(target=kill_one_while_it_trains, daemon=True)
        killer.start()
        failures = train_all(specs, store, scheduler_file=sched_file, log=lines.append)
        killer.join(5)
        watch.close()
    finally:
        for p in procs:
            p.kill()
            p.wait(30)
        log.close()
    assert killed, "no worker was killed while training"
    assert failures == [], failures
    assert all(line.endswith("(handed back from the worker's scratch store)")
               for line in lines if line.startswith("["))
    assert any(" trains " in line for line in lines)  # a line names what each worker starts
    # every run is in the client's store, checked, and equals the ci book's run cell for cell
    # (trained by its embedded cluster: tests/book/conftest.py)
    here = built[0].parent / "runs"
    for label, spec in {s.run_id: (lab, s) for lab, s in specs}.values():
        remote = load_metrics(run_path(spec, store))
        local = load_metrics(ensure_run(spec, here, accelerator="cpu"))
        pd.testing.assert_frame_equal(remote, local, check_exact=True)
        card = json.loads((run_path(spec, store) / "card.json").read_text())
        assert card["machine_kind"] is not None and card["threads"] == 1


def _default_sigint():
    """In the child before it starts: SIGINT's default action, as in a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


#: A job that trains two long ``ci`` runs on an embedded cluster of one worker.
_JOB = """
import sys
from gtalib.book.design.plan import make_plan
from gtalib.book.pipeline.schedule import train_all

if __name__ == "__main__":
    plan = make_plan("ci", 1, max_steps=2000)
    train_all(plan.specs(list(plan.runs)[:2]), sys.argv[1], jobs=1, threads=1)
"""


@pytest.mark.slow
def test_ctrl_c_cancels_the_runs_and_leaves_nothing_half_written(tmp_path):
    import psutil

    from gtalib.training.runs import check_store

    store = tmp_path / "store"
    # SIGINT as a terminal leaves it, even where the tests run in the background with it
    # ignored (an ignored signal stays ignored in a child)
    job = subprocess.Popen([sys.executable, "-c", _JOB, str(store)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, preexec_fn=_default_sigint,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
    seen = []
    try:
        for line in job.stdout:  # until the worker says it trains a run
            seen.append(line)
            if " trains " in line:
                break
        assert any(" trains " in line for line in seen), "".join(seen)
        # inside the run: its folder made (on a loaded machine that takes more than the line)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(p.is_dir() for p in store.glob("*")):
            time.sleep(0.2)
        time.sleep(2.0)
        workers = psutil.Process(job.pid).children(recursive=True)
        assert workers, "the embedded cluster has no worker process"
        job.send_signal(signal.SIGINT)
        rest = job.communicate(timeout=120)[0]
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode != 0, rest
    assert "KeyboardInterrupt" in rest
    # no worker keeps training: the cluster's processes are gone ...
    gone, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive, alive
    # ... and the store holds no finished run and nothing half-written: a run folder is either
    # not done (resumable or retrained) or done with files that check out
    before = {p: p.stat().st_mtime_ns for p in store.rglob("*")}
    states = check_store(store)
    assert states and {s.state for s in states} <= {"incomplete"}, states
    time.sleep(2.0)
    assert {p: p.stat().st_mtime_ns for p in store.rglob("*")} == before


@pytest.mark.slow
def test_ctrl_c_of_gtalib_book_is_one_line_and_exit_130(tmp_path):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) while ``gtalib book`` trains
    on the embedded cluster: exit status 130 and one line saying where the finished runs are,
    no traceback."""
    store = tmp_path / "store"
    job = subprocess.Popen([sys.executable, "-m", "gtalib", "book", "--preset", "ci", "--only",
                            "init_ablation", "--no-html", "--run-dir", str(store), "--jobs", "1"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True, preexec_fn=_default_sigint,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
    seen = []
    try:
        for line in job.stdout:  # until a run trains
            seen.append(line)
            if line.startswith("runs:") or " trains " in line:
                break
        time.sleep(3.0)
        os.killpg(job.pid, signal.SIGINT)
        rest = job.communicate(timeout=120)[0]
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    out = "".join(seen) + rest
    assert job.returncode == 130, out
    assert "Traceback" not in out, out
    assert (f"gtalib book: interrupted; the finished runs are kept in {store}: run the same "
            f"command again to train the rest") in out.splitlines()


@pytest.mark.slow
def test_a_lost_scheduler_is_one_error_and_the_finished_runs_are_kept(tmp_path):
    """``gtalib book`` on a running cluster whose scheduler is killed (SIGKILL) after two runs
    finished: exit status 2 and one line saying how many runs are kept and what to do, no
    traceback, no run reported as failed, no notebook executed; the store holds exactly the
    runs that line counts, each complete, and nothing half-written."""
    from gtalib.training.runs import check_store

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    sched_file, store = tmp_path / "scheduler.json", tmp_path / "store"
    log = open(tmp_path / "cluster.log", "w")
    scheduler = _start(["scheduler", "--scheduler-file", str(sched_file), "--port", "0",
                        "--dashboard-address", ":0"], tmp_path / "scheduler", env, log)
    procs = [scheduler]
    try:
        deadline = time.time() + 60
        while not sched_file.exists() and time.time() < deadline:
            time.sleep(0.2)
        worker = _start(["worker", "--scheduler-file", str(sched_file), "--nthreads", "1",
                             "--no-nanny", "--local-directory", str(tmp_path / "w0")],
                            tmp_path / "w0", env, log)
        procs.append(worker)
        job = subprocess.Popen(
            [str(Path(sys.executable).with_name("gtalib")), "book", "--preset", "ci", "--seeds",
             "2", "--max-steps", "40", "--only", "init_ablation", "--no-html", "--budget", "none",
             "--scheduler-file", str(sched_file), "--run-dir", str(store)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        procs.append(job)
        out, finished = [], 0
        for line in job.stdout:
            out.append(line)
            finished += line.startswith("[")
            if finished == 2:
                # the worker first, so that no run finishes after the scheduler is gone
                worker.kill()
                worker.wait(30)
                scheduler.kill()
                break
        rest, err = job.communicate(timeout=120)
        out.append(rest)
    finally:
        for p in procs:
            p.kill()
            p.wait(30)
        log.close()
    out = "".join(out)
    assert finished == 2, out + err
    assert job.returncode == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    m = re.fullmatch(r"gtalib book: error: lost the Dask scheduler tcp://\S+ after (\d+) of (\d+) "
                     r"runs \(kept in (.+)\); run the same command again to train the other (\d+)",
                     lines[0])
    assert m, lines[0]
    kept, todo, where, left = int(m[1]), int(m[2]), m[3], int(m[4])
    assert where == str(store) and kept + left == todo and kept >= 2
    assert "Traceback" not in out and "FAILED" not in out and "notebook" not in out, out
    states = check_store(store)
    assert sum(s.state == "done" for s in states) == kept, states
    assert {s.state for s in states} <= {"done", "incomplete"}, states
    assert len([ln for ln in out.splitlines() if re.match(r"\[\d+/\d+\] ", ln)]) <= kept
