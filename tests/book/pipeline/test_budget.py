"""What the book's runs cost on this machine and which fit a budget (:mod:`gtalib.book.pipeline.budget`)."""

import math
from types import SimpleNamespace

import pandas as pd
import pytest
from synthetic import synthetic_identity  # noqa: E402

from gtalib.book.design import run_specs as specs
from gtalib.book.design.names import display_name
from gtalib.book.design.plan import make_plan
from gtalib.book.pipeline import budget, calibration
from gtalib.training import record_costs


@pytest.fixture()
def ci_specs(monkeypatch):
    monkeypatch.setattr(specs, "data_spec", synthetic_identity)
    plan = make_plan("ci", 2)
    return plan, [s for _, s in plan.specs()]


def test_makespan_is_the_longest_first_schedule():
    assert budget.makespan([3, 1, 2], 1) == 6  # one worker: the sum
    assert budget.makespan([3, 1, 2], 5) == 3  # a worker each: the longest
    # LPT: 3|3, 5|3, 5|5, 7|5 (the optimum, 3+3 | 2+2+2 = 6, is not what it finds)
    assert budget.makespan([2, 3, 2, 3, 2], 2) == 7
    assert budget.makespan([], 2) == 0
    with pytest.raises(ValueError, match="workers must be >= 1"):
        budget.makespan([1], 0)


def test_groups_keep_every_pair_together(ci_specs):
    _, todo = ci_specs
    tasks = budget.groups(todo)
    assert sorted(s.run_id for g in tasks for s in g) == sorted(s.run_id for s in todo)
    for g in tasks:
        assert len({(s.model.variant, s.seed, s.train) for s in g}) == 1
    # both arms of the init ablation's GQA pair at seed 0 are one task
    arms = [s for s in todo if s.model.variant == "gqa" and s.seed == 0
            and s.train.max_steps == todo[0].train.max_steps and s.train.data_seed == 0]
    assert len(arms) >= 2 and any(all(a in g for a in arms) for g in tasks)


def _costs(spec_seconds=()) -> pd.DataFrame:
    """A cost table (as :func:`gtalib.training.record_costs.cost_table`) with the given medians:
    ``(spec, seconds)`` pairs, one per configuration."""
    rows = {record_costs.config_key(s): sec for s, sec in spec_seconds}
    return pd.DataFrame([{"key": k, "core_s_median": sec, "train_s_median": sec}
                         for k, sec in rows.items()],
                        columns=["key", "core_s_median", "train_s_median"])


def test_expected_seconds_scale_records_and_fall_back_to_flops(ci_specs):
    _, todo = ci_specs
    a, b = todo[0], next(s for s in todo if record_costs.config_key(s) != record_costs.config_key(todo[0]))
    cal = calibration.Calibration(seconds_per_step=0.2, recorded_seconds_per_step=0.1, flops_per_s=1e9)
    assert cal.factor == pytest.approx(2.0)
    costs = _costs([(a, 30.0)])
    assert budget.expected_seconds(a, cal, costs) == (pytest.approx(60.0), "recorded")
    sec, basis = budget.expected_seconds(b, cal, costs)
    assert basis == "FLOPs" and sec == pytest.approx(calibration.training_flops(b) / 1e9
                                                     + budget.RUN_SETUP_S)
    # 6 · N · D (Kaplan et al. 2020), in closed form for one run
    from gtalib.model.params import count_params

    assert calibration.training_flops(b) == 6 * count_params(b.model)["total"] * (
        b.train.max_steps * b.train.batch_size * b.train.seq_len)


def test_choose_trains_what_has_no_record_and_fills_the_budget_in_plan_order(ci_specs):
    _, todo = ci_specs
    cal = calibration.Calibration(1.0, 1.0, 1e9)
    costs = _costs([(s, 100.0) for s in todo])  # every run 100 s here
    tasks = budget.groups(todo)
    unrecorded = {s.run_id for s in tasks[1]}  # the second task has no record
    recorded = {s.run_id: s.run_id not in unrecorded for s in todo}
    rest = budget.REST_S * cal.factor

    # a budget that the task without a record alone overshoots: only it is trained
    c = budget.choose(todo, recorded, cal, costs, workers=1, budget_s=1.0)
    assert c.train == [tasks[1]] and c.over_budget
    assert c.train_wall_s == pytest.approx(100.0 * len(tasks[1]) + budget.START_S)
    assert {s.run_id for s in c.read} == {s.run_id for g in tasks if g is not tasks[1] for s in g}

    # room for it and the first task on two workers: both, in the plan's order; the others are
    # read whole (no task split between trained and read)
    need = budget.makespan([100.0 * len(tasks[0]), 100.0 * len(tasks[1])], 2) + rest + budget.START_S
    c = budget.choose(todo, recorded, cal, costs, workers=2, budget_s=need / budget.BUDGET_FILL)
    assert c.train[:2] == [tasks[0], tasks[1]] and not c.over_budget
    assert c.job_wall_s <= budget.BUDGET_FILL * c.budget_s + 1e-9
    trained = {s.run_id for g in c.train for s in g}
    for g in tasks:
        assert {s.run_id in trained for s in g} in ({True}, {False})
    assert len(trained) + len(c.read) == len(todo)

    # no budget: everything
    c = budget.choose(todo, recorded, cal, costs, workers=2, budget_s=None)
    assert c.train == tasks and c.read == []
    with pytest.raises(ValueError, match="budget"):
        budget.choose(todo, recorded, cal, costs, workers=2, budget_s=0)


def test_calibration_compares_this_machine_with_the_record(ci_specs, monkeypatch):
    plan, _ = ci_specs
    ref = calibration.reference_spec(plan)
    assert (ref.model.variant, ref.seed) == ("mha", 0)
    costs = _costs([(ref, 0.5 * ref.train.max_steps)])  # recorded: 0.5 s per step
    cal = calibration.calibrate(plan, costs, steps=2)
    assert cal.recorded_seconds_per_step == pytest.approx(0.5)
    assert cal.factor == pytest.approx(cal.seconds_per_step / 0.5)
    assert cal.flops_per_s == pytest.approx(
        calibration.training_flops(ref) / ref.train.max_steps / cal.seconds_per_step)
    assert calibration.calibrate(plan, _costs(), steps=1).factor == 1.0  # nothing recorded
    with pytest.raises(ValueError, match="steps"):
        calibration.calibrate(plan, costs, steps=0)


def test_a_calibration_is_the_median_step_after_the_warm_up(ci_specs, monkeypatch):
    plan, _ = ci_specs
    ref = calibration.reference_spec(plan)
    # each step's seconds on a scripted clock: slow warm-up steps, then one step held up by
    # other work; the calibration reads neither (a mean of the timed steps would say 2.0 s)
    steps = [7.0] * calibration.WARMUP_STEPS + [1.0, 1.25, 9.0, 1.0, 1.5, 1.0, 1.0, 1.25]
    assert len(steps) == calibration.WARMUP_STEPS + calibration.CALIBRATION_STEPS
    clock = {"now": 0.0, "calls": 0}

    def perf_counter():  # called at each step's start and end, in turn
        if clock["calls"] % 2:
            clock["now"] += steps[clock["calls"] // 2]
        clock["calls"] += 1
        return clock["now"]

    monkeypatch.setattr(calibration, "time", SimpleNamespace(perf_counter=perf_counter))
    assert calibration.time_steps(ref.to_dict()) == pytest.approx(1.125)
    assert clock["calls"] == 2 * len(steps)
    with pytest.raises(ValueError):
        calibration.steady_step_s([])


def test_the_job_prints_its_prediction(ci_specs):
    plan, todo = ci_specs
    cal = calibration.Calibration(0.3, 0.2, 2e9)
    recorded = {s.run_id: True for s in todo}
    c = budget.choose(todo, recorded, cal, _costs(), workers=2, budget_s=3600)
    text = budget.describe(c, cal, "this machine")
    assert "0.300 s per step" in text and "recorded costs × 1.50" in text
    assert f"training {len(todo)} run(s)" in text and "budget: 60 min; 0 run(s)" in text
    assert not math.isnan(c.job_wall_s)


def test_late_tasks_drops_the_optional_tasks_that_would_end_after_the_deadline():
    cost = {"a": 10, "b": 10, "c": 10, "d": 1}
    # two workers, one busy until t=5: a starts at 0 and ends at 10, b at 5 -> 15, c at 10 -> 20
    # (past 18: dropped, its worker stays free), d at 10 -> 11
    assert budget.late_tasks([("a", True), ("b", True), ("c", True), ("d", True)], cost,
                             running_ends=[5.0], workers=2, now=0.0, deadline=18.0) == ["c"]
    # a task that must be trained (not optional) is kept, and takes its worker's time
    assert budget.late_tasks([("a", False), ("b", False), ("c", False), ("d", True)], cost,
                             running_ends=[5.0], workers=2, now=0.0, deadline=18.0) == []
    assert budget.late_tasks([("c", False), ("a", True), ("b", True)], cost, [5.0], 2, 0.0,
                             18.0) == ["b"]  # c 0->10, a 5->15, b 10->20
    # the pace scales every prediction: at x2, a ends at 20
    assert budget.late_tasks([("a", True), ("d", True)], cost, [], 1, 0.0, 18.0, pace=2.0) == ["a"]
    # a worker still busy past `now` is used from when it frees up, a free one from now
    assert budget.late_tasks([("d", True)], cost, [30.0], 1, 0.0, 18.0) == ["d"]
    assert budget.late_tasks([("d", True)], cost, [30.0], 2, 12.0, 18.0) == []


def test_the_deadline_leaves_the_rest_of_the_budget_to_the_job_after_training(ci_specs):
    _, todo = ci_specs
    cal = calibration.Calibration(1.5, 1.0, 1e9)  # this machine 1.5x the records
    costs = _costs([(s, 100.0) for s in todo])
    c = budget.choose(todo, {s.run_id: True for s in todo}, cal, costs, 2, budget_s=600)
    # the corpus comes before training, inside the time the deadline counts from the job's start
    assert budget.train_deadline_s(c) == pytest.approx(
        budget.BUDGET_FILL * 600 - budget.AFTER_TRAIN_S * 1.5)
    assert c.job_wall_s == pytest.approx(budget.BEFORE_TRAIN_S * 1.5 + c.train_wall_s
                                         + budget.AFTER_TRAIN_S * 1.5)
    assert budget.train_deadline_s(budget.choose(todo, {s.run_id: True for s in todo}, cal, costs,
                                                 2, None)) is None


def test_at_the_predicted_pace_the_deadline_drops_nothing_the_prediction_fitted(ci_specs):
    """One schedule: the tasks :func:`choose` fits, started when it says training starts
    (``elapsed_s`` + START_S after the job's start) in :func:`start_order`, all optional, end by
    :func:`train_deadline_s` at pace 1.00 on every budget; and it fills that limit, so a deadline
    that counted the time before training twice (the corpus in both the job's clock and the
    rest of the job, the drop "× 1.00 of the prediction") drops runs at some budget."""
    _, todo = ci_specs
    cal = calibration.Calibration(1.0, 1.0, 1e9)
    costs = _costs([(s, 20.0 + 7.0 * i) for i, s in enumerate(todo)])
    recorded = {s.run_id: True for s in todo}
    first = {todo[-1].run_id}
    dropped_if_counted_twice = 0
    for budget_s in range(150, 1200, 37):
        for elapsed in (3.0, 40.0):
            c = budget.choose(todo, recorded, cal, costs, 2, budget_s, first, elapsed_s=elapsed)
            tasks = budget.start_order(c.train, c.seconds, c.first)
            cost = {i: sum(c.seconds[s.run_id] for s in g) for i, g in enumerate(tasks)}
            pending = [(i, True) for i in range(len(tasks))]
            deadline = budget.train_deadline_s(c)
            start = elapsed + budget.START_S
            assert budget.late_tasks(pending, cost, [], 2, start, deadline) == [], budget_s
            assert start + c.train_wall_s - budget.START_S <= deadline + 1e-9
            dropped_if_counted_twice += bool(budget.late_tasks(
                pending, cost, [], 2, start, deadline - budget.BEFORE_TRAIN_S))
    assert dropped_if_counted_twice > 0


def test_start_order_puts_the_spot_check_first_then_the_longest():
    class Spec:  # what start_order reads of a RunSpec
        def __init__(self, run_id):
            self.run_id = run_id

    tasks = [[Spec("a")], [Spec("b"), Spec("c")], [Spec("d")]]
    cost = {"a": 5.0, "b": 1.0, "c": 1.0, "d": 9.0}
    assert budget.start_order(tasks, cost) == [tasks[2], tasks[0], tasks[1]]  # longest first
    assert budget.start_order(tasks, cost, {"c"}) == [tasks[1], tasks[2], tasks[0]]
    # in that order on two workers: 2 | 9 → 2+5 | 9 = 9; longest first would also give 9
    assert budget.makespan([2.0, 9.0, 5.0], 2, ordered=True) == 9.0
    assert budget.makespan([1.0, 1.0, 4.0], 2, ordered=True) == 5.0  # LPT: 4 | 1+1 = 4


def test_choose_trains_the_spot_check_before_runs_offered_earlier(ci_specs):
    _, todo = ci_specs
    cal = calibration.Calibration(1.0, 1.0, 1e9)
    costs = _costs([(s, 100.0) for s in todo])
    tasks = budget.groups(todo)
    recorded = {s.run_id: True for s in todo}
    first = {s.run_id for s in tasks[-1]}
    offered = [s for s in tasks[-1]] + [s for g in tasks[:-1] for s in g]  # the job's order
    fits_one = (100.0 * len(tasks[-1]) + budget.START_S + budget.REST_S) / budget.BUDGET_FILL
    c = budget.choose(offered, recorded, cal, costs, workers=1, budget_s=fits_one + 1, first=first)
    assert [{s.run_id for s in g} for g in c.train] == [first]
    assert "spot-check: " + str(len(first)) + " run(s) of the declared set" in budget.describe(
        c, cal, "here")


def test_the_spot_check_set_fits_the_default_budget_on_the_slowest_cpu_seen():
    """The default book (cpu, 2 workers, 60 min, nothing in the store) at the slowest CPU's
    factor over the recorded costs: the whole spot-check set is trained, and its tasks (with the
    runs they bring along) alone leave a tenth of the budget's training time free."""
    from gtalib.book.design.spot_check import (
        SLOWEST_FACTOR,
        spot_check_refs,
        training_tiers,
    )
    from gtalib.book.pipeline.job import DEFAULT_BUDGET_MIN

    plan = make_plan("cpu", 3)
    todo = list({s.run_id: s for s in map(plan.spec, sum(training_tiers(plan), ()))}.values())
    first = {plan.spec(r).run_id for r in spot_check_refs(plan)}
    cal = calibration.Calibration(SLOWEST_FACTOR, 1.0, 1e9)  # recorded costs × the factor
    costs = record_costs.cost_table()
    recorded = {s.run_id: True for s in todo}
    c = budget.choose(todo, recorded, cal, costs, 2, DEFAULT_BUDGET_MIN * 60, first)
    assert first <= {s.run_id for g in c.train for s in g}
    spot_tasks = [g for g in budget.groups(todo) if any(s.run_id in first for s in g)]
    alone = budget.choose([s for g in spot_tasks for s in g], recorded, cal, costs, 2, None)
    limit = budget.train_deadline_s(c)
    assert alone.train_wall_s <= 0.9 * limit, (alone.train_wall_s, limit)


def test_a_later_tier_waits_until_every_task_of_the_earlier_ones_fits(ci_specs, monkeypatch):
    """A seed-0 task that does not fit keeps every other-seed task out, even one that would fit:
    more variants are checked before more seeds; within a tier a smaller task still fills in."""
    _, todo = ci_specs
    cal = calibration.Calibration(1.0, 1.0, 1e9)
    tasks = budget.groups(todo)[:4]
    big, small, other_seed, small_2 = tasks
    seconds = {**{s.run_id: 1000.0 for s in big}, **{s.run_id: 10.0 for s in small + small_2},
               **{s.run_id: 1.0 for s in other_seed}}
    monkeypatch.setattr(budget, "expected_seconds", lambda s, cal, costs: (seconds[s.run_id], "x"))
    costs = _costs()
    offered = [s for g in (big, small, small_2, other_seed) for s in g]
    tier = {**{s.run_id: 1 for g in (big, small, small_2) for s in g},
            **{s.run_id: 2 for s in other_seed}}
    recorded = {s.run_id: True for s in offered}
    fits = (10.0 * (len(small) + len(small_2)) + 1.0 * len(other_seed) + budget.START_S
            + budget.REST_S) / budget.BUDGET_FILL
    c = budget.choose(offered, recorded, cal, costs, 1, fits + 1, tier=tier)
    assert [g for g in c.train] == [small, small_2]  # the other seed's task waits
    c = budget.choose(offered, recorded, cal, costs, 1, fits + 1)  # one tier: it fills in
    assert [g for g in c.train] == [small, small_2, other_seed]


def test_the_paper_preset_is_costed_from_flops_without_building_its_model(monkeypatch):
    """A paper-size step would take days to time on a CPU: the calibration times nothing,
    every run is its FLOPs at the recorded runs' throughput, and the GPU line is 6·N·D over
    40 % of an H100's peak, in closed form."""
    from gtalib.model.params import count_params

    def no_model(*_a, **_k):
        raise AssertionError("a model was built or timed")

    monkeypatch.setattr(calibration, "time_steps", no_model)
    monkeypatch.setattr(calibration, "GPT", no_model)
    costs = record_costs.cost_table()
    rate = calibration.recorded_flops_per_s(costs)
    # the recorded cpu reference itself: its FLOPs over its recorded core-seconds is of that order
    cpu_ref = calibration.reference_spec(make_plan("cpu", 3))
    row = costs[costs["key"] == record_costs.config_key(cpu_ref)].iloc[0]
    assert 0.3 < rate / (calibration.training_flops(cpu_ref) / row["core_s_median"]) < 3
    plan = make_plan("paper", 1, notebooks=["init_ablation"])
    plan.data(build=True)  # the run ids hash the GPT-2-tokenised corpus (seconds; no model)
    ref = calibration.reference_spec(plan)
    assert calibration.timed_step_s(ref, costs) > calibration.MAX_TIMED_STEP_S
    cal = calibration.flops_calibration(plan, costs)
    assert not cal.timed and cal.flops_per_s == pytest.approx(rate)
    sec, basis = budget.expected_seconds(ref, cal, costs)
    assert basis == "FLOPs" and sec == pytest.approx(calibration.training_flops(ref) / rate
                                                     + budget.RUN_SETUP_S)
    n = count_params(ref.model)["total"]
    hours = 6 * n * ref.train.max_steps * ref.train.tokens_per_step / (989e12 * 0.4) / 3600
    words = budget.gpu_words([ref])
    assert f"≈ {hours:,.0f} GPU-hours" in words
    assert f"≥ {n * 16 / 1e9:.0f} GB of GPU memory" in words
    assert "calibration: none timed" in budget.describe(
        budget.choose([ref], {ref.run_id: False}, cal, costs, 1, 3600), cal, "here")


def test_each_family_is_scaled_from_a_cpu_kind_that_recorded_it(ci_specs):
    """A 1,000-step configuration recorded only on kind B is scaled by its family's calibration
    against B, whatever the reference family's factor: the prediction is recorded cost on B ×
    this machine's step over B's step, in closed form."""
    _, todo = ci_specs
    a, b = todo[0], next(s for s in todo if calibration.family(s) == calibration.family(todo[0])
                         and record_costs.config_key(s) != record_costs.config_key(todo[0]))
    by_a = {"A": {"runs": 3, "core_s": 100.0, "train_s": 100.0},
            "B": {"runs": 1, "core_s": 50.0, "train_s": 50.0}}
    by_b = {"B": {"runs": 2, "core_s": 80.0, "train_s": 80.0}}
    costs = pd.DataFrame([{"key": record_costs.config_key(s), "core_s_median": m,
                           "train_s_median": m, "by_cpu": by}
                          for s, m, by in ((a, 90.0, by_a), (b, 80.0, by_b))])
    n = a.train.max_steps
    fam = calibration.FamilyCalibration("x", 0.3, {"A": 100.0 / n, "B": 50.0 / n}, 1e9)
    cal = calibration.Calibration(9.0, 1.0, 1e9, families={calibration.family(a): fam}, cpu="A")
    # a on this machine's own kind A: 100 s × 0.3 / (100/n)
    assert budget.expected_seconds(a, cal, costs)[0] == pytest.approx(100.0 * 0.3 * n / 100.0)
    # b only on B: 80 s × 0.3 / (50/n), not 80 s × the reference factor 9
    assert budget.expected_seconds(b, cal, costs)[0] == pytest.approx(80.0 * 0.3 * n / 50.0)
    # without a family calibration: the overall median × factor, as before
    plain = calibration.Calibration(9.0, 1.0, 1e9)
    assert budget.expected_seconds(b, plain, costs)[0] == pytest.approx(80.0 * 9.0)


def test_a_variant_this_kind_never_recorded_is_timed_and_scaled_on_its_own(ci_specs):
    """Variants do not slow down alike from one CPU kind to another: a run whose configuration
    this kind (A) never recorded gets a calibration of its own variant (calibration_specs) and
    is scaled through it from the kind that recorded both; a run recorded here keeps its
    family's calibration against this kind's records. Closed form."""
    plan, todo = ci_specs
    a = todo[0]
    b = next(s for s in todo if calibration.family(s) == calibration.family(a)
             and s.model.variant != a.model.variant)
    by_a = {"A": {"runs": 3, "core_s": 100.0, "train_s": 100.0}}
    by_b = {"B": {"runs": 2, "core_s": 80.0, "train_s": 80.0}}
    costs = pd.DataFrame([{"key": record_costs.config_key(s), "core_s_median": m,
                           "train_s_median": m, "by_cpu": by}
                          for s, m, by in ((a, 100.0, by_a), (b, 80.0, by_b))])
    chosen = calibration.calibration_specs(plan, [a, b], costs, cpu="A")
    assert chosen[calibration.variant_family(b)] is b
    assert calibration.variant_family(a) not in chosen  # recorded on this kind: its family serves
    n = a.train.max_steps
    fam = calibration.FamilyCalibration("x", 0.3, {"A": 100.0 / n}, 1e9)
    own = calibration.FamilyCalibration("y", 0.5, {"B": 80.0 / n}, 1e9)
    cal = calibration.Calibration(9.0, 1.0, 1e9, families={calibration.family(a): fam,
                                                      calibration.variant_family(b): own}, cpu="A")
    assert budget.expected_seconds(a, cal, costs)[0] == pytest.approx(100.0 * 0.3 * n / 100.0)
    # b: 80 s on B × its own variant's step now over its step on B
    assert budget.expected_seconds(b, cal, costs)[0] == pytest.approx(80.0 * 0.5 * n / 80.0)
    assert calibration.family_words(calibration.variant_family(b)).startswith(
        f"{display_name(b.model.variant)}, {n:,}-step runs")


def test_family_times_sum_predicted_and_measured_per_family(ci_specs):
    _, todo = ci_specs
    fams = {}
    for s in todo:
        fams.setdefault(calibration.family(s), []).append(s)
    predicted = {s.run_id: 10.0 for s in todo}
    measured = {s.run_id: 12.0 for s in todo[::2]}
    rows = budget.family_times(todo, predicted, measured)
    assert sum(r["runs"] for r in rows) == len(measured)
    for r in rows:
        assert r["measured_s"] == pytest.approx(1.2 * r["predicted_s"])
    assert all("(× 1.20)" in line for line in budget.family_lines(rows))

    # per configuration: the seed and data order left out, as a recorded cost leaves them out
    measured = {s.run_id: (12.0 if i % 3 else 10.5) for i, s in enumerate(todo)}
    configs = budget.family_times(todo, predicted, measured, per="configuration")
    keys = {record_costs.config_key(s) for s in todo}
    assert len(configs) == len(keys) < len(todo)  # the ci plan has two seeds of each
    assert sum(r["runs"] for r in configs) == len(todo)
    assert all(r["configuration"].endswith(calibration.family_words(calibration.family(todo[0])))
               and "seed" not in r["configuration"] for r in configs)
    ratios = [r["measured_s"] / r["predicted_s"] for r in configs]
    within = sum(abs(x - 1) <= budget.CONFIG_TOLERANCE for x in ratios)
    assert 0 < within < len(ratios)  # 1.20 is outside ±15 %, 1.05 and 1.15 within
    last = budget.family_lines(rows, configs)[-1]
    assert last.startswith(f"prediction: {within} of {len(configs)} configuration(s) within ±15 %")
    assert f"(× {min(ratios):.2f}–{max(ratios):.2f})" in last
    with pytest.raises(ValueError, match="per must be 'family' or 'configuration'"):
        budget.family_times(todo, predicted, measured, per="variant")
