"""Notebook parameters: one validating function, the usual spellings accepted, the rest refused
with the parameter, the value and what is allowed; every notebook calls it first."""

import ast
from dataclasses import fields
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest

from gtalib.book.design import chapters as registry
from gtalib.book.design import figures
from gtalib.book.design import seeds as seed_policy
from gtalib.book.pipeline import execute as notebooks
from gtalib.book.pipeline.parameters import (
    SETUP_PARAMETERS,
    ParameterError,
    notebook_params,
    run_dir_label,
)

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("given, expected", [
    ("false", False), ("False", False), ("FALSE", False), ("no", False), ("No", False),
    ("0", False), (0, False), (False, False), ("true", True), ("Yes", True), ("1", True),
    (1, True), (True, True), (" no ", False),
])
def test_booleans_accept_the_usual_spellings(given, expected):
    assert notebook_params(train=given).train is expected


@pytest.mark.parametrize("given", ["maybe", "ja", 2, -1, None, 0.5, "", [True]])
def test_booleans_refuse_anything_else(given):
    with pytest.raises(ParameterError) as e:
        notebook_params(train=given)
    msg = str(e.value)
    assert "'train'" in msg and repr(given) in msg and "true/false, yes/no or 1/0" in msg


@pytest.mark.parametrize("name", ["seeds", "max_steps", "smoothing"])
def test_integers_accept_strings_of_digits(name):
    assert getattr(notebook_params(**{name: "4"}), name) == 4
    assert getattr(notebook_params(**{name: 7}), name) == 7


@pytest.mark.parametrize("name, given", [
    ("seeds", "three"), ("seeds", "2.5"), ("seeds", 2.0), ("seeds", True), ("seeds", 0),
    ("seeds", "-1"), ("seeds", None), ("seeds", 101), ("seeds", "1000"), ("max_steps", 0),
    ("max_steps", "1e3"), ("smoothing", "five"),
])
def test_integers_refuse_anything_else(name, given):
    """seeds as the CLI's --seeds: 1 to 100 (MAX_SEEDS); the others: any integer from 1."""
    allowed = "an integer from 1 to 100" if name == "seeds" else "an integer >= 1"
    with pytest.raises(ParameterError, match=rf"'{name}' = .*expected {allowed}"):
        notebook_params(**{name: given})
    if name == "seeds":
        assert notebook_params(seeds=100).seeds == 100


@pytest.mark.parametrize("given", [None, "None", "none", "null", ""])
def test_optional_values_accept_none(given):
    p = notebook_params(max_steps=given, smoothing=given, run_dir=given, variants=given)
    assert (p.max_steps, p.smoothing, p.run_dir, p.variants) == (None, None, None, None)


@pytest.mark.parametrize("given", [
    "gqa,mla", "gqa, MLA", "[gqa, mla]", '["gqa", "mla"]', "- gqa\n- mla", ["gqa", "mla"],
    ("GQA", "mla"),
])
def test_lists_accept_comma_yaml_and_json(given):
    assert notebook_params("gate", variants=given).variants == ["gqa", "mla"]


@pytest.mark.parametrize("given", [3, "[gqa, [mla]]", "{gqa: 1}", "[]", "gqa,,mla", "[gqa",
                                   ["gqa", 1]])
def test_lists_refuse_anything_else(given):
    with pytest.raises(ParameterError, match="'variants' = .*expected a list of names"):
        notebook_params("gate", variants=given)


def test_variants_are_checked_against_the_figure():
    with pytest.raises(ParameterError, match="'variants' = 'mha,gqa'.*not in the gate figure; "
                                             "allowed: gqa, mla, gla-2, mlra-2, mlra-4"):
        notebook_params("gate", variants="mha,gqa")


def test_other_parameters_are_checked():
    with pytest.raises(ParameterError, match="'preset' = 'laptop'.*one of paper, gpu, cpu, ci"):
        notebook_params(preset="laptop")
    with pytest.raises(ParameterError, match="'confidence' = '95'.*strictly between 0 and 1"):
        notebook_params(confidence="95")
    assert notebook_params(confidence="0.9").confidence == 0.9
    with pytest.raises(ParameterError, match="unknown notebook parameter.*'seed'"):
        notebook_params(seed=1)
    with pytest.raises(ParameterError, match="'run_dir' = 3"):
        notebook_params(run_dir=3)


def test_the_parameters_table_names_no_machine_path(tmp_path):
    p = notebook_params(preset="ci", seeds="2", run_dir=str(tmp_path), train="false")
    assert p.shown() == {"preset": "ci", "seeds": 2, "run_dir": "a folder outside the repository",
                         "train": False}
    assert str(tmp_path) not in p._repr_html_()
    assert run_dir_label(REPO / "runs") == "runs"
    assert run_dir_label(None).startswith("default")


def test_the_parameters_table_says_what_the_preset_makes_of_the_books_seeds(monkeypatch):
    # cpu raises every figure and the main table to 5 (the seed table); a book-wide length does not
    assert notebook_params(preset="cpu", seeds=3).shown()["seeds"] == (
        "3 (the book's count; at cpu the ablation figures run 10, the main table 5)")
    assert notebook_params(preset="cpu", seeds=3, max_steps=20).shown()["seeds"] == 3
    assert notebook_params(preset="cpu", seeds=11).shown()["seeds"] == 11  # above every count
    monkeypatch.setitem(figures.ABLATIONS, "gate", replace(figures.ABLATIONS["gate"],
                        seeds={"cpu": 10, "ci": 4}))
    assert notebook_params(preset="ci", seeds=3).shown()["seeds"] == (
        "3 (the book's count; at ci the gating figure runs 4; the initialisation, latent-scaling "
        "and double-heads figures and the main table 3)")



def test_a_seed_count_below_a_figures_design_is_reported_on_the_page():
    """-p seeds 4 at cpu reads 10 pairs (the ablations) and 5 seeds (the main table): the page
    says so above its parameters, not only inside them."""
    p = notebook_params(preset="cpu", seeds=4)  # a page of every figure (claims)
    assert p.seed_notice == (
        "seeds = 4 is below the count fixed for this preset before any run: at cpu the "
        "ablation figures run 10, the main table 5, and that is what this page reads; a smaller "
        "count would be a different design, not a subset of this one")
    assert p._repr_html_().startswith("<p><strong>Note:</strong> seeds = 4 is below")
    assert notebook_params("gate", preset="cpu", seeds=4).seed_notice.startswith(
        "seeds = 4 is below the count fixed for this preset before any run: at cpu this figure "
        "runs 10 seed pairs, and that is what this page reads")
    assert "this table runs 5 seeds" in notebook_params("main", preset="cpu", seeds=4).seed_notice
    assert notebook_params("main", preset="cpu", seeds=7).seed_notice is None  # 7 of 7
    assert notebook_params(preset="cpu", seeds=10).seed_notice is None  # meets every design
    assert notebook_params(preset="cpu", seeds=11).seed_notice is None  # above every count
    assert notebook_params(preset="cpu").seed_notice is None  # not given
    assert notebook_params(preset="cpu", seeds=seed_policy.DEFAULT_SEEDS).seed_notice is None
    assert notebook_params(preset="cpu", seeds=4, max_steps=20).seed_notice is None


def test_a_page_builds_a_missing_corpus_whether_it_may_train_or_not(monkeypatch):
    """From a fresh clone (no corpus), papermill on one notebook builds the corpus first, with
    training on or off (a page that only reads records still hashes run ids with it)."""
    from gtalib.book.design import plan as plans

    built = []
    monkeypatch.setattr(plans.runs, "make_datamodule",
                        lambda *a, **kw: type("DM", (), {"prepare_data": lambda self: built.append(
                            kw.get("build"))})())
    monkeypatch.setattr(plans.specs, "data_spec", lambda preset, max_steps: {"built": built[:]})
    assert notebook_params(preset="ci", train=True).plan.data() == {"built": [True]}
    assert notebook_params(preset="ci", train=False).plan.data() == {"built": [True, True]}


NOTEBOOK_FILES = sorted((REPO / "notebooks").glob("*.ipynb"))


def _first_code_after_parameters(nb):
    """The parameters cell and the first code cell after the setup cell that follows it."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    i = next(i for i, c in enumerate(code) if "parameters" in c.metadata.get("tags", []))
    return code[i], code[i + 2]


def _declared(nb) -> set[str]:
    """The names the (first) ``parameters`` cell of ``nb`` assigns, the setup cell's
    (:data:`SETUP_PARAMETERS`) aside; none without one."""
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    return {t.id for c in cells[:1] for n in ast.parse(c.source).body for t in n.targets
            } - set(SETUP_PARAMETERS)


@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=lambda p: p.stem)
def test_every_notebook_has_one_parameters_cell_that_papermill_injects_after(path):
    """One cell tagged ``parameters``, the first code cell, declaring only names notebook_params
    knows; papermill puts its injected cell right after it (not at the top, with a warning)."""
    import papermill as pm
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    from gtalib.book.pipeline.parameters import NotebookParams

    nb = load_notebook_node(str(path))  # as papermill reads it (every cell has its tags list)
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    assert tagged == code[:1], f"{path.name}: cells tagged parameters: {tagged}; code cells: {code}"
    declared = set(pm.inspect_notebook(str(path))) - set(SETUP_PARAMETERS)
    assert declared == _declared(nb)
    assert declared <= {f.name for f in fields(NotebookParams)} - {"given"}
    injected = parameterize_notebook(nb, notebooks.notebook_parameters("ci", 2),
                                     kernel_name="python3", language="python")
    assert "injected-parameters" in injected.cells[tagged[0] + 1].metadata["tags"]


def test_the_book_executes_every_notebook_and_each_injected_parameter_is_declared():
    import papermill as pm

    assert sorted(registry.notebooks()) == [p.stem for p in NOTEBOOK_FILES]
    declared = set().union(*(pm.inspect_notebook(str(p)) for p in NOTEBOOK_FILES))
    assert set(notebooks.notebook_parameters("ci", 2)) <= declared


@pytest.mark.parametrize("name", [p.stem for p in NOTEBOOK_FILES
                                  if _declared(nbformat.read(p, as_version=4))])
def test_every_notebook_validates_all_its_parameters_first(name):
    """The cell after ``parameters`` passes every parameter through notebook_params before any
    other call, and the rest of the notebook reads only the validated values."""
    nb = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
    params, first = _first_code_after_parameters(nb)
    declared = _declared(nb)
    calls = [n for n in ast.parse(first.source).body if not isinstance(n, (ast.Import,
                                                                          ast.ImportFrom))]
    call = calls[0].value
    assert isinstance(call, ast.Call) and call.func.id == "notebook_params"
    assert {k.arg for k in call.keywords} == declared
    later = "\n".join(c.source for c in nb.cells[nb.cells.index(first):] if c.cell_type == "code")
    used = {n.id for n in ast.walk(ast.parse(later)) if isinstance(n, ast.Name)}
    passed = {n.id for k in call.keywords for n in ast.walk(k.value) if isinstance(n, ast.Name)}
    assert used & declared == passed, f"{name}: a raw parameter is used after validation"


def _kernel_notebook(path: Path, params: str, check: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(params), nbformat.v4.new_code_cell(check)]
    nb.cells[0].metadata["tags"] = ["parameters"]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)


def test_papermill_stops_at_an_unknown_parameter_naming_the_allowed_ones(tmp_path):
    """papermill only warns about a parameter the notebook does not declare (and runs at the
    default): notebook_params finds papermill's injected cell and refuses it."""
    import papermill as pm

    src = tmp_path / "p.ipynb"
    _kernel_notebook(src, "seeds = 3\ngtalib_source = None",
                     "from gtalib.book.pipeline.parameters import notebook_params\n"
                     "print(notebook_params(seeds=seeds).seeds)")
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(str(src), str(tmp_path / "bad.ipynb"), parameters={"sedes": 5},
                            kernel_name="python3", progress_bar=False)
    assert e.value.ename == "ParameterError"
    assert e.value.evalue == ("unknown notebook parameter(s) 'sedes'; this notebook takes: seeds, "
                              "gtalib_source, gtalib_commit")
    # declared names (the setup cell's among them) pass, and their values arrive
    out = pm.execute_notebook(str(src), str(tmp_path / "ok.ipynb"), kernel_name="python3",
                              parameters={"seeds": 5, "gtalib_source": "x"}, progress_bar=False)
    assert out.cells[-1].outputs[0]["text"] == "5\n"
