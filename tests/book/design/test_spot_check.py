"""The spot-check set (:mod:`gtalib.book.design.spot_check`): declared per preset, spread over
every figure and table, first in the job's training order."""

from dataclasses import replace

import pytest

from gtalib.book.design import figures
from gtalib.book.design import spot_check as S
from gtalib.book.design.plan import make_plan
from gtalib.book.design.run_specs import run_identity


@pytest.mark.parametrize("preset", ["cpu", "gpu", "ci"])
def test_the_set_holds_both_arms_at_seed_0_of_its_variant_of_every_figure(preset):
    plan = make_plan(preset, 3)
    refs = S.spot_check_refs(plan)
    chosen = S.spot_check_variants(preset)
    assert set(chosen) == {*figures.ABLATIONS, "main"}
    for key, variant in chosen.items():
        expected = {run_identity(r) for r in plan.figure_refs[key]
                    if r.variant == variant and r.seed == 0}
        assert len(expected) == (1 if key == "main" else 2), key  # both arms of an ablation
        assert expected <= {run_identity(r) for r in refs}, key
    assert {r.seed for r in refs} == {0}
    assert len({run_identity(r) for r in refs}) == len(refs)  # each run once


def test_the_set_follows_the_chapters_a_plan_reads():
    plan = make_plan("cpu", 3, notebooks=("gating_ablation",))
    assert {r.variant for r in S.spot_check_refs(plan)} == {"gla-2"}
    assert S.spot_check_refs(make_plan("paper", 3)) == ()  # no set declared there


def test_the_training_order_is_the_set_then_seed_0_in_rounds_then_the_rest():
    plan = make_plan("cpu", 3)
    order = sum(S.training_tiers(plan), ())  # the order the job offers them in
    assert sorted(map(run_identity, order)) == sorted(map(run_identity, plan.runs))
    assert len(order) == len(plan.runs)
    spot = S.spot_check_refs(plan)
    assert order[:len(spot)] == spot
    # seed 0 at data order 0; the pair at seed 0 repeated at other data orders comes last
    others = {run_identity(r) for refs in plan.data_order_refs.values() for r in refs}
    assert others and all(dict(r.train)["data_seed"] > 0 for refs in plan.data_order_refs.values()
                          for r in refs)
    seed0 = {run_identity(r) for r in plan.runs if r.seed == 0} - others
    tier = order[len(spot):len(seed0)]
    assert {run_identity(r) for r in tier} == seed0 - {run_identity(r) for r in spot}
    # round 1 takes each figure's next variant: the gating figure's GQA pair comes before the
    # initialisation figure's third variant
    labels = [(r.variant, dict(r.train).get("max_steps")) for r in tier]
    assert labels.index(("gqa", 1000)) < labels.index(("mla", None))
    assert all(r.seed > 0 or run_identity(r) in others for r in order[len(seed0):])


def test_a_spec_naming_a_variant_its_figure_does_not_show_is_refused():
    with pytest.raises(ValueError, match=r"figure 'gate': spot_check\['ci'\] = 'mha' is not shown at "
                                         r"'ci'; allowed: gqa, mla"):
        replace(figures.ABLATIONS["gate"], spot_check={"ci": "mha"})
    with pytest.raises(ValueError, match=r"figure 'main': spot_check\['ci'\] = 'tpa' is not shown"):
        replace(figures.TABLES["main"], spot_check={"ci": "tpa"})


def test_the_words_name_each_figure_s_variant():
    assert S.spot_check_words("cpu") == (
        "seed 0, both arms, of MHA (initialisation), GLA-2 (gating), MLRA-2 (latent scaling), "
        "GQA (double heads) and MHA (main results)")
    assert S.spot_check_words("paper") is None


def test_a_figure_that_names_none_is_checked_at_its_first_variant(monkeypatch):
    assert S.spot_check_variants("cpu")["gate"] == "gla-2"  # as declared
    monkeypatch.setitem(figures.ABLATIONS, "gate",
                        replace(figures.ABLATIONS["gate"], spot_check={}))
    assert S.spot_check_variants("cpu")["gate"] == "gqa"  # the figure's first
    assert S.spot_check_variants("paper") == {}


def test_the_tiers_hold_each_run_once_the_set_first():
    plan = make_plan("cpu", 3)
    spot, seed0, rest = S.training_tiers(plan)
    assert spot == S.spot_check_refs(plan)
    assert {r.seed for r in seed0} == {0}
    # the rest: the other seeds, then seed 0 only at the other data orders
    assert all(r.seed > 0 or dict(r.train).get("data_seed", 0) > 0 for r in rest)
    assert {dict(r.train)["data_seed"] for r in rest if r.seed == 0} == {1, 2, 3, 4}
    assert len(spot) + len(seed0) + len(rest) == len(plan.runs)
