"""Training the runs the book needs: the missing ones among a plan's specs, in this process or
in ``jobs`` worker processes (a process pool), with progress lines and an ETA. The one place the
book's scheduler of runs lives (step 2 of :mod:`gtalib.book.job`). Reads the run store through
:mod:`gtalib.training.runs`.
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor, as_completed


# ---------------------------------------------------------------------------------------------
# 2. runs


def _train_one(spec_dict: dict, run_dir: str, threads: int | None, accelerator: str
               ) -> tuple[str, float]:
    """Worker: train one run (used by the process pool; top level so it pickles)."""
    import torch

    from gtalib.training import runs
    from gtalib.training.train import ensure_run

    if threads:
        torch.set_num_threads(threads)
    t0 = time.perf_counter()
    ensure_run(runs.RunSpec.from_dict(spec_dict), run_dir, accelerator=accelerator)
    return spec_dict["model"]["variant"], time.perf_counter() - t0


def train_all(specs, run_dir, jobs: int = 1, threads: int | None = None,
              accelerator: str = "auto", log=print) -> list[str]:
    """Train the runs among ``specs`` that are not done, with progress lines (which run, how
    many left, ETA = runs left × mean time per run / jobs).

    Args:
        specs: ``(label, RunSpec)`` pairs; the label names the run in progress lines.
        accelerator: Lightning accelerator (``"auto"`` picks a GPU when there is one; the
            device does not enter the run hash, the run card records it).

    Returns:
        messages of the runs that failed (empty if all succeeded). A failing run does not stop
        the others; its figure page reports it.
    """
    from gtalib.training import runs
    from gtalib.training.train import ensure_run

    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs!r}")
    unique = {s.run_id: (label, s) for label, s in specs}
    todo = [s for rid, (_, s) in unique.items() if not runs.is_done(runs.run_path(s, run_dir))]
    name = {s.run_id: f"{label} seed={s.seed} steps={s.train.max_steps}"
            for label, s in unique.values()}
    log(f"runs: {len(unique)} needed, {len(unique) - len(todo)} cached, {len(todo)} to train "
        f"in {run_dir} ({jobs} job(s))")
    failures, times = [], []
    t_start = time.perf_counter()

    def report(spec, seconds, error=None):
        done = len(times) + len(failures)
        left = len(todo) - done
        if error is None:
            times.append(seconds)
        else:
            failures.append(f"{spec.run_id} {name[spec.run_id]}: {error}")
        mean = (sum(times) / len(times)) if times else (time.perf_counter() - t_start) / max(done, 1)
        eta = left * mean / jobs
        state = f"{seconds:.1f} s" if error is None else f"FAILED ({error})"
        log(f"[{done + 1}/{len(todo)}] {spec.run_id} {name[spec.run_id]}: {state}; "
            f"{left - 1} left, ETA {eta / 60:.1f} min")

    if jobs == 1:
        for spec in todo:
            log(f"training {spec.run_id} {name[spec.run_id]} ...")
            t0 = time.perf_counter()
            try:
                if threads:
                    import torch

                    torch.set_num_threads(threads)
                ensure_run(spec, run_dir, accelerator=accelerator)
                report(spec, time.perf_counter() - t0)
            except Exception as e:  # noqa: BLE001 - reported, the page says so
                report(spec, time.perf_counter() - t0, f"{type(e).__name__}: {e}")
    else:
        import multiprocessing as mp

        with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as ex:
            futures = {ex.submit(_train_one, s.to_dict(), str(run_dir), threads or 1,
                                 accelerator): s
                       for s in todo}
            for fut in as_completed(futures):
                spec = futures[fut]
                try:
                    _, seconds = fut.result()
                    report(spec, seconds)
                except Exception as e:  # noqa: BLE001
                    report(spec, 0.0, f"{type(e).__name__}: {e}")
    return failures
