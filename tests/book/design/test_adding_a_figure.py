"""A new ablation figure is one spec and one notebook: a throw-away RoPE-width figure, declared
only in ``ABLATIONS`` (in this process and, through an IPython startup file, in the notebook's
kernel), appears in every list the book derives from its chapters and builds at ``ci`` on a
synthetic store (docs/interfaces.md, "Adding an ablation figure")."""

import json

import notebook_cells
import pytest
import synthetic

from gtalib.book.design import chapters, figures
from gtalib.book.design import run_specs as specs
from gtalib.book.design.plan import make_plan
from gtalib.book.design.figures import figure_spec
from gtalib.book.design.spot_check import spot_check_refs, spot_check_variants
from gtalib.book.pipeline import execute
from gtalib.book.pipeline.paths import NOTEBOOK_DIR
from gtalib.book.pipeline.snippets import intro_markdown
from gtalib.cli import build_parser

#: The figure, as a user would add it to gtalib/book/design/figures.py.
FIGURE = '''
from gtalib.book.design import figures as _figures
_figures.ABLATIONS["rope_width"] = _figures.Ablation(
    key="rope_width", title="RoPE-width ablation: d_r 8 vs 16",
    variants=("mla", "gla-2"), alt={"qk_rope_head_dim": 8}, rec={},
    convention="ΔL = L(d_r 8) − L(d_r 16)", colors={"mla": "tab:green", "gla-2": "tab:purple"},
    claim="A RoPE part of 16 beats one of 8 for MLA and GLA-2.", ci_variants=("mla", "gla-2"),
    notebook="rope_width", summary="the width of the RoPE key", claim_value="ΔL > 0 for both",
    ranking=("mla", "MLA gains most from the wider RoPE part"),
    seeds={"cpu": 12}, looks={"cpu": (6, 12)}, spot_check={"ci": "gla-2"},
    data_orders_declared={"cpu": (1, 2)})
'''


@pytest.fixture
def rope_figure(monkeypatch):
    monkeypatch.setitem(figures.ABLATIONS, "rope_width", None)  # removed again afterwards
    exec(FIGURE, {})
    for module in (chapters, figures):
        assert "rope_width" in module.ABLATIONS
    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    return figures.ABLATIONS["rope_width"]


def test_a_new_figure_appears_everywhere_the_book_lists_chapters(rope_figure):
    stems = chapters.notebooks()
    assert stems.index("rope_width") == stems.index("double_heads") + 1  # after the others
    assert "rope_width" in chapters.figure_notebooks()
    assert chapters.chapter("rope_width").reads == ("rope_width",)
    assert "claims" in stems and "rope_width" in chapters.chapter("claims").reads
    toc = chapters.toc_yaml()
    ablations = toc.split("caption: Ablations")[1].split("caption:")[0]
    assert "- file: generated/rope_width\n" in ablations
    assert "the width of the RoPE key" in intro_markdown()
    # its runs: both arms of each ci variant, in the plan and in what --only trains
    plan = make_plan("ci", 2)
    refs = plan.figure_refs["rope_width"]
    assert sorted((r.variant, r.arm, r.seed) for r in refs) == sorted(
        (v, a, s) for v in ("mla", "gla-2") for a in ("alt", "rec") for s in range(2))
    only = make_plan("ci", 2, notebooks=("rope_width",))
    assert set(only.runs) == set(refs) and only.ladder_refs == ()
    assert figure_spec("rope_width").seeds_at("ci", 2) == 2
    # its design, from the same spec: seeds and looks, the spot-check, the data orders
    assert figure_spec("rope_width").seeds_at("cpu", 3) == 12 and figure_spec("rope_width").looks_at("cpu", 3) == (6, 12)
    assert spot_check_variants("ci")["rope_width"] == "gla-2"
    assert spot_check_variants("cpu")["rope_width"] == "mla"  # none named there: its first
    assert {r.variant for r in spot_check_refs(plan)} >= {"gla-2"}
    assert figure_spec("rope_width").data_order_runs("cpu") == []  # declared, not yet read
    # its claim and ranking on the claims page
    claim = next(c for c in figures.claims() if c.source == "rope_width")
    assert claim.text == rope_figure.claim and claim.number == len(figures.claims()) - 2
    assert figures.rankings()["rope_width"][0] == "mla"
    # the CLI offers it to --only
    book = build_parser()._subparsers._group_actions[0].choices["book"]
    assert "rope_width" in book.format_help()


def test_a_new_figure_builds_its_page_at_ci(rope_figure, tmp_path, monkeypatch):
    store = tmp_path / "store"
    synthetic.write_store(store, "ci", 2)
    ipython = synthetic.ipython_dir(tmp_path / "ipython")
    startup = ipython / "profile_default" / "startup" / "00-synthetic.py"
    startup.write_text(startup.read_text() + FIGURE)
    monkeypatch.setenv("IPYTHONDIR", str(ipython))
    src = json.loads((NOTEBOOK_DIR / "latent_scaling.ipynb").read_text())
    for cell in src["cells"]:
        if cell["cell_type"] == "code":
            cell["source"] = [s.replace('"latent_scale"', '"rope_width"') for s in cell["source"]]
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    (nb_dir / "rope_width.ipynb").write_text(json.dumps(src))
    (tmp_path / "out").mkdir()
    params = execute.notebook_parameters("ci", 2, store)
    execute.execute_notebook("rope_width", params, tmp_path / "out", notebook_dir=nb_dir)
    out = json.loads((tmp_path / "out" / "rope_width.ipynb").read_text())
    text = json.dumps([c.get("outputs", []) for c in out["cells"]])
    assert "RoPE-width ablation" in text and "GLA-2" in text
    assert "image/png" in text
    assert not execute.notebook_errors(tmp_path / "out")
    # its cells are checked as every ablation page's: listed from the registry, the same
    # plotting cell as the others
    assert "rope_width" in notebook_cells.ablation_stems()
    assert notebook_cells.figure_cell("rope_width", nb_dir) == notebook_cells.figure_cell(
        "init_ablation")
