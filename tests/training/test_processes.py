"""Runs in fresh processes: 2-process DDP on CPU (gloo) equals the single-process run, a
process killed mid-run (``os._exit``, no clean-up) resumes to the uninterrupted result, and two
processes asking for the same run train it once (the second waits; a killed holder's lock is
taken over)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gtalib.training.runs import RunSpec, check_store, is_done, load_metrics, lock_holder
from gtalib.training.train import ensure_run
from gtalib.model.presets import model_config
from gtalib.training.config import train_config

from .synthetic import SyntheticData

SCRIPT = Path(__file__).with_name("run_script.py")
DATA = {"name": "synthetic-markov", "version": 1}  # as in run_script.py


def synthetic(s):
    return SyntheticData(s.train.seq_len, s.train.batch_size, eval_windows=s.train.eval_windows)


def reference_spec():
    return RunSpec(model_config("ci", "mlra-4"), train_config("ci"), DATA, 0)


def run_script(*args, timeout=240):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], env=env, timeout=timeout,
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    s = reference_spec()
    path = ensure_run(s, tmp_path_factory.mktemp("ref"), datamodule=synthetic(s))
    return load_metrics(path)


@pytest.mark.slow
def test_ddp_two_processes_equals_single_process(reference, tmp_path):
    proc = run_script(tmp_path, "--devices", 2, "--strategy", "ddp")
    assert proc.returncode == 0, proc.stderr[-3000:]
    path = tmp_path / reference_spec().run_id
    df = load_metrics(path)
    assert df["step"].tolist() == reference["step"].tolist()
    # same global batch split over two ranks: equal up to float reduction order
    for col in ("train_loss", "val_loss", "val_loss/a", "val_loss/b"):
        np.testing.assert_allclose(df[col], reference[col], rtol=0, atol=1e-4, err_msg=col)
    assert json.loads((path / "card.json").read_text())["world_size"] == 2


def test_hard_kill_then_resume_equals_uninterrupted(reference, tmp_path):
    proc = run_script(tmp_path, "--exit-at", 13)
    assert proc.returncode == 3, proc.stderr[-3000:]
    s = reference_spec()
    path = tmp_path / s.run_id
    assert not is_done(path) and (path / "checkpoints" / "last.ckpt").exists()
    done = ensure_run(s, tmp_path, datamodule=synthetic(s))
    pd.testing.assert_frame_equal(load_metrics(done), reference)


def start_script(out, *args):
    """``run_script.py`` started in the background, its stdout and stderr going to ``out``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    with open(out, "w") as f:
        return subprocess.Popen([sys.executable, str(SCRIPT), *map(str, args)], env=env,
                                stdout=f, stderr=subprocess.STDOUT, text=True)


def wait_for(condition, proc, what, timeout=120):
    t0 = time.monotonic()
    while not condition():
        assert proc.poll() is None, f"the process ended (status {proc.returncode}) before {what}"
        assert time.monotonic() - t0 < timeout, f"no {what} after {timeout} s"
        time.sleep(0.1)


def test_two_processes_on_one_run_train_it_once(tmp_path):
    s = reference_spec()
    runs, path = tmp_path / "runs", tmp_path / "runs" / s.run_id
    first = start_script(tmp_path / "first.log", runs, "--hold-at", 5, tmp_path)
    wait_for((tmp_path / "held").exists, first, "the first process training")
    # the store names who trains it (gtalib runs), and does not call it incomplete
    holder = f"pid {first.pid} on {socket.gethostname()} since "
    (state,) = check_store(runs)
    assert state.state == "training" and state.detail.startswith(f"being trained by {holder}")
    second = start_script(tmp_path / "second.log", runs)
    log = tmp_path / "second.log"
    wait_for(lambda: "waiting" in log.read_text(), second, "the second process waiting")
    (tmp_path / "go").touch()
    assert first.wait(240) == 0 and second.wait(240) == 0, log.read_text()[-3000:]
    out = log.read_text()
    assert (f"run {s.run_id} is being trained by pid {first.pid} on {socket.gethostname()} since "
            in out)
    assert f"trained_by: {holder}" in out  # the second did not train it, and says who did
    assert "trained_by: this process" in (tmp_path / "first.log").read_text()
    assert str(path) in out and str(path) in (tmp_path / "first.log").read_text()
    assert [p.name for p in (path / "logs").iterdir()] == ["version_0"]  # one training attempt
    assert json.loads((path / "card.json").read_text())["resumed"] is False
    assert not (runs / f"{s.run_id}.lock").exists()


def test_the_lock_of_a_killed_process_is_taken_over(reference, tmp_path, capsys):
    s = reference_spec()
    runs = tmp_path / "runs"
    # held past the checkpoint of step 10, then killed: its lock file is left, naming it
    first = start_script(tmp_path / "first.log", runs, "--hold-at", 13, tmp_path)
    wait_for((tmp_path / "held").exists, first, "the first process training")
    first.send_signal(signal.SIGKILL)
    first.wait(60)
    lock = runs / f"{s.run_id}.lock"
    assert lock.read_text().startswith(f"pid {first.pid} on ")
    assert lock_holder(runs / s.run_id) is None  # a killed holder's file is not a held lock
    assert check_store(runs)[0].state == "incomplete"
    outcome = {}
    done = ensure_run(s, runs, datamodule=synthetic(s), outcome=outcome)
    assert outcome == {"trained_by": "this process"}
    out = capsys.readouterr().out
    assert f"run {s.run_id}: pid {first.pid} on " in out and "ended without finishing it; taking over" in out
    assert "waiting" not in out
    pd.testing.assert_frame_equal(load_metrics(done), reference)
    assert json.loads((done / "card.json").read_text())["resumed"] is True
    assert not lock.exists()


@pytest.mark.parametrize("env, zero", [({}, True), ({"RANK": "0", "LOCAL_RANK": "0"}, True),
                                       ({"LOCAL_RANK": "1"}, False), ({"RANK": "3"}, False),
                                       ({"NODE_RANK": "1"}, False), ({"SLURM_PROCID": "2"}, False)])
def test_only_rank_zero_takes_the_lock(env, zero, monkeypatch):
    from gtalib.training.train import _RANK_VARIABLES, _is_rank_zero

    for v in _RANK_VARIABLES:
        monkeypatch.delenv(v, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert _is_rank_zero() is zero
