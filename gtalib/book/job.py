"""The main job: corpus → training runs → papermill notebooks → Jupyter Book HTML.

``gtalib book [--preset cpu|ci|gpu] [--seeds N] [--jobs J] ...`` (or ``python -m gtalib.book``):

1. builds the preset's corpus if it is missing (:mod:`gtalib.data`);
2. trains every missing run of every figure through the run store, in one process (or ``J``
   worker processes), printing which run, how many are left and an ETA; a run the repository
   has recorded (``book/recorded/``, :mod:`gtalib.training.records`) is read from its bundle instead,
   unless ``--train-recorded``;
3. executes every notebook of ``notebooks/`` with papermill at the preset (parameters injected,
   training off: a run that is still missing is reported on its page), writing the executed
   copies to ``book/generated/``;
4. installs MathJax 3 from npm into ``.cache/mathjax`` (once) so that math renders offline;
5. builds the HTML with Jupyter Book 1.x (execution off, ``-W -n --keep-going``) into
   ``book/_build/html`` and fails if a notebook raised, Sphinx warned, or any rendered page
   contains an error output.

Exit status 0 only if every run trained, every notebook executed and the HTML is clean (with
``--no-train`` nothing is trained and missing runs are reported on their pages, not as an error).
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from gtalib.book.plan import NOTEBOOKS, Plan, make_plan  # NOTEBOOKS: re-exported for callers
from gtalib.training import records
from gtalib.training.runs import is_done, resolve_run_dir, run_path

REPO = Path(__file__).resolve().parents[2]
BOOK_DIR = REPO / "book"
NOTEBOOK_DIR = REPO / "notebooks"
MATHJAX_VERSION = "3.2.2"
#: Seeds per configuration of the default book (the Makefile's ``SEEDS`` says the same).
DEFAULT_SEEDS = 3

#: Notebooks whose pages carry a figure (checked by scripts/check_book.py).
FIGURE_NOTEBOOKS = (
    "scale_ladder", "init_ablation", "gating_ablation", "latent_scaling", "double_heads", "main_results",
    "decode_speed",
)


class BookError(RuntimeError):
    """A step of the book build failed (message says which and where to look)."""


# ---------------------------------------------------------------------------------------------
# 1. corpus


def ensure_corpus(plan: Plan, log=print) -> None:
    """Build the plan's default corpus if it is missing (no-op when its manifest exists)."""
    from gtalib.training import runs

    dm = runs.make_datamodule("default", plan.tokenizer, plan.train, build=True)
    if not (dm.path / "manifest.json").is_file():
        log(f"building the corpus {dm.path} (once) ...")
    dm.prepare_data()


# ---------------------------------------------------------------------------------------------
# 2. runs


def _train_one(spec_dict: dict, run_dir: str, threads: int | None, accelerator: str
               ) -> tuple[str, float]:
    """Worker: train one run (used by the process pool; top level so it pickles)."""
    import torch

    from gtalib.training import runs

    if threads:
        torch.set_num_threads(threads)
    t0 = time.perf_counter()
    runs.ensure_run(runs.RunSpec.from_dict(spec_dict), run_dir, accelerator=accelerator)
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
                runs.ensure_run(spec, run_dir, accelerator=accelerator)
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


# ---------------------------------------------------------------------------------------------
# 3. notebooks


def notebook_parameters(preset: str, seeds: int, run_dir=None, max_steps=None) -> dict:
    """The parameters injected into every notebook (names of their ``parameters`` cells).
    ``run_dir=None`` means the default store, which the notebook resolves itself."""
    return {"preset": preset, "seeds": seeds, "max_steps": max_steps,
            "run_dir": None if run_dir is None else str(run_dir), "train": False}


#: Seconds a notebook cell may run, by preset (the job trains first, so a cell only reads runs
#: and plots; the gpu/paper presets read longer metrics files). ``gtalib book
#: --cell-timeout`` overrides it.
CELL_TIMEOUT_S = {"ci": 300, "cpu": 600, "gpu": 1200, "paper": 1800}


class NotebookTimeout(BookError):
    """A notebook cell ran past the execution time limit."""


def _clean_executed_copy(path: Path, name: str) -> None:
    """Make an executed copy fit for the book: papermill's injected-parameters cell is tagged
    ``remove-cell`` (the page shows the validated parameters as a table instead,
    :class:`gtalib.book.params.NotebookParams`), and papermill's record of the input and output
    paths names the notebook, not the build machine's folders (the copy is published as the
    page's source)."""
    import nbformat

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


@contextlib.contextmanager
def _environment(**values):
    """Set environment variables (inherited by the kernels started meanwhile), then restore."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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
    from jupyter_client.manager import AsyncKernelManager

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
    import papermill as pm
    from nbclient.exceptions import CellTimeoutError

    src = Path(notebook_dir) / f"{name}.ipynb"
    if not src.exists():
        raise KeyError(f"no notebook {src}; known: {', '.join(NOTEBOOKS)}")
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
    import nbformat

    nb = nbformat.read(path, as_version=4)
    source_cells = [c for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    started = [i for i, c in enumerate(source_cells)
               if c.metadata.get("papermill", {}).get("start_time")]
    if not started:
        return "a cell"
    cell = source_cells[started[-1]]
    first = next((ln for ln in cell.source.splitlines() if ln.strip()), "")
    return f"cell {started[-1]} ({first.strip()[:60]!r})"


def execute_notebooks(params: dict, names=NOTEBOOKS, out_dir: Path | None = None, jobs: int = 1,
                      log=print, timeout: float | None = None,
                      notebook_dir: Path = NOTEBOOK_DIR) -> list[str]:
    """Run the notebooks ``names`` with papermill into ``out_dir`` (default ``book/generated``),
    ``jobs`` at a time (each in its own kernel process), each cell under ``timeout`` seconds
    (:func:`execute_notebook`).

    Returns:
        messages of notebooks that raised (their executed copy, with the error, is still written).
    """
    from concurrent.futures import ThreadPoolExecutor

    out_dir = Path(out_dir or BOOK_DIR / "generated")
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        if not (Path(notebook_dir) / f"{name}.ipynb").exists():
            raise KeyError(f"no notebook {name!r}; known: {', '.join(NOTEBOOKS)}")
    failures = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        futures = {ex.submit(execute_notebook, n, params, out_dir, timeout, notebook_dir): n
                   for n in names}
        for i, fut in enumerate(as_completed(futures), 1):
            name = futures[fut]
            try:
                log(f"[{i}/{len(names)}] notebook {name}: {fut.result():.1f} s")
            except NotebookTimeout as e:
                msg = str(e)
                failures.append(msg)
                log(f"[{i}/{len(names)}] {msg}")
            except Exception as e:  # noqa: BLE001 - collected, the build fails at the end
                last = (str(e).strip().splitlines() or [""])[-1]
                msg = f"notebook {name} raised {type(e).__name__}: {last}"
                failures.append(msg)
                log(f"[{i}/{len(names)}] {msg}")
    return failures


def notebook_errors(nb_dir: Path) -> list[str]:
    """``"<notebook>: <ename>"`` for every error output stored in the executed notebooks."""
    import nbformat

    found = []
    for path in sorted(Path(nb_dir).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    found.append(f"{path.name}: {out.get('ename')}: {out.get('evalue')}")
    return found


def _md_table(df) -> str:
    """A pandas frame as a Markdown pipe table (no extra dependency)."""
    cols = [df.index.name or "", *map(str, df.columns)]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for idx, row in df.iterrows():
        lines.append("| " + " | ".join([str(idx), *map(str, row.tolist())]) + " |")
    return "\n".join(lines)


def presets_markdown() -> str:
    """Markdown table of every preset's model sizes and training settings (from the code), one
    column per preset so that it fits the text column."""
    import pandas as pd

    from gtalib.book import figures
    from gtalib.model.presets import PRESETS
    from gtalib.training.config import train_config

    rows = {}
    for name, p in PRESETS.items():
        t = train_config(name)
        rows[name] = {
            "layers": p["n_layer"], "d_model": p["d_model"],
            "heads × d_h": f"{p['n_head']} × {p['head_dim']}", "vocab": p["vocab_size"],
            "steps": f"{t.max_steps:,}", "tokens/run": f"{t.max_steps * t.tokens_per_step:,}",
            "peak LR": t.lr, "warmup steps": f"{t.warmup_steps:,}",
        }
    df = pd.DataFrame(rows)
    df.index.name = "preset"
    own = [f"the {fig.title.split(':')[0].lower()} trains {t.max_steps:,} steps "
           f"({t.max_steps * t.tokens_per_step:,} tokens per run) at `{name}`"
           for fig in figures.ABLATIONS.values() for name, over in fig.train.items()
           for t in [train_config(name, **dict(over))]]
    note = f"\nFigures with their own training length: {'; '.join(own)}.\n" if own else ""
    return _md_table(df) + "\n" + note


def recipe_markdown() -> str:
    """The training recipe sentence of the methods chapter, from the presets' training settings
    (every preset shares it; a preset that does not is named with its own values)."""
    from gtalib.model.presets import PRESETS
    from gtalib.training.config import train_config

    def recipe(t):
        return (f"AdamW $\\beta = ({t.beta1}, {t.beta2})$, weight decay {t.weight_decay}, "
                f"gradient-norm clip {t.grad_clip}, linear warmup then cosine decay to "
                f"{t.min_lr_ratio}× the peak learning rate")

    by_recipe: dict[str, list[str]] = {}
    for name in PRESETS:
        by_recipe.setdefault(recipe(train_config(name)), []).append(name)
    if len(by_recipe) == 1:
        return (f"Same recipe at every preset ({next(iter(by_recipe))}); the presets change the "
                "sizes:\n")
    return ("The recipe by preset: " + "; ".join(
        f"{', '.join(f'`{n}`' for n in names)}: {r}" for r, names in by_recipe.items())
        + ". The sizes:\n")


def statistics_markdown(seeds: int, confidence: float = 0.95, preset: str | None = None,
                        max_steps=None) -> str:
    """What this build's seed count means for its intervals (methods chapter): the Student-t
    factor at ``seeds − 1`` degrees of freedom (:func:`gtalib.book.analysis.t_critical`),
    whether the figures shade the interval (from :data:`gtalib.book.plotting.MIN_BAND_SEEDS`
    seeds), the cap of *pairs to resolve* (:data:`gtalib.book.analysis.MAX_PAIRS`) and, given
    ``preset``, the variants a figure runs with more seeds (:func:`figures.figure_seeds`)."""
    from gtalib.book import figures
    from gtalib.book.stats import MAX_PAIRS, t_critical
    from gtalib.book.style import MIN_BAND_SEEDS, plural

    q = 0.5 + confidence / 2
    cap = f"*Pairs to resolve* is sought up to {MAX_PAIRS} pairs."
    if seeds < 2:
        return (f"This build trains {plural(seeds, 'seed')} per configuration: there is no "
                f"interval, and every verdict is *undetermined (1 seed)*. {cap}\n")
    t = t_critical(confidence, seeds - 1)
    shade = f"The figures shade the interval from {plural(MIN_BAND_SEEDS, 'seed')} on, " + (
        "as here." if seeds >= MIN_BAND_SEEDS else
        f"so this build's figures do not: at {seeds} the factor makes it wider than the curves.")
    more = []
    for key, fig in (figures.ABLATIONS.items() if preset else ()):
        by_n = {}
        for v, n in figures.figure_seeds(key, preset, seeds, max_steps=max_steps).items():
            if n > seeds:
                by_n.setdefault(n, []).append(figures.display_name(v))
        for n, vs in sorted(by_n.items()):
            tn = t_critical(confidence, n - 1)
            more.append(f"the {fig.title.split(':')[0].lower()} runs {n} for {', '.join(vs)} "
                        f"(factor {tn:.3g}: {tn / n ** 0.5:.3g} standard deviations)")
    extra = ("" if not more else
             " Where this count left a variant unresolved although both tests of a verdict said "
             "more pairs would resolve it (at the measured spread of the paired ΔL, *pairs to "
             "resolve* within the larger count, and its mean already above the seed spread, "
             "which more pairs do not narrow), a figure runs more seeds for it, both arms alike, "
             "the count fixed before the added seeds ran: " + "; ".join(more) + ".")
    return (f"This build trains {plural(seeds, 'seed')} per configuration, so the interval's "
            f"factor is $t_{{{q:g},\\,{seeds - 1}}} = {t:.3g}$: an effect is resolved only when "
            f"it exceeds {t / seeds ** 0.5:.3g} times the standard deviation of ΔL over seeds."
            f"{extra} {shade} {cap}\n")


def short_hash(value, n: int = 12) -> str:
    """A hash shown by its first ``n`` characters with the full value in a tooltip (inline HTML
    for the Markdown snippets); empty for a missing value."""
    value = str(value or "")
    if len(value) <= n:
        return f"<code>{html.escape(value)}</code>" if value else ""
    return f'<code title="{html.escape(value)}">{html.escape(value[:n])}…</code>'


def provenance_markdown(preset: str) -> str:
    """The provenance of the preset's corpus for the methods chapter, from its ``manifest.json``
    (:mod:`gtalib.data.build`; the same facts as its ``PROVENANCE.md``): the split rule, then two
    tables that fit the text column, the archives (sha256 shortened, full value in a tooltip)
    and the split sizes per source."""
    import pandas as pd

    from gtalib import data as gdata
    from gtalib.book import figures

    folder = gdata.corpus_dir("default", figures.preset_tokenizer(preset))
    if not (folder / "manifest.json").exists():
        return f"*(corpus not built: run `gtalib data build` for the {preset} preset)*\n"
    m = gdata.load_manifest(folder)
    tok, sources = m["tokenizer"], m["sources"]
    archives = pd.DataFrame([{
        "source": s["name"], "package": s.get("package"), "version": s.get("version"),
        "sha256": short_hash(s.get("sha256")), "licence (as stated)": s.get("licence"),
    } for s in sources]).set_index("source")
    sizes = pd.DataFrame([{
        "source": s["name"], "duplicates dropped": s["duplicates_dropped"],
        "train docs": f"{s['train']['documents']:,}", "train tokens": f"{s['train']['tokens']:,}",
        "val docs": f"{s['val']['documents']:,}", "val tokens": f"{s['val']['tokens']:,}",
        "unigram entropy (nats)": f"{s['train']['unigram_entropy_nats']:.4f}",
    } for s in sources]).set_index("source")
    n_tr = sum(s["train"]["tokens"] for s in sources)
    n_va = sum(s["val"]["tokens"] for s in sources)
    return "\n".join([
        f"**Corpus `{m['corpus']}`, tokenizer `{tok['name']}`** (vocabulary {tok['vocab_size']}, "
        f"end-of-text id {tok['eot']}). Split rule: {m['split_rule']}.", "",
        "Archives (sha256 of each archive, shortened; hover for the full value):", "",
        _md_table(archives), "",
        "Documents and tokens per split (entropy of the training split):", "",
        _md_table(sizes), "",
        f"Total: {n_tr:,} training tokens, {n_va:,} validation tokens; unigram entropy of the "
        f"training split {m['train_unigram_entropy_nats']:.4f} nats/token.", ""])


def build_info_markdown(summary: dict, plan: Plan, run_dir: Path) -> str:
    """This build's settings, environment and the run cards of its runs: values every run
    shares (source, device, threads, git commit) stated once, then one row per configuration
    with each seed's run id (shortened, full value in a tooltip) and the mean wall time and
    throughput. A run the store lacks is described by its recorded bundle's card (source
    ``recorded``), if the repository holds one."""
    import platform

    import pandas as pd
    import torch

    from importlib.metadata import PackageNotFoundError, version

    def ver(pkg):
        try:
            return version(pkg)
        except PackageNotFoundError:
            return "not installed"

    pkgs = ("torch", "lightning", "numpy", "pandas", "matplotlib", "seaborn", "papermill",
            "jupyter-book", "triton")
    lines = [
        f"- preset `{summary['preset']}`, {summary['seeds']} seed(s), max_steps override "
        f"`{summary['max_steps']}`, {summary['jobs']} training job(s)",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPU(s), Python "
        f"{platform.python_version()}, torch {torch.__version__}",
        "- versions: " + ", ".join(f"{p} {ver(p)}" for p in pkgs),
        "- time of this build: " + ", ".join(
            f"{k[:-2]} {v:.0f} s" for k, v in summary.items() if k.endswith("_s")),
    ]
    rows = []
    for ref in plan.runs:
        spec = plan.spec(ref)
        card, source = run_dir / spec.run_id / "card.json", "trained here"
        if not card.exists():  # read from the repository's bundle, if recorded
            record = records.find_record(spec)
            card, source = ((record / "card.json", "recorded") if record is not None
                            else (card, "missing"))
        c = json.loads(card.read_text()) if card.exists() else {}
        # a figure with its own length shares labels with the other figures' runs
        label = f"{ref.label} ({spec.train.max_steps:,} steps)" if ref.train else ref.label
        rows.append({"configuration": label, "seed": ref.seed, "run": spec.run_id,
                     "source": source,
                     "device": c.get("device", "missing"), "threads": c.get("threads", ""),
                     "git": str(c.get("git_commit") or "")[:12],
                     "wall s": c.get("wall_time_s"), "tokens/s": c.get("tokens_per_s")})
    runs = pd.DataFrame(rows)
    for k in ("wall s", "tokens/s"):
        runs[k] = pd.to_numeric(runs[k], errors="coerce")
    shared = {k: runs[k].iloc[0] for k in ("source", "device", "threads", "git")
              if runs[k].nunique() == 1}
    if any(str(v) for v in shared.values()):
        lines.append("- every run: " + ", ".join(f"{k} `{v}`" for k, v in shared.items()
                                                 if str(v)))
    table = runs.pivot(index="configuration", columns="seed", values="run").map(short_hash)
    table = table.loc[list(dict.fromkeys(runs["configuration"]))]
    table.columns = [f"seed {c}" for c in table.columns]
    grouped = runs.groupby("configuration", sort=False)
    for k in ("source", "device", "threads", "git"):
        if k not in shared:
            table[k] = grouped[k].agg(lambda v: " / ".join(map(str, dict.fromkeys(v))))
    for k in ("wall s", "tokens/s"):
        table[f"{k} (mean)"] = grouped[k].mean().map(lambda x: "" if pd.isna(x) else f"{x:,.1f}")
    return "\n".join(lines) + "\n\n" + _md_table(table) + "\n"


def write_chapter_snippets(summary: dict, plan: Plan, run_dir: Path, out_dir: Path | None = None
                           ) -> None:
    """Write ``presets.md``, ``recipe.md``, ``statistics.md``, ``provenance.md`` and
    ``build_info.md`` into ``book/generated/`` (included by the methods and reproduction
    chapters: numbers in their prose come from the configuration and this build)."""
    out_dir = Path(out_dir or BOOK_DIR / "generated")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "presets.md").write_text(presets_markdown())
    (out_dir / "recipe.md").write_text(recipe_markdown())
    (out_dir / "statistics.md").write_text(statistics_markdown(
        summary["seeds"], preset=summary["preset"], max_steps=summary["max_steps"]))
    (out_dir / "provenance.md").write_text(provenance_markdown(summary["preset"]))
    (out_dir / "build_info.md").write_text(build_info_markdown(summary, plan, run_dir))


# ---------------------------------------------------------------------------------------------
# 4. MathJax (offline)


def ensure_mathjax(book_dir: Path = BOOK_DIR, cache: Path = REPO / ".cache" / "mathjax",
                   log=print) -> Path:
    """``npm install mathjax@MATHJAX_VERSION`` into ``cache`` (once) and copy its ``es5/`` to
    ``book/generated/static/mathjax/`` (served through ``html_static_path``; not ``_static/``,
    which Sphinx would scan and inject every .js of).

    Raises:
        BookError: npm missing or the install failed.
    """
    es5 = cache / "node_modules" / "mathjax" / "es5"
    if not (es5 / "tex-chtml.js").exists():
        npm = shutil.which("npm")
        if npm is None:
            raise BookError("npm not found: it is needed once to install MathJax for offline math")
        cache.mkdir(parents=True, exist_ok=True)
        log(f"installing mathjax@{MATHJAX_VERSION} from npm into {cache}")
        r = subprocess.run([npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund",
                            "--no-save", f"mathjax@{MATHJAX_VERSION}"], capture_output=True,
                           text=True)
        if r.returncode != 0 or not (es5 / "tex-chtml.js").exists():
            raise BookError(f"npm install mathjax failed:\n{r.stdout}\n{r.stderr}")
    dest = Path(book_dir) / "generated" / "static" / "mathjax"
    if not (dest / "tex-chtml.js").exists():
        shutil.copytree(es5, dest, dirs_exist_ok=True)
    return dest


# ---------------------------------------------------------------------------------------------
# 5. HTML


def build_html(book_dir: Path = BOOK_DIR, log=print) -> Path:
    """``jupyter-book build`` (HTML, ``-W -n --keep-going``; execution is off in _config.yml).

    Raises:
        BookError: the build failed or warned (its output is in the message).
    """
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(book_dir), "--builder",
           "html", "-W", "-n", "--keep-going"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise BookError(f"jupyter-book build failed ({' '.join(cmd)}):\n{r.stdout[-6000:]}\n"
                        f"{r.stderr[-6000:]}")
    log(f"HTML built in {time.perf_counter() - t0:.1f} s")
    return Path(book_dir) / "_build" / "html"


#: Markers of an error output in HTML rendered by myst-nb (error outputs are rendered as
#: tracebacks; stderr streams carry the ``stderr`` class).
_TRACEBACK = re.compile(r'class="[^"]*\boutput\b[^"]*\btraceback\b')
_STDERR = re.compile(r'<div class="[^"]*\boutput\b[^"]*\bstderr\b[^"]*">(.*?)</div>', re.S)


def html_error_outputs(html_dir: Path) -> list[str]:
    """Pages of ``html_dir`` with an error output: a rendered traceback, or a stderr stream that
    mentions an error or exception. Returns ``"<page>: <what>"`` strings."""
    found = []
    for page in sorted(Path(html_dir).rglob("*.html")):
        text = page.read_text(errors="replace")
        rel = page.relative_to(html_dir)
        if _TRACEBACK.search(text):
            found.append(f"{rel}: traceback output")
        for m in _STDERR.finditer(text):
            body = html.unescape(re.sub(r"<[^>]+>", "", m.group(1)))
            if re.search(r"error|exception|traceback", body, re.I):
                found.append(f"{rel}: stderr output: {body.strip()[:200]}")
    return found


def machine_paths(html_dir: Path, paths) -> list[str]:
    """Files of a built book that name a folder of the build machine: ``"<file>: <path>"`` for
    every text file under ``html_dir`` (pages, their published sources, the search index) that
    contains one of ``paths`` as a whole path component (``/tmp`` matches ``/tmp/x``, not
    ``/tmpx``). A reader needs the parameters and the results, not the builder's file system."""
    needles = sorted({str(Path(p)).rstrip("/") for p in paths if str(p).strip("/")}, key=len,
                     reverse=True)
    pattern = re.compile("|".join(re.escape(n) + r"(?![\w.-])" for n in needles))
    found = []
    for f in sorted(Path(html_dir).rglob("*")):
        if f.suffix not in (".html", ".ipynb", ".md", ".txt", ".js", ".json") or not f.is_file():
            continue
        if "mathjax" in f.parts:
            continue
        for m in sorted(set(pattern.findall(f.read_text(errors="replace")))):
            found.append(f"{f.relative_to(html_dir)}: {m}")
    return found


def build_machine_folders(run_dir: Path, book_dir: Path) -> list[Path]:
    """Folders whose paths must not appear in the book: the repository, the home and temporary
    folders, the run store, the book sources and the data cache."""
    import tempfile

    from gtalib.data.archives import default_data_dir

    return [REPO, Path.home(), Path(tempfile.gettempdir()), Path(run_dir),
            Path(book_dir).resolve(), default_data_dir()]


# ---------------------------------------------------------------------------------------------
# The job


def build_book(preset: str = "cpu", seeds: int = DEFAULT_SEEDS, max_steps=None, jobs: int = 1,
               threads: int | None = None, run_dir=None, notebooks=NOTEBOOKS,
               train: bool = True, html: bool = True, book_dir=BOOK_DIR,
               accelerator: str = "auto", cell_timeout: float | None = None,
               train_recorded: bool = False, log=print) -> dict:
    """The main job (module docstring). Returns a timing summary (seconds per phase).

    Args:
        book_dir: Jupyter Book source folder (``_config.yml``, ``_toc.yml``, chapters); the
            executed notebooks go to ``<book_dir>/generated``, the HTML to
            ``<book_dir>/_build/html``.
        cell_timeout: seconds a notebook cell may run (default :data:`CELL_TIMEOUT_S` of the
            preset); a cell past it fails the job, naming the notebook and the cell.
        train_recorded: also train, into the run store, the runs that the repository has
            recorded (:mod:`gtalib.training.records`): the scale ladder's and the default figures' most
            expensive ones. By default a recorded run is read from its bundle, not re-trained
            (the pages say so), and the ladder's other runs are not trained.

    Raises:
        BookError: any run failed, a notebook raised, the HTML build warned, or a rendered page
            has an error output (the book is still built as far as possible first).
        KeyError: unknown preset or notebook.
    """
    for name, value, optional in (("seeds", seeds, False), ("jobs", jobs, False),
                                  ("threads", threads, True), ("max_steps", max_steps, True)):
        if not (optional and value is None) and (
                not isinstance(value, int) or isinstance(value, bool) or value < 1):
            flag = "--" + name.replace("_", "-")
            raise ValueError(f"{name} ({flag}) must be a positive integer"
                             f"{' or None' if optional else ''}, got {value!r}")
    if cell_timeout is not None and not cell_timeout > 0:
        raise ValueError(f"cell_timeout must be a positive number of seconds, got {cell_timeout!r}")
    if train_recorded and not train:
        raise ValueError("train_recorded (--train-recorded) trains runs, train=False (--no-train) "
                         "trains none: give one of them")
    plan = make_plan(preset, seeds, max_steps, notebooks)
    run_dir = resolve_run_dir(run_dir)
    times, problems = {}, []
    t_all = t0 = time.perf_counter()
    ensure_corpus(plan, log=log)
    times["corpus_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    if train:
        if train_recorded:  # hours on a CPU: the whole book and ladder in the local store
            refs = list(plan.runs) + list(plan.ladder_refs)
        else:  # what the repository recorded is read from its bundle (the pages label it)
            refs = [r for r in plan.runs if records.find_record(plan.spec(r)) is None]
            log(f"runs: {len(plan.runs) - len(refs)} of {len(plan.runs)} are recorded in "
                f"{records.default_record_dir()} and read from there (--train-recorded trains "
                "them)")
        problems += [f"run {m}" for m in train_all(plan.specs(refs), run_dir, jobs, threads,
                                                    accelerator, log)]
    else:  # say here what the pages will report as missing
        specs = [s for _, s in plan.specs()]
        absent = [s for s in specs if not is_done(run_path(s, run_dir))]
        recorded = sum(records.find_record(s) is not None for s in absent)
        log(f"runs: {len(specs)} needed, {len(specs) - len(absent)} in {run_dir}, {recorded} "
            f"recorded, {len(absent) - recorded} missing (not trained: --no-train; their pages "
            "list them)")
    times["train_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    # run_dir=None: the notebooks resolve the store from $GTALIB_RUN_DIR, set for their kernels,
    # so no path of this machine is written into the executed notebooks
    params = notebook_parameters(preset, seeds, None, max_steps)
    book_dir = Path(book_dir)
    nb_dir = book_dir / "generated"
    with _environment(GTALIB_RUN_DIR=str(run_dir)):
        problems += execute_notebooks(params, plan.notebooks, nb_dir, jobs, log, cell_timeout)
    problems += [f"error output in {e}" for e in notebook_errors(nb_dir)]
    times["notebooks_s"] = time.perf_counter() - t0

    summary = {"preset": preset, "seeds": seeds, "max_steps": max_steps, "jobs": jobs, **times}
    write_chapter_snippets(summary, plan, run_dir, nb_dir)
    if html:
        t0 = time.perf_counter()
        ensure_mathjax(book_dir, log=log)
        try:
            html_dir = build_html(book_dir, log=log)
            problems += [f"error output in {e}" for e in html_error_outputs(html_dir)]
            problems += [f"machine-specific path in {e}" for e in machine_paths(
                html_dir, build_machine_folders(run_dir, book_dir))]
            log(f"book: {html_dir / 'index.html'}")
        except BookError as e:
            problems.append(str(e))
        times["html_s"] = time.perf_counter() - t0
    times["total_s"] = time.perf_counter() - t_all
    log("times: " + ", ".join(f"{k[:-2]} {v:.1f} s" for k, v in times.items()))
    summary = {"preset": preset, "seeds": seeds, "max_steps": max_steps, "jobs": jobs, **times}
    (nb_dir / "build_summary.json").write_text(json.dumps(summary, indent=2))
    if problems:
        raise BookError("the book has problems:\n  " + "\n  ".join(problems))
    return summary


#: ``gtalib book --help`` text: plain text (the module docstring is RST, for Sphinx).
