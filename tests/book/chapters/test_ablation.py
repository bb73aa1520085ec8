"""The ablation chapters (gtalib.book.chapters.ablation): the final-ΔL table and the ablation result on
synthetic metrics whose ΔL, CI and verdicts are known in closed form, and the regression tests of
the book-review fixes to their figure and captions (paper panel limits, legends, band, seeds), and
the values the pages' Markdown states (page_facts)."""

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402
from notebook_cells import ablation_stems, figure_cell, notebook_figure  # noqa: E402
from synthetic import metrics, runs_frame  # noqa: E402

from gtalib.book.analysis import curves as C
from gtalib.book.analysis import final_table
from gtalib.book.analysis import style
from gtalib.book.chapters import ablation as A
from gtalib.book.chapters import figure_tests
from gtalib.book.chapters import shared
from gtalib.book.chapters import curve_features
from gtalib.book.chapters.verdict_parts import order_changes, summary_counts
from gtalib.book.design import run_specs as specs
from gtalib.book.design.figures import ablation
from gtalib.book.design.names import display_name
from gtalib.book.design.plan import make_plan

# --- ΔL ----------------------------------------------------------------------------------------


def _ablation_runs(deltas, rec_finals=(3.0, 3.0), steps=(0, 50, 100)):
    """Two seeds; alt = rec + delta_seed at every step; rec final loss per seed given."""
    spec = {}
    for seed, (dl, rf) in enumerate(zip(deltas, rec_finals)):
        rec = np.linspace(rf + 2, rf, len(steps))
        spec[("mla", "rec", seed)] = metrics(list(steps), rec)
        spec[("mla", "alt", seed)] = metrics(list(steps), rec + dl)
    return runs_frame(spec)


def test_band_and_final_table_closed_form():
    runs = _ablation_runs([0.10, 0.30])
    curves = C.delta_curves(runs)
    band = C.seed_band(curves)
    half = math.tan(0.475 * math.pi) * (0.2 / math.sqrt(2)) / math.sqrt(2)  # s = 0.1·√2
    last = band[band["step"] == 100].iloc[0]
    assert last["mean"] == pytest.approx(0.2)
    assert last["hi"] - last["mean"] == pytest.approx(half)
    table = A.final_delta_table(runs, {"mla": 0.02})
    row = table.loc["mla"]
    assert row["ΔL"] == pytest.approx(0.2) and row["seeds"] == 2 and row["step"] == 100
    # CI (0.2 ± 1.27) covers zero: within noise even though both seeds are positive; one
    # variant, so Holm's adjustment is the p-value itself: t = 0.2 / (0.1·√2/√2) = 2 on 1 dof
    assert row["verdict"] == "within noise"
    assert row["p"] == row["p (Holm)"] == pytest.approx(2 * stats.t.sf(2.0, 1))
    # alt finals 3.1 and 3.3 -> sd 0.1·√2 (the larger arm); rec sd 0; |ΔL| 0.2 is above it
    assert row["seed sd"] == pytest.approx(0.2 / math.sqrt(2))
    assert row["one run shows it?"] == "yes"
    # resolvable |ΔL| = the half-width; 0.2 needs the smallest n with t_{n-1}·0.1√2/√n < 0.2:
    # n = 4: 3.182·0.1414/2 = 0.225, n = 5: 2.776·0.1414/√5 = 0.176
    assert row["resolvable |ΔL|"] == pytest.approx(half)
    sd = 0.2 / math.sqrt(2)
    need = min(n for n in range(2, 21) if stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n) < 0.2)
    assert row["pairs to resolve"] == need == 5


def test_final_table_differs_when_seeds_agree_against_paper():
    # three seeds, ΔL = -0.20, -0.21, -0.19 (tight), rec finals equal -> seed sd 0.01 (alt arm)
    spec = {}
    for seed, dl in enumerate([-0.20, -0.21, -0.19]):
        rec = np.array([5.0, 4.0, 3.0])
        spec[("gqa", "rec", seed)] = metrics([0, 1, 2], rec)
        spec[("gqa", "alt", seed)] = metrics([0, 1, 2], rec + dl)
    t = A.final_delta_table(runs_frame(spec), {"gqa": 0.02})
    assert t.loc["gqa", "ΔL"] == pytest.approx(-0.20)
    assert t.loc["gqa", "seed sd"] == pytest.approx(0.01)
    assert t.loc["gqa", "verdict"] == "differs" and t.loc["gqa", "one run shows it?"] == "yes"


def _three_variant_runs(deltas_by_variant):
    """Seeds 0.. with the given paired ΔL per variant (every step; rec final 3.0)."""
    spec = {}
    for variant, deltas in deltas_by_variant.items():
        for seed, dl in enumerate(deltas):
            rec = np.array([5.0, 4.0, 3.0])
            spec[(variant, "rec", seed)] = metrics([0, 1, 2], rec)
            spec[(variant, "alt", seed)] = metrics([0, 1, 2], rec + dl)
    return runs_frame(spec)


@pytest.mark.parametrize("mlra2, verdict", [
    ((0.001, 0.002, 0.000, 0.001), "agrees"),        # ≈ 0 beside the others' ≈ 0.04
    ((-0.001, 0.000, -0.002, -0.001), "agrees"),     # ≈ 0 from below
    ((0.041, 0.039, 0.040, 0.044), "differs"),       # as large as the others': not ≈ 0
    ((-0.10, -0.11, -0.09, -0.10), "differs"),       # hurt by more than the margin: not ≈ 0
    ((0.05, -0.04, 0.06, -0.05), "within noise"),    # the pairs cannot tell
])
def test_a_near_zero_claim_is_an_equivalence_test_of_its_size(mlra2, verdict):
    """Latent scaling "barely" helps MLRA-2: the claim's size is tested against ± half the other
    variants' mean ΔL, per seed (closed form below); the row's own declared verdict stays the
    sign test, so a positive ΔL as large as the others' still *agrees* there."""
    others = {"mla": (0.040, 0.041, 0.039, 0.040), "gla-2": (0.042, 0.038, 0.041, 0.039)}
    runs = _three_variant_runs({**others, "mlra-2": mlra2})
    res = type("R", (), {"deltas": C.final_deltas(runs), "complete": ["mla", "gla-2", "mlra-2"],
                         "final_column": "val_loss", "confidence": 0.95})()
    ours, v = A.near_zero_claim(res, "mlra-2")
    assert v == verdict
    margin = (np.array(others["mla"]) + np.array(others["gla-2"])) / 4  # half their mean
    below, above = margin - np.array(mlra2), margin + np.array(mlra2)
    half = stats.t.ppf(0.975, 3) / 2  # t_{0.975, 3} · s / √4
    lo_b, lo_a = below.mean() - half * below.std(ddof=1), above.mean() - half * above.std(ddof=1)
    hi_b, hi_a = below.mean() + half * below.std(ddof=1), above.mean() + half * above.std(ddof=1)
    assert v == ("agrees" if lo_b > 0 and lo_a > 0 else
                 "differs" if min(hi_b, hi_a) < 0 else "within noise")
    assert f"margin − ΔL [{lo_b:+.3f}, {hi_b:+.3f}]" in ours and "over 4 pairs" in ours
    assert ours.startswith(f"MLRA-2 ΔL {np.mean(mlra2):+.3f} against ±{margin.mean():.3f}")
    # the declared row verdict is untouched: by sign
    row = A.final_delta_table(runs, {"mla": 0.0038, "gla-2": 0.0035, "mlra-2": 0.0003})
    if verdict == "differs" and np.mean(mlra2) > 0:
        assert row.loc["mlra-2", "verdict"] == "agrees"


def test_ablation_result_on_a_synthetic_store(tmp_path, monkeypatch):
    import shutil

    import synthetic

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    synthetic.write_store(tmp_path, "ci", seeds=2, max_steps=20)
    r = A.ablation_result("init", make_plan("ci", 2), tmp_path)
    # 20 logged steps -> no smoothing; curves from the training loss at every step
    assert r.smoothing == 1 and r.curves["step"].nunique() == 20
    # synthetic alternative arm = recommended + EFFECT["init"] at every step and seed
    assert r.curves["delta"].to_numpy() == pytest.approx(synthetic.EFFECT["init"])
    assert r.final.loc["gqa", "ΔL"] == pytest.approx(synthetic.EFFECT["init"])
    assert r.incomplete == []
    # delete one run: its variant leaves the figure entirely and is named as incomplete
    missing = r.collected.status.query("variant == 'mla' and arm == 'alt' and seed == 1")
    shutil.rmtree(tmp_path / missing["run_id"].iloc[0])
    r2 = A.ablation_result("init", make_plan("ci", 2), tmp_path)
    assert r2.complete == ["gqa"] and r2.incomplete == ["mla"]
    assert set(r2.curves["variant"]) == {"gqa"} and list(r2.final.index) == ["gqa"]
    assert r2.collected.incomplete["state"].tolist() == ["missing"]
    # a finished run whose metrics were truncated is reported corrupt, never plotted
    cut = r.collected.status.query("variant == 'gqa' and arm == 'rec' and seed == 0")
    metrics = tmp_path / cut["run_id"].iloc[0] / "metrics.csv"
    metrics.write_text("".join(metrics.read_text().splitlines(keepends=True)[:11]))  # steps 1-10
    r3 = A.ablation_result("init", make_plan("ci", 2), tmp_path)
    assert r3.complete == [] and sorted(r3.incomplete) == ["gqa", "mla"]
    failed = r3.collected.incomplete.query("state == 'corrupt'")
    assert len(failed) == 1 and "truncated" in failed["detail"].iloc[0]


def test_within_a_build_each_figure_result_is_computed_once(tmp_path, monkeypatch):
    """With the build's folder set (ENV_SHARED_RESULTS), the first call at the page defaults
    collects the runs and keeps the result; the next (the claims page's, the snippets') loads
    it without collecting; a call with other options, or with another plan, computes its own;
    outside a build nothing is kept."""
    import synthetic

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    synthetic.write_store(tmp_path / "store", "ci", seeds=2, max_steps=20)
    collected = []
    real = A.collect_runs
    monkeypatch.setattr(A, "collect_runs", lambda refs, *a, **k: collected.append(len(refs))
                        or real(refs, *a, **k))
    plan, store = make_plan("ci", 2), tmp_path / "store"
    assert A.ablation_result("init", plan, store).shared is None  # outside a build: kept nowhere
    monkeypatch.setenv(shared.ENV_SHARED_RESULTS, str(tmp_path / "shared"))
    (tmp_path / "shared").mkdir()
    first = A.ablation_result("init", plan, store)
    again = A.ablation_result("init", make_plan("ci", 2), store)  # a page's own plan, same
    assert collected == [8, 8]  # the second call of the build collected nothing
    assert again.final.equals(first.final) and again.curves.equals(first.curves)
    assert list((tmp_path / "shared").glob("init-*.pkl")) == [first.shared] == [again.shared]
    # other options: computed, not kept, and nothing computed from it is kept either
    assert A.ablation_result("init", plan, store, smoothing=3).shared is None
    A.ablation_result("init", make_plan("ci", 1), store)  # another seed count: its own
    assert collected == [8, 8, 8, 4]
    assert len(list((tmp_path / "shared").glob("init-*.pkl"))) == 2


def test_a_page_finds_the_result_its_build_kept(tmp_path, monkeypatch):
    """The job keeps a result under its own plan (maybe of a few chapters, ``--only``) and the
    resolved store; a page asks with its own full plan and ``run_dir=None`` (the store from
    $GTALIB_RUN_DIR, which the job sets): the same file. Another store, confidence or seed
    count, or the records read in place of the store's runs, is another file; a folder that is
    gone means no build."""
    from gtalib.book.pipeline.parameters import notebook_params

    store = tmp_path / "store"
    monkeypatch.setenv("GTALIB_RUN_DIR", str(store))
    monkeypatch.setenv(shared.ENV_SHARED_RESULTS, str(tmp_path / "shared"))
    (tmp_path / "shared").mkdir()
    job = shared.shared_file("gate", make_plan("ci", 2, None, ("init_ablation",)), store, 0.95)
    page = shared.shared_file("gate", notebook_params("gate", preset="ci", seeds=2).plan, None,
                              0.95)
    assert job == page and job.parent == tmp_path / "shared"
    others = {shared.shared_file("gate", make_plan("ci", 2), tmp_path / "other", 0.95),
              shared.shared_file("gate", make_plan("ci", 2), store, 0.9),
              shared.shared_file("gate", make_plan("ci", 3), store, 0.95),
              shared.shared_file("init", make_plan("ci", 2), store, 0.95),
              shared.shared_file("gate", make_plan("ci", 2), store, 0.95, "records")}
    assert job not in others and len(others) == 5
    (tmp_path / "shared").rmdir()
    assert shared.shared_file("gate", make_plan("ci", 2), store, 0.95) is None


@pytest.mark.parametrize("row, text, needle", [
    (7, "5.6x", "'5.6x' is not a number"), (3, "", "empty cell"), (20, "inf", "not a finite number")])
def test_corrupt_cell_is_named_on_the_page_and_other_runs_still_plot(tmp_path, monkeypatch, row,
                                                                     text, needle):

    import pandas as pd
    import synthetic

    from gtalib.book.analysis import collect

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    synthetic.write_store(tmp_path, "ci", seeds=2, max_steps=20)
    status = A.ablation_result("init", make_plan("ci", 2), tmp_path).collected.status
    rid = status.query("variant == 'mla' and arm == 'alt' and seed == 1")["run_id"].iloc[0]
    cells = pd.read_csv(tmp_path / rid / "metrics.csv", dtype=str, keep_default_na=False)
    cells.loc[row - 1, "train_loss"] = text
    cells.to_csv(tmp_path / rid / "metrics.csv", index=False)
    r = A.ablation_result("init", make_plan("ci", 2), tmp_path)
    assert r.complete == ["gqa"] and r.incomplete == ["mla"]  # gqa still plots
    assert set(r.curves["variant"]) == {"gqa"}
    bad = r.collected.incomplete
    assert bad["state"].tolist() == ["corrupt"] and bad["run_id"].tolist() == [rid]
    want = f"run {rid}: {rid}/metrics.csv, column 'train_loss', row {row} (step {row}): "
    assert bad["detail"].iloc[0].startswith(want) and needle in bad["detail"].iloc[0]
    assert str(tmp_path) not in bad["detail"].iloc[0]  # no machine path on the page
    notice = collect.missing_notice(r.collected)
    assert f"`{rid}`): corrupt — {want}" in notice


# --- the figure, its captions and the verdict line ----------------------------------------------

@pytest.mark.parametrize("key", ["init", "gate", "latent_scale", "double_heads"])
def test_paper_panel_shows_every_paper_value(key):
    spec = ablation(key)
    fig, ax = plt.subplots()
    A.plot_paper_reference(spec, ax)
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
    spec = ablation("gate")
    fig, ax = plt.subplots()
    A.plot_paper_reference(spec, ax)
    markers = [line.get_marker() for line in ax.get_lines()]
    assert len(set(markers)) == len(spec.variants)
    plt.close(fig)


@pytest.mark.parametrize("key, asked", [("gate", ("mlra-4", "gqa")), ("init", ("tpa",)),
                                        ("latent_scale", ("mla", "gla-2"))])
def test_paper_panel_shows_only_the_variants_asked_for(key, asked):
    """A page run with ``variants=...`` draws those of the paper's curves/markers, no others."""
    spec = ablation(key)
    fig, ax = plt.subplots()
    A.plot_paper_reference(spec, ax, asked)
    labels = [t.get_text().split(" paper")[0] for t in ax.get_legend().get_texts()]
    assert labels == [display_name(v) for v in spec.variants if v in asked]
    assert len(ax.get_lines()) == len(asked)
    plt.close(fig)


def test_ablation_result_remembers_the_variants_asked_for(tmp_path, monkeypatch):
    import synthetic

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    synthetic.write_store(tmp_path, "ci", 1)  # GQA and MLA only: MLRA-4 stays missing
    r = A.ablation_result("gate", make_plan("ci", 1), tmp_path, variants="mlra-4,gqa")
    assert r.variants == ("mlra-4", "gqa")
    assert (r.complete, r.incomplete) == (["gqa"], ["mlra-4"])
    fig = notebook_figure(r, monkeypatch)
    paper_ax = fig.axes[1]
    assert [t.get_text().split(" paper")[0] for t in paper_ax.get_legend().get_texts()] == [
        "GQA", "MLRA-4"]
    plt.close(fig)


@pytest.mark.parametrize("seeds", [2, 3])
def test_band_is_drawn_from_three_seeds_and_the_curves_set_the_y_range(tmp_path, monkeypatch,
                                                                       seeds):
    """Every seed thin, the mean bold; the t-interval shaded only from 3 seeds (with 2,
    t = 12.7 makes it cover the plot); the y-range is the curves' (seeds and means, 8 %
    margin, and 0), so a wider band is clipped; the legend and the caption's values say what is
    drawn."""
    from dataclasses import replace

    import synthetic
    from matplotlib.collections import PolyCollection

    from gtalib.book.analysis.curves import seed_band

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    synthetic.write_store(tmp_path, "ci", seeds)
    r = A.ablation_result("init", make_plan("ci", seeds), tmp_path)
    curves = r.curves.copy()
    curves["delta"] += curves["seed"].map({0: 0.0, 1: 0.03, 2: -0.02})  # a seed-to-seed spread
    r = replace(r, curves=curves, band=seed_band(curves))
    fig = notebook_figure(r, monkeypatch)
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
    facts = A.page_facts(r)
    assert (facts["seeds"], facts["band_from"], facts["confidence"]) == (
        f"{seeds} seeds", f"{style.MIN_BAND_SEEDS}", "95%")
    plt.close(fig)


def test_a_figures_own_seed_count_reaches_its_table_and_every_caption(tmp_path, monkeypatch):
    """A figure that runs more seeds than the book (the seed table) draws and tables every
    variant with all of them, and the title, caption, verdict line and methods text name the
    count."""
    from dataclasses import replace

    import synthetic

    from gtalib.book.design import figures
    from gtalib.book.pipeline import snippets

    monkeypatch.setitem(figures.ABLATIONS, "gate", replace(figures.ABLATIONS["gate"],
                        seeds={"cpu": 10, "ci": 4}))
    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    synthetic.write_store(tmp_path, "ci", 3)  # the plan at 3 seeds already asks for the gate's 4
    r = A.ablation_result("gate", make_plan("ci", 3), tmp_path)
    assert r.seed_counts == {"gqa": 4, "mla": 4}
    assert r.final.loc["gqa", "seeds"] == r.final.loc["mla", "seeds"] == 4
    assert r.curves.groupby("variant")["seed"].nunique().to_dict() == {"gqa": 4, "mla": 4}
    assert A.seeds_text(r.seed_counts) == "4 seeds" and A.seeds_text({}) == "no seeds"
    facts = A.page_facts(r)
    assert (facts["seeds"], facts["pairs"], facts["preset"]) == ("4 seeds", "4 seed pairs", "`ci`")
    assert (facts["looks"], facts["variants_tested"]) == ("4", "2")  # one look, two variants
    fig = notebook_figure(r, monkeypatch)
    assert "4 seeds" in fig.axes[0].get_title()
    plt.close(fig)
    text = snippets.statistics_markdown(3, preset="ci")
    assert "the gating figure runs 4 (factor 3.18: 1.59 standard deviations)" in text
    assert "runs 4" not in snippets.statistics_markdown(3, preset="ci", max_steps=7)


def test_rule_comparison_names_a_verdict_the_spread_rule_would_hold_back():
    """Paired ΔL of 0.10, 0.12, 0.14 (tight) on seeds whose own losses differ by 0.6: the paired
    test resolves it (agrees), the spread rule would not (|ΔL| ≤ max − min of one arm)."""
    from types import SimpleNamespace

    spec = {}
    for seed, (rf, dl) in enumerate([(3.0, 0.10), (3.3, 0.12), (3.6, 0.14)]):
        rec = np.array([5.0, 4.0, rf])
        spec[("mla", "rec", seed)] = metrics([0, 1, 2], rec)
        spec[("mla", "alt", seed)] = metrics([0, 1, 2], rec + dl)
    runs = runs_frame(spec)
    final = A.final_delta_table(runs, {"mla": 0.02})
    assert final.loc["mla", "verdict"] == "agrees"
    assert final.loc["mla", "one run shows it?"] == "no"  # seed sd 0.3 > 0.12
    result = SimpleNamespace(final=final, collected=SimpleNamespace(runs=runs), runs=runs,
                             final_column="val_loss", key="init")
    moved = figure_tests.rule_comparison(result)
    assert list(moved["variant"]) == ["MLA"] and moved.iloc[0]["spread rule"] == "within noise"
    assert moved.iloc[0]["seed spread"] == "0.640"
    assert moved.iloc[0]["why"] == "|ΔL| 0.120 ≤ spread 0.640"  # the spread test held it back


def test_the_verdict_names_the_variants_whose_verdict_the_data_order_changes():
    """From a data-order table (curve_features.data_order_table's columns): the variants whose
    verdict the data order's variance turns, "none" where none turns, "not measured" without
    data-order runs; in a joint-design table, those whose verdict at data order 0 differs."""
    orders = pd.DataFrame({"verdict": ["agrees", "within noise", "within noise", "within noise"],
                           "final verdict": ["agrees", "agrees", "agrees", "within noise"]},
                          index=["mha", "gqa", "mla", "gta"])
    orders["flipped"] = orders["verdict"] != orders["final verdict"]
    assert order_changes(orders) == "GQA and MLA"
    same = orders.assign(verdict=orders["final verdict"], flipped=False)
    assert order_changes(same) == "none"
    assert order_changes(None) == order_changes(pd.DataFrame()) == "not measured"
    joint = pd.DataFrame({"joint verdict": ["agrees", "agrees"], "changed": [False, True]},
                         index=["gqa", "mla"])
    assert order_changes(joint) == "MLA"


def test_the_features_counts_as_the_verdict_states_them():
    """A curve figure's lead counts its features' verdicts (so that curves which do not agree
    are said beside a final ΔL that does), undetermined ones apart; without features, "not
    measured"."""
    from types import SimpleNamespace

    features = SimpleNamespace(verdicts=["agrees", "differs", "differs", "within noise"],
                               counts=lambda: {"agrees": 1, "differs": 2, "within noise": 1})
    assert summary_counts(features) == "1 of 4 agree, 2 differ, 1 within noise"
    few = SimpleNamespace(verdicts=["agrees", "undetermined (3 pairs)"],
                          counts=lambda: {"agrees": 1, "undetermined (3 pairs)": 1})
    assert summary_counts(few) == "1 of 2 agree, 0 differ, 0 within noise, 1 undetermined"
    assert summary_counts(None) == "not measured"


def test_the_page_states_its_verdict_and_caption_from_the_result(tmp_path, monkeypatch):
    """page_facts on a synthetic store (every pair ΔL = EFFECT["init"] > 0, the paper's sign):
    the verdict, its variants, the pairs, the sizes of the preset, the tokens per run and the
    seeds, each as the result holds them."""
    import synthetic

    from gtalib.model.presets import PRESETS

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    synthetic.write_store(tmp_path, "ci", seeds=3, max_steps=20)
    r = A.ablation_result("init", make_plan("ci", 3), tmp_path)
    facts = A.page_facts(r, entropy=3.25)
    final = r.final
    assert list(final["verdict"]) == ["agrees", "agrees"]
    assert facts["verdict"] == "agrees" and facts["verdicts"] == "*agrees* for GQA and MLA"
    assert facts["pairs"] == "3 seed pairs" and facts["seeds"] == "3 seeds"
    shows = [display_name(v) for v in final.index if final.loc[v, "one run shows it?"] == "yes"]
    assert facts["single_run"] == (" and ".join(shows) if shows else "none")
    spec = ablation("init")
    assert (facts["title"], facts["convention"], facts["claim"]) == (
        spec.title, spec.convention, spec.claim_value)
    assert (facts["near_zero_variant"], facts["near_zero"]) == ("none", "none")
    # latent scaling's "barely MLRA-2": named whether or not this build has its runs
    from dataclasses import replace

    latent = A.page_facts(replace(r, key="latent_scale"))
    assert (latent["near_zero_variant"], latent["near_zero"]) == ("MLRA-2", "not measured")
    size = PRESETS["ci"]
    assert [facts[k] for k in ("n_layer", "d_model", "n_head", "head_dim")] == [
        str(size[k]) for k in ("n_layer", "d_model", "n_head", "head_dim")]
    tokens = int(r.curves["tokens"].max())
    div, unit = A.token_unit(tokens)
    assert facts["tokens"] == f"{tokens / div:.3g}{unit}"
    assert facts["pair_order"] == ("*k*" if r.joint else "0")
    assert facts["smoothing"] == f"{r.smoothing} logged step" + ("s" if r.smoothing != 1 else "")
    assert facts["entropy"] == "3.250"
    # the plateau rule the page links to states the table's window and margin
    from notebook_cells import NOTEBOOKS

    methods = (NOTEBOOKS.parent / "book" / "methods.md").read_text()
    assert (f"a trailing mean over {A.PLATEAU_WINDOW} steps" in methods
            and f"minus {A.PLATEAU_MARGIN:g} nats" in methods)
    # no complete variant: nothing measured, and the page says so
    empty = A.page_facts(A.ablation_result("init", make_plan("ci", 3), tmp_path / "none"))
    assert (empty["verdict"], empty["verdicts"], empty["pairs"], empty["single_run"]) == (
        "not measured", "none", "0 seed pairs", "none")
    # the pages paste these values, and every one of them somewhere
    curve_facts = curve_features.page_facts(r, None, pd.DataFrame(), make_plan("ci", 3))
    assert curve_facts["features"] == curve_facts["order_changes"] == "not measured"
    assert _pasted(set(facts), set(curve_facts)) == set(facts) | set(curve_facts)


def _pasted(facts: set, curve_facts: set) -> set:
    """The ``fig_<name>`` values the ablation pages' sentences state (names without the prefix),
    each page's a subset of ``facts`` (ablation.page_facts) and, on a page whose code also reads
    curve_features.page_facts, of ``curve_facts`` (or, reading curve_features.data_order_facts,
    of its data-order names); every page states some."""
    import nbformat

    from notebook_cells import NOTEBOOKS, stated_names

    pasted = set()
    for stem in (*ablation_stems(), "own_attention"):
        nb = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        names = {n.removeprefix("fig_") for n in stated_names(stem) if n.startswith("fig_")}
        assert 'f"fig_{name}"' in code and "ablation.page_facts(result" in code, stem
        # curve_features.page_facts states the data order's facts too; a page without curves
        # reads those alone (curve_features.data_order_facts)
        order_facts = {"design", "orders", "order_read", "order_changes"}
        allowed = facts | (curve_facts if "curve_features.page_facts(" in code else
                           order_facts if "curve_features.data_order_facts(" in code else set())
        assert names and names <= allowed, (stem, sorted(names - allowed))
        pasted |= names
    return pasted


def test_the_plateau_table_gives_each_runs_escape_step_or_never():
    """Loss at H + 0.5 until step 30 (seed 0) or 50 (seed 1), then at H − 1; the recommended arm
    of seed 1 never leaves: the trailing mean over 10 steps falls below H − 0.1 once 5 of its
    steps are low, at 30 + 4 and 50 + 4; "never" for the run that stays."""
    from types import SimpleNamespace

    H, grid = 3.0, np.arange(1, 81)
    spec = {("mla", arm, seed): metrics(grid, np.where(grid < e, H + 0.5, H - 1.0))
            for (arm, seed), e in {("alt", 0): 30, ("rec", 0): 30, ("alt", 1): 50,
                                   ("rec", 1): 1000}.items()}
    table = A.plateau_table(SimpleNamespace(runs=runs_frame(spec)), H)
    assert list(table.columns) == ["seed 0", "seed 1"]
    assert sorted(table.to_numpy().ravel().tolist()) == ["34", "34", "54", "never"]
    assert A.plateau_table(SimpleNamespace(runs=pd.DataFrame()), H).empty


def test_every_ablation_notebook_shows_the_same_plotting_code_of_at_most_40_lines():
    """One plotting cell, the same in the four ablation notebooks and the bring-your-own-attention
    page (so that the tests of the figure test each page's), folded on the page (hide-input) and
    short enough to read."""
    sources = {figure_cell(n) for n in (*ablation_stems(), "own_attention")}
    assert len(sources) == 1
    assert len(sources.pop().splitlines()) <= 40


def test_pair_verdicts_are_paired_t_tests_holm_adjusted_across_the_figure():
    """Against scipy's one-sample t-test and Holm's step-down by hand: three variants, one
    look."""
    from scipy import stats as sp

    deltas = {"mla": [0.10, 0.12, 0.14, 0.09], "gqa": [0.02, -0.03, 0.01, 0.00],
              "gla-2": [-0.05, -0.06, -0.04, -0.07]}
    pairs = pd.DataFrame([(v, s, 0, d) for v, ds in deltas.items() for s, d in enumerate(ds)],
                         columns=["variant", "seed", "data order", "ΔL"])
    paper = {"mla": 0.02, "gqa": 0.01, "gla-2": 0.03}
    out = final_table.pair_verdicts(pairs, paper, looks=(4,), confidence=0.95)
    p = [sp.ttest_1samp(deltas[v], 0.0).pvalue for v in deltas]
    order = np.argsort(p)
    holm = np.empty(3)
    holm[order] = np.maximum.accumulate([min(1.0, (3 - k) * p[i]) for k, i in enumerate(order)])
    assert list(out.index) == list(deltas)
    assert out["p"].to_numpy() == pytest.approx(p)
    assert out["p (Holm)"].to_numpy() == pytest.approx(holm)
    assert list(out["verdict"]) == ["agrees", "within noise", "differs"]
    assert list(out["pairs"]) == [4, 4, 4]
    assert out["ΔL"].to_numpy() == pytest.approx([np.mean(d) for d in deltas.values()])
