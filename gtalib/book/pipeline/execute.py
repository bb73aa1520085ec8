"""Executing the book's notebooks: the parameters injected into them, papermill under a kernel
manager of our own, the time limit per cell, the clean-up of each executed copy and the error
outputs stored in them (step 3 of :mod:`gtalib.book.pipeline.job`). Reads ``notebooks/*.ipynb``
(:func:`gtalib.book.design.chapters.notebooks`) and writes the executed copies to ``book/generated/``.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import nbformat
import papermill as pm
from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import CellTimeoutError

from gtalib.book.design.chapters import notebooks
from gtalib.book.pipeline.paths import BOOK_DIR, NOTEBOOK_DIR, BookError
from gtalib.training.machine import machine_label
from gtalib.training.runs import git_commit

# ---------------------------------------------------------------------------------------------
# 3. notebooks


def notebook_parameters(preset: str, seeds: int, run_dir=None, max_steps=None,
                        variants=()) -> dict:
    """The parameters injected into every notebook (names of their ``parameters`` cells).
    ``run_dir=None`` means the default store, which the notebook resolves itself; ``variants``:
    the user's own variants (``module:Class``), drawn beside the paper's on the ablation pages
    (their ``variants`` parameter; ``None`` when there are none). In a git checkout,
    ``gtalib_commit`` is its HEAD: an executed copy, downloaded and opened where gtalib is
    missing, installs the commit it was built from (the notebooks' first cell)."""
    params = {"preset": preset, "seeds": seeds, "max_steps": max_steps,
              "run_dir": None if run_dir is None else str(run_dir), "train": False,
              "variants": ",".join(variants) or None}
    commit = git_commit()
    return params if commit is None else {**params, "gtalib_commit": commit}


#: Seconds a notebook cell may run, by preset (the job trains first, so a cell only reads runs
#: and plots; the gpu/paper presets read longer metrics files). ``gtalib book
#: --cell-timeout`` overrides it.
CELL_TIMEOUT_S = {"ci": 300, "cpu": 600, "gpu": 1200, "paper": 1800}


class NotebookTimeout(BookError):
    """A notebook cell ran past the execution time limit."""


def _clean_executed_copy(path: Path, name: str) -> None:
    """Make an executed copy fit for the book: papermill's injected-parameters cell is tagged
    ``remove-cell`` (the page shows the validated parameters as a table instead,
    :class:`gtalib.book.pipeline.parameters.NotebookParams`), and papermill's record of the input and output
    paths names the notebook, not the build machine's folders (the copy is published as the
    page's source)."""

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            cell.metadata["tags"] = [*tags, "remove-cell"]
    record = nb.metadata.get("papermill", {})
    if "input_path" in record:
        record["input_path"] = f"notebooks/{name}.ipynb"
    if "output_path" in record:
        record["output_path"] = f"{name}.ipynb"
    nbformat.write(nb, path)


def _kernel_manager_class():
    """The jupyter_client kernel manager the job's notebooks run under: jupyter_client's
    ``AsyncKernelManager`` (what nbclient uses) with two settings of our own.

    - IPC transport on POSIX: over TCP, ipykernel 7.4 logs "Kernel is running over TCP without
      encryption" at every start; the kernel only talks to this process on this machine, so
      Unix sockets are the fitting transport and the warning's own advice. Each kernel gets its
      own private temporary folder for its socket files (jupyter_client 8.10 would otherwise
      name them ``kernel-ipc-<n>`` in the working folder, and kernels started at the same time
      would pick the same names), removed at shutdown.
    - No SIGINT on shutdown: jupyter_client 8.x interrupts a kernel before asking it to shut
      down, even when it is idle after the last cell; a signal that lands while ipykernel
      handles a message is logged as "ERROR | KeyboardInterrupt caught in kernel" although
      nothing failed. The shutdown request alone ends an idle kernel; one that does not stop
      is still sent SIGTERM and then SIGKILL by ``finish_shutdown``.
    """

    class BookKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            self._socket_dir = None
            if os.name == "posix":
                self._socket_dir = tempfile.mkdtemp(prefix="gtalib-kernel-")
                kwargs.setdefault("transport", "ipc")
                kwargs.setdefault("ip", os.path.join(self._socket_dir, "socket"))
            super().__init__(**kwargs)

        async def _async_interrupt_kernel(self) -> None:
            if not self.shutting_down:
                await super()._async_interrupt_kernel()

        async def _async_cleanup_resources(self, restart: bool = False) -> None:
            await super()._async_cleanup_resources(restart=restart)
            if self._socket_dir and not restart:
                shutil.rmtree(self._socket_dir, ignore_errors=True)

    return BookKernelManager


def execute_notebook(name: str, params: dict, out_dir: Path, timeout: float | None = None,
                     notebook_dir: Path = NOTEBOOK_DIR) -> float:
    """Execute ``<notebook_dir>/<name>.ipynb`` with papermill into ``out_dir``; returns
    seconds. Only the parameters its ``parameters`` cell declares are injected.

    Args:
        timeout: seconds any one cell may run (papermill's ``execution_timeout``; default
            :data:`CELL_TIMEOUT_S` of ``params["preset"]``, else of ``cpu``).

    Raises:
        KeyError: no such notebook. NotebookTimeout: a cell ran past ``timeout`` (the message
            names the notebook and the cell). papermill's ``PapermillExecutionError``: a cell
            raised (the executed copy, with the error, is still written).
    """

    src = Path(notebook_dir) / f"{name}.ipynb"
    if not src.exists():
        raise KeyError(f"no notebook {src}; known: {', '.join(notebooks())}")
    # inject only what the notebook's parameters cell declares (the ladder takes no max_steps,
    # the tables take nothing)
    declared = pm.inspect_notebook(str(src))
    if timeout is None:
        timeout = CELL_TIMEOUT_S.get(params.get("preset"), CELL_TIMEOUT_S["cpu"])
    dest = Path(out_dir) / src.name
    t0 = time.perf_counter()
    try:
        pm.execute_notebook(str(src), str(dest), parameters={k: v for k, v in params.items() if k in declared} or None,
                            kernel_name="python3", progress_bar=False, cwd=str(src.parent),
                            execution_timeout=timeout,
                            kernel_manager_class=_kernel_manager_class())
    except CellTimeoutError:
        raise NotebookTimeout(f"notebook {name}: {_running_cell(dest)} ran past the "
                              f"{timeout:g} s limit per cell and was stopped (raise it with "
                              f"gtalib book --cell-timeout)") from None
    _clean_executed_copy(dest, name)
    return time.perf_counter() - t0


def _running_cell(path: Path) -> str:
    """``"cell N (first line)"`` of the cell a timeout stopped: the last cell of the executed
    copy that papermill started (N counts the source notebook's cells, from 0)."""

    nb = nbformat.read(path, as_version=4)
    source_cells = [c for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    started = [i for i, c in enumerate(source_cells)
               if c.metadata.get("papermill", {}).get("start_time")]
    if not started:
        return "a cell"
    cell = source_cells[started[-1]]
    first = next((ln for ln in cell.source.splitlines() if ln.strip()), "")
    return f"cell {started[-1]} ({first.strip()[:60]!r})"


@dataclass(frozen=True)
class NotebookRun:
    """What executing one notebook gave (:func:`execute_notebooks`).

    Attributes:
        name: the notebook's stem.
        status: ``"ok"``, ``"raised"`` (a cell raised) or ``"timed out"`` (a cell ran past the
            limit).
        seconds: wall time of its execution, kernel start and shutdown included (seconds).
        cells, executed: code cells of the notebook (papermill's injected parameters aside) and
            how many of them ran to the end.
        started_utc: when its execution started (ISO 8601, UTC, to the second).
        machine: the machine it ran on (:func:`gtalib.training.machine.machine_label`).
        message: the one-line failure, or None.
    """

    name: str
    status: str
    seconds: float
    cells: int
    executed: int
    started_utc: str
    machine: str
    message: str | None = None


def _cell_counts(path: Path, stopped: bool = False) -> tuple[int, int]:
    """(code cells, code cells that ran to their end without an error) of an executed copy,
    injected parameters aside; with ``stopped`` (a timeout) the last cell started does not count,
    whatever papermill marked it. (0, 0) when no copy was written."""
    if not path.is_file():
        return 0, 0
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"
            and "injected-parameters" not in c.metadata.get("tags", [])]
    ran = [c.metadata.get("papermill", {}).get("status") == "completed"
           and not any(o.get("output_type") == "error" for o in c.get("outputs", []))
           for c in code]
    started = [i for i, c in enumerate(code) if c.metadata.get("papermill", {}).get("start_time")]
    if stopped and started:
        ran[started[-1]] = False
    return len(code), sum(ran)


def _execute(name: str, params: dict, out_dir: Path, timeout, notebook_dir) -> NotebookRun:
    """:func:`execute_notebook`, its failure caught and described in one line."""
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    t0 = time.perf_counter()
    status, message = "ok", None
    try:
        execute_notebook(name, params, out_dir, timeout, notebook_dir)
    except NotebookTimeout as e:
        status, message = "timed out", str(e)
    except Exception as e:  # noqa: BLE001 - collected, the build fails at the end
        last = (str(e).strip().splitlines() or [""])[-1]
        status, message = "raised", f"notebook {name} raised {type(e).__name__}: {last}"
    cells, executed = _cell_counts(Path(out_dir) / f"{name}.ipynb", status == "timed out")
    return NotebookRun(name, status, time.perf_counter() - t0, cells, executed, started,
                       machine_label(), message)


def execute_notebooks(params: dict, names=None, out_dir: Path | None = None, jobs: int = 1,
                      log=print, timeout: float | None = None,
                      notebook_dir: Path = NOTEBOOK_DIR) -> list[NotebookRun]:
    """Run the notebooks ``names`` (default: every notebook chapter) with papermill into
    ``out_dir`` (default ``book/generated``), ``jobs`` at a time (each in its own kernel
    process), each cell under ``timeout`` seconds (:func:`execute_notebook`), logging one line
    per notebook as it ends.

    Returns:
        one :class:`NotebookRun` per notebook, in the order of ``names``; a notebook that raised
        or timed out has its ``message`` (its executed copy, with the error, is still written).

    Raises:
        KeyError: a name without a notebook in ``notebook_dir``.
    """

    names = notebooks() if names is None else tuple(names)
    out_dir = Path(out_dir or BOOK_DIR / "generated")
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        if not (Path(notebook_dir) / f"{name}.ipynb").exists():
            raise KeyError(f"no notebook {name!r}; known: {', '.join(notebooks())}")
    done = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        futures = [ex.submit(_execute, n, params, out_dir, timeout, notebook_dir) for n in names]
        for i, fut in enumerate(as_completed(futures), 1):
            run = fut.result()
            done[run.name] = run
            log(f"[{i}/{len(names)}] " + (run.message or f"notebook {run.name}: {run.seconds:.1f} s"))
    return [done[n] for n in names]


def notebook_errors(nb_dir: Path) -> list[str]:
    """``"<notebook>: <ename>"`` for every error output stored in the executed notebooks."""

    found = []
    for path in sorted(Path(nb_dir).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    found.append(f"{path.name}: {out.get('ename')}: {out.get('evalue')}")
    return found
