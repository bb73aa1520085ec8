"""Ctrl-C and SIGTERM at every phase of ``gtalib book`` (corpus, calibration, training,
notebooks, HTML): one line, exit 130 or 143, the run store as it was (every finished run kept,
nothing half-written) and every temporary folder the job made removed. In process, each phase's
entry replaced by one that makes a temporary folder (as the phase's own do: the calibration's
setup store, a worker's scratch store, the kernels' sockets) and then receives the signal; the
phases before it pass without work. Then once for real: SIGTERM during the calibration on the
embedded cluster, whose workers' temporary folders must go too."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

import pandas as pd
import pytest

from gtalib.book.pipeline import budget, job
from gtalib.cli import main

REPO = Path(__file__).resolve().parents[2]
PHASES = ("corpus", "calibration", "training", "notebooks", "html")


def _store(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _phases(monkeypatch, stop_in: str, signum: int, made: list):
    """Patch the job so that it passes every phase before ``stop_in`` without work, and in it
    makes a temporary folder and receives ``signum``."""

    def stop(*_a, **_k):
        made.append(Path(tempfile.mkdtemp(prefix=f"gtalib-{stop_in}-")))
        signal.raise_signal(signum)
        time.sleep(60)  # the signal's exception ends this
        raise AssertionError(f"{signal.Signals(signum).name} did not stop the job")

    def passes(result=None):
        return lambda *_a, **_k: result

    @contextlib.contextmanager
    def no_cluster(*_a, **_k):
        yield None, "embedded LocalCluster of 1 worker(s)"

    none = types.SimpleNamespace(train=[], first=set(), read=[], seconds={}, train_wall_s=0.0,
                                 job_wall_s=0.0)
    steps = {"corpus": (job, "ensure_corpus"), "calibration": (job, "runs_to_train"),
             "training": (job, "train_all"), "notebooks": (job, "execute_notebooks"),
             "html": (job, "write_toc")}
    passing = {"corpus": passes(), "calibration": passes(([], {}, none)),
               "training": passes([]), "notebooks": passes([]), "html": passes()}
    monkeypatch.setattr(job, "open_cluster", no_cluster)
    monkeypatch.setattr(job, "check_disk_space", passes())
    monkeypatch.setattr(budget, "train_deadline_s", passes())
    monkeypatch.setattr(job, "ablation_results", passes())
    monkeypatch.setattr(job, "notebook_errors", passes([]))
    monkeypatch.setattr(job, "against_records", passes(types.SimpleNamespace(
        runs=pd.DataFrame({"outcome": []}))))
    monkeypatch.setattr(job, "write_chapter_snippets", passes())
    monkeypatch.setattr(job, "all_notebooks", passes(()))  # as if every page was built before
    for phase, (module, name) in steps.items():
        monkeypatch.setattr(module, name, stop if phase == stop_in else passing[phase])


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
@pytest.mark.parametrize("phase", PHASES)
def test_a_stop_at_any_phase_is_one_line_keeps_the_runs_and_leaves_no_temporary_folder(
        phase, signum, tmp_path, monkeypatch, capsys):
    systmp, store = tmp_path / "tmp", tmp_path / "runs"
    systmp.mkdir()
    (store / "0123456789abcdef").mkdir(parents=True)  # a finished run's files, kept as they are
    (store / "0123456789abcdef" / "metrics.csv").write_text("step,train_loss\n1,5.5\n")
    (store / "0123456789abcdef" / "DONE").write_text("")
    before = _store(store)
    monkeypatch.setattr(tempfile, "tempdir", str(systmp))
    monkeypatch.delenv("GTALIB_SYSTEM_TMPDIR", raising=False)
    made = []
    _phases(monkeypatch, phase, signum, made)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # SIG_IGN under CI
    try:
        status = main(["book", "--preset", "ci", "--run-dir", str(store)]
                      + (["--no-train"] if phase in ("notebooks", "html") else []))
    finally:
        signal.signal(signal.SIGINT, previous)
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 128 + signum, err
    words = "stopped by SIGTERM" if signum == signal.SIGTERM else "interrupted"
    assert err == [f"gtalib book: {words}; the finished runs are kept in {store}: run the same "
                   "command again to train the rest"]
    assert len(made) == 1 and systmp in made[0].parents  # made inside the job's own folder ...
    assert list(systmp.iterdir()) == []  # ... which is gone
    assert _store(store) == before
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the caller's handlers back


@pytest.mark.slow
def test_sigterm_during_the_real_calibration_is_one_line_and_leaves_nothing(tmp_path):
    """``gtalib book --predict`` at ci on the embedded cluster, SIGTERM once the calibration has
    started on the workers: exit 143, one line, no worker left, and nothing in the temporary
    folder (the workers' setup stores, Dask's scratch space, torch's caches)."""
    import psutil

    systmp = tmp_path / "tmp"
    systmp.mkdir()
    env = {**os.environ, "TMPDIR": str(systmp), "OMP_NUM_THREADS": "1"}
    env.pop("GTALIB_SYSTEM_TMPDIR", None)
    job_ = subprocess.Popen([sys.executable, "-m", "gtalib", "book", "--preset", "ci", "--seeds",
                             "1", "--predict", "--jobs", "2", "--run-dir", str(tmp_path / "runs")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=REPO, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and job_.poll() is None:  # until a worker times a run
            if list(systmp.glob("gtalib-*/gtalib-setup-*")):
                break
            time.sleep(0.2)
        assert job_.poll() is None, job_.stderr.read()
        workers = psutil.Process(job_.pid).children(recursive=True)
        job_.send_signal(signal.SIGTERM)
        err = job_.communicate(timeout=120)[1]
    finally:
        if job_.poll() is None:
            os.killpg(job_.pid, signal.SIGKILL)
    assert job_.returncode == 143, err
    assert err.strip().splitlines() == [
        f"gtalib book: stopped by SIGTERM"], err  # --predict: nothing trained, nothing to keep
    assert not psutil.wait_procs(workers, timeout=30)[1]
    assert list(systmp.iterdir()) == []


def test_output_into_a_pipe_or_a_file_is_written_line_by_line():
    """A command's stdout redirected (``gtalib book --predict > file``) shows each line as it is
    printed, not at the end: a line printed before a long wait is read during the wait."""
    code = ("import time\nfrom gtalib.cli.signals import command_process\n"
            "with command_process():\n    print('calibration: ...')\n    time.sleep(60)\n")
    job = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        reader = threading.Thread(target=lambda: lines.append(job.stdout.readline()), daemon=True)
        lines = []
        reader.start()
        reader.join(timeout=30)  # the child sleeps 60 s after its line
        assert lines == ["calibration: ...\n"] and job.poll() is None
    finally:
        job.kill()
        job.wait()
