"""The scale ladder's width axis (gtalib.book.chapters.ladder_width): its runs, the parameter matching at d 256,
the gap and its interval in closed form and against scipy, the trend in both directions, and the
section's tables and words when runs are missing."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import synthetic  # noqa: E402
from scipy import stats

from gtalib.book.chapters import ladder_width as W
from gtalib.book.design import ladder as ladders
from gtalib.book.design import run_specs as specs
from gtalib.book.design import figures
from gtalib.book.design import seeds as seed_policy
from gtalib.book.design.ladder import ladder, ladder_runs
from gtalib.book.design.plan import make_plan
from gtalib.book.design.figures import TABLES, figure_spec
from gtalib.book.design.run_specs import RunRef
from gtalib.model.params import count_params
from gtalib.model.presets import model_config

WIDTH_VARIANTS = ("mha", "gqa", "mla", "mlra-2", "mlra-4")


# --- the runs -----------------------------------------------------------------------------------


def test_the_width_axis_runs_and_their_narrow_point_is_the_main_tables_runs():
    """cpu: 5 variants x 2 widths x 5 seeds; the d-128 runs are the main results' runs of the
    same variants and seeds (same spec, same run id), so they are shared, not trained twice."""
    refs = ladder_runs("cpu", part="width")
    assert len(refs) == len(set(refs)) == 5 * 2 * 5
    assert {r.arm for r in refs} == {"main"} and {r.variant for r in refs} == set(WIDTH_VARIANTS)
    assert {dict(r.train)["max_steps"] for r in refs} == {250}
    assert {r.options for r in refs} == {(("n_layer", 8),),
                                         (("d_model", 256), ("head_dim", 64), ("n_layer", 8))}
    assert {W.ref_width(r, "cpu") for r in refs} == {(128, 4, 32), (256, 4, 64)}
    data = synthetic.synthetic_identity("cpu")
    narrow = {specs.run_spec(r, "cpu", None, data).run_id for r in refs
              if W.ref_width(r, "cpu")[0] == 128}
    main = {specs.run_spec(r, "cpu", None, data).run_id for r in TABLES["main"].runs("cpu", 3)
            if r.variant in WIDTH_VARIANTS and not r.options}
    assert narrow == main and len(main) == 25
    # ci: GQA and MLA, 2 seeds; the narrow point is the token axis' runs without the gate
    ci = ladder_runs("ci", part="width")
    assert len(ci) == 2 * 2 * 2
    token = {specs.run_spec(r, "ci", None, data).run_id for r in ladder_runs("ci", part="gate")
             if r.arm == "alt" and dict(r.train)["max_steps"] == 10
             and dict(r.options)["n_layer"] == 2 and r.variant in ("gqa", "mla")}
    assert {specs.run_spec(r, "ci", None, data).run_id for r in ci
            if W.ref_width(r, "ci")[0] == 128} == token
    with pytest.raises(ValueError, match="part"):
        ladder_runs("cpu", part="widths")


def test_the_width_axis_design_is_checked():
    with pytest.raises(ValueError, match="width_named"):
        ladders.Ladder(depths=(2,), base_steps=10, width_variants=("gqa", "mla"),
                       widths=((128, 4, 32), (256, 4, 64)))  # width_named mlra-4 not among them
    with pytest.raises(ValueError, match="widths"):
        ladders.Ladder(depths=(2,), base_steps=10, width_variants=("gqa", "mla"),
                       widths=((128, 4, 32),), width_named="mla")
    with pytest.raises(ValueError, match=r"figure 'ladder_width': seeds\['ci'\] must be a pos"):
        replace(figures.TABLES["ladder_width"], seeds={"ci": 0})
    # every preset with a ladder has a seed count for each of its axes
    for name in ladders.LADDERS:
        assert all(figure_spec(k).seeds_at(name) >= 1 for k in seed_policy.LADDER_KEYS)
    # the first width is each preset's own
    from gtalib.model.presets import PRESETS

    for name, lad in ladders.LADDERS.items():
        assert lad.widths[0] == tuple(PRESETS[name][k] for k in ladders.WIDTH_FIELDS)


def test_every_variant_is_parameter_matched_to_mha_at_d256():
    """At d 256 (4 heads of 64) the sizes follow the paper's ratios from head_dim (d_c = 4·64, RoPE
    64/2, MLRA-4's blocks 64 wide) and every variant is within 0.1 % of the MHA model of that
    width, whose F is the preset's rule at d 256 (680), not the d-128 value (344)."""
    mha = model_config("cpu", "mha", d_model=256, head_dim=64, n_layer=8)
    assert mha.intermediate_size == 680
    base = count_params(mha)["total"]
    for v in WIDTH_VARIANTS:
        cfg = model_config("cpu", v, d_model=256, head_dim=64, n_layer=8)
        assert abs(count_params(cfg)["total"] - base) / base < 1e-3, v
    m4 = model_config("cpu", "mlra-4", d_model=256, head_dim=64)
    assert (m4.kv_lora_rank, m4.kv_lora_rank // m4.latent_blocks, m4.qk_rope_head_dim) == (
        256, 64, 32)
    p = ladders.width_params("cpu").set_index(["d_model", "config"])
    assert p["vs_mha_pct"].abs().max() < 0.1
    assert p.loc[(256, "MHA"), "n_params"] == base
    assert p.loc[(256, "MLRA-4"), "block_width"] == 64 and p.loc[(128, "MLRA-4"), "block_width"] == 32
    assert pd.isna(p.loc[(256, "GQA"), "block_width"])


# --- the gap, in closed form --------------------------------------------------------------------


def _frames(losses: dict, seeds=range(3), needed_points=None):
    """``final`` and ``needed`` of gap_points from {(point, variant): [loss per seed] or None}."""
    final, needed = [], []
    for (point, v), values in losses.items():
        for s in seeds:
            needed.append((point, v, s))
            if values is not None and s < len(values) and values[s] is not None:
                final.append((point, v, s, values[s]))
    return (pd.DataFrame(final, columns=["point", "variant", "seed", "loss"]),
            pd.DataFrame(needed, columns=["point", "variant", "seed"]))


def test_the_gap_is_the_named_variant_minus_the_best_complete_other_paired_by_seed():
    final, needed = _frames({
        (128, "mlra-4"): [2.30, 2.26, 2.28],
        (128, "gqa"): [2.18, 2.17, 2.20],    # best: mean 2.1833
        (128, "mha"): [2.19, 2.20, 2.21],
        (128, "mla"): [2.00, 2.00, None],    # lowest, but a run is missing: left out
    })
    pts, per_seed = W.gap_points(final, needed, "mlra-4")
    r = pts.iloc[0]
    assert r["best"] == "gqa" and r["others"] == ("gqa", "mha")
    assert r["left_out"] == (("mla", 2, 3),) and (r["done"], r["needed"]) == (11, 12)
    gap = np.array([2.30 - 2.18, 2.26 - 2.17, 2.28 - 2.20])
    lo, hi = stats.t.interval(0.95, 2, loc=gap.mean(), scale=stats.sem(gap))
    assert r["mean"] == pytest.approx(gap.mean()) and r["n"] == 3
    assert (r["low"], r["high"]) == (pytest.approx(lo), pytest.approx(hi))
    assert per_seed["gap"].tolist() == pytest.approx(gap.tolist())
    assert r["named_loss"] == pytest.approx(2.28)
    assert r["best_loss"] == pytest.approx((2.18 + 2.17 + 2.20) / 3)
    assert r["verdict"] == "differs"  # MLRA-4 behind, interval above zero: not the lowest
    ahead, _ = W.gap_points(final.assign(loss=np.where(final["variant"] == "mlra-4",
                                                       final["loss"] - 0.3, final["loss"])),
                            needed, "mlra-4")
    assert ahead.iloc[0]["verdict"] == "agrees" and ahead.iloc[0]["mean"] < 0
    with pytest.raises(ValueError, match="loss"):
        W.gap_points(final.drop(columns="loss"), needed, "mlra-4")


def test_a_point_without_the_named_variant_or_any_other_has_no_gap():
    final, needed = _frames({(128, "mlra-4"): [2.3, 2.3, 2.3], (128, "gqa"): [2.2, 2.1, 2.2],
                             (256, "mlra-4"): None, (256, "gqa"): [2.0, 2.0, 2.0]})
    pts, per_seed = W.gap_points(final, needed, "mlra-4")
    wide = pts.set_index("point").loc[256]
    assert pd.isna(wide["best"]) and math.isnan(wide["mean"]) and wide["n"] == 0
    assert (wide["done"], wide["needed"]) == (3, 6)
    assert set(per_seed["point"]) == {128}


# --- the trend ----------------------------------------------------------------------------------


def _two_widths(narrow, wide):
    final, needed = _frames({(128, "mlra-4"): narrow, (128, "gqa"): [2.0, 2.0, 2.0],
                             (256, "mlra-4"): wide, (256, "gqa"): [1.8, 1.8, 1.8]})
    return W.gap_points(final, needed, "mlra-4")


def _iv(x):
    """Mean and two-sided 95 % Student-t interval of ``x``."""
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    return x.mean(), lo, hi


def test_the_trend_says_falls_rises_or_no_change_from_the_paired_change():
    # gap 0.10, 0.12, 0.08 at d 128; 0.04, 0.05, 0.04 at d 256: change -0.06, -0.07, -0.04
    pts, per = _two_widths([2.10, 2.12, 2.08], [1.84, 1.85, 1.84])
    t = W.trend_row(pts, per, "width")
    change = np.array([1.84, 1.85, 1.84]) - 1.8 - (np.array([2.10, 2.12, 2.08]) - 2.0)
    assert (t["axis"], t["first"], t["last"], t["n"], t["trend"]) == ("width", 128, 256, 3,
                                                                       "falls")
    assert (t["mean"], t["low"], t["high"]) == pytest.approx(_iv(change))
    assert t["high"] < 0
    # the other sign: the gap rises (-0.18 → -0.10), interval above zero
    t = W.trend_row(*_two_widths([1.82, 1.83, 1.81], [1.70, 1.69, 1.71]), "width")
    assert t["trend"] == "rises" and t["low"] > 0
    assert W.trend_row(*_two_widths([2.02, 2.01, 2.03], [1.92, 1.93, 1.91]), "width")[
        "trend"] == "rises"
    # change 0.01, -0.03, 0.05: its interval covers zero
    t = W.trend_row(*_two_widths([2.10, 2.12, 2.08], [1.91, 1.89, 1.93]), "width")
    assert t["trend"] == "no change" and t["low"] < 0 < t["high"]
    shown = W.format_trend_table(pd.DataFrame([t]), "mlra-4")
    assert shown.iloc[0].tolist() == ["width", "d_model 128", "d_model 256",
                                      f"{t['mean']:+.4f}", f"[{t['low']:+.4f}, {t['high']:+.4f}]",
                                      3, "no change"]
    # one seed at both ends: the sign of its change, no interval
    final, needed = _frames({(128, "mlra-4"): [2.1], (128, "gqa"): [2.0],
                             (256, "mlra-4"): [1.85], (256, "gqa"): [1.8]}, seeds=range(1))
    t = W.trend_row(*W.gap_points(final, needed, "mlra-4"), "width")
    assert (t["n"], t["trend"], t["mean"]) == (1, "falls", pytest.approx(-0.05))
    assert W.format_trend_table(pd.DataFrame([t]), "mlra-4").iloc[0, 4] == "n/a (1 pair)"


def test_no_trend_without_two_points_with_a_gap():
    pts, per = _two_widths([2.10, 2.12, 2.08], None)
    t = W.trend_row(pts, per, "width")
    assert (t["first"], t["last"], t["n"], t["trend"]) == (None, None, 0, "—")
    assert math.isnan(t["mean"])
    assert W.format_trend_table(pd.DataFrame([t]), "mlra-4").iloc[0].tolist() == [
        "width", "—", "—", "—", "—", 0, "—"]
    final, needed = _frames({(128, "mlra-4"): None, (128, "gqa"): None,
                             (256, "mlra-4"): None, (256, "gqa"): None})
    assert W.trend_row(*W.gap_points(final, needed, "mlra-4"), "width")["trend"] == "—"
    # three lengths: the change is first to last
    final, needed = _frames({(250, "mlra-4"): [2.1, 2.1, 2.1], (250, "gqa"): [2.0, 2.0, 2.0],
                             (1000, "mlra-4"): [1.75, 1.76, 1.74], (1000, "gqa"): [1.7] * 3,
                             (2000, "mlra-4"): [1.53, 1.54, 1.52], (2000, "gqa"): [1.5] * 3})
    pts, per = W.gap_points(final, needed, "mlra-4")
    t = W.trend_row(pts, per, "steps")
    assert (t["first"], t["last"], t["trend"]) == (250, 2000, "falls")
    assert t["mean"] == pytest.approx(-0.07)
    assert W.format_trend_table(pd.DataFrame([t]), "mlra-4").iloc[0, :3].tolist() == [
        "steps", "250 steps", "2,000 steps"]
    with pytest.raises(ValueError, match="axis"):
        W.point_text("depth", 2)
    with pytest.raises(ValueError, match="axis"):
        W.trend_row(pts, per, "depth")
    with pytest.raises(ValueError, match="axis"):
        W.format_gap_table(pts, "mlra-4", "depth")
    with pytest.raises(KeyError, match="allowed"):
        W.ref_width(RunRef("gqa", "main", (), 0), "laptop")


def test_the_trend_pairs_the_change_over_the_seeds_both_ends_have():
    """Five seeds and three variants at 250 steps, three seeds and two variants at 2000: each gap
    uses all of its point's seeds and names the variants it compares; the change pairs the three
    seeds both ends have, so it is not the difference of the two gaps shown."""
    rows = {(250, "gqa"): [2.00, 2.01, 2.02, 2.00, 2.03], (250, "mla"): [2.05] * 5,
            (250, "mlra-4"): [2.10, 2.12, 2.11, 2.09, 2.13],
            (2000, "gqa"): [1.50, 1.51, 1.49], (2000, "mlra-4"): [1.53, 1.545, 1.515]}
    final = pd.DataFrame([(p, v, i, x) for (p, v), xs in rows.items() for i, x in enumerate(xs)],
                         columns=["point", "variant", "seed", "loss"])
    pts, per = W.gap_points(final, final.drop(columns="loss"), "mlra-4")
    first = np.array([0.10, 0.11, 0.09, 0.09, 0.10])
    last = np.array([0.03, 0.035, 0.025])
    change = last - first[:3]  # seeds 0-2 only
    p = pts.set_index("point")
    assert p["others"].tolist() == [("gqa", "mla"), ("gqa",)] and p["n"].tolist() == [5, 3]
    assert (p.loc[250, "mean"], p.loc[250, "low"], p.loc[250, "high"]) == pytest.approx(_iv(first))
    t = W.trend_row(pts, per, "steps")
    assert (t["n"], t["trend"]) == (3, "falls")
    assert (t["mean"], t["low"], t["high"]) == pytest.approx(_iv(change))
    assert change.mean() != pytest.approx(last.mean() - first.mean())
    table = W.format_gap_table(pts, "mlra-4", "steps")
    assert table["others compared"].tolist() == ["GQA, MLA", "GQA"]


# --- the runs of the length axis ---------------------------------------------------------------


def test_each_length_reads_every_run_the_book_plans_there_and_nothing_else():
    """cpu: 250 steps = the width axis' d-128 runs (5 variants x 5 seeds); 1000 steps = the gating
    page's runs without the gate of the width variants it has (GQA, MLA, MLRA-2, MLRA-4 x 10 seeds;
    its GLA-2 is not a width variant), which include the ladder's own 1000-step runs (same run
    ids); 2000 steps = the ladder's GQA and MLRA-4 without the gate, 3 seeds. Every run is one
    the default book plans."""
    from gtalib.book.design.seeds import DEFAULT_SEEDS

    data = synthetic.synthetic_identity("cpu")

    def rid(r):
        return specs.run_spec(r, "cpu", None, data).run_id

    refs = W.length_refs(make_plan("cpu", 1))
    got = {steps: {(r.variant, r.seed, src) for s, r, src in refs if s == steps}
           for steps in (250, 1000, 2000)}
    assert got[250] == {(v, i, "width") for v in WIDTH_VARIANTS for i in range(5)}
    assert got[1000] == {(v, i, "gate") for v in ("gqa", "mla", "mlra-2", "mlra-4")
                         for i in range(figure_spec("gate").seeds_at("cpu"))}
    assert got[2000] == {(v, i, "ladder") for v in ("gqa", "mlra-4") for i in range(3)}
    assert len(refs) == 25 + 4 * figure_spec("gate").seeds_at("cpu") + 6 == len({rid(r) for _, r, _ in refs})
    plan = make_plan("cpu", DEFAULT_SEEDS)
    planned = {rid(r) for r in (*plan.runs, *plan.ladder_refs)}
    assert {rid(r) for _, r, _ in refs} <= planned
    ladder_1000 = {rid(r) for r in ladder_runs("cpu", part="gate") if r.arm == "alt"
                   and dict(r.train)["max_steps"] == 1000 and dict(r.options)["n_layer"] == 8}
    assert ladder_1000 <= {rid(r) for s, r, _ in refs if s == 1000}
    assert [s for s, _, _ in refs] == sorted(s for s, _, _ in refs)
    # an explicit seed count takes seeds 0..n-1 of every source
    two = W.length_refs(make_plan("cpu", 1), 2)
    assert [sum(s == n for s, _, _ in two) for n in (250, 1000, 2000)] == [10, 8, 4]
    assert {r.seed for _, r, _ in two} == {0, 1}


def test_the_book_s_length_and_seed_overrides_change_no_run_of_the_width_section():
    """A book at 50 steps and 7 seeds reads the ladder at the lengths and counts it was recorded
    at: the same (axis, point, run) triples as the preset's own plan."""
    assert W.width_refs(make_plan("cpu", 7, max_steps=50)) == W.width_refs(make_plan("cpu", 1))
    assert W.length_refs(make_plan("ci", 4, max_steps=3), 2) == W.length_refs(make_plan("ci", 1), 2)


def test_the_width_section_resolves_its_runs_at_the_preset_s_own_lengths(monkeypatch):
    """A source without a length of its own (the main table, an ablation arm at the preset's
    length) takes the book's length unless its runs are resolved under the preset's own design.
    With a ci ladder whose token axis has the preset's 20 steps, where the main table plans the
    most seeds, a book at 50 steps collects the same run ids as the preset's own plan, the main
    table's 20-step runs among them."""

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    monkeypatch.setitem(ladders.LADDERS, "ci", replace(ladder("ci"), token_factors=(1, 2, 3)))
    monkeypatch.setitem(figures.TABLES, "main", replace(figures.TABLES["main"],
                                                        seeds={"cpu": 5, "ci": 4}))  # the most seeds there: its runs

    class Collected(Exception):
        pass

    def collect(refs, plan, *args, **kwargs):
        raise Collected({r: plan.spec(r).run_id for r in refs})

    monkeypatch.setattr(W, "collect_runs", collect)
    ids = []
    for plan in (make_plan("ci", 1), make_plan("ci", 2, max_steps=50)):
        with pytest.raises(Collected) as got:
            W.width_gap(plan)
        ids.append(got.value.args[0])
    assert ids[0] == ids[1]
    main = [r for r in ids[0] if r.arm == "main" and not r.train]
    assert len(main) == 2 * 4  # GQA and MLA, 4 seeds
    assert {specs.run_spec(r, "ci", None).train.max_steps for r in main} == {20}


# --- the whole section on a synthetic store ------------------------------------------------------


def _write_width_store(run_dir, preset, loss):
    """Finished synthetic runs for every run of the width section: constant loss ``loss(ref)``."""
    data = synthetic.synthetic_identity(preset)
    for ref in dict.fromkeys(r for _, _, r in W.width_refs(make_plan(preset, 1))):
        spec = specs.run_spec(ref, preset, None, data)
        path = Path(run_dir) / spec.run_id
        if path.exists():
            continue
        steps = np.arange(1, spec.train.max_steps + 1)
        on_eval = (steps % spec.train.eval_every == 0) | (steps == steps[-1])
        value = loss(ref)
        df = pd.DataFrame({"step": steps, "tokens": steps * 10, "train_loss": value,
                           "val_loss": np.where(on_eval, value, np.nan), "lr": 1e-3})
        synthetic.write_finished_run(run_dir, spec, df)


def test_width_gap_on_a_synthetic_store_and_with_the_wide_runs_missing(tmp_path, monkeypatch):
    import shutil

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)

    def loss(ref):  # MLA behind GQA by 0.1 at d 128 and by 0.04 at d 256, plus 0.002·seed
        d_model = W.ref_width(ref, "ci")[0]
        behind = (0.1 if d_model == 128 else 0.04) if ref.variant == "mla" else 0.0
        return 3.0 - 0.001 * d_model / 128 + behind + 0.002 * ref.seed * (ref.variant == "mla")

    _write_width_store(tmp_path, "ci", loss)
    g = W.width_gap(make_plan("ci", 1), None, tmp_path, record_dir=tmp_path / "none")
    assert g.named == "mla" and g.collected.incomplete.empty
    wide = g.width.set_index("point")
    assert wide.loc[128, "mean"] == pytest.approx(0.101) and wide.loc[256, "mean"] == pytest.approx(0.041)
    trend = g.trends.set_index("axis").loc["width"]
    assert (trend["first"], trend["last"], trend["n"], trend["trend"]) == (128, 256, 2, "falls")
    assert (trend["mean"], trend["low"], trend["high"]) == pytest.approx((-0.06, -0.06, -0.06))
    assert list(g.length["point"]) == [10, 30]
    table = W.format_gap_table(g.width, g.named, "width", preset="ci")
    assert table["d_model"].tolist() == ["128 (4 × 32; MLA latent: 1 block of 128)",
                                         "256 (4 × 64; MLA latent: 1 block of 256)"]
    assert table["best other (mean loss)"].tolist()[0].startswith("GQA (")
    assert table["runs done"].tolist() == ["4 of 4", "4 of 4"]
    assert W.length_sources(g).values.tolist() == [[10, "width axis", 2, "GQA and MLA"],
                                                   [30, "ladder gate", 2, "GQA and MLA"]]
    assert W.width_facts(g) == {"width_named": "MLA", "width_others": "GQA", "width_depth": "2",
                                "width_steps": "10", "width_seeds": "2",
                                "width_confidence": "95%"}
    assert tuple(W.width_facts(g)) == W.FACT_NAMES
    # the wide runs missing: counted in the tables, no trend; nothing fails
    for rid in g.collected.status[g.collected.status["label"].str.contains("d_model=256")]["run_id"]:
        shutil.rmtree(tmp_path / rid)
    g = W.width_gap(make_plan("ci", 1), None, tmp_path, record_dir=tmp_path / "none")
    assert g.trends.set_index("axis").loc["width", "trend"] == "—"  # one point with a gap
    table = W.format_gap_table(g.width, g.named, "width", preset="ci")
    assert table["runs done"].tolist() == ["4 of 4", "0 of 4"]
    assert table["left out"].tolist() == ["—", "all (none done)"]
    bad = W.incomplete_table(g.collected)
    assert len(bad) == 2 and set(bad["state"]) == {"missing"}  # GQA and MLA at d_model 256
    assert bad["seeds"].tolist() == ["0, 1"] * 2 and bad["detail"].tolist() == ["", ""]
    assert all("d_model=256" in label for label in bad["label"])
    W.show_width_gap(g)  # displays without error outside a notebook too
    none = W.width_gap(make_plan("gpu", 1))
    assert none.note == "`gpu`: no width axis (presets with one: `cpu`, `ci`)." and none.width.empty
    assert set(W.width_facts(none).values()) == {"—"} and none.trends.empty
    W.show_width_gap(none)


def test_a_length_an_ablation_page_shares_uses_that_pages_seeds(tmp_path, monkeypatch):
    """ci with a 20-step token rung (the gating page's own length there) and a gating page of 4
    seeds: 10 steps = the width axis' runs (2 seeds), 20 = the gating page's runs without the gate
    (4 seeds; the ladder's 2 are among them), 30 = the ladder's (2 seeds). Each gap is over its
    point's seeds, the change 10 → 30 over seeds 0 and 1; a missing run leaves MLA out of 20."""
    import shutil

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    monkeypatch.setitem(ladders.LADDERS, "ci", replace(ladder("ci"), token_factors=(1, 2, 3)))
    monkeypatch.setitem(figures.ABLATIONS, "gate", replace(figures.ABLATIONS["gate"],
                        seeds={"cpu": 10, "ci": 4}))
    gaps = {10: lambda s: 0.1 + 0.002 * s, 20: lambda s: 0.05 + 0.01 * s,
            30: lambda s: 0.02 + 0.005 * s * s}

    def loss(ref):  # MLA (the named variant at ci) behind GQA by gaps[steps](seed) at d 128
        steps = dict(ref.train).get("max_steps", 20)
        wide = W.ref_width(ref, "ci")[0] == 256
        behind = (0.04 if wide else gaps[steps](ref.seed)) if ref.variant == "mla" else 0.0
        return 3.0 - 0.001 * steps + behind

    _write_width_store(tmp_path, "ci", loss)
    g = W.width_gap(make_plan("ci", 1), None, tmp_path, record_dir=tmp_path / "none")
    assert {s: {src for p, _, src in g.length_runs if p == s} for s in (10, 20, 30)} == {
        10: {"width"}, 20: {"gate"}, 30: {"ladder"}}
    pts = g.length.set_index("point")
    assert pts["n"].to_dict() == {10: 2, 20: 4, 30: 2}
    assert pts["needed"].to_dict() == {10: 4, 20: 8, 30: 4}
    at20 = np.array([gaps[20](s) for s in range(4)])
    lo, hi = stats.t.interval(0.95, 3, loc=at20.mean(), scale=stats.sem(at20))
    assert pts.loc[20, "mean"] == pytest.approx(0.065)
    assert (pts.loc[20, "low"], pts.loc[20, "high"]) == (pytest.approx(lo), pytest.approx(hi))
    change = np.array([gaps[30](s) - gaps[10](s) for s in range(2)])  # -0.080, -0.077
    ch = W.gap_trend(g.length_per_seed, 10, 30)
    assert (ch.n, ch.mean) == (2, pytest.approx(change.mean()))
    trend = g.trends.set_index("axis").loc["steps"]
    assert (trend["first"], trend["last"], trend["n"]) == (10, 30, 2)
    assert trend["mean"] == pytest.approx(change.mean())
    assert (pts.loc[20, "others"], pts.loc[20, "best"]) == (("gqa",), "gqa")
    assert W.length_sources(g).set_index("steps").loc[20].tolist() == [
        f"{figures.ablation('gate').heading} (no gate)", 4, "GQA and MLA"]
    gone = [r for p, r, _ in g.length_runs if p == 20 and r.variant == "mla" and r.seed == 3]
    shutil.rmtree(tmp_path / specs.run_spec(gone[0], "ci", None,
                                             synthetic.synthetic_identity("ci")).run_id)
    g = W.width_gap(make_plan("ci", 1), None, tmp_path, record_dir=tmp_path / "none")
    r20 = g.length.set_index("point").loc[20]
    assert pd.isna(r20["best"]) and r20["left_out"] == (("mla", 3, 4),)
    assert (r20["done"], r20["needed"]) == (7, 8)
    trend = g.trends.set_index("axis").loc["steps"]
    assert (trend["first"], trend["last"], trend["n"]) == (10, 30, 2)  # 10 → 30 still paired


def test_the_parameter_table_prints_a_dash_where_a_variant_has_no_latent():
    t = W.format_width_params(ladders.width_params("cpu")).set_index(["d_model", "config"])
    assert t.loc[(128, "MHA"), "d_c"] == t.loc[(256, "GQA"), "latent block"] == "—"
    assert t.loc[(256, "MLRA-4"), ["d_c", "latent block"]].tolist() == ["256", "64"]
    mha = count_params(model_config("cpu", "mha", d_model=256, head_dim=64, n_layer=8))["total"]
    assert t.loc[(256, "MHA"), "parameters"] == f"{mha:,}" and "," in f"{mha:,}"
    assert t.loc[(128, "MHA"), "vs MHA (%)"] == "+0.000"


def test_width_cost_scales_the_recorded_narrow_run_by_the_flops_ratio(monkeypatch):
    """core_s(d 256) = median recorded core-s at d 128 × 6·N₂₅₆·T / 6·N₁₂₈·T (the tokens are equal,
    so the parameter ratio)."""
    from gtalib.training import record_costs

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    plan = make_plan("cpu", 1)
    narrow = {r.variant: plan.spec(r) for r in ladder_runs("cpu", 1, "width")
              if W.ref_width(r, "cpu")[0] == 128}
    costs = pd.DataFrame({"key": [record_costs.config_key(s) for s in narrow.values()],
                          "core_s_median": [100.0 * (i + 1) for i in range(len(narrow))]})
    c = W.width_cost(make_plan("cpu", 1), costs).set_index("variant")
    assert list(c.index) == list(WIDTH_VARIANTS) and set(c["seeds"]) == {5}
    for i, (v, s) in enumerate(narrow.items()):
        wide = model_config("cpu", v, d_model=256, head_dim=64, n_layer=8)
        ratio = count_params(wide)["total"] / count_params(s.model)["total"]
        assert c.loc[v, "flops_ratio"] == pytest.approx(ratio)
        assert c.loc[v, "core_s"] == pytest.approx(100.0 * (i + 1) * ratio)
    assert 3.9 < c["flops_ratio"].min() <= c["flops_ratio"].max() < 4.0
