"""A bare Python runs a notebook: a virtual environment holding papermill and ipykernel, and
torch as Colab has it, installs gtalib and the other pins from the notebook's first cell (see
``test_notebook_setup.py``). A minute of pip, mostly waiting on the disk and the registry: a
file of its own, so that pytest-xdist (``--dist loadfile``) runs it beside other files."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[3]


def _has_image(path: Path) -> bool:
    nb = json.loads(path.read_text())
    return any("image/png" in o.get("data", {}) or "image/svg+xml" in o.get("data", {})
               for c in nb["cells"] for o in c.get("outputs", []))


@pytest.mark.slow
def test_a_bare_python_runs_the_initialisation_notebook_from_another_folder(tmp_path):
    """A virtual environment holding papermill and ipykernel, and torch and triton outside its
    own site-packages as Colab's system Python has them (no gtalib), runs
    notebooks/init_ablation.ipynb from a folder outside the repository, given this checkout as
    gtalib_source: its first cell keeps that torch, installs the other pins and gtalib, and the
    page draws its figure from the recorded runs (an empty run store: nothing is trained; needs
    the package registry that scripts/install.sh uses). Where torch is missing the cell installs
    it from the same pin of requirements.txt as scripts/install.sh, which CI runs on a clean
    clone; unpacking its 1.4 GB again here took two thirds of this test's two minutes."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # torch and triton where Colab keeps them: a folder of their own on the path (a .pth line),
    # linked from this environment, their dependencies left for the cell's pip to resolve
    colab = tmp_path / "colab_site"
    colab.mkdir()
    for name in ("torch", "functorch", "torchgen", "triton"):
        for entry in Path(torch.__file__).parents[1].glob(f"{name}*"):
            if entry.name == name or entry.name.startswith(f"{name}-"):
                (colab / entry.name).symlink_to(entry)
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], check=True, capture_output=True, text=True)
    (Path(purelib.stdout.strip()) / "colab_site.pth").write_text(f"{colab}\n")
    # pip byte-compiles every module it installs unless told not to (PIP_NO_COMPILE, as pip's
    # --no-compile): a minute of CPU for torch and the pins that checks nothing here
    no_compile = {**os.environ, "PIP_NO_COMPILE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run([str(python), "-m", "pip", "install", "-q", "papermill", "ipykernel"],
                   check=True, env=no_compile)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert subprocess.run([str(python), "-c", "import gtalib"], cwd=elsewhere,
                          capture_output=True).returncode
    shutil.copy(REPO / "notebooks" / "init_ablation.ipynb", elsewhere)
    env = {k: v for k, v in no_compile.items() if k != "VIRTUAL_ENV"}
    env["GTALIB_RUN_DIR"] = str(tmp_path / "empty_store")  # the corpus: the session's (conftest)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    r = subprocess.run([str(venv / "bin" / "papermill"), "init_ablation.ipynb", "out.ipynb",
                        "-p", "gtalib_source", str(REPO), "--kernel", "python3"],
                       cwd=elsewhere, env=env, capture_output=True, text=True)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert _has_image(elsewhere / "out.ipynb")
    printed = [o.get("text", "") for c in json.loads((elsewhere / "out.ipynb").read_text())["cells"]
               for o in c.get("outputs", []) if o.get("output_type") == "stream"]
    assert not any(text.startswith("training ") for text in printed)  # collect_runs says so
    assert not (tmp_path / "empty_store").exists() or not any((tmp_path / "empty_store").iterdir())
    # the cell kept Colab's torch and triton: pip installed neither into the environment
    site = Path(purelib.stdout.strip())
    assert (site / "lightning").is_dir() and not (site / "torch").exists()
    assert not (site / "triton").exists()
