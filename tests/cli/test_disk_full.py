"""A full run store through the commands: ``gtalib train`` and ``gtalib book`` end with one line
naming the store and the space free (exit 2), ``gtalib book`` starts no run and executes no
notebook after the failure, and the same command with space continues; both refuse to start on
a store with less space than predicted unless ``--ignore-disk-space``.

The disk fills up by ``OSError(ENOSPC)`` injected where the store's files are written
(``tests/faults.py``); the file system's free space is what ``shutil.disk_usage``
answers, set here to 1 MB. ``gtalib book`` trains on an in-process Dask cluster (``--cluster
tcp://...``, worker threads of this process) so that the injected fault reaches its runs.
"""

import json
import os
import shutil
from collections import namedtuple
from pathlib import Path

import pandas as pd
import pytest
from faults import WriteFaults

from gtalib import cli
from gtalib.training.runs import is_done, load_metrics

Usage = namedtuple("Usage", "total used free")
MB = 1_000_000


@pytest.fixture(autouse=True)
def setup_untimed(monkeypatch):
    """The calibration's setup runs write a store of their own, whose files the injected faults
    would count: here a run's setup is not timed."""
    from gtalib.book.pipeline import calibration

    monkeypatch.setattr(calibration, "time_setup", lambda *a, **k: 0.2)


@pytest.fixture
def one_mb_free(monkeypatch):
    """The file system of every folder reports 1 MB free; ``restore()`` gives the truth back."""
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(100 * MB, 99 * MB, MB))

    class Undo:
        @staticmethod
        def restore():
            monkeypatch.setattr(shutil, "disk_usage", real)

    return Undo


def _train(run_dir, *extra):
    return cli.main(["train", "--variant", "mha", "--preset", "ci", "--max-steps", "12",
                     "--quiet", "--run-dir", str(run_dir), *extra])


def _run_folder(run_dir: Path) -> Path:
    [folder] = [p for p in run_dir.iterdir() if p.is_dir()]
    return folder


def test_train_refuses_a_store_with_less_space_than_the_run_needs(tmp_path, one_mb_free, capsys):
    assert _train(tmp_path / "runs") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"gtalib train: error: not enough space in the run store {tmp_path / 'runs'} "
                   f"(1.0 MB free on its file system): ≈ 10.4 MB needed for this run; free "
                   f"space, give a store on a larger disk (--run-dir), or start anyway with "
                   f"--ignore-disk-space"]
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_train_on_a_full_disk_is_one_line_and_the_same_command_resumes(tmp_path, one_mb_free,
                                                                       monkeypatch, capsys):
    """ENOSPC at the second checkpoint write (step 12 of 12): one line naming the store, the
    space free and the checkpoint kept (step 10), exit 2, no traceback; the same command with
    space resumes from step 10 and ends bit-identical to an uninterrupted run."""
    store = tmp_path / "runs"
    faults = WriteFaults("last.ckpt", 2)
    monkeypatch.setattr(os, "write", faults.write)
    assert _train(store, "--ignore-disk-space") == 2
    out = capsys.readouterr()
    folder = _run_folder(store)
    assert out.err.strip().splitlines() == [
        f"gtalib train: error: no space left in the run store {store} (1.0 MB free on its file "
        f"system): run {folder.name} stopped, its checkpoint of step 10 kept (it resumes from "
        f"there): free space (or give a store on a larger disk) and run the same command again"]
    assert "Traceback" not in out.out + out.err
    faults.clear()
    one_mb_free.restore()
    assert _train(store) == 0
    assert json.loads((folder / "card.json").read_text())["resumed"] is True
    assert _train(tmp_path / "ref") == 0
    pd.testing.assert_frame_equal(load_metrics(folder), load_metrics(_run_folder(tmp_path / "ref")),
                                  check_exact=True)


def test_a_full_disk_outside_the_run_store_is_one_line_naming_the_file(one_mb_free):
    """The data cache, the book's pages: the file the error names and the space free."""
    import errno

    from gtalib.cli.core import CliError, expected_error

    full = OSError(errno.ENOSPC, "No space left on device", "/data/corpora/x.bin")
    wrapped = RuntimeError("a library's wrapper")
    wrapped.__context__ = full
    for exc in (full, wrapped):
        err = expected_error(exc)
        assert isinstance(err, CliError) and str(err) == (
            "no space left on the file system of /data/corpora/x.bin (1.0 MB free): free space "
            "and run the same command again")
    assert expected_error(OSError(errno.EACCES, "Permission denied", "/x")) is None  # a bug


# ------------------------------------------------------------------------------- gtalib book

@pytest.fixture
def cluster():
    """A Dask scheduler and one one-thread worker in this process, over TCP."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                      dashboard_address=":0") as c:
        yield c.scheduler_address


@pytest.fixture
def watched(monkeypatch):
    """The runs the book's workers start and the notebooks it executes, in order."""
    from gtalib.book.pipeline import job, schedule

    seen = {"runs": [], "notebooks": []}
    train = schedule.ensure_run

    def ensure_run(spec, *a, **kw):
        seen["runs"].append(spec.run_id)
        return train(spec, *a, **kw)

    def execute_notebooks(*a, **kw):
        seen["notebooks"].append(a)
        raise AssertionError("no notebook may be executed")

    monkeypatch.setattr(schedule, "ensure_run", ensure_run)
    monkeypatch.setattr(job, "execute_notebooks", execute_notebooks)
    return seen


def _book(run_dir, address, *extra):
    return cli.main(["book", "--preset", "ci", "--seeds", "1", "--max-steps", "4", "--only",
                     "init_ablation", "--budget", "none", "--no-html", "--cluster", address,
                     "--run-dir", str(run_dir), *extra])


def test_book_refuses_a_store_with_less_space_than_its_runs_need(tmp_path, cluster, watched,
                                                                 one_mb_free, capsys):
    assert _book(tmp_path / "runs", cluster) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"gtalib book: error: not enough space in the run store "
                           f"{tmp_path / 'runs'} (1.0 MB free on its file system): ≈ ")
    assert last.endswith(" needed for the 4 run(s) to train; free space, give a store on a "
                         "larger disk (--run-dir), or start anyway with --ignore-disk-space")
    assert watched == {"runs": [], "notebooks": []}


def test_book_stops_at_the_first_full_disk_and_the_same_command_continues(
        tmp_path, cluster, watched, one_mb_free, monkeypatch, capsys):
    """The init figure at ``ci``: 4 runs in 2 tasks (both arms of a pair each) on one worker.
    The store fills up when the second run writes its metrics: the job cancels the other task,
    starts no further run and executes no notebook; its last line names the store, the space
    free, the run stopped and the run kept, exit 2. With space, the same command trains the
    rest, the stopped run from its final checkpoint, bit-identical to a run trained apart."""
    store = tmp_path / "runs"
    faults = WriteFaults("metrics.csv", 2)
    monkeypatch.setattr(os, "write", faults.write)
    assert _book(store, cluster, "--ignore-disk-space") == 2
    err = capsys.readouterr().err
    first, stopped = watched["runs"]  # the task's two arms; the other task never started
    assert watched["notebooks"] == []
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"gtalib book: error: no space left in the run store {store} (1.0 MB "
                           f"free on its file system): run {stopped} ")
    assert last.endswith(", its checkpoint of step 4 kept (it resumes from there); 1 of 4 runs "
                         f"are done and kept in {store}, no further run was started: free space "
                         "(or give --run-dir on a larger disk) and run the same command again to "
                         "train the rest")
    assert "No space left on device" not in err and "Traceback" not in err
    assert is_done(store / first) and not is_done(store / stopped)
    assert sorted(p.name for p in store.iterdir() if p.is_dir()) == sorted([first, stopped])

    faults.clear()
    one_mb_free.restore()
    monkeypatch.setattr(cli.book, "build_book", _train_only(cli.book.build_book))
    assert _book(store, cluster) == 0
    assert watched["runs"][2:] and stopped in watched["runs"][2:] and first not in watched["runs"][2:]
    assert json.loads((store / stopped / "card.json").read_text())["resumed"] is True
    from gtalib.training.runs import load_spec
    from gtalib.training.train import ensure_run

    apart = ensure_run(load_spec(store / stopped), tmp_path / "apart")
    pd.testing.assert_frame_equal(load_metrics(store / stopped), load_metrics(apart),
                                  check_exact=True)


def _train_only(build_book):
    """``build_book`` that stops where the watched ``execute_notebooks`` raises: the rerun's
    check is its runs."""

    def build(*a, **kw):
        try:
            return build_book(*a, **kw)
        except AssertionError as e:
            if "no notebook" not in str(e):
                raise
            return {}

    return build
