"""The curve features of a figure and its data-order check (gtalib.book.chapters.curve_features) on
synthetic runs whose plateau escapes, ΔL and data-order effects are known: the window's start,
the features a figure reads and the verdict that a large data-order spread overturns."""

import types
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from synthetic import metrics, runs_frame, synthetic_identity, write_finished_run

from gtalib.book.analysis import curves as C
from gtalib.book.analysis import features as ft
from gtalib.book.chapters import ablation as A
from gtalib.book.chapters import shared
from gtalib.book.chapters.verdict_parts import order_changes
from gtalib.book.chapters import curve_features as CF
from gtalib.book.design import run_specs as specs
from gtalib.book.design import figures
from gtalib.book.design.plan import make_plan

H = 3.0  # the corpus entropy of these tests (nats)


def _result(escapes, deltas, steps=100, smoothing=5, key="init"):
    """A result-like object: per (variant, arm, seed) its plateau escape step; alt = rec + the
    variant's ΔL curve. The loss sits at H + 0.5 until the escape, then at H − 1."""
    spec = {}
    grid = np.arange(1, steps + 1)
    for (v, arm, seed), e in escapes.items():
        loss = np.where(grid < e, H + 0.5, H - 1.0) + (deltas[v](grid) if arm == "alt" else 0)
        spec[(v, arm, seed)] = metrics(grid, loss)
    runs = runs_frame(spec)
    curves = C.delta_curves(runs, "train_loss", smoothing)
    return types.SimpleNamespace(key=key, runs=runs, curves=curves, smoothing=smoothing,
                                 complete=list(deltas), confidence=0.95, preset="cpu",
                                 variants=tuple(deltas), deltas=C.final_deltas(runs))


def test_the_window_starts_after_the_last_run_leaves_the_plateau_plus_the_smoothing():
    flat = {"mha": lambda s: 0.0 * s, "gqa": lambda s: 0.0 * s}
    escapes = {(v, a, s): 10 + 3 * s + (7 if a == "alt" else 0)
               for v in flat for a in ("alt", "rec") for s in range(3)}
    r = _result(escapes, flat)
    w = CF.feature_window(r, H)
    # plateau_escape: trailing mean over 10 steps below H − 0.1 once 5 low steps are in it
    latest = max(escapes.values()) + 4
    assert (w.latest, w.start, w.end) == (latest, latest + 5, 100)
    assert w.escaped == w.runs == 12
    assert w.facts() == {"window": f"{latest + 5}–100", "window_fraction": f"{w.start / 100:.2f}",
                         "escape": f"step {latest}", "escaped": "12 of 12", "smoothing": "5"}
    # no run ever leaves the plateau: the last half of the run
    never = {k: 1000 for k in escapes}
    w = CF.feature_window(_result(never, flat), H)
    assert (w.start, w.escaped) == (50, 0)
    assert (w.facts()["window"], w.facts()["escape"], w.facts()["escaped"]) == (
        "50–100", "none", "0 of 12")


def test_a_figure_reads_the_courses_and_the_features_its_paper_names():
    """The init figure at three variants: TPA's ΔL is highest and falls, GTA's falls slowest
    (not at all), MHA's falls most: every course but GTA's agrees; the top curve agrees; the
    slowest curve agrees; the spread shrinks."""
    deltas = {"tpa": lambda s: 0.3 - 0.002 * s, "mha": lambda s: 0.25 - 0.0024 * s,
              "gta": lambda s: 0.02 + 0.0 * s}
    escapes = {(v, a, s): 5 for v in deltas for a in ("alt", "rec") for s in range(6)}
    r = _result(escapes, deltas)
    # seed noise, so that the intervals are finite: a per-seed offset on the alt arm
    bump = r.runs["seed"] * 0.001 * np.where(r.runs["arm"] == "alt", 1, 0)
    r.runs["train_loss"] += bump
    r.runs["val_loss"] += bump
    r.curves = C.delta_curves(r.runs, "train_loss", r.smoothing)
    cf = CF.curve_features(r, H)
    kinds = [(f.kind, f.variant) for f in cf.features]
    assert kinds == [("course", "tpa"), ("course", "mha"), ("course", "gta"), ("top", "tpa"),
                     ("slowest", "gta"), ("convergence", None), ("order", None)]
    got = dict(zip(kinds, cf.verdicts))
    assert got[("course", "tpa")] == got[("course", "mha")] == "agrees"
    assert got[("course", "gta")] == "within noise"  # a flat curve: no change to test
    assert got[("top", "tpa")] == "agrees"
    assert got[("slowest", "gta")] == "agrees"
    course_tpa = cf.features[0]
    assert course_tpa.estimate == pytest.approx(-0.002 * (100 - cf.window.start), abs=1e-6)
    table = CF.features_table(cf)
    assert list(table["verdict"]) == cf.verdicts
    assert CF.summary_counts(cf).startswith(f"{cf.verdicts.count('agrees')} of 7 agree")
    # three of the figure's nine variants: the window is theirs
    assert cf.subset
    # the paper's order with its ties (MHA 0.0168, TPA 0.0346, GTA 0.020)
    assert table.loc["end order", CF.PAPER_COLUMN] == "TPA > GTA > MHA"
    assert "curves close up" in table.index  # the paper's initialisation curves converge

    # at three pairs a bootstrap feature is not decided, and leaves the Holm family
    few = _result({k: e for k, e in escapes.items() if k[2] < 3}, deltas)
    cf3 = CF.curve_features(few, H)
    got3 = dict(zip([(f.kind, f.variant) for f in cf3.features], cf3.verdicts))
    assert got3[("top", "tpa")] == got3[("slowest", "gta")] == ft.FEW_PAIRS
    assert got3[("order", None)] == "within noise"  # Kendall's test across three variants
    assert got3[("course", "tpa")] == "agrees"  # a t interval still holds at three pairs
    assert np.isnan(cf3.p_holm[[f.kind == "top" for f in cf3.features]]).all()
    assert CF.summary_counts(cf3).endswith(", 2 undetermined")  # top, slowest


def _write(run_dir, plan, ref, delta, seed_noise=0.0):
    """A finished synthetic run of ``ref`` whose validation loss is 2 (+ ``delta`` on the alt
    arm)."""
    steps = np.arange(1, 21)
    loss = 2.0 + 2.5 * np.exp(-steps / 8) + seed_noise + (delta if ref.arm == "alt" else 0.0)
    spec = specs.run_spec(ref, plan.preset, None, plan.data())
    write_finished_run(run_dir, spec, metrics(steps, loss, lr=1e-3))


def test_a_data_order_spread_as_large_as_the_effect_turns_agrees_into_within_noise(
        tmp_path, monkeypatch):
    monkeypatch.setattr(specs, "data_spec", lambda preset, max_steps=None: synthetic_identity(preset))
    # the one-order design: every pair at order 0
    monkeypatch.setitem(figures.ABLATIONS, "init", replace(figures.ABLATIONS["init"], joint={}))
    plan = make_plan("ci", 4)
    assert {dict(r.train)["data_seed"] for r in plan.data_order_refs["init"]} == {1, 2}
    seed_delta = {0: 0.050, 1: 0.052, 2: 0.049, 3: 0.051}  # a clear effect over seeds
    order_delta = {"gqa": {1: -0.15, 2: 0.25}, "mla": {1: 0.051, 2: 0.049}}
    for ref in plan.figure_refs["init"]:
        _write(tmp_path, plan, ref, seed_delta[ref.seed])
    for ref in plan.data_order_refs["init"]:
        _write(tmp_path, plan, ref, order_delta[ref.variant][dict(ref.train)["data_seed"]])
    result = A.ablation_result("init", plan, tmp_path)
    assert list(result.final["verdict"]) == ["agrees", "agrees"]
    orders = CF.data_order_deltas("init", plan, tmp_path)
    assert len(orders) == 4
    table = CF.data_order_check(result, orders)
    # GQA: ΔL 0.05, 0.05 + (−0.15 − 0.05) and 0.25 over its data orders: sd ≈ 0.2
    assert table.loc["gqa", "sd orders"] == pytest.approx(
        np.std([0.05, -0.15, 0.25], ddof=1), abs=1e-9)
    assert table.loc["gqa", "sd seeds"] == pytest.approx(
        np.std(list(seed_delta.values()), ddof=1), abs=1e-9)
    assert table.loc["gqa", "verdict"] == "within noise" and table.loc["gqa", "flipped"]
    assert table.loc["mla", "verdict"] == "agrees" and not table.loc["mla", "flipped"]
    assert CF.data_order_facts(table, "init", plan) == {
        "design": "one order", "orders": "1 and 2", "order_read": "yes", "order_changes": "GQA"}
    printed = CF.format_data_order(table)
    assert list(printed["changed?"]) == ["yes", "no"]
    assert list(printed.index) == ["GQA", "MLA"]
    assert printed.loc["GQA", "sd orders"] == f"{np.std([0.05, -0.15, 0.25], ddof=1):.4f}"
    assert list(printed["verdict"]) == ["within noise", "agrees"]  # with the order's variance
    assert list(printed["verdict, order 0"]) == ["agrees", "agrees"]
    line = CF.overview_lines({"init": result}, plan, tmp_path, H)
    assert line.startswith("- **Initialisation ablation**: ")
    assert "([features](init_ablation.ipynb#the-curves-feature-by-feature))" in line
    assert line.endswith("; one order design, verdicts another data order changes: GQA")


def test_a_joint_design_figure_sets_its_order_0_verdicts_and_variance_split_beside_its_own(
        tmp_path, monkeypatch):
    """ci reads the initialisation figure in the joint design: pair k at seed k and data order
    k. GQA's ΔL is clear at data order 0 but swings with the order, so its joint verdict is
    within noise while the one at order 0 agrees; MLA's effect holds at every order."""
    monkeypatch.setattr(specs, "data_spec", lambda preset, max_steps=None: synthetic_identity(preset))
    plan = make_plan("ci", 4)
    assert "init" in plan.one_order_refs
    seed_delta = {0: 0.050, 1: 0.052, 2: 0.049, 3: 0.051}
    order_swing = {"gqa": {0: 0.0, 1: -0.20, 2: 0.20, 3: -0.18}, "mla": dict.fromkeys(range(4), 0)}
    for ref in plan.one_order_refs["init"]:  # every pair at data order 0
        _write(tmp_path, plan, ref, seed_delta[ref.seed])
    for ref in plan.data_order_refs["init"]:  # the pair at seed 0 at orders 1 and 2
        d = dict(ref.train)["data_seed"]
        _write(tmp_path, plan, ref, seed_delta[0] + order_swing[ref.variant][d])
    for ref in plan.figure_refs["init"]:  # the joint pairs; pair 0 is the run written above
        if ref.seed:
            _write(tmp_path, plan, ref, seed_delta[ref.seed] + order_swing[ref.variant][ref.seed])
    result = A.ablation_result("init", plan, tmp_path)
    assert result.looks == (4,)  # one look, declared with the design
    assert result.final.loc["gqa", "verdict"] == "within noise"
    assert result.final.loc["mla", "verdict"] == "agrees"
    table = CF.data_order_table(result, plan, tmp_path)
    assert CF.is_joint(table)
    assert list(table["final verdict"]) == ["agrees", "agrees"]  # at data order 0
    assert list(table["changed"]) == [True, False]
    # the variance split is variance_components over every distinct pair the figure has
    cells = {(s, 0): seed_delta[s] for s in range(4)}
    cells.update({(0, d): seed_delta[0] + order_swing["gqa"][d] for d in (1, 2)})
    cells.update({(k, k): seed_delta[k] + order_swing["gqa"][k] for k in (1, 2, 3)})
    (seed, order), delta = zip(*cells), list(cells.values())
    expected = CF.variance_components(seed, order, delta)
    for src in CF.VARIANCE_SOURCES:
        assert table.loc["gqa", f"share {src}"] == pytest.approx(expected.share[src], abs=1e-6)
    assert table.loc["gqa", "share data order"] > 0.8  # the swing is the order's
    assert table.loc["gqa", "sd joint"] == pytest.approx(expected.sd_joint, abs=1e-6)
    facts = CF.data_order_facts(table, "init", plan)
    assert (facts["design"], facts["order_read"], facts["order_changes"]) == ("joint", "yes", "GQA")
    assert order_changes(table) == "GQA"
    printed = CF.format_data_order(table)
    assert list(printed["verdict, joint"]) == ["within noise", "agrees"]
    assert list(printed["verdict, order 0"]) == ["agrees", "agrees"]
    variance = CF.format_variance(table)
    assert variance.loc["GQA", "data order"].startswith(f"{expected.share['data order']:.0%} [")
    line = CF.overview_lines({"init": result}, plan, tmp_path, H)
    assert line.endswith("; joint design, verdicts another data order changes: GQA")


def test_a_preset_without_data_order_runs_says_so(monkeypatch):
    monkeypatch.setattr(specs, "data_spec", lambda preset, max_steps=None: synthetic_identity(preset))
    plan = make_plan("ci", 2)
    assert CF.data_order_check(types.SimpleNamespace(final=pd.DataFrame()), pd.DataFrame()).empty
    assert "gate" not in plan.data_order_refs and "gate" not in plan.one_order_refs
    assert CF.data_order_facts(pd.DataFrame(), "gate", plan) == {
        "design": "one order", "orders": "none", "order_read": "no",
        "order_changes": "not measured"}
    # declared but not read (the set is not all recorded): the page says which orders wait
    monkeypatch.setitem(figures.ABLATIONS, "gate", replace(figures.ABLATIONS["gate"],
                                                          data_orders_declared={"ci": (1, 2)}))
    facts = CF.data_order_facts(pd.DataFrame(), "gate", plan)
    assert (facts["orders"], facts["order_read"]) == ("1 and 2", "no")


def test_within_a_build_each_figure_table_is_computed_once_and_equals_a_fresh_one(
        tmp_path, monkeypatch):
    """With the build's folder set (ENV_SHARED_RESULTS), the figure page's features and
    data-order table are computed once: the claims page's lines and a second call load them,
    equal to what a call outside the build computes. Another entropy, plan, store or source, or
    a result read at other options, is computed, never loaded from another's entry."""
    monkeypatch.setattr(specs, "data_spec", lambda preset, max_steps=None: synthetic_identity(preset))
    # the one-order design: every pair at order 0
    monkeypatch.setitem(figures.ABLATIONS, "init", replace(figures.ABLATIONS["init"], joint={}))
    plan, store = make_plan("ci", 4), tmp_path / "store"
    for ref in plan.figure_refs["init"]:
        _write(store, plan, ref, 0.05 + 0.002 * ref.seed, seed_noise=0.01 * ref.seed)
    for ref in plan.data_order_refs["init"]:
        _write(store, plan, ref, 0.05 - 0.01 * dict(ref.train)["data_seed"])
    fresh = A.ablation_result("init", plan, store)  # outside a build: computed, kept nowhere
    fresh_features = CF.features_table(CF.curve_features(fresh, H))
    fresh_orders = CF.data_order_table(fresh, plan, store)
    assert not fresh_orders.empty

    calls = {"features": 0, "orders": 0}
    features, deltas = CF._curve_features, CF.data_order_deltas

    def count_features(*a, **k):
        calls["features"] += 1
        return features(*a, **k)

    def count_orders(*a, **k):
        calls["orders"] += 1
        return deltas(*a, **k)

    monkeypatch.setattr(CF, "_curve_features", count_features)
    monkeypatch.setattr(CF, "data_order_deltas", count_orders)
    monkeypatch.setenv(shared.ENV_SHARED_RESULTS, str(tmp_path / "shared"))
    (tmp_path / "shared").mkdir()
    result = A.ablation_result("init", plan, store)  # the build's: its page's and the claims'
    CF.curve_features(result, H)
    CF.data_order_table(result, plan, store)
    assert calls == {"features": 1, "orders": 1}
    CF.overview_lines({"init": result}, plan, store, H)  # the claims page: loads both
    cf = CF.curve_features(A.ablation_result("init", make_plan("ci", 4), store), H)
    orders = CF.data_order_table(result, make_plan("ci", 4), store)
    assert calls == {"features": 1, "orders": 1}
    pd.testing.assert_frame_equal(CF.features_table(cf), fresh_features)
    pd.testing.assert_frame_equal(orders, fresh_orders)

    CF.curve_features(result, H + 0.5)  # another entropy: another window, its own entry
    CF.data_order_table(result, plan, store, source="records")  # another source
    CF.data_order_table(result, plan, tmp_path / "other")  # another store
    CF.data_order_table(A.ablation_result("init", make_plan("ci", 3), store),
                        make_plan("ci", 3), store)  # another seed count: another result
    assert calls == {"features": 2, "orders": 4}
    subset = A.ablation_result("init", plan, store, smoothing=3)  # not the build's: not kept
    CF.curve_features(subset, H)
    CF.curve_features(subset, H)
    assert calls == {"features": 4, "orders": 4}


def test_a_final_values_figure_in_the_joint_design_joins_the_overview_and_the_methods_table(
        tmp_path, monkeypatch):
    """The latent-scaling figure (final values only in the paper, no curves) read in the joint
    design at ci, as at cpu: the claims page's line says it has no curves to read and names its
    design; the methods table gives it no window and, per variant, the variance split."""
    monkeypatch.setattr(specs, "data_spec", lambda preset, max_steps=None: synthetic_identity(preset))
    spec = figures.ABLATIONS["latent_scale"]
    assert not spec.paper_curves
    monkeypatch.setitem(figures.ABLATIONS, "latent_scale", replace(
        spec, joint={"ci": 4}, joint_declared={"ci": 4}, data_orders={"ci": (1, 2)},
        data_orders_declared={"ci": (1, 2)}))
    plan = make_plan("ci", 4)
    assert "latent_scale" in plan.one_order_refs
    swing = {0: 0.0, 1: -0.02, 2: 0.03, 3: -0.01}  # the data order moves ΔL a little
    joint = [r for r in plan.figure_refs["latent_scale"] if r.seed]  # pair 0: the one-order pair 0
    for refs in (plan.one_order_refs["latent_scale"], plan.data_order_refs["latent_scale"], joint):
        for ref in refs:
            order = dict(ref.train).get("data_seed", 0)  # one-order pairs leave it unset
            _write(tmp_path, plan, ref, 0.05 + 0.001 * ref.seed + swing[order])
    result = A.ablation_result("latent_scale", plan, tmp_path)
    assert result.looks == (4,) and len(result.complete) == 2
    assert {(r.seed, dict(r.train).get("data_seed", 0)) for r in plan.figure_refs["latent_scale"]} == {
        (k, k) for k in range(4)}
    line = CF.overview_lines({"latent_scale": result}, plan, tmp_path, H)
    assert line.startswith(f"- **{spec.heading}**: final values only (the paper prints no curves); "
                           "joint design, verdicts another data order changes: ")
    table = CF.methods_markdown({"latent_scale": result}, plan, tmp_path, H)
    rows = [r for r in table.splitlines() if r.startswith(f"| {spec.heading}")]
    assert len(rows) == 2 and all(r.split("|")[2].strip() == "—" for r in rows)  # no window
    assert all(r.count("%") == 3 for r in rows)  # seed / order / residual shares
