"""A user's own attention variant on the ablation pages (docs/interfaces.md, "Your own attention
variant"): drawn beside the paper's variants, tested in a family of its own, kept out of the
paper's verdicts and claims."""

from __future__ import annotations

import importlib
import os
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import synthetic  # noqa: E402
from notebook_cells import notebook_figure  # noqa: E402

from gtalib.book.chapters import ablation as A  # noqa: E402
from gtalib.book.design import run_specs as specs  # noqa: E402
from gtalib.book.design.figures import figure_spec  # noqa: E402
from gtalib.book.design.plan import make_plan  # noqa: E402
from gtalib.book.pipeline.parameters import notebook_params  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
DOCS = (REPO / "docs" / "interfaces.md").read_text().split("## Your own attention variant")[1]
CLASS_TEXT = re.search(r"```python\n(.*?)```", DOCS, re.S).group(1)
NOPE = "my_attention:NoPE"


@pytest.fixture
def store(tmp_path, monkeypatch):
    """The docs' class importable as ``my_attention``, and a synthetic ci store with its runs."""
    (tmp_path / "my_attention.py").write_text(CLASS_TEXT)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("my_attention", None)
    importlib.invalidate_caches()
    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    synthetic.write_store(tmp_path / "store", "ci", 3, variants=(NOPE,))
    yield tmp_path / "store"
    sys.modules.pop("my_attention", None)


def test_it_joins_the_figures_whose_arms_it_takes(store):
    assert figure_spec("init").variants_at("ci", [NOPE]) == ("gqa", "mla", NOPE)
    assert figure_spec("gate").variants_at("cpu", ["mla", NOPE]) == ("mla", NOPE)
    # latent scales and double heads are options its config refuses: it stays out, saying why
    assert figure_spec("latent_scale").variants_at("ci", [NOPE]) == ("mla", "gla-2")
    assert "latent_scale=False only applies" in figure_spec("latent_scale").user_variant_refusal("ci", NOPE)
    assert "head_multiplier=2" in figure_spec("double_heads").user_variant_refusal("ci", NOPE)
    assert notebook_params("init", preset="ci", variants=NOPE).variants == ["gqa", "mla", NOPE]
    plan = make_plan("ci", 3, variants=(NOPE,))
    assert {(r.arm, r.seed) for r in plan.figure_refs["init"] if r.variant == NOPE} == {
        (a, s) for a in ("alt", "rec") for s in range(3)}
    assert not any(r.variant == NOPE for r in plan.figure_refs["latent_scale"])
    with pytest.raises(KeyError, match="not a user's variants"):
        make_plan("ci", 3, variants=("mha",))


def test_it_is_drawn_and_tested_beside_the_paper_s_variants_in_its_own_family(store, monkeypatch):
    plan = make_plan("ci", 3, variants=(NOPE,))
    mine = A.ablation_result("init", plan, store, variants=[NOPE])
    paper = A.ablation_result("init", make_plan("ci", 3), store)
    # the paper's variants: the same table, the same Holm family, as without the user's
    assert list(mine.final.index) == list(paper.final.index) == ["gqa", "mla"]
    cols = ["ΔL", "CI low", "CI high", "p", "p (Holm)", "verdict"]
    pd.testing.assert_frame_equal(mine.final[cols], paper.final[cols])
    assert mine.complete == paper.complete == ["gqa", "mla"]
    assert set(mine.curves["variant"]) == {"gqa", "mla"}
    # the user's: its own table, ΔL = the synthetic store's init effect (normal − zero), 0.05
    assert mine.user_complete == [NOPE] and list(mine.user_final.index) == [NOPE]
    row = mine.user_final.loc[NOPE]
    assert row["seeds"] == 3 and row["ΔL"] == pytest.approx(synthetic.EFFECT["init"])
    assert row["p (Holm)"] == row["p"]  # a family of one
    assert set(mine.user_curves["variant"]) == {NOPE}
    shown = A.format_final_table(mine.user_final, mine.confidence)
    assert list(shown.index) == ["NoPE"] and "paper ΔL (≈)" not in shown.columns
    shown_objects = []
    monkeypatch.setattr(A, "display", shown_objects.append)
    A.show_verdicts(mine, mine.final)  # the page's tables: the paper's, then its own
    from IPython.display import Markdown

    heading = [o.data for o in shown_objects
               if isinstance(o, Markdown) and "Your variants" in o.data]
    assert heading == [f"### Your variants\n\n[Tested apart]({A.USER_VARIANTS})"]
    assert list(shown_objects[-1].data.index) == ["NoPE"]  # the last table: its own row
    # what "tested apart" means, once, in the methods chapter's section the link opens
    methods = (REPO / "book" / "methods.md").read_text()
    section = methods.split("(your-own-variants)=\n### Your own variants\n", 1)[1].split("\n#", 1)[0]
    assert A.USER_VARIANTS.endswith("#your-own-variants")
    assert "Holm family of their own" in section and '"for all nine"' in section
    fig = notebook_figure(mine, monkeypatch)  # the notebooks' plotting cell
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert {"GQA", "MLA", "NoPE"} <= set(labels)
    assert A.variant_color(A.ablation(mine.key), NOPE, mine.user_complete) == "black"


@pytest.mark.slow
def test_the_book_job_trains_it_and_its_page_shows_it_apart(tmp_path, monkeypatch, built):
    """``gtalib book --variants my_attention:NoPE --only init_ablation`` at ci, into a copy of
    book/ and a temporary store that holds the paper's runs of the figure already (linked from
    the ci book's store, tests/book/conftest.py): the job trains its runs, and the executed
    page draws it and tables it under "Your variants", apart from the paper's verdicts."""
    import json
    import shutil

    from gtalib.book.pipeline.job import build_book
    from gtalib.training.runs import run_path

    book_store = built[0].parent / "runs"
    plan = make_plan("ci", 2, notebooks=("init_ablation",))
    for _, spec in plan.specs(list(plan.runs)):
        shutil.copytree(run_path(spec, book_store), run_path(spec, tmp_path / "store"),
                        copy_function=os.link)

    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "my_attention.py").write_text(CLASS_TEXT)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "mod"))  # the workers and kernels too
    monkeypatch.syspath_prepend(str(tmp_path / "mod"))
    sys.modules.pop("my_attention", None)
    dst = tmp_path / "book"
    shutil.copytree(REPO / "book", dst, ignore=shutil.ignore_patterns("_build", "generated"))
    build_book("ci", seeds=2, jobs=1, threads=1, run_dir=tmp_path / "store",
               notebooks=("init_ablation",), html=False, book_dir=dst, budget_min=None,
               variants=(NOPE,), log=lambda *a: None)
    held = [json.loads(p.read_text())["model"] for p in (tmp_path / "store").glob("*/spec.json")]
    mine = [m for m in held if m["variant"] == NOPE]
    assert len(mine) == 4 and {m["init"] for m in mine} == {"zero", "normal"}  # 2 seeds × 2 arms
    assert len(held) == len(plan.runs) + len(mine)  # nothing of the paper's trained again
    nb = json.loads((dst / "generated" / "init_ablation.ipynb").read_text())
    text = json.dumps([c.get("outputs", []) for c in nb["cells"]])
    assert "### Your variants" in text and "NoPE" in text
    assert not [o for c in nb["cells"] for o in c.get("outputs", [])
                if o.get("output_type") == "error"]
    sys.modules.pop("my_attention", None)


@pytest.mark.slow
def test_the_book_page_draws_the_docs_class_in_the_init_figure_at_ci(tmp_path):
    """notebooks/own_attention.ipynb, executed as the book does: it shows the docs' class as
    written, trains its ci runs and draws them beside GQA and MLA under "Your variants"."""
    import json

    from gtalib.book.chapters.own_attention import docs_class_text
    from gtalib.book.pipeline import execute

    assert docs_class_text() == CLASS_TEXT
    params = execute.notebook_parameters("cpu", 3, tmp_path / "store")
    (tmp_path / "out").mkdir()
    execute.execute_notebook("own_attention", params, tmp_path / "out")
    assert not execute.notebook_errors(tmp_path / "out")
    nb = json.loads((tmp_path / "out" / "own_attention.ipynb").read_text())
    text = json.dumps([c.get("outputs", []) for c in nb["cells"]])
    assert "class NoPE(Attention)" in text and "image/png" in text
    assert "### Your variants" in text
    trained = {json.loads(p.read_text())["model"]["variant"]
               for p in (tmp_path / "store").glob("*/spec.json")}
    assert trained == {"gqa", "mla", NOPE}


def test_the_docs_class_folder_lives_as_long_as_its_process(tmp_path):
    """docs_variant writes the docs' class to a temporary folder that its process can import
    from, reuses it on a second call, and leaves nothing behind once the process exits (a
    folder per book build used to stay in /tmp)."""
    import subprocess

    code = ("import importlib, sys\n"
            "from gtalib.book.chapters.own_attention import docs_variant\n"
            "path = docs_variant(); assert docs_variant() == path\n"
            "module, name = path.split(':')\n"
            "cls = getattr(importlib.import_module(module), name)\n"
            "folder = sys.modules[module].__file__.rsplit('/', 1)[0]\n"
            "assert sys.path.count(folder) == 1\n"
            "print(folder)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, check=True).stdout.split()
    folder = Path(out[-1])
    assert folder.name.startswith("gtalib-own-attention-")
    assert not folder.exists()
