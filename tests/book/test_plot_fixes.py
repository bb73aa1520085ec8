"""Regression tests of the book-review fixes: paper panel limits, legends, pluralisation."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from gtalib.book import figures as F  # noqa: E402
from gtalib.book import plotting  # noqa: E402


@pytest.mark.parametrize("key", ["init", "gate", "latent_scale", "double_heads"])
def test_paper_panel_shows_every_paper_value(key):
    spec = F.ablation(key)
    fig, ax = plt.subplots()
    plotting.plot_paper_reference(spec, ax)
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
    plotting.plot_paper_reference(spec, ax)
    markers = [line.get_marker() for line in ax.get_lines()]
    assert len(set(markers)) == len(spec.variants)
    plt.close(fig)


def test_plural():
    assert plotting.plural(1, "thread") == "1 thread"
    assert plotting.plural(2, "thread") == "2 threads"
    assert plotting._hardware([{"device": "cpu", "threads": 1}]) == "cpu, 1 thread"


@pytest.mark.parametrize("key, asked", [("gate", ("mlra-4", "gqa")), ("init", ("tpa",)),
                                        ("latent_scale", ("mla", "gla-2"))])
def test_paper_panel_shows_only_the_variants_asked_for(key, asked):
    """A page run with ``variants=...`` draws those of the paper's curves/markers, no others."""
    spec = F.ablation(key)
    fig, ax = plt.subplots()
    plotting.plot_paper_reference(spec, ax, asked)
    labels = [t.get_text().split(" paper")[0] for t in ax.get_legend().get_texts()]
    assert labels == [F.display_name(v) for v in spec.variants if v in asked]
    assert len(ax.get_lines()) == len(asked)
    plt.close(fig)


def test_ablation_result_remembers_the_variants_asked_for(tmp_path, monkeypatch):
    import synthetic

    from gtalib.book import analysis

    monkeypatch.setattr(F, "data_spec", synthetic.synthetic_identity)
    synthetic.write_store(tmp_path, "ci", 1)  # GQA and MLA only: MLRA-4 stays missing
    r = analysis.ablation_result("gate", "ci", 1, tmp_path, variants="mlra-4,gqa")
    assert r.variants == ("mlra-4", "gqa")
    assert (r.complete, r.incomplete) == (["gqa"], ["mlra-4"])
    fig = plotting.plot_ablation(r)
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
    from gtalib.book import analysis

    monkeypatch.setattr(F, "data_spec", synthetic.synthetic_identity)
    synthetic.write_store(tmp_path, "ci", seeds)
    r = analysis.ablation_result("init", "ci", seeds, tmp_path)
    curves = r.curves.copy()
    curves["delta"] += curves["seed"].map({0: 0.0, 1: 0.03, 2: -0.02})  # a seed-to-seed spread
    r = replace(r, curves=curves, band=analysis.seed_band(curves))
    fig = plotting.plot_ablation(r)
    ax = fig.axes[0]
    fills = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(fills) == (len(r.complete) if seeds >= 3 else 0)
    assert ax.get_ylim() == pytest.approx(plotting.curve_limits([*curves["delta"],
                                                                 *r.band["mean"]]))
    if seeds >= 3:  # this band reaches beyond the curves: cut at the frame, not widening it
        assert r.band["hi"].max() > ax.get_ylim()[1]
    thin = [ln for ln in ax.get_lines() if ln.get_linewidth() < 1]
    assert len(thin) == seeds * len(r.complete) + 1  # + the legend's "each seed" entry
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[-3 if seeds >= 3 else -2:] == (
        ["each seed's ΔL", f"mean over {seeds} seeds"]
        + (["95% t-interval of the mean"] if seeds >= 3 else []))
    caption = plotting.ablation_caption(r)
    assert (f"thin lines: each seed's ΔL; bold: mean over {seeds} seeds; " + (
        "shaded: 95% t-interval of the mean, shown from 3 seeds; the y-range follows the curves, "
        "the shading is cut at the frame." if seeds >= 3 else
        "no shading: the 95% t-interval of the mean is shown from 3 seeds, this figure has 2; "
        "the y-range follows the curves.")) in caption
    plt.close(fig)


def test_curve_limits():
    assert plotting.curve_limits([0.1, 0.3]) == pytest.approx((-0.024, 0.324))  # 0 included
    assert plotting.curve_limits([-0.2, float("nan")]) == pytest.approx((-0.216, 0.016))
    assert plotting.curve_limits([]) == (-1.0, 1.0)
