"""What the book's runs cost on this machine and which fit a budget (:mod:`gtalib.book.pipeline.budget`)."""

import dataclasses
import math
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from synthetic import synthetic_identity  # noqa: E402

from gtalib.book.design import run_specs as specs
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


def _cost_each(monkeypatch, seconds):
    """Every run's expected seconds here: ``seconds(spec)``."""
    monkeypatch.setattr(budget, "expected_seconds", lambda s, cal: (seconds(s), "timed"))


def test_expected_seconds_are_the_timed_steps_with_evaluations_and_setup(ci_specs):
    _, todo = ci_specs
    a, b = todo[0], next(s for s in todo if calibration.step_shape(s) != calibration.step_shape(todo[0]))
    timing = calibration.StepTiming("x", 0.2)
    cal = calibration.Calibration(seconds_per_step=0.2, recorded_seconds_per_step=0.1, flops_per_s=1e9,
                                  steps={calibration.step_shape(a): timing})
    assert cal.factor == pytest.approx(2.0)
    share = calibration.evaluation_share(a)
    assert budget.expected_seconds(a, cal) == (
        pytest.approx(a.train.max_steps * 0.2 * (1 + share) + budget.RUN_SETUP_S), "timed")
    # a setup timed here replaces the constant
    timed_setup = dataclasses.replace(cal, setup_s=0.9)
    assert budget.expected_seconds(a, timed_setup)[0] == pytest.approx(
        a.train.max_steps * 0.2 * (1 + share) + 0.9)
    sec, basis = budget.expected_seconds(b, cal)
    assert basis == "FLOPs" and sec == pytest.approx(
        calibration.training_flops(b) / 1e9 * (1 + calibration.evaluation_share(b))
        + budget.RUN_SETUP_S)
    # 6 · N · D (Kaplan et al. 2020), in closed form for one run
    from gtalib.model.params import count_params

    assert calibration.training_flops(b) == 6 * count_params(b.model)["total"] * (
        b.train.max_steps * b.train.batch_size * b.train.seq_len)


def test_choose_trains_what_has_no_record_and_fills_the_budget_in_plan_order(ci_specs, monkeypatch):
    _, todo = ci_specs
    cal = calibration.Calibration(1.0, 1.0, 1e9)
    _cost_each(monkeypatch, lambda s: 100.0)  # every run 100 s here
    costs = _costs()
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


def test_calibration_times_every_step_shape_and_compares_the_reference_with_its_record(ci_specs):
    plan, todo = ci_specs
    ref = calibration.reference_spec(plan)
    assert (ref.model.variant, ref.seed) == ("mha", 0)
    costs = _costs([(ref, 0.5 * ref.train.max_steps)])  # recorded: 0.5 s per step
    shapes = {calibration.step_shape(s) for s in todo}
    # seconds already timed on the workers are taken as they are; the other shapes (here the
    # reference's and one more) are timed here
    *given, left = sorted(shapes - {calibration.step_shape(ref)}, key=repr)
    cal = calibration.calibrate(plan, costs, steps=2, timed=dict.fromkeys(given, 123.0),
                                todo=todo, workers=2)
    assert set(cal.steps) == shapes | {calibration.step_shape(ref)} and cal.workers == 2
    assert given and all(cal.steps[g].seconds_per_step == 123.0 for g in given)
    assert all(0 < t.seconds_per_step < 60 for k, t in cal.steps.items() if k not in given)
    assert cal.steps[left].basis == "timed"
    assert cal.seconds_per_step == cal.steps[calibration.step_shape(ref)].seconds_per_step
    assert cal.recorded_seconds_per_step == pytest.approx(0.5)
    assert cal.factor == pytest.approx(cal.seconds_per_step / 0.5)
    assert cal.flops_per_s == pytest.approx(
        calibration.training_flops(ref) / ref.train.max_steps / cal.seconds_per_step)
    assert calibration.calibrate(plan, _costs(), steps=1).factor == 1.0  # nothing recorded
    with pytest.raises(ValueError, match="steps"):
        calibration.calibrate(plan, costs, steps=0)


def test_each_shape_is_timed_in_rounds_beside_other_shapes_and_the_median_kept(ci_specs):
    """calibrate_workers times every shape CALIBRATION_ROUNDS times, each round in another
    order, so that on two workers a shape shares the machine with another shape each time, and
    one timing more keeps the other worker busy while the last one runs; its seconds per step
    are the median of its timings (one fast or slow timing moves nothing)."""
    plan, todo = ci_specs
    specs = calibration.calibration_specs(plan, todo)
    assert len(specs) >= 3
    keys = list(specs)
    started = []

    class Done:  # a finished Dask future
        def __init__(self, value):
            self.value = value

        def result(self):
            return self.value

    class Client:  # two workers, tasks started in submission order as the scheduler queues them
        def wait_for_workers(self, n, timeout):
            pass

        def map(self, fn, dicts, **kw):
            assert kw["pure"] is False
            if fn is calibration.shape_flops:  # every shape the same arithmetic
                return [Done(1e9) for _ in dicts]
            assert fn is calibration.time_steps
            started.extend(dicts)
            # the k-th timing of a shape: 1.0, 3.0, 2.0 s per step
            return [Done((1.0, 3.0, 2.0, 9.0)[sum(d == e for e in dicts[:i])])
                    for i, d in enumerate(dicts)]

        def gather(self, futures):
            return [f.result() for f in futures]

        def scheduler_info(self):
            return {"workers": {"a": {}, "b": {}}}

    timed, setup_s, workers = calibration.calibrate_workers(Client(), specs)
    assert (setup_s, workers) == (None, 2)
    # the rounds, then one filler (the first shape again) that nobody reads
    assert len(started) == calibration.CALIBRATION_ROUNDS * len(keys) + 1
    assert started[-1] == started[0]
    assert {k: t.seconds_per_step for k, t in timed.items()} == {
        k: pytest.approx(2.0) for k in keys}  # the median of 1.0, 3.0, 2.0
    assert all(t.basis == "timed" and t.note == "" for t in timed.values())
    # pairs of tasks started together on the two workers: no two shapes meet twice
    index = {str(specs[k].to_dict()): i for i, k in enumerate(keys)}
    rounds = started[:-1]
    pairs = [frozenset(index[str(d)] for d in rounds[i:i + 2]) for i in range(0, len(rounds) - 1, 2)]
    assert len(pairs) == len(set(pairs))


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
    # steps of 1/16 s: timed until they last MIN_TIMED_S (1 s), 16 steps rather than 8
    assert calibration.MIN_TIMED_S == 1.0
    steps[:] = [7.0] * calibration.WARMUP_STEPS + [0.0625] * 100
    clock.update(now=0.0, calls=0)
    assert calibration.time_steps(ref.to_dict()) == pytest.approx(0.0625)
    assert clock["calls"] == 2 * (calibration.WARMUP_STEPS + 16)
    # steps of 1/64 s: 64 would last 1 s, but a timing runs no more steps than the run has
    # (a ci run: 20)
    assert ref.train.max_steps == 20
    steps[:] = [7.0] * calibration.WARMUP_STEPS + [1 / 64] * 100
    clock.update(now=0.0, calls=0)
    assert calibration.time_steps(ref.to_dict()) == pytest.approx(1 / 64)
    assert clock["calls"] == 2 * ref.train.max_steps
    with pytest.raises(ValueError):
        calibration.steady_step_s([])


def test_a_runs_setup_is_its_wall_time_less_its_steps_and_evaluations(ci_specs, monkeypatch, tmp_path):
    """time_setup trains the run for SETUP_STEPS steps twice (the first pays the imports) and
    returns the second's wall time less its card's train_wall_s, on a scripted clock."""
    import json

    plan, _ = ci_specs
    ref = calibration.reference_spec(plan)
    calls, clock = [], {"now": 0.0}
    walls = iter([9.0, 3.5])  # the first run is slow: imports

    def ensure_run(spec, store):
        calls.append((spec.train.max_steps, spec.train.warmup_steps, store))
        clock["now"] += next(walls)
        path = tmp_path / f"run{len(calls)}"
        path.mkdir()
        (path / "card.json").write_text(json.dumps({"train_wall_s": 1.25}))
        return path

    monkeypatch.setattr(calibration, "ensure_run", ensure_run)
    monkeypatch.setattr(calibration, "time", SimpleNamespace(perf_counter=lambda: clock["now"]))
    assert calibration.time_setup(ref.to_dict()) == pytest.approx(3.5 - 1.25)
    assert [c[:2] for c in calls] == [(calibration.SETUP_STEPS, 0)] * 2
    assert calls[0][2] != calls[1][2]  # two fresh stores, both removed
    assert not any(Path(c[2]).exists() for c in calls)
    with pytest.raises(ValueError, match="threads"):
        calibration.time_setup(ref.to_dict(), threads=0)


def test_the_job_prints_its_prediction(ci_specs):
    plan, todo = ci_specs
    ref = calibration.reference_spec(plan)
    cal = calibration.Calibration(0.3, 0.2, 2e9, workers=2, steps={
        calibration.step_shape(ref): calibration.StepTiming("mha n_head=4", 0.3),
        calibration.step_shape(todo[-1]): calibration.StepTiming("other", 0.45)}, setup_s=0.5)
    recorded = {s.run_id: True for s in todo}
    c = budget.choose(todo, recorded, cal, _costs(), workers=2, budget_s=3600)
    text = budget.describe(c, cal, "this machine")
    assert ("2 step shape(s) timed three times on 2 worker(s), as many at once, 0.300–0.450 s "
            "per step, "
            "a run's setup 0.50 s; the reference run") in text
    assert "(MHA) 0.300 s against 0.200 s recorded: the rest of the job × 1.50" in text
    assert budget.step_lines(cal) == "  mha n_head=4: 0.300 s per step\n  other: 0.450 s per step"
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


def test_the_deadline_leaves_the_rest_of_the_budget_to_the_job_after_training(ci_specs, monkeypatch):
    _, todo = ci_specs
    cal = calibration.Calibration(1.5, 1.0, 1e9)  # this machine 1.5x the records
    _cost_each(monkeypatch, lambda s: 100.0)
    costs = _costs()
    c = budget.choose(todo, {s.run_id: True for s in todo}, cal, costs, 2, budget_s=600)
    # the corpus comes before training, inside the time the deadline counts from the job's start
    assert budget.train_deadline_s(c) == pytest.approx(
        budget.BUDGET_FILL * 600 - budget.AFTER_TRAIN_S * 1.5)
    assert c.job_wall_s == pytest.approx(budget.BEFORE_TRAIN_S * 1.5 + c.train_wall_s
                                         + budget.AFTER_TRAIN_S * 1.5)
    assert budget.train_deadline_s(budget.choose(todo, {s.run_id: True for s in todo}, cal, costs,
                                                 2, None)) is None


def test_at_the_predicted_pace_the_deadline_drops_nothing_the_prediction_fitted(ci_specs, monkeypatch):
    """One schedule: the tasks :func:`choose` fits, started when it says training starts
    (``elapsed_s`` + START_S after the job's start) in :func:`start_order`, all optional, end by
    :func:`train_deadline_s` at pace 1.00 on every budget; and it fills that limit, so a deadline
    that counted the time before training twice (the corpus in both the job's clock and the
    rest of the job, the drop "× 1.00 of the prediction") drops runs at some budget."""
    _, todo = ci_specs
    cal = calibration.Calibration(1.0, 1.0, 1e9)
    seconds = {s.run_id: 20.0 + 7.0 * i for i, s in enumerate(todo)}
    _cost_each(monkeypatch, lambda s: seconds[s.run_id])
    costs = _costs()
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


def test_choose_trains_the_spot_check_before_runs_offered_earlier(ci_specs, monkeypatch):
    _, todo = ci_specs
    cal = calibration.Calibration(1.0, 1.0, 1e9)
    _cost_each(monkeypatch, lambda s: 100.0)
    costs = _costs()
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
    factor over the recorded costs (each step shape timed at its configurations' slowest
    recorded seconds per step × the factor): the whole spot-check set is trained, and its tasks
    (with the runs they bring along) alone leave a tenth of the budget's training time free."""
    from gtalib.book.design.spot_check import (
        SLOWEST_FACTOR,
        spot_check_refs,
        training_tiers,
    )
    from gtalib.book.pipeline.job import DEFAULT_BUDGET_MIN

    plan = make_plan("cpu", 3)
    todo = list({s.run_id: s for s in map(plan.spec, sum(training_tiers(plan), ()))}.values())
    first = {plan.spec(r).run_id for r in spot_check_refs(plan)}
    costs = record_costs.cost_table()
    per_step = {}
    for s in todo:
        row = calibration.cost_row(costs, s)
        per = float(row["train_s_median"].iloc[0]) / s.train.max_steps * SLOWEST_FACTOR
        # configurations of one shape do the same work per step: their medians differ by what
        # shared the machine while they were recorded, so the least is the work's own time
        shape = calibration.step_shape(s)
        per_step[shape] = min(per, per_step.get(shape, math.inf))
    cal = calibration.Calibration(SLOWEST_FACTOR, 1.0, 1e9, steps={
        k: calibration.StepTiming("", v) for k, v in per_step.items()})
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
    _cost_each(monkeypatch, lambda s: seconds[s.run_id])
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
    sec, basis = budget.expected_seconds(ref, cal)
    assert basis == "FLOPs" and sec == pytest.approx(
        calibration.training_flops(ref) / rate * (1 + calibration.evaluation_share(ref))
        + budget.RUN_SETUP_S)
    n = count_params(ref.model)["total"]
    hours = 6 * n * ref.train.max_steps * ref.train.tokens_per_step / (989e12 * 0.4) / 3600
    words = budget.gpu_words([ref])
    assert f"≈ {hours:,.0f} GPU-hours" in words
    assert f"≥ {n * 16 / 1e9:.0f} GB of GPU memory" in words
    assert "calibration: none timed" in budget.describe(
        budget.choose([ref], {ref.run_id: False}, cal, costs, 1, 3600), cal, "here")


def test_a_step_shape_leaves_out_what_changes_no_arithmetic(ci_specs):
    """Runs that differ in seed, data order, length, initialisation or latent scaling share one
    timing; a gate or doubled heads is a step of its own; the calibration times the reference
    first, then the first run of each other shape."""
    plan, todo = ci_specs
    a = next(s for s in todo if s.model.variant == "mla" and not s.model.gate
             and s.model.head_multiplier == 1)
    same = [dataclasses.replace(a, seed=7, train=dataclasses.replace(
                a.train, data_seed=3, max_steps=5 * a.train.max_steps)),
            dataclasses.replace(a, model=dataclasses.replace(
                a.model, init="normal" if a.model.init == "zero" else "zero",
                latent_scale=not a.model.latent_scale, init_std=0.5))]
    other = [dataclasses.replace(a, model=dataclasses.replace(a.model, gate=True)),
             dataclasses.replace(a, model=dataclasses.replace(a.model, head_multiplier=2)),
             dataclasses.replace(a, train=dataclasses.replace(a.train, batch_size=2 * a.train.batch_size))]
    assert {calibration.step_shape(s) for s in same} == {calibration.step_shape(a)}
    assert len({calibration.step_shape(s) for s in [a, *other]}) == 4
    chosen = calibration.calibration_specs(plan, [a, *same, *other])
    ref = calibration.reference_spec(plan)
    assert list(chosen.values()) == [ref, a, *other]


def test_the_evaluation_share_in_closed_form(ci_specs):
    """At the cpu preset's settings: 5 evaluations (steps 50 … 250) of 6 sources × 32 windows of
    128 tokens, forward only (a third of a training step's FLOPs per token), against 250 steps of
    16 × 128 tokens: 5 · 6 · 32 · 128 / (3 · 250 · 16 · 128) = 0.08."""
    _, todo = ci_specs
    s = todo[0]
    cpu_like = dataclasses.replace(
        s, train=dataclasses.replace(s.train, max_steps=250, eval_every=50, eval_windows=32,
                                     batch_size=16, micro_batch_size=None, seq_len=128),
        data={"identity": {"corpus": {"sources": [{"name": str(i)} for i in range(6)]}}})
    assert calibration.evaluation_share(cpu_like) == pytest.approx(0.08)
    # 251 steps: a sixth evaluation, at the last step
    longer = dataclasses.replace(cpu_like, train=dataclasses.replace(cpu_like.train, max_steps=251))
    assert calibration.evaluation_share(longer) == pytest.approx(6 * 6 * 32 * 128 / (3 * 251 * 2048))


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
