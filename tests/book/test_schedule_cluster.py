"""The book's runs on a real Dask cluster on this machine: ``dask scheduler`` and two ``dask
worker`` processes over TCP, each in its own working folder and training into its own scratch
store (``GTALIB_SCRATCH_ONLY``: they hand every run back), one of them killed with SIGKILL while
it trains. Every run finishes, and equals a run trained here cell for cell."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from gtalib.book.plan import make_plan
from gtalib.book.schedule import SCRATCH_ONLY, train_all
from gtalib.training.runs import load_metrics, run_path
from gtalib.training.train import ensure_run

DASK = str(Path(sys.executable).with_name("dask"))


def _start(args, cwd, env, log):
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([DASK, *args], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)


@pytest.mark.slow
def test_ci_book_runs_on_a_scheduler_and_two_workers_one_killed(tmp_path):
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

        plan = make_plan("ci", 2)
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
    assert all(line.endswith("(handed back)") for line in lines if line.startswith("["))
    # every run is in the client's store, checked, and equals a run trained here cell for cell
    here = tmp_path / "here"
    for label, spec in {s.run_id: (lab, s) for lab, s in specs}.values():
        remote = load_metrics(run_path(spec, store))
        local = load_metrics(ensure_run(spec, here, accelerator="cpu"))
        pd.testing.assert_frame_equal(remote, local, check_exact=True)
        card = json.loads((run_path(spec, store) / "card.json").read_text())
        assert card["machine_kind"] is not None and card["threads"] == 1
