"""Runs in fresh processes: 2-process DDP on CPU (gloo) equals the single-process run, and a
process killed mid-run (``os._exit``, no clean-up) resumes to the uninterrupted result."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gtalib.runs import RunSpec, ensure_run, is_done, load_metrics
from gtalib.presets import model_config, train_config

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
    import json

    assert json.loads((path / "card.json").read_text())["world_size"] == 2


def test_hard_kill_then_resume_equals_uninterrupted(reference, tmp_path):
    proc = run_script(tmp_path, "--exit-at", 13)
    assert proc.returncode == 3, proc.stderr[-3000:]
    s = reference_spec()
    path = tmp_path / s.run_id
    assert not is_done(path) and (path / "checkpoints" / "last.ckpt").exists()
    done = ensure_run(s, tmp_path, datamodule=synthetic(s))
    pd.testing.assert_frame_equal(load_metrics(done), reference)
