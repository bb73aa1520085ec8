"""The book's runs on a real Slurm: a one-node Slurm on this machine (``scripts/slurm.sh start``:
Debian's slurm-wlm and munge, as root) and ``gtalib book --cluster slurm`` with two worker jobs
submitted by dask-jobqueue, one of them cancelled with ``scancel`` while it trains. The book
exits 0, the cancelled job's run is trained again on the other job, every run equals the same
run of the ci book built by the embedded cluster (the ``built`` fixture) cell for cell, and no
job of the book is left in ``squeue``.

Skipped, with the reason (also in the run's summary, "real parts"), where no Slurm can be
started: not root, or no apt-get. With ``GTALIB_REQUIRE_SLURM=1`` (``.ci/run`` and the test
workflow, which start Slurm first) it fails instead of skipping."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from gtalib.book.design.plan import make_plan
from gtalib.training.runs import is_done, load_metrics, run_path
from gtalib.training.train import ensure_run

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "slurm.sh"
REQUIRE = "GTALIB_REQUIRE_SLURM"
GTALIB = str(Path(sys.executable).with_name("gtalib"))


def _slurm(action: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), action], capture_output=True, text=True,
                          timeout=timeout)


def _queue() -> set[str]:
    """Job ids in ``squeue`` (every user's: the book's jobs are this user's)."""
    r = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, check=True)
    return set(r.stdout.split())


def _job_of(pid: int) -> str | None:
    """The Slurm job a process runs in (its ``SLURM_JOB_ID``), or None."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    found = [v.split(b"=", 1)[1].decode() for v in env if v.startswith(b"SLURM_JOB_ID=")]
    return found[0] if found else None


@pytest.fixture(scope="module")
def slurm(real_parts_report):
    """A Slurm node that takes jobs: found running, or started by ``scripts/slurm.sh start`` (and
    then stopped again at the end of the module); else skip (fail under ``GTALIB_REQUIRE_SLURM``)."""
    status, started, reason = _slurm("status"), False, None
    if status.returncode != 0:
        if os.geteuid() != 0:
            reason = ("no Slurm takes jobs here and starting one needs root "
                      "(sudo bash scripts/slurm.sh start)")
        else:
            r = _slurm("start", timeout=1200)
            started = r.returncode == 0
            reason = None if started else (r.stderr.strip().splitlines() or ["failed"])[-1]
            status = _slurm("status")
    if reason:
        real_parts_report(f"Slurm: test_slurm skipped: {reason}")
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{REQUIRE}=1 but no Slurm: {reason}")
        pytest.skip(reason)
    node = status.stdout.strip()
    yield node
    if started:
        _slurm("stop")


def test_ci_book_trains_on_slurm_and_survives_a_cancelled_job(slurm, built, tmp_path,
                                                             real_parts_report):
    plan = make_plan("ci", 2, None, ("init_ablation",))
    specs = {s.run_id: s for _, s in plan.specs([*plan.runs, *plan.ladder_refs])}
    store = tmp_path / "store"
    before = _queue()
    job = subprocess.Popen(
        [GTALIB, "book", "--preset", "ci", "--seeds", "2", "--only", "init_ablation", "--no-html",
         "--budget", "none", "--cluster", "slurm", "--jobs", "2", "--batch-cores", "1",
         "--batch-memory", "4GB", "--batch-walltime", "00:20:00", "--run-dir", str(store)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    out, cancelled = [], None  # cancelled: (job id, run id, pid)
    try:
        for line in job.stdout:
            out.append(line)
            m = re.match(r"\s+worker \S+ \(\S+ pid (\d+)\) trains (\S+)", line)
            # the first run a worker trains: its start-up (imports, first compile) keeps it in
            # flight for seconds, where a later ci run (20 steps) can end within the second
            if m and cancelled is None:
                pid, rid = int(m[1]), m[2]
                slurm_job = _job_of(pid)
                assert slurm_job in _queue() - before, (slurm_job, line)
                time.sleep(0.3)  # inside the run
                subprocess.run(["scancel", slurm_job], check=True)
                cancelled = (slurm_job, rid, pid)
        job.wait(600)
    finally:
        if job.poll() is None:
            job.kill()
    out = "".join(out)
    assert job.returncode == 0, out
    assert cancelled is not None, "no worker job was cancelled while it trained:\n" + out
    slurm_job, rid, pid = cancelled
    # the cancelled job's run: finished by another process, after the cancel
    [done_line] = [ln for ln in out.splitlines() if re.match(rf"\[\d+/\d+\] {rid} ", ln)]
    assert f" pid {pid} " not in done_line and "FAILED" not in out, out
    # no job of the book is left (dask-jobqueue cancels its jobs when the cluster closes)
    deadline = time.time() + 60
    while _queue() - before and time.time() < deadline:
        time.sleep(1.0)
    assert not _queue() - before, f"jobs left in squeue: {_queue() - before}"
    # every run is in the store and equals the ci book's run, cell for cell
    here = built[0].parent / "runs"  # the ci book's store (tests/book/conftest.py): its runs
    assert all(is_done(run_path(s, store)) for s in specs.values())
    for spec in specs.values():
        pd.testing.assert_frame_equal(load_metrics(run_path(spec, store)),
                                      load_metrics(ensure_run(spec, here, accelerator="cpu")),
                                      check_exact=True)
    real_parts_report(f"Slurm: test_slurm trained {len(specs)} runs on {slurm} through 2 sbatch "
                      f"jobs, job {slurm_job} cancelled mid-run and survived")
