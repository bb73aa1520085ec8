"""The scale ladder: its runs, parameter matching per rung, and the analysis on a synthetic store
whose ΔL per depth is known in closed form."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pandas as pd
import pytest
import synthetic  # noqa: E402
from scipy import stats

from gtalib.book.chapters import scale_ladder as L
from gtalib.book.design import ladder as ladders
from gtalib.book.design import run_specs as specs
from gtalib.book.design.figures import GATE_CPU_STEPS, figure_spec
from gtalib.book.design.ladder import ladder, ladder_runs
from gtalib.book.design.plan import make_plan
from gtalib.book.design.run_specs import RunRef


def test_ladder_runs_cover_every_rung_arm_and_length():
    refs = L.depth_runs("cpu", 3)
    # init: 3 variants x 3 depths x 2 arms + MHA scaled x 3 depths; gate: 3 depths x 2 arms x 2
    # lengths; token axis at 8 layers: MLRA-4 x 2 arms x 3 lengths, GQA x 2 arms at 2000 steps
    # (its 250 and 1000 are the depth axis' runs); all x 3 seeds
    assert len(refs) == len(set(refs)) == (3 * 3 * 2 + 3 + 3 * 2 * 2 + 2 * 3 + 2) * 3
    # every part together: the depth and token axes, then the width axis (5 variants x 2 widths)
    assert ladder_runs("cpu", 3) == refs + ladder_runs("cpu", 3, "width")
    assert len(ladder_runs("cpu", 3, "width")) == 5 * 2 * 3
    assert {dict(r.options)["n_layer"] for r in refs} == {2, 4, 8}
    gate_steps = {dict(r.train)["max_steps"] for r in refs if r.variant == "gqa"}
    assert gate_steps == {250, 1000, 2000}
    assert {dict(r.options)["n_layer"] for r in refs
            if r.variant == "gqa" and dict(r.train)["max_steps"] == 2000} == {8}
    mlra4 = {(dict(r.options)["n_layer"], dict(r.train)["max_steps"], r.arm)
             for r in refs if r.variant == "mlra-4"}
    assert mlra4 == {(8, n, arm) for n in (250, 1000, 2000) for arm in ("alt", "rec")}
    assert {dict(r.train)["max_steps"] for r in refs
            if r.variant not in ("gqa", "mlra-4")} == {250}
    assert {ladder("cpu").part(v) for v in ("gqa", "mlra-4")} == {"gate"}
    assert ladder("cpu").part("tpa") == "init"
    with pytest.raises(ValueError, match="token_variants"):
        ladders.Ladder(depths=(2,), base_steps=10, token_variants=("mha",))
    long = RunRef("gqa", "alt", (("n_layer", 8),), 0, train=(("max_steps", 1000),))
    from gtalib.training.config import train_config

    t = train_config("cpu", **dict(long.train))
    assert (t.max_steps, t.warmup_steps) == (1000, 100)  # the preset's 10 % warmup kept
    with pytest.raises(KeyError, match="no scale ladder"):
        ladder_runs("paper", 1)
    with pytest.raises(ValueError, match="part"):
        ladder_runs("cpu", 1, part="heads")


def test_every_rung_is_parameter_matched_within_a_tenth_of_a_percent():
    p = ladders.ladder_params("cpu")
    assert set(p["n_layer"]) == {2, 4, 8}
    assert p["vs_mha_pct"].abs().max() < 0.1
    # the FFN width is solved per depth: the gated GQA gives up width for its gate
    g = p[(p["config"] == "GQA + gate") & (p["n_layer"] == 8)]["intermediate_size"].iloc[0]
    u = p[(p["config"] == "GQA") & (p["n_layer"] == 8)]["intermediate_size"].iloc[0]
    assert g < u


def test_the_cpu_books_depth_is_the_ladder_rung_where_init_has_the_papers_sign():
    """The default book trains at the ladder's deepest rung, and there the ablation pages' runs
    *are* the ladder's runs (same spec, same run id), so both pages show one set of numbers: the
    init rung at the preset's length, the gate rung at the gating page's 1000 steps."""
    from gtalib.model.presets import PRESETS
    from gtalib.training.config import train_config

    lad = ladder("cpu")
    depth = PRESETS["cpu"]["n_layer"]
    assert depth == max(lad.depths) and lad.base_steps == train_config("cpu").max_steps
    data = synthetic.synthetic_identity("cpu")
    plan = make_plan("cpu", 2)
    book_ids = {specs.run_spec(r, "cpu", None, data).run_id: r.label for r in plan.runs}
    def labels(steps, part):
        rung = [r for r in L.depth_runs("cpu") if dict(r.options)["n_layer"] == depth
                and dict(r.train)["max_steps"] == steps and r.seed < 2
                and r.arm != "scaled" and lad.part(r.variant) == part]
        return {book_ids.get(specs.run_spec(r, "cpu", None, data).run_id) for r in rung}

    assert labels(lad.base_steps, "init") == {"MHA normal init", "MHA zero init",
                                              "MLA normal init", "MLA zero init",
                                              "TPA normal init", "TPA zero init"}
    assert GATE_CPU_STEPS == 4 * lad.base_steps
    assert labels(GATE_CPU_STEPS, "gate") == {"GQA no gate", "GQA + gate", "MLRA-4 no gate",
                                                "MLRA-4 + gate"}
    # at 250 steps the ladder's gate pairs are main-table runs (MLRA-4) or the init page's (GQA)
    assert labels(lad.base_steps, "gate") == {"GQA zero init", None, "MLRA-4", "MLRA-4 + gate"}
    # the ladder shows its own seeds (3 recorded; 5 on the width axis), not the book's
    assert {r.seed for r in L.depth_runs("cpu")} == set(range(figure_spec("ladder").seeds_at("cpu"))) == {0, 1, 2}
    assert set(plan.ladder_refs) == set(ladder_runs("cpu"))
    assert {r.seed for r in ladder_runs("cpu", part="width")} == set(range(5))


def _write_ladder_store(run_dir, preset, seeds, offset):
    """Finished synthetic runs for the ladder: val loss = 2 + offset(ref) + 0.002·seed on the
    alternative arms only (constant over steps), so ΔL per seed is offset + 0.002·seed exactly."""
    data = synthetic.synthetic_identity(preset)
    for ref in L.depth_runs(preset, seeds):
        spec = specs.run_spec(ref, preset, None, data)
        n = spec.train.max_steps
        off = 0.0 if ref.arm == "rec" else offset(ref) + 0.002 * ref.seed
        steps = np.arange(1, n + 1)
        df = pd.DataFrame({"step": steps, "tokens": steps * 10, "train_loss": 2.0 + off})
        on_eval = (steps % spec.train.eval_every == 0) | (steps == n)
        df["val_loss"] = np.where(on_eval, 2.0 + off, np.nan)
        df["lr"] = 1e-3
        synthetic.write_finished_run(run_dir, spec, df)


def test_ladder_result_and_series_on_a_synthetic_store(tmp_path, monkeypatch):
    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)

    def offset(ref):
        depth = dict(ref.options)["n_layer"]
        if ref.variant == "gqa":
            return 0.02  # the gate always helps
        if ref.variant == "mla":  # the token axis: the gate helps only in the longer runs
            return -0.01 if dict(ref.train)["max_steps"] == 10 else 0.01
        return 0.01 * (depth - 1.5)  # normal vs zero: < 0 at 1 layer, > 0 at 2 layers

    _write_ladder_store(tmp_path, "ci", 2, offset)
    r = L.ladder_result(make_plan("ci", 1), 2, tmp_path, record_dir=tmp_path / "no-records")
    assert r.collected.incomplete.empty
    assert set(r.collected.status["source"]) == {"local"}
    pts = r.points.set_index(["part", "variant", "arm", "n_layer", "max_steps"])
    # mean over seeds 0, 1 of offset + 0.002·seed; interval t_{0.975, 1} · s / √2
    half = stats.t.ppf(0.975, 1) * np.std([0, 0.002], ddof=1) / math.sqrt(2)
    p = pts.loc[("init", "mha", "alt", 1, 10)]
    assert p["mean"] == pytest.approx(-0.005 + 0.001)
    assert p["high"] - p["mean"] == pytest.approx(half)
    assert p["resolvable"] == pytest.approx(half) and p["n"] == 2
    # the synthetic cards name no machine: every pair is local, its machine unknown
    assert set(r.points["pair_source"]) == {"both local, machine unknown"}
    assert pts.loc[("init", "mha", "alt", 2, 10), "mean"] == pytest.approx(0.005 + 0.001)
    assert pts.loc[("gate", "gqa", "alt", 2, 30), "mean"] == pytest.approx(0.021)
    # the paper's ΔL is ln PPL(alt) − ln PPL(rec) from figures
    assert p["paper"] == pytest.approx(math.log(14.094 / 13.86))
    assert math.isnan(pts.loc[("init", "mha", "scaled", 1, 10), "paper"])
    # every interval is mean ± half: MHA's -0.004 and +0.006 cover zero, GQA's +0.021 does not
    series = L.series_table(r).set_index(["ΔL of", "at"])
    assert series.loc[("MHA: normal − zero", "10 steps")].tolist() == [
        "layers", "1, 2", "2", "2", "none"]
    assert series.loc[("GQA: no gate − gate", "30 steps")].tolist() == [
        "layers", "1, 2", "1, 2", "1", "1, 2"]
    # the token axis: MLA only at 2 layers, both lengths, in the gate part
    assert pts.loc[("gate", "mla", "alt", 2, 10), "mean"] == pytest.approx(-0.009)
    assert pts.loc[("gate", "mla", "alt", 2, 30), "mean"] == pytest.approx(0.011)
    assert not any(k[1] == "mla" and k[3] == 1 for k in pts.index)
    # the token axis: MLA turns to ΔL > 0 between 10 and 30 steps (-0.009 → +0.011)
    assert series.loc[("MLA: no gate − gate", "2 layers")].tolist() == [
        "steps", "10, 30", "30", "30", "none"]
    assert series.loc[("GQA: no gate − gate", "2 layers")].tolist() == [
        "steps", "10, 30", "10, 30", "10", "10, 30"]
    never = r.points.assign(mean=-r.points["mean"], low=-r.points["high"],
                            high=-r.points["low"])
    mla = never[(never["variant"] == "mla") & (never["n_layer"] == 2)]
    assert L.sign_row(mla, "max_steps") == {"points": [10, 30], "positive": [10],
                                            "excludes_zero": [], "from_": None}
    # MHA's scaled arm has MHA's offsets: at 2 layers it removes none of the +0.006 gap
    iv = f"{0.006:+.3f} [{0.006 - half:+.3f}, {0.006 + half:+.3f}]"
    assert L.scaled_table(r).values.tolist() == [["MHA", "10", "2", iv, iv, "0%"]]
    # the ci ladder's 10 points (MHA normal and scaled at 1 and 2 layers; GQA at 1 and 2 layers,
    # 10 and 30 steps; MLA's token axis at 2 layers, 10 and 30 steps) are one Holm family
    assert len(r.points) == 10 and r.width_seeds == 2
    assert L.ladder_facts(r) == {"ladder_seeds": "2", "ladder_seed_last": "1",
                                 "ladder_width_seeds": "2", "ladder_family": "10"}
    assert tuple(L.ladder_facts(r)) == L.FACT_NAMES
    # one run shows a point when |ΔL| exceeds the larger arm's seed sd: here the alt arm's,
    # std(offset, offset + 0.002) = 0.002/√2 (the rec arm is constant)
    assert pts["seed_sd"].tolist() == pytest.approx([0.002 / math.sqrt(2)] * 10)
    assert L.format_ladder_table(r.points)["one run shows it?"].tolist() == [
        "yes" if abs(m) > 0.002 / math.sqrt(2) else "no" for m in r.points["mean"]]
    import matplotlib
    matplotlib.use("Agg")
    fig = L.plot_ladder(r)
    for show in (L.show_ladder, L.show_series, L.show_points):
        show(r)  # displays without error outside a notebook too
    # the depth panels hold the depth axis only; the token panel holds MLA and GQA at 2 layers
    assert not any("MLA" in t.get_text() for t in fig.axes[1].get_legend().get_texts())
    assert {t.get_text() for t in fig.axes[2].get_legend().get_texts()} == {
        "GQA: no gate − gate", "MLA: no gate − gate"}
    # one run missing: listed, and its point computed from the remaining seed only
    gone = r.collected.status.query("variant == 'mha' and arm == 'alt' and seed == 1")
    for rid in gone["run_id"]:
        shutil.rmtree(tmp_path / rid)
    r2 = L.ladder_result(make_plan("ci", 1), 2, tmp_path, record_dir=tmp_path / "no-records")
    assert len(r2.collected.incomplete) == len(gone)
    assert r2.points.set_index(["part", "variant", "arm", "n_layer", "max_steps"]).loc[
        ("init", "mha", "alt", 1, 10), "n"] == 1


def test_the_depth_test_says_how_much_of_zero_inits_lead_the_scaling_removes():
    def pts(normal, scaled, steps=250):  # (mean, low, high) at 2 and 8 layers
        rows = [("init", "mha", arm, d, steps, m, lo, hi)
                for arm, vals in (("alt", normal), ("scaled", scaled))
                for d, (m, lo, hi) in zip((2, 8), vals)]
        return pd.DataFrame(rows, columns=["part", "variant", "arm", "n_layer", "max_steps",
                                           "mean", "low", "high"])

    def table(points):
        return L.scaled_table(L.LadderResult("cpu", 3, 0.95, None, pd.DataFrame(), points,
                                             pd.DataFrame())).values.tolist()

    # 1 − 0.01 / 0.04 = 75 % of the gap at the deepest rung where zero init leads (8 layers)
    lead = pts([(-0.05, -0.09, -0.01), (0.04, 0.01, 0.07)],
               [(-0.06, -0.1, -0.02), (0.01, -0.02, 0.04)])
    t = L.scaled_test(lead, "mha", 250)
    assert (t["layers"], t["normal"]["mean"], t["scaled"]["mean"]) == (8, 0.04, 0.01)
    assert t["removed"] == pytest.approx(0.75)
    assert table(lead) == [["MHA", "250", "8", "+0.040 [+0.010, +0.070]",
                            "+0.010 [-0.020, +0.040]", "75%"]]
    # the scaled arm ahead of zero init: all of the gap
    ahead = pts([(0.02, -0.01, 0.05), (0.04, 0.01, 0.07)],
                [(0.0, -0.01, 0.01), (-0.03, -0.05, -0.01)])
    assert L.scaled_test(ahead, "mha", 250)["removed"] == pytest.approx(1.75)
    assert table(ahead)[0][-1] == "all"
    # N(0, σ) behind zero init at no depth: no gap to remove
    never = pts([(-0.02, -0.03, -0.01)] * 2, [(0.0, -0.01, 0.01)] * 2)
    assert L.scaled_test(never, "mha", 250)["layers"] is None
    assert table(never) == [["MHA", "250", "—", "—", "—", "—"]]
    # no depth with both arms at that length: no row
    assert L.scaled_test(never, "mha", 1000) is None
    assert table(pts([(0.0, 0, 0)] * 2, [(0.0, 0, 0)] * 2, steps=1000)) == []


def test_a_token_only_length_is_drawn_and_told_against_length_only(tmp_path, monkeypatch):
    """A length only the token axis has (cpu: GQA at 2000 steps, 8 layers) is neither a depth
    series in the depth panel nor a depth row of the series table; it is on the token panel and
    row."""
    from dataclasses import replace

    import matplotlib
    matplotlib.use("Agg")

    assert ladder("cpu").depth_steps() == (250, 1000)
    monkeypatch.setitem(ladders.LADDERS, "ci", replace(ladder("ci"), token_factors=(1, 3, 6)))
    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    _write_ladder_store(tmp_path, "ci", 2, lambda ref: 0.01)
    r = L.ladder_result(make_plan("ci", 1), 2, tmp_path, record_dir=tmp_path / "no-records")
    assert {(v, s) for v, s in zip(r.points["variant"], r.points["max_steps"]) if s == 60} == {
        ("gqa", 60), ("mla", 60)}
    series = L.series_table(r)
    assert "60 steps" not in set(series["at"])
    gqa = series.set_index(["ΔL of", "at"]).loc[("GQA: no gate − gate", "2 layers")]
    assert (gqa["along"], gqa["points"]) == ("steps", "10, 30, 60")
    fig = L.plot_ladder(r)
    depth_labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert not any("60 steps" in t for t in depth_labels)
    assert any("30 steps" in t for t in depth_labels)
    assert [t.get_text() for t in fig.axes[2].get_xticklabels()] == ["10", "30", "60"]


def test_the_ladder_table_says_whether_one_run_shows_each_point():
    """|mean ΔL| against the seed sd of one arm's final loss, as on the ablation pages: 0.03 > 0.02
    yes, |-0.01| < 0.02 no, one pair (no sd) n/a."""
    pts = pd.DataFrame({
        "part": ["init", "gate", "init"], "variant": ["mha", "gqa", "tpa"],
        "arm": ["alt", "alt", "scaled"], "n_layer": [2, 8, 4], "max_steps": [250, 1000, 250],
        "n": [3, 3, 1], "mean": [0.03, -0.01, 0.5], "low": [0.01, -0.02, math.nan],
        "high": [0.05, 0.0, math.nan], "resolvable": [0.02, 0.01, math.nan],
        "pairs_needed": [3.0, math.nan, math.nan], "seed_sd": [0.02, 0.02, math.nan],
        "paper": [0.017, 0.024, math.nan], "p_holm": [0.04, 0.6, math.nan],
        "verdict": ["agrees", "within noise", "undetermined (1 seed)"]})
    t = L.format_ladder_table(pts)
    assert t["one run shows it?"].tolist() == ["yes", "no", "n/a"]
    assert list(t.index) == [0, 1, 2] and t.columns[-1] == "one run shows it?"


def _result(preset, seeds, width_seeds, rows):
    """A LadderResult whose points are ``rows`` of (part, variant, arm, n_layer, max_steps)."""
    pts = pd.DataFrame(rows, columns=["part", "variant", "arm", "n_layer", "max_steps"])
    pts["p_holm"] = 0.5
    return L.LadderResult(preset, seeds, 0.95, None, pd.DataFrame(), pts, pd.DataFrame(),
                          width_seeds)


def test_the_page_states_its_seeds_its_family_and_where_the_ablation_pages_differ():
    """cpu: the rungs at the book's depth (8 layers) and each ablation page's length (init 250,
    gate 1000 steps) are those pages' runs; the pages read 10 of them (the seed table), the ladder its 3,
    and the page says so with the family size (here 7 points, one of them not shared)."""
    rows = [("init", v, "alt", 8, 250) for v in ("mha", "mla", "tpa")]
    rows += [("init", "mha", "scaled", 8, 250), ("init", "mha", "alt", 2, 250)]
    rows += [("gate", v, "alt", 8, 1000) for v in ("gqa", "mlra-4")]
    r = _result("cpu", figure_spec("ladder").seeds_at("cpu"), figure_spec("ladder_width").seeds_at("cpu"), rows)
    assert L.shared_rungs(r) == [("init", ("mha", "mla", "tpa"), 8, 250),
                                 ("gate", ("gqa", "mlra-4"), 8, 1000)]
    assert figure_spec("init").seeds_at("cpu", 1) == 10
    assert (figure_spec("ladder").seeds_at("cpu"), figure_spec("ladder_width").seeds_at("cpu")) == (3, 5)
    assert L.ladder_facts(r) == {"ladder_seeds": "3", "ladder_seed_last": "2",
                                 "ladder_width_seeds": "5", "ladder_family": "7"}
    assert L.shared_table(r).values.tolist() == [
        ["initialisation", "MHA, MLA and TPA: normal − zero", "8", "250", "10", "3"],
        ["gating", "GQA and MLRA-4: no gate − gate", "8", "1,000",
         f"{figure_spec('gate').seeds_at('cpu', 1)}", "3"]]
    # ci: no rung at the book's depth and an ablation page's length, no width seeds without one
    ci = _result("ci", 2, 0, [("init", "mha", "alt", 2, 10)])
    assert L.shared_table(ci).empty
    assert L.ladder_facts(ci) == {"ladder_seeds": "2", "ladder_seed_last": "1",
                                  "ladder_width_seeds": "—", "ladder_family": "1"}
