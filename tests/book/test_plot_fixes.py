"""Regression tests of the book-review fixes: paper panel limits, legends, pluralisation."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from gtalib.book import figures as F  # noqa: E402
from gtalib.book import ablation, style  # noqa: E402


@pytest.mark.parametrize("key", ["init", "gate", "latent_scale", "double_heads"])
def test_paper_panel_shows_every_paper_value(key):
    spec = F.ablation(key)
    fig, ax = plt.subplots()
    ablation.plot_paper_reference(spec, ax)
    lo, hi = ax.get_ylim()
    values = list(spec.paper_curve_frame()["delta"])
    values += [spec.paper_final(v) for v in spec.variants if v not in spec.paper_curves]
    # strictly inside: no value on or beyond the frame (the gate curves start at 0.018)
    assert lo < min(values) and max(values) < hi and lo < 0.0
    assert ax.get_xlim()[0] < 1.0 and ax.get_xlim()[1] > 100
    # legend anchored right of the axes, so it cannot cover a marker at x = 100
    assert ax.get_legend().get_bbox_to_anchor().x0 > ax.get_window_extent().x1
    plt.close(fig)


def test_variants_get_distinct_markers():
    spec = F.ablation("gate")
    fig, ax = plt.subplots()
    ablation.plot_paper_reference(spec, ax)
    markers = [line.get_marker() for line in ax.get_lines()]
    assert len(set(markers)) == len(spec.variants)
    plt.close(fig)


@pytest.mark.parametrize("key, asked", [("gate", ("mlra-4", "gqa")), ("init", ("tpa",)),
                                        ("latent_scale", ("mla", "gla-2"))])
def test_paper_panel_shows_only_the_variants_asked_for(key, asked):
    """A page run with ``variants=...`` draws those of the paper's curves/markers, no others."""
    spec = F.ablation(key)
    fig, ax = plt.subplots()
    ablation.plot_paper_reference(spec, ax, asked)
    labels = [t.get_text().split(" paper")[0] for t in ax.get_legend().get_texts()]
    assert labels == [F.display_name(v) for v in spec.variants if v in asked]
    assert len(ax.get_lines()) == len(asked)
    plt.close(fig)


def test_ablation_result_remembers_the_variants_asked_for(tmp_path, monkeypatch):
    import synthetic

    monkeypatch.setattr(F, "data_spec", synthetic.synthetic_identity)
    synthetic.write_store(tmp_path, "ci", 1)  # GQA and MLA only: MLRA-4 stays missing
    r = ablation.ablation_result("gate", "ci", 1, tmp_path, variants="mlra-4,gqa")
    assert r.variants == ("mlra-4", "gqa")
    assert (r.complete, r.incomplete) == (["gqa"], ["mlra-4"])
    fig = ablation.plot_ablation(r)
    paper_ax = fig.axes[1]
    assert [t.get_text().split(" paper")[0] for t in paper_ax.get_legend().get_texts()] == [
        "GQA", "MLRA-4"]
    plt.close(fig)


@pytest.mark.parametrize("seeds", [2, 3])
def test_band_is_drawn_from_three_seeds_and_the_curves_set_the_y_range(tmp_path, monkeypatch,
                                                                       seeds):
    """Every seed thin, the mean bold; the t-interval shaded only from 3 seeds (with 2,
    t = 12.7 makes it cover the plot); the y-range is the curves' (seeds and means, 8 %
    margin, and 0), so a wider band is clipped; legend and caption say what is drawn."""
    from dataclasses import replace

    from matplotlib.collections import PolyCollection

    import synthetic
    from gtalib.book.curves import seed_band

    monkeypatch.setattr(F, "data_spec", synthetic.synthetic_identity)
    synthetic.write_store(tmp_path, "ci", seeds)
    r = ablation.ablation_result("init", "ci", seeds, tmp_path)
    curves = r.curves.copy()
    curves["delta"] += curves["seed"].map({0: 0.0, 1: 0.03, 2: -0.02})  # a seed-to-seed spread
    r = replace(r, curves=curves, band=seed_band(curves))
    fig = ablation.plot_ablation(r)
    ax = fig.axes[0]
    fills = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(fills) == (len(r.complete) if seeds >= 3 else 0)
    assert ax.get_ylim() == pytest.approx(style.curve_limits([*curves["delta"],
                                                                 *r.band["mean"]]))
    if seeds >= 3:  # this band reaches beyond the curves: cut at the frame, not widening it
        assert r.band["hi"].max() > ax.get_ylim()[1]
    thin = [ln for ln in ax.get_lines() if ln.get_linewidth() < 1]
    assert len(thin) == seeds * len(r.complete) + 1  # + the legend's "each seed" entry
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[-3 if seeds >= 3 else -2:] == (
        ["each seed's ΔL", f"mean over {seeds} seeds"]
        + (["95% t-interval of the mean"] if seeds >= 3 else []))
    caption = ablation.ablation_caption(r)
    assert (f"thin lines: each seed's ΔL; bold: mean over {seeds} seeds; " + (
        "shaded: 95% t-interval of the mean, shown from 3 seeds; the y-range follows the curves, "
        "the shading is cut at the frame." if seeds >= 3 else
        "no shading: the 95% t-interval of the mean is shown from 3 seeds, this figure has 2; "
        "the y-range follows the curves.")) in caption
    plt.close(fig)


def test_more_seeds_for_one_variant_reach_its_table_and_every_caption(tmp_path, monkeypatch):
    """A variant with more seeds (Ablation.seeds) is drawn and tabled with all of them, and the
    title, caption, verdict line and methods text name the counts."""
    from dataclasses import replace

    import synthetic
    from gtalib.book import job

    gate = replace(F.ablation("gate"), seeds={"ci": {"mla": 4}})
    monkeypatch.setitem(F.ABLATIONS, "gate", gate)
    monkeypatch.setattr(F, "data_spec", synthetic.synthetic_identity)
    synthetic.write_store(tmp_path, "ci", 3)  # the plan at 3 seeds already asks for MLA's 4
    r = ablation.ablation_result("gate", "ci", 3, tmp_path)
    assert r.seed_counts == {"gqa": 3, "mla": 4}
    assert r.final.loc["gqa", "seeds"] == 3 and r.final.loc["mla", "seeds"] == 4
    assert r.curves.groupby("variant")["seed"].nunique().to_dict() == {"gqa": 3, "mla": 4}
    assert ablation.seeds_text(r.seed_counts) == "3 seeds (4 for MLA)"
    assert ablation.seeds_text({"a": 3, "b": 3}) == "3 seeds"
    assert "3 seeds (4 for MLA) per configuration" in ablation.ablation_caption(r)
    assert "bold: mean over 3 seeds (4 for MLA); shaded" in ablation.ablation_caption(r)
    assert "3 seeds (4 for MLA)" in ablation.verdict_summary(r)
    fig = ablation.plot_ablation(r)
    assert "3 seeds (4 for MLA)" in fig.axes[0].get_title()
    plt.close(fig)
    text = job.statistics_markdown(3, preset="ci")
    assert "the gating ablation runs 4 for MLA (factor 3.18: 1.59 standard deviations)" in text
    assert "runs 4" not in job.statistics_markdown(3, preset="ci", max_steps=7)
    # a variant below the band's seed count is left unshaded while the others are shaded
    assert "shown from 3 seeds (a variant with fewer is not shaded)" in ablation.drawn_text(
        {"gqa": 2, "mla": 4}, 0.95)
