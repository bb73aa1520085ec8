"""The introduction's headline (gtalib.book.chapters.headline): one row per claim with the
claims page's verdicts, the forest plot drawing each variant's interval and the paper's value
where the final-ΔL tables put them, and the runs sentence's counts."""

from __future__ import annotations

import math
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from gtalib.book.chapters import headline as H
from gtalib.book.design.figures import ABLATIONS, claims


def _claims_frame() -> pd.DataFrame:
    """A claims table shaped like claims_table's: every claim, the ranking rows, made-up cells."""
    rows = []
    for c in claims():
        verdict = "mixed: agrees 7/9, within noise 2/9" if c.source == "init" else "agrees"
        rows.append((c.number, c.text, c.paper_value, "ours", verdict, "", f"measured {c.number}"))
    rows.append(("4 (ranking)", "TPA gains most", "", "x", "within noise", "", "x"))
    latent = next(c.number for c in claims() if c.source == "latent_scale")
    rows.append((f"{latent} (≈ 0)", "MLRA-2 ≈ 0", "", "x", "differs", "", "x"))
    return pd.DataFrame(rows, columns=["claim", "paper says", "paper value", "ours", "verdict",
                                       "resolution", "measured"]).set_index("claim")


def test_one_row_per_claim_with_the_claims_pages_verdict_and_its_ranking_folded_in():
    table = H.headline_table(_claims_frame())
    assert list(table.index) == [c.number for c in claims()]
    init = next(c.number for c in claims() if c.source == "init")
    assert table.loc[init, "verdict"] == "mixed: agrees 7/9, within noise 2/9"
    assert table.loc[init, "ranking"] == "within noise"
    assert table.loc[init, "paper says"] == "Initialisation: " + ABLATIONS["init"].claim_value
    assert (table.drop(init)["ranking"] == "").all()
    md = H.headline_markdown_table(table)
    assert md.count("\n") == len(claims()) + 2  # header, rule, one line per claim
    row = next(line for line in md.splitlines() if line.startswith(f"| {init} |"))
    assert "{doc}`Initialisation <generated/init_ablation>`" in row
    assert ">mixed</strong>: 7 agree, 2 within noise · ranking " in row
    assert (table[H.ANY_ORDER] == "").all() and "any order" not in md
    # the latent-scaling claim's ≈ 0 part (an equivalence test) folds in beside its verdict
    latent = next(c.number for c in claims() if c.source == "latent_scale")
    assert table.loc[latent, "≈ 0"] == "differs" and (table.drop(latent)["≈ 0"] == "").all()
    row = next(line for line in md.splitlines() if line.startswith(f"| {latent} |"))
    assert row.endswith('agrees</strong> · ≈ 0 <strong class="gtalib-verdict '
                        'gtalib-verdict-differs">differs</strong> |')


def test_the_data_order_verdicts_fold_into_their_claims_row():
    tables = {"init": pd.DataFrame({"verdict": ["agrees"] * 2 + ["within noise"] * 7}),
              "gate": pd.DataFrame()}  # no data-order runs: left out
    orders = H.data_order_verdicts(tables)
    assert orders == {"init": (H.ANY_ORDER, "mixed: within noise 7/9, agrees 2/9")}
    table = H.headline_table(_claims_frame(), orders)
    init = next(c.number for c in claims() if c.source == "init")
    assert table.loc[init, H.ANY_ORDER] == orders["init"][1]
    assert (table.drop(init)[H.ANY_ORDER] == "").all()
    assert (table[H.ORDER_0] == "").all()
    md = H.headline_markdown_table(table)
    row = next(line for line in md.splitlines() if line.startswith(f"| {init} |"))
    assert row.endswith("· any order: <strong class=\"gtalib-verdict "
                        "gtalib-verdict-mixed\">mixed</strong>: 7 within noise, 2 agree |")
    assert md.count("any order") == 1


def test_a_joint_design_figure_shows_its_verdict_at_data_order_0():
    # a figure read in the joint design: its row's verdict holds for any order already, so the
    # row adds the verdict with every pair at data order 0 ("final verdict"), not "verdict"
    tables = {"gate": pd.DataFrame({"verdict": ["within noise"] * 5,
                                    "final verdict": ["agrees"] * 4 + ["within noise"],
                                    "joint verdict": ["agrees"] * 5})}
    orders = H.data_order_verdicts(tables)
    assert orders == {"gate": (H.ORDER_0, "mixed: agrees 4/5, within noise 1/5")}
    table = H.headline_table(_claims_frame(), orders)
    gate = next(c.number for c in claims() if c.source == "gate")
    assert table.loc[gate, H.ORDER_0] == orders["gate"][1]
    assert (table[H.ANY_ORDER] == "").all()
    md = H.headline_markdown_table(table)
    row = next(line for line in md.splitlines() if line.startswith(f"| {gate} |"))
    assert row.endswith("· order 0: <strong class=\"gtalib-verdict "
                        "gtalib-verdict-mixed\">mixed</strong>: 4 agree, 1 within noise |")
    assert "any order" not in md


@pytest.mark.parametrize("verdict, word", [
    ("agrees", "agrees"), ("within noise", "within noise"), ("mixed: differs 1/2, agrees 1/2", "mixed"),
    ("not measured on a GPU (the CPU ranks by FLOPs)", "not measured"),
    ("not measured (MLRA-4 not in this preset's run set)", "not measured"),
    ("undetermined (1 seed)", "undetermined")])
def test_verdict_word(verdict, word):
    assert H.verdict_word(verdict) == word


def _final(variants, deltas, lows, highs, verdicts, paper):
    return pd.DataFrame({"seeds": 3, "ΔL": deltas, "CI low": lows, "CI high": highs,
                         "verdict": verdicts, "paper ΔL (≈)": paper}, index=variants)


@pytest.mark.parametrize("layout, grid", [("wide", (1, 4)), ("narrow", (4, 1))])
def test_the_forest_plot_draws_each_interval_and_the_papers_value(layout, grid):
    results = {
        "init": SimpleNamespace(final=_final(["gqa", "mla"], [0.05, -0.01], [0.02, -0.03],
                                             [0.08, 0.01], ["agrees", "within noise"],
                                             [0.017, math.nan])),
        "gate": SimpleNamespace(final=pd.DataFrame()),
        "latent_scale": SimpleNamespace(final=_final(["mla"], [-0.04], [-0.06], [-0.02],
                                                     ["differs"], [0.02])),
        "double_heads": SimpleNamespace(final=_final(["gqa"], [0.01], [-0.02], [0.04],
                                                     ["within noise"], [0.01])),
    }
    fig = H.forest_figure(results, layout)
    try:
        shown = [ax for ax in fig.axes if ax.get_visible()]
        assert len(shown) == 4 and fig.axes[0].get_gridspec().get_geometry() == grid
        init = shown[0]
        assert [t.get_text() for t in init.get_yticklabels()] == ["MLA", "GQA"]  # top down
        lines = {tuple(np.round(ln.get_xdata(), 6)): ln for ln in init.get_lines()}
        # GQA (top row, y = 1): interval from CI low to CI high in the agrees colour
        gqa = lines[(0.02, 0.08)]
        assert list(gqa.get_ydata()) == [1, 1] and gqa.get_color() == H.VERDICT_STYLE["agrees"][0]
        assert lines[(0.017,)].get_marker() == "D"  # the paper's value, just below the row
        assert lines[(0.017,)].get_ydata()[0] == pytest.approx(0.7)
        assert not any(math.isnan(x) for k in lines for x in k)  # no paper value for MLA
        latent = {tuple(np.round(ln.get_xdata(), 6)): ln for ln in shown[2].get_lines()}
        assert latent[(-0.06, -0.02)].get_color() == H.VERDICT_STYLE["differs"][0]
        assert "no complete runs" in [t.get_text() for t in shown[1].texts]
    finally:
        plt.close(fig)
    alt = H.forest_alt(results)
    assert "Initialisation: 1 variant agrees and 1 variant within noise" in alt
    assert "Gating: no complete runs" in alt and "Latent-scaling: 1 variant differs" in alt
    with pytest.raises(ValueError, match="layout must be one of"):
        H.forest_figure(results, "square")


def test_the_forest_plot_shows_a_near_zero_variant_by_its_size_claim(monkeypatch):
    """MLRA-2's row agrees by sign, but the paper calls its ΔL ≈ 0: its dot takes the
    equivalence test's verdict and its label says so, as the landing table's row does."""
    calls = []

    def claim(result, v):
        calls.append(v)
        return "ours", "differs"

    monkeypatch.setattr(H, "near_zero_claim", claim)
    final = _final(["mla", "gla-2", "mlra-2"], [0.014, 0.033, 0.032], [0.0, 0.02, 0.02],
                   [0.03, 0.04, 0.04], ["within noise", "agrees", "agrees"], [0.004] * 3)
    results = {k: SimpleNamespace(final=pd.DataFrame()) for k in ABLATIONS}
    results["latent_scale"] = SimpleNamespace(final=final)
    assert list(H.shown_verdicts("latent_scale", results["latent_scale"])) == [
        "within noise", "agrees", "differs"] and calls == ["mlra-2"]
    fig = H.forest_figure(results, "wide")
    try:
        latent = [ax for ax in fig.axes if ax.get_visible()][2]
        assert [t.get_text() for t in latent.get_yticklabels()] == [
            "MLRA-2 (≈ 0)", "GLA-2", "MLA"]
        lines = {tuple(np.round(ln.get_xdata(), 6)): ln for ln in latent.get_lines()}
        assert lines[(0.032,)].get_color() == H.VERDICT_STYLE["differs"][0]
    finally:
        plt.close(fig)
    assert ("Latent-scaling: 1 variant agrees, 1 variant differs and 1 variant within noise"
            in H.forest_alt(results))


def test_each_figures_text_shows_at_10_px_or_more_in_its_column():
    """Each layout is scaled to its text column (772 px at 1400, 358 px on a 390-px phone):
    every text of it (ticks, labels, titles, legend) must still show at 10 px or more, i.e.
    points × column px / (72 × width in)."""
    results = {k: SimpleNamespace(final=_final(["gqa", "mla", "gla-2"], [0.05, 0.02, 0.01],
                                               [0.02, 0.0, -0.01], [0.08, 0.04, 0.03],
                                               ["agrees"] * 3, [0.01] * 3)) for k in ABLATIONS}
    shown = {}
    for layout in H.LAYOUTS:
        fig = H.forest_figure(results, layout)
        try:
            fig.canvas.draw()
            sizes = [t.get_fontsize() for t in fig.findobj(plt.Text) if t.get_text()]
            shown[layout] = {col: min(sizes) * px / (72 * fig.get_figwidth())
                             for col, px in H.COLUMN_PX.items()}
        finally:
            plt.close(fig)
    assert shown["wide"]["wide"] >= 10 and shown["narrow"]["narrow"] >= 10, shown
    assert shown["wide"]["narrow"] < 10  # the wide figure squeezed onto a phone would not be


def test_the_run_facts_count_where_the_runs_come_from_and_how_they_compared():
    counts = {"trained in this build": 17, "in the store before": 3, "read from records": 343,
              "missing": 0}
    facts = H.run_facts(counts, {"bit-identical": 15, "within envelope": 2, "mismatch": 0})
    assert facts == {"runs_read": "363 runs",
                     "runs_sources": "17 trained in this build, 3 in the store before and 343 "
                                     "read from records",
                     "runs_here": "20", "runs_compared": "17",
                     "runs_outcomes": "15 bit-identical and 2 within the envelope"}
    none = H.run_facts({"read from records": 360}, {"bit-identical": 0})
    assert (none["runs_here"], none["runs_compared"], none["runs_outcomes"]) == ("0", "0", "none")
    assert H.run_facts({}, {})["runs_sources"] == "none"


def test_the_landing_page_states_the_run_facts_the_build_writes(tmp_path, monkeypatch):
    """write_headline writes the run facts beside the headline; book/intro.md names each of
    them (MyST substitutions, enabled in _config.yml and handed over by the book's extension)."""
    import json
    import re
    from pathlib import Path

    monkeypatch.setattr(H, "forest_figure", lambda results, layout: plt.figure())
    monkeypatch.setattr(H, "forest_alt", lambda results: "alt")
    md = H.write_headline(_claims_frame(), {}, {"read from records": 2}, {}, tmp_path)
    assert md.startswith("::::{container} gtalib-headline\n| | paper | this build | verdict |")
    facts = json.loads((tmp_path / H.SUBSTITUTIONS).read_text())
    assert facts == H.run_facts({"read from records": 2}, {}) and facts["runs_read"] == "2 runs"
    book = Path(__file__).resolve().parents[3] / "book"
    intro = (book / "intro.md").read_text()
    assert set(re.findall(r"\{\{ (\w+) \}\}", intro)) == set(facts)
    assert "substitution" in (book / "_config.yml").read_text()
    assert f'"generated") / "{H.SUBSTITUTIONS}"' in (book / "_ext" / "gtalib_publish.py").read_text()


def test_the_landing_page_says_what_the_verdict_cells_words_mean():
    """The headline's table holds words (its header, a verdict's parts); book/intro.md states
    once what they mean and links the claims page."""
    from pathlib import Path

    md = H.headline_markdown_table(H.headline_table(_claims_frame()))
    assert md.splitlines()[0] == "| | paper | this build | verdict |"
    intro = (Path(__file__).resolve().parents[3] / "book" / "intro.md").read_text()
    for word in ("*ranking*", "*≈ 0*", f"*{H.ANY_ORDER}*", f"*{H.ORDER_0}*",
                 "{doc}`generated/claims`"):
        assert word in intro
