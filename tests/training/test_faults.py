"""The faults of a long job, on one run: a full disk (``OSError(ENOSPC)`` injected at the n-th
write of a file of the store, ``tests/faults.py``) and a checkpoint write killed half-way.
Whatever fails, the previous checkpoint stays readable, the run resumes from it, and its metrics
are bit-identical to an uninterrupted run's. Then Lightning's Slurm hint. Runs use the ``ci``
presets, 6 steps, on the synthetic corpus of ``synthetic.py``; the kill test runs
``run_script.py`` (20 steps) in a process of its own."""

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from gtalib.model.presets import model_config
from gtalib.training.config import train_config
from gtalib.training.disk import StoreFullError, disk_full, write_file
from gtalib.training.runs import RunSpec, is_done, load_metrics
from gtalib.training.train import ensure_run

from faults import WriteFaults

from .synthetic import SyntheticData

DATA = {"name": "synthetic-markov", "version": 1}  # as in run_script.py
HERE = Path(__file__).parent


def spec(max_steps=6, variant="mha", **train):
    t = train_config("ci", max_steps=max_steps, eval_every=3, checkpoint_every=2, **train)
    return RunSpec(model_config("ci", variant), t, DATA, 0)


def data_for(s: RunSpec):
    return SyntheticData(s.train.seq_len, s.train.batch_size, s.train.data_seed, s.train.eval_windows)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run: its metrics."""
    s = spec()
    return load_metrics(ensure_run(s, tmp_path_factory.mktemp("ref"), datamodule=data_for(s)))


def _step(ckpt: Path) -> int:
    return torch.load(ckpt, map_location="cpu", weights_only=True)["global_step"]


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a, b, check_exact=True)  # bit for bit


def test_write_file_leaves_the_old_file_whole_when_the_disk_is_full(tmp_path, monkeypatch):
    f = tmp_path / "card.json"
    write_file(f, "old\n")
    faults = WriteFaults("card.json", 1)
    monkeypatch.setattr(os, "write", faults.write)
    with pytest.raises(OSError) as err:
        write_file(f, "new\n" * 1000)
    assert err.value.errno == errno.ENOSPC and disk_full(err.value) is err.value
    assert f.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["card.json"]
    faults.clear()
    write_file(f, "new\n")
    assert f.read_text() == "new\n"


@pytest.mark.parametrize("at, kept", [(2, 2), (3, 4)])
def test_a_full_disk_at_a_checkpoint_keeps_the_previous_one_and_the_rerun_resumes_from_it(
        reference, tmp_path, monkeypatch, at, kept):
    """ENOSPC at the ``at``-th checkpoint write (steps 2, 4, 6): the checkpoint before it is kept
    and readable, no temporary file is left, the error names the store, the space free and the
    step kept; with space again the run resumes from that step and ends bit-identical."""
    s = spec()
    faults = WriteFaults("last.ckpt", at)
    monkeypatch.setattr(os, "write", faults.write)
    with pytest.raises(StoreFullError) as err:
        ensure_run(s, tmp_path, datamodule=data_for(s))
    msg = str(err.value)
    assert msg.startswith(f"no space left in the run store {tmp_path} (")
    assert " free on its file system): " in msg and "\n" not in msg
    assert f"run {s.run_id} stopped, its checkpoint of step {kept} kept (it resumes from there)" in msg
    assert err.value.store == tmp_path and err.value.run_id == s.run_id
    ckpt = tmp_path / s.run_id / "checkpoints" / "last.ckpt"
    assert _step(ckpt) == kept
    assert [p.name for p in ckpt.parent.iterdir()] == ["last.ckpt"]  # no temporary file
    assert not is_done(tmp_path / s.run_id)
    faults.clear()
    done = ensure_run(s, tmp_path, datamodule=data_for(s))
    assert json.loads((done / "card.json").read_text())["resumed"] is True
    _same(load_metrics(done), reference)


def test_a_full_disk_before_the_first_checkpoint_leaves_no_run_folder(tmp_path, monkeypatch):
    s = spec()
    monkeypatch.setattr(os, "write", WriteFaults("last.ckpt", 1).write)
    with pytest.raises(StoreFullError, match=rf"run {s.run_id} stopped, no checkpoint yet \(it "
                                             r"restarts from step 0\)"):
        ensure_run(s, tmp_path, datamodule=data_for(s))
    assert not (tmp_path / s.run_id).exists()


def test_a_full_disk_after_training_keeps_the_final_checkpoint(reference, tmp_path, monkeypatch):
    """ENOSPC when the metrics are written: the run's final checkpoint is kept, and the rerun
    writes the same metrics from it without training a step again."""
    s = spec()
    faults = WriteFaults("metrics.csv", 1)
    monkeypatch.setattr(os, "write", faults.write)
    with pytest.raises(StoreFullError, match=f"its checkpoint of step {s.train.max_steps} kept"):
        ensure_run(s, tmp_path, datamodule=data_for(s))
    assert not (tmp_path / s.run_id / "metrics.csv").exists()
    faults.clear()
    done = ensure_run(s, tmp_path, datamodule=data_for(s))
    _same(load_metrics(done), reference)


def test_a_checkpoint_write_killed_half_way_keeps_the_previous_one(tmp_path):
    """The process is killed (SIGKILL) half-way through writing its second checkpoint (step 20
    of 20): the half-written bytes are in a temporary file, ``last.ckpt`` is still step 10's,
    whole; the next training removes the temporary file, resumes from step 10 and ends
    bit-identical to an uninterrupted run."""
    p = subprocess.run([sys.executable, str(HERE / "run_script.py"), str(tmp_path / "store"),
                        "--kill-writing", "2"], capture_output=True, text=True, timeout=600)
    assert p.returncode == -9, p.stderr[-2000:]
    s = RunSpec(model_config("ci", "mlra-4"), train_config("ci"), DATA, 0)  # run_script.py's
    ckpts = tmp_path / "store" / s.run_id / "checkpoints"
    [tmp] = ckpts.glob(".last.ckpt.*.tmp")
    assert 0 < tmp.stat().st_size < (ckpts / "last.ckpt").stat().st_size
    assert _step(ckpts / "last.ckpt") == 10
    done = ensure_run(s, tmp_path / "store", datamodule=data_for(s))
    assert not tmp.exists()
    assert json.loads((done / "card.json").read_text())["resumed"] is True
    ref = ensure_run(s, tmp_path / "ref", datamodule=data_for(s))
    _same(load_metrics(done), load_metrics(ref))


def _fake_srun(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for k in ("SLURM_JOB_ID", "SLURM_NTASKS", "SLURM_JOB_NAME"):
        monkeypatch.delenv(k, raising=False)


@pytest.mark.parametrize("in_job", [False, True])
def test_lightnings_srun_hint_only_inside_a_slurm_job(tmp_path, monkeypatch, recwarn, in_job):
    """Where ``srun`` is installed, Lightning hints at it on every fit that does not resume;
    gtalib lets the hint through only inside a Slurm job (``SLURM_JOB_ID`` set), where a run
    not started by ``srun`` may be a mistake. ``progress=True``: Lightning's other advice is
    shown, so only the hint's own filter can hide it."""
    _fake_srun(tmp_path, monkeypatch)
    if in_job:
        monkeypatch.setenv("SLURM_JOB_ID", "42")
    s = spec(max_steps=1)
    ensure_run(s, tmp_path / "store", datamodule=data_for(s), progress=True)
    hints = [w for w in recwarn if "The `srun` command is available" in str(w.message)]
    assert len(hints) == (1 if in_job else 0)


def test_the_predicted_bytes_hold_a_real_run(tmp_path):
    """:func:`gtalib.training.disk.run_bytes` against a run's own files: the checkpoint from the
    model's size within 2 % above the real ``last.ckpt`` (twice: it and the temporary file of
    the next), the files kept once done (estimated from the step count) no less than they are."""
    from gtalib.training.disk import checkpoint_bytes, run_bytes

    s = spec()
    done = ensure_run(s, tmp_path, datamodule=data_for(s), keep_checkpoint=True)
    ckpt = (done / "checkpoints" / "last.ckpt").stat().st_size
    kept = sum(f.stat().st_size for f in done.rglob("*") if f.is_file()
               and "checkpoints" not in f.parts)
    assert ckpt <= checkpoint_bytes(s.model) <= 1.02 * ckpt
    predicted_kept, training = run_bytes(s)
    assert training == 2 * checkpoint_bytes(s.model)
    assert kept <= predicted_kept <= 3 * kept
