"""Executing notebooks: a cell that never returns is stopped and named; parameters given on
papermill's command line are validated before anything trains."""

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from gtalib.book.pipeline import execute as notebooks
from gtalib.book.pipeline import job as book

REPO = Path(__file__).resolve().parents[3]


def _notebook(path: Path, *sources: str, params: str | None = None) -> None:
    nb = nbformat.v4.new_notebook()
    if params is not None:
        cell = nbformat.v4.new_code_cell(params)
        cell.metadata["tags"] = ["parameters"]
        nb.cells.append(cell)
    nb.cells += [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)


def test_a_cell_past_the_time_limit_fails_naming_notebook_and_cell(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    _notebook(src / "stuck.ipynb", "x = 1", "import time\nwhile True:\n    time.sleep(1)",
              params="preset = 'ci'")
    with pytest.raises(notebooks.NotebookTimeout) as e:
        notebooks.execute_notebook("stuck", {"preset": "ci"}, tmp_path, timeout=3, notebook_dir=src)
    msg = str(e.value)
    assert msg.startswith("notebook stuck: cell 2 ('import time')")
    assert "3 s limit" in msg and "--cell-timeout" in msg


def test_execute_notebooks_reports_the_timeout_and_goes_on(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    _notebook(src / "stuck.ipynb", "import time\ntime.sleep(60)")
    _notebook(src / "fine.ipynb", "print('ok')")
    lines = []
    stuck, fine = notebooks.execute_notebooks({"preset": "ci"}, ("stuck", "fine"),
                                              tmp_path / "out", log=lines.append, timeout=2,
                                              notebook_dir=src)
    assert stuck.message == ("notebook stuck: cell 0 ('import time') ran past the 2 s limit per "
                             "cell and was stopped (raise it with gtalib book --cell-timeout)")
    assert (stuck.name, stuck.status, stuck.cells, stuck.executed) == ("stuck", "timed out", 1, 0)
    assert (fine.name, fine.status, fine.cells, fine.executed, fine.message) == (
        "fine", "ok", 1, 1, None)
    assert 2 <= stuck.seconds and 0 < fine.seconds
    assert (tmp_path / "out" / "fine.ipynb").exists()
    # one line per notebook as it ends ("[i/2] ..."), the stuck one with its failure
    assert {ln.split("] ", 1)[1] for ln in lines} == {stuck.message,
                                                     f"notebook fine: {fine.seconds:.1f} s"}


def test_default_time_limit_comes_from_the_preset():
    from gtalib.model.presets import PRESETS

    assert set(notebooks.CELL_TIMEOUT_S) == set(PRESETS)
    assert (notebooks.CELL_TIMEOUT_S["ci"] < notebooks.CELL_TIMEOUT_S["cpu"]
            < notebooks.CELL_TIMEOUT_S["paper"])
    from gtalib.cli import build_parser

    args = build_parser().parse_args(["book", "--cell-timeout", "30"])
    assert args.cell_timeout == 30.0
    with pytest.raises(ValueError, match="cell_timeout must be a positive number"):
        book.build_book("ci", cell_timeout=0)


def test_injected_parameters_are_hidden_from_the_page(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    _notebook(src / "p.ipynb", "print(run_dir is None)", params="run_dir = 'x'")
    notebooks.execute_notebook("p", {"run_dir": None}, tmp_path, timeout=60, notebook_dir=src)
    nb = nbformat.read(tmp_path / "p.ipynb", as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and "remove-cell" in injected[0].metadata["tags"]
    assert nb.cells[-1].outputs[0]["text"] == "True\n"


@pytest.mark.slow
def test_papermill_train_false_trains_nothing(tmp_path, train="false"):
    """``papermill ... -p train false`` (a string) must not train: the page reports the runs
    missing and the run store stays empty. The other spellings ("No", "0", ...) reach the same
    function (``notebook_params``), tested spelling by spelling in test_parameters.py."""
    store = tmp_path / "store"
    out = tmp_path / "out.ipynb"
    r = subprocess.run([str(Path(sys.executable).with_name("papermill")),
                        str(REPO / "notebooks" / "gating_ablation.ipynb"), str(out),
                        "-p", "preset", "ci", "-p", "seeds", "1", "-p", "run_dir", str(store),
                        "-p", "train", train, "-p", "variants", "gqa", "--cwd",
                        str(REPO / "notebooks")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    text = out.read_text()
    assert "Incomplete: 2 of 2 runs are missing or failed" in text
    assert not store.exists() or not any(store.iterdir())


@pytest.mark.slow
def test_papermill_bad_parameter_fails_before_training(tmp_path):
    store = tmp_path / "store"
    r = subprocess.run([str(Path(sys.executable).with_name("papermill")),
                        str(REPO / "notebooks" / "gating_ablation.ipynb"),
                        str(tmp_path / "out.ipynb"), "-p", "preset", "ci", "-p", "run_dir",
                        str(store), "-p", "train", "maybe", "--cwd", str(REPO / "notebooks")],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "ParameterError: notebook parameter 'train' = 'maybe' (str): expected a boolean" in (
        r.stderr + r.stdout)
    assert not store.exists()


def test_concurrent_kernels_run_over_private_sockets_and_leave_nothing(tmp_path, capfd):
    """Notebooks executed at once each get their own kernel sockets (a shared name once crossed
    their messages: "Invalid Signature"); no TCP warning, no interrupt at shutdown, no files
    left behind."""
    import tempfile

    src = tmp_path / "src"
    src.mkdir()
    names = [f"nb{i}" for i in range(3)]
    for i, name in enumerate(names):
        _notebook(src / f"{name}.ipynb", "import time\ntime.sleep(0.3)", f"print({i} * 7)")
    before = set(Path(tempfile.gettempdir()).glob("gtalib-kernel-*"))
    executed = notebooks.execute_notebooks({}, names, tmp_path / "out", jobs=3,
                                           log=lambda m: None, timeout=60, notebook_dir=src)
    assert [(r.name, r.status, r.executed) for r in executed] == [(n, "ok", 2) for n in names]
    for i, name in enumerate(names):
        nb = nbformat.read(tmp_path / "out" / f"{name}.ipynb", as_version=4)
        assert nb.cells[-1].outputs[0]["text"] == f"{i * 7}\n"
    assert sorted(p.name for p in src.iterdir()) == [f"{n}.ipynb" for n in names]
    assert set(Path(tempfile.gettempdir()).glob("gtalib-kernel-*")) == before
    err = capfd.readouterr().err
    for message in ("without encryption", "KeyboardInterrupt caught", "Invalid Signature"):
        assert message not in err


def test_notebook_errors_reads_error_outputs(tmp_path):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("1/0")
    cell.outputs = [nbformat.v4.new_output("error", ename="ZeroDivisionError",
                                           evalue="division by zero", traceback=[])]
    nb.cells = [cell, nbformat.v4.new_code_cell("1")]
    nbformat.write(nb, tmp_path / "x.ipynb")
    assert notebooks.notebook_errors(tmp_path) == ["x.ipynb: ZeroDivisionError: division by zero"]
