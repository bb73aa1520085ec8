"""The calibration's timing rule (:mod:`gtalib.book.pipeline.calibration`): a median of rounds that
one fast or slow timing cannot move, a check of each shape's seconds per FLOP against the other
shapes' that times a stray shape again, and a shape that cannot be timed costed from its FLOPs."""

from types import SimpleNamespace

import pytest
from synthetic import synthetic_identity  # noqa: E402

from gtalib.book.design import run_specs as specs
from gtalib.book.design.plan import make_plan
from gtalib.book.pipeline import budget, calibration
from gtalib.model.flops import count_flops
from gtalib.model.gpt import GPT


@pytest.fixture()
def ci(monkeypatch):
    monkeypatch.setattr(specs, "data_spec", synthetic_identity)
    plan = make_plan("ci", 2)
    todo = [s for _, s in plan.specs()]
    return plan, todo, calibration.calibration_specs(plan, todo)


def scripted_clock(monkeypatch, seconds_per_step):
    """Run the real :func:`calibration.time_steps` (its model, its steps) on a clock that says
    each step of the shape being timed took ``seconds_per_step(key, n)`` seconds, ``n`` the
    count of that shape's earlier timings; returns the shapes in the order they were timed."""
    timed, current = [], {}
    real = calibration.time_steps

    def time_steps(spec_dict, threads=1, steps=calibration.CALIBRATION_STEPS):
        key = calibration.step_shape(calibration.RunSpec.from_dict(spec_dict))
        current["per"] = seconds_per_step(key, timed.count(key))
        timed.append(key)
        return real(spec_dict, threads, steps)

    clock = {"now": 0.0, "calls": 0}

    def perf_counter():  # called at each step's start and end, in turn
        if clock["calls"] % 2:
            clock["now"] += current["per"]
        clock["calls"] += 1
        return clock["now"]

    monkeypatch.setattr(calibration, "time_steps", time_steps)
    monkeypatch.setattr(calibration, "time", SimpleNamespace(perf_counter=perf_counter))
    return timed


def test_a_fast_timing_like_mhas_does_not_fool_the_prediction(ci, monkeypatch):
    """On an Intel Xeon (family 6, model 106) the least of two rounds timed MHA at 0.354 s per
    step, below GQA's 0.364 s, and MHA's runs then took 1.40 and 1.51 times their prediction.
    Here a scripted clock times MHA's step at 0.51 s in two rounds and 0.354 s in one, the other
    shapes at 0.40 s: the calibration keeps 0.51 s, and MHA's run is predicted from it."""
    plan, todo, shapes = ci
    ref = calibration.reference_spec(plan)
    mha = calibration.step_shape(ref)

    def per_step(key, n):
        if key == mha:
            return (0.51, 0.354, 0.51)[n]
        return 0.40

    timed = scripted_clock(monkeypatch, per_step)
    cal = calibration.calibrate(plan, budget_costs(), todo=todo)
    assert timed.count(mha) == calibration.CALIBRATION_ROUNDS == 3
    assert cal.steps[mha].seconds_per_step == pytest.approx(0.51)  # the least would be 0.354
    assert cal.seconds_per_step == pytest.approx(0.51)
    assert all(t.seconds_per_step == pytest.approx(0.40) for k, t in cal.steps.items() if k != mha)
    seconds, basis = budget.expected_seconds(ref, cal)
    assert basis == "timed"
    assert seconds == pytest.approx(ref.train.max_steps * 0.51 * (
        1 + calibration.evaluation_share(ref)) + budget.RUN_SETUP_S)


def test_a_shape_whose_seconds_per_flop_stray_is_timed_again(ci, monkeypatch):
    """Two of MHA's three timings run fast (0.15 s per step, alone on the machine), so its
    median strays from the other shapes' seconds per FLOP by more than FLOP_TOLERANCE: it is timed
    RETIME_ROUNDS more times and its seconds are the median of all five, with a note."""
    plan, todo, shapes = ci
    mha = calibration.step_shape(calibration.reference_spec(plan))
    flops = {k: calibration.shape_flops(s.to_dict()) for k, s in shapes.items()}
    rate = 0.40 / flops[mha]  # every shape at one rate: seconds per step follow the FLOPs

    def per_step(key, n):
        if key == mha:
            return (0.15, 0.15, 0.40, 0.41, 0.40)[n]
        return rate * flops[key]

    timed = scripted_clock(monkeypatch, per_step)
    cal = calibration.calibrate(plan, budget_costs(), todo=todo)
    assert 0.15 / 0.40 < 1 / (1 + calibration.FLOP_TOLERANCE)  # the first median strays
    assert timed.count(mha) == calibration.CALIBRATION_ROUNDS + calibration.RETIME_ROUNDS
    assert all(timed.count(k) == calibration.CALIBRATION_ROUNDS for k in shapes if k != mha)
    assert cal.steps[mha].seconds_per_step == pytest.approx(0.40)
    assert cal.steps[mha].note == ("timed 5 times: its first 3 at 0.38 × the shapes' median "
                                   "seconds per FLOP, all 5 at 1.00 ×")
    assert f"({cal.steps[mha].note})" in budget.step_lines(cal)
    for k, t in cal.steps.items():
        assert t.note == "" if k != mha else t.note
        assert t.seconds_per_step == pytest.approx(rate * flops[k])


def test_a_shape_that_cannot_be_timed_is_costed_from_its_flops(ci, monkeypatch):
    """A shape whose every timing fails (a step that raises; on the workers also one lost more
    often than Dask retries) is said in one line and predicted from its FLOPs at the median
    seconds per FLOP of the shapes timed, not left out; with none timed the calibration is one
    error."""
    plan, todo, shapes = ci
    mha = calibration.step_shape(calibration.reference_spec(plan))
    broken = next(k for k in shapes if k != mha)
    flops = {k: calibration.shape_flops(s.to_dict()) for k, s in shapes.items()}
    per_flop = {k: (0.40 if k == mha else 0.30) / flops[k] for k in shapes}
    real = calibration.time_steps

    def time_steps(spec_dict, threads=1, steps=calibration.CALIBRATION_STEPS):
        key = calibration.step_shape(calibration.RunSpec.from_dict(spec_dict))
        if key == broken:
            raise RuntimeError("step failed\nsecond line")
        return per_flop[key] * flops[key]

    monkeypatch.setattr(calibration, "time_steps", time_steps)
    cal = calibration.calibrate(plan, budget_costs(), todo=todo)
    timed_rates = sorted(per_flop[k] for k in shapes if k != broken)
    mid = timed_rates[len(timed_rates) // 2] if len(timed_rates) % 2 else sum(
        timed_rates[len(timed_rates) // 2 - 1:len(timed_rates) // 2 + 1]) / 2
    t = cal.steps[broken]
    assert t.basis == "FLOPs"
    assert t.seconds_per_step == pytest.approx(flops[broken] * mid)
    assert t.note == ("could not be timed (RuntimeError: step failed): predicted from its FLOPs "
                      "at the timed shapes' seconds per FLOP")
    [line] = [ln for ln in budget.step_lines(cal).splitlines() if "could not be timed" in ln]
    assert line.startswith(f"  {t.run}: ")
    run = next(s for s in todo if calibration.step_shape(s) == broken)
    assert budget.expected_seconds(run, cal)[0] > 0

    monkeypatch.setattr(calibration, "time_steps", lambda *a, **k: 1 / 0)
    with pytest.raises(ValueError, match=r"^calibration: no step shape could be timed "
                                         r"\(ZeroDivisionError: division by zero\)$"):
        calibration.calibrate(plan, budget_costs(), todo=todo)
    monkeypatch.setattr(calibration, "time_steps", real)


def test_a_steps_flops_are_the_model_counted_on_one_sequence_times_the_batch(ci):
    """:func:`gtalib.model.flops.step_flops` counts on the meta device and one sequence; the
    same count on real tensors of the whole batch agrees exactly, for every step shape of the
    ``ci`` book."""
    import torch

    _, _, shapes = ci
    for spec in shapes.values():
        t = spec.train
        model = GPT(spec.model)
        idx = torch.randint(0, spec.model.vocab_size, (t.batch_size, t.seq_len + 1))

        def step():
            _, loss = model(idx[:, :-1], idx[:, 1:])
            loss.backward()

        assert calibration.shape_flops(spec.to_dict()) == count_flops(step)


def budget_costs():
    """An empty cost table (nothing recorded): the reference's factor is 1."""
    import pandas as pd

    return pd.DataFrame(columns=["key", "core_s_median", "train_s_median"])
