"""The joint data-order design (seeds.JOINT_DECLARED, seeds.JOINT, each spec's joint_runs): pair k
of a figure trains both arms at initialisation seed k and data order k, pair 0 is the figure's own
run, the figure is read at one look, and its one-order pairs stay beside it."""


import pytest

from gtalib.book.design import seeds
from gtalib.book.design.figures import figure_spec
from gtalib.book.design.plan import make_plan


def _order(ref) -> int:
    return dict(ref.train).get("data_seed", 0)


def test_the_declared_design_is_ten_joint_pairs_of_every_ablation_figure():
    # declared before any of its runs was read: 10 pairs at cpu, the initialisation and gating
    # figures on 2026-12-05, the latent-scaling and double-heads figures on 2026-12-07
    assert seeds.JOINT_DECLARED["cpu"] == {"init": 10, "gate": 10, "latent_scale": 10,
                                           "double_heads": 10}
    assert set(seeds.JOINT["cpu"]) <= set(seeds.JOINT_DECLARED["cpu"])
    # the joint runs beyond pair 0: pairs 1-9, both arms, of 9 + 5 + 3 + 3 variants
    todo = sum(len(figure_spec(k).joint_runs("cpu", n)) - 2 * len(figure_spec(k).variants_at("cpu"))
               for k, n in seeds.JOINT_DECLARED["cpu"].items())
    assert todo == 2 * 9 * (9 + 5 + 3 + 3) == 360
    # and the pair at seed 0 repeated at data orders 1-4, for every figure
    assert seeds.DATA_ORDERS_DECLARED["cpu"] == dict.fromkeys(
        ("init", "gate", "latent_scale", "double_heads"), (1, 2, 3, 4))


@pytest.mark.parametrize("key", ["latent_scale", "double_heads"])
def test_a_latent_or_heads_arm_that_is_an_init_arm_is_the_same_run(key):
    """Zero init, latent scaling on, one head multiplier: the recommended arm of the
    initialisation figure. Where the new figures' arm is that configuration, its joint run has
    the init figure's run id, so it is recorded once and trained once."""
    plan = make_plan("cpu", 1)
    init = {plan.spec(r).run_id for r in figure_spec("init").joint_runs("cpu", 10)}
    shared = {(r.variant, r.arm) for r in figure_spec(key).joint_runs("cpu", 10) if plan.spec(r).run_id in init}
    assert shared == {(v, "rec") for v in figure_spec(key).variants_at("cpu")
                      if v in figure_spec("init").variants_at("cpu")}


@pytest.mark.parametrize("key", ["init", "gate"])
def test_pair_k_reads_seed_k_and_data_order_k_both_arms_alike(key):
    refs = figure_spec(key).joint_runs("cpu", 10)
    assert len(refs) == 10 * 2 * len(figure_spec(key).variants_at("cpu"))
    assert all(_order(r) == r.seed for r in refs)
    own = figure_spec(key).runs("cpu", 10, joint=False)
    # each joint run is the figure's own run with only the data order changed ...
    base = {(r.variant, r.arm, r.seed): r.train for r in own}
    for r in refs:
        assert tuple(kv for kv in r.train if kv[0] != "data_seed") == base[(r.variant, r.arm,
                                                                            r.seed)]
    # ... and pair 0 is exactly the figure's own pair at seed 0 (the same refs, so the same ids)
    assert [r for r in refs if r.seed == 0] == [r for r in own if r.seed == 0]
    # both arms of every pair share seed and order (the pairing holds)
    arms = {}
    for r in refs:
        arms.setdefault((r.variant, r.seed), set()).add((r.arm, _order(r)))
    assert all(a == {("alt", s), ("rec", s)} for (_, s), a in arms.items())


def test_pair_0_has_the_recorded_run_id_of_the_figure(monkeypatch):
    plan = make_plan("cpu", 1)
    for key in ("init", "gate"):
        ids = {plan.spec(r).run_id for r in figure_spec(key).joint_runs("cpu", 1)}
        assert ids == {plan.spec(r).run_id for r in figure_spec(key).runs("cpu", 1, joint=False)
                       if r.seed == 0}
        later = {plan.spec(r).run_id for r in figure_spec(key).joint_runs("cpu", 2)} - ids
        assert len(later) == 2 * len(figure_spec(key).variants_at("cpu"))  # order 1 is its own run


def test_the_ci_book_goes_through_the_joint_path():
    assert figure_spec("init").reads_joint("ci")
    plan = make_plan("ci", 2)
    joint = plan.figure_refs["init"]
    assert {(r.seed, _order(r)) for r in joint} == {(0, 0), (1, 1)}
    assert {(r.seed, _order(r)) for r in plan.one_order_refs["init"]} == {(0, 0), (1, 0)}
    ids = {plan.spec(r).run_id for r in plan.runs}
    assert {plan.spec(r).run_id for r in (*joint, *plan.one_order_refs["init"])} <= ids
    assert figure_spec("init").looks_at("ci", 2) == (2,)
    # a book-wide length override reads no joint design (the runs are the figure's length)
    assert not figure_spec("init").reads_joint("ci", max_steps=5)
    assert make_plan("ci", 2, max_steps=5).one_order_refs == {}


def test_a_switched_figure_reads_one_look_and_more_seeds_each_at_its_own_order():
    assert figure_spec("init").looks_at("cpu", 1) == (10,)  # one look, declared with the design
    assert figure_spec("latent_scale").looks_at("cpu", 1) == (5, 10)  # a figure not switched keeps two
    plan = make_plan("cpu", 12)  # above the declared pairs: the extra pairs, each its own order
    assert sorted({(r.seed, _order(r)) for r in plan.figure_refs["init"]}) == [
        (k, k) for k in range(12)]
    assert {_order(r) for r in plan.one_order_refs["init"]} == {0}
    assert "latent_scale" not in plan.one_order_refs


def test_bad_pair_counts_are_refused():
    with pytest.raises(ValueError, match="pairs"):
        figure_spec("init").joint_runs("cpu", -1)
    with pytest.raises(KeyError):
        figure_spec("nope").joint_runs("cpu", 2)


def test_a_figure_switches_only_once_every_joint_run_is_recorded():
    from gtalib.training import records
    plan = make_plan("cpu", 1)
    for key in seeds.JOINT["cpu"]:
        missing = [r for r in figure_spec(key).joint_runs("cpu", seeds.JOINT_DECLARED["cpu"][key])
                   if records.find_record(plan.spec(r)) is None]
        assert not missing, f"{key} reads the joint design but lacks {len(missing)} records"
