"""The notebooks' first cell (after the parameters): it makes a notebook runnable where gtalib is
not installed (Colab's launch button, a bare Jupyter) and does nothing where it is; every notebook
runs from a fresh clone. A bare Python installing gtalib from that cell is
``test_notebook_bare_python.py``, a file of its own so that pytest-xdist (``--dist loadfile``)
runs its minutes of pip beside this file's notebooks rather than after them."""

import json
import os
import shutil
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


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory) -> Path:
    """What a clone of this checkout would hold once its changes are committed: the files git
    tracks or would track (no run store, no corpus, no virtual environment)."""
    dst = tmp_path_factory.mktemp("clone")
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=REPO, capture_output=True, text=True, check=True).stdout
    for name in filter(None, files.split("\0")):
        if (REPO / name).is_file():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dst / name)
    return dst


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=lambda p: p.stem)
def test_every_notebook_runs_at_the_ci_preset_from_a_fresh_clone(path, fresh_clone, tmp_path):
    """``papermill notebooks/<x>.ipynb out.ipynb -p preset ci`` from the clone's root, with the
    clone's gtalib first on the path (runs in the session's private store, shared with the ci
    book build: content-addressed, so a run trained by either is the same run)."""
    clone = fresh_clone
    env = {**os.environ, "PYTHONPATH": str(clone)}
    where = subprocess.run([sys.executable, "-c", "import gtalib; print(gtalib.__file__)"],
                           cwd=clone, env=env, capture_output=True, text=True,
                           check=True).stdout
    assert Path(where.strip()).is_relative_to(clone)
    out = tmp_path / "out.ipynb"
    r = subprocess.run([str(Path(sys.executable).with_name("papermill")),
                        f"notebooks/{path.name}", str(out), "-p", "preset", "ci"],
                       cwd=clone, env=env, capture_output=True, text=True)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    errors = [o for c in json.loads(out.read_text())["cells"] for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert errors == []

