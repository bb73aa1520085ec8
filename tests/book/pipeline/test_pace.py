"""The training's deadline (:mod:`gtalib.book.pipeline.pace`): the pace read per step shape, so
that one shape's slow runs drop no other shape's, and dropped runs taken back when they fit.

The replay is the ``cpu`` book of an Intel Xeon (family 6, model 106, 2 workers) with no
records of its CPU kind: its 17 configurations at seed 0, then at seed 1, ran at the ratios
measured / predicted that the job printed for them (MHA × 1.51 and × 1.40, the other 15 at
× 0.98–1.20, 10 of the 17 within ±15 %), on the scheduler's clock of a two-worker cluster that
starts the tasks in order as workers free up."""

import heapq
from dataclasses import dataclass

import pytest

from gtalib.book.pipeline import budget, pace


@dataclass(frozen=True)
class Run:
    run_id: str
    shape: str
    fam: str = "250-step runs"


@pytest.fixture(autouse=True)
def shapes_by_name(monkeypatch):
    """The fake runs name their step shape and family themselves."""
    monkeypatch.setattr(pace, "step_shape", lambda s: s.shape)
    monkeypatch.setattr(pace, "family", lambda s: s.fam)


#: Step shape → (predicted seconds of one run, the measured / predicted ratio of each of its
#: configurations: both arms of a pair share a shape). The ratios are the job's printed ones.
SHAPES = {"mha": (150, (1.51, 1.40)), "s1": (200, (0.98, 1.00)), "s2": (175, (1.02, 1.03)),
          "s3": (185, (1.05, 1.06)), "s4": (170, (1.08, 1.10)), "s5": (190, (1.12, 1.14)),
          "s6": (165, (1.16, 1.17)), "s7": (160, (1.18, 1.19)), "s8": (150, (1.20,))}


def issue_book(seeds=2):
    """Tasks (both arms of a pair, or one run) in start order, predicted and measured seconds."""
    tasks, cost, measured = [], {}, {}
    for seed in range(seeds):
        for shape, (seconds, ratios) in SHAPES.items():
            task = [Run(f"{shape}-{arm}-seed{seed}", shape) for arm in range(len(ratios))]
            for run, ratio in zip(task, ratios):
                cost[run.run_id], measured[run.run_id] = seconds, seconds * ratio
            tasks.append(task)
    return tasks, cost, measured


def replay(deadline: pace.Deadline, measured: dict, workers: int = 2):
    """The scheduler's clock: tasks start in order on the first worker free, those dropped
    skipped; the deadline reviews at the start and whenever a task ends. Returns the tasks
    trained, their end, and each review's ``(time, dropped, taken back)``."""
    tasks = deadline.tasks
    now, ends, trained, log = 0.0, [], [], []
    drop, back = deadline.review(now)
    log.append((now, drop, back))
    while True:
        idle = workers - len(ends)
        for i in range(len(tasks)):
            if idle == 0:
                break
            if i not in deadline.started and i not in deadline.dropped:
                deadline.start(i, now)
                heapq.heappush(ends, (now + sum(measured[s.run_id] for s in tasks[i]), i))
                idle -= 1
        if not ends:
            return trained, now, log
        now, i = heapq.heappop(ends)
        deadline.finish(i, {s.run_id: measured[s.run_id] for s in tasks[i]})
        trained.append(i)
        drop, back = deadline.review(now)
        log.append((now, drop, back))


def fits_at_measured_times(tasks, measured, end: float) -> set:
    """The tasks that fit by ``end`` at their measured seconds, started in order (those that
    would not are skipped for the next): what a deadline that knew every run's time keeps."""
    late = budget.late_tasks([(i, True) for i in range(len(tasks))],
                             {i: sum(measured[s.run_id] for s in g) for i, g in enumerate(tasks)},
                             [], 2, 0.0, end)
    return set(range(len(tasks))) - set(late)


def test_the_replay_of_the_issues_runs_drops_no_run_that_fits():
    tasks, cost, measured = issue_book()
    # the budget chose every task: at the predicted pace they end within its deadline
    end = budget.makespan([sum(cost[s.run_id] for s in g) for g in tasks], 2, ordered=True)
    deadline_s = end * 1.02
    assert sum(measured.values()) / sum(cost.values()) == pytest.approx(1.12, abs=0.02)
    fits = fits_at_measured_times(tasks, measured, deadline_s)
    assert 0 < len(tasks) - len(fits) <= 3  # at the measured times a few tasks do not fit

    d = pace.Deadline(tasks, cost, set(range(len(tasks))), deadline_s, 2)
    trained, finished_at, log = replay(d, measured)
    ever = {i for _, drop, _ in log for i in drop}
    assert ever <= set(range(len(tasks))) - fits, "a task that fits was dropped"
    assert set(trained) == fits  # and every one that fits was trained
    assert finished_at <= deadline_s
    assert d.runs_dropped() == sum(len(tasks[i]) for i in ever)
    assert d.runs_read() == sum(len(tasks[i]) for i in set(range(len(tasks))) - fits)

    # the slowest pace seen, the deadline's earlier rule, read MHA's × 1.455 into every task
    # after the first and dropped most of the book (the job dropped 14 runs this way)
    slowest = max(sum(measured[s.run_id] for s in tasks[0]) / sum(cost[s.run_id] for s in tasks[0]),
                  1.0)
    first_end = sum(measured[s.run_id] for s in tasks[0])
    old = budget.late_tasks([(i, True) for i in range(2, len(tasks))],
                            {i: sum(cost[s.run_id] for s in g) for i, g in enumerate(tasks)},
                            [sum(measured[s.run_id] for s in tasks[1])], 2, first_end,
                            deadline_s, slowest)
    assert sum(len(tasks[i]) for i in old) >= 10


def test_one_shapes_slow_runs_set_no_other_shapes_pace():
    tasks, cost, measured = issue_book()
    d = pace.Deadline(tasks, cost, set(), 1e9, 2)
    mha, s1, s2, s3 = (tasks[i] for i in range(4))
    d.finish(0, {s.run_id: measured[s.run_id] for s in mha})
    assert d.pace(tasks[9][0]) == pytest.approx((1.51 + 1.40) / 2)  # MHA at seed 1: its own
    assert d.pace(s1[0]) == 1.0  # one shape finished: the others at their prediction
    for i in (1, 2):
        d.finish(i, {s.run_id: measured[s.run_id] for s in tasks[i]})
    # three shapes finished: a shape not yet finished takes their median of medians, MHA's
    # × 1.455 one of three
    assert d.pace(s3[0]) == pytest.approx(1.025)
    # never below 1: a shape faster than predicted is taken at its prediction
    assert d.pace(s1[0]) == 1.0


def test_dropped_runs_are_taken_back_when_the_pace_recovers():
    """The first three shapes' runs go at × 1.6 (the machine busy for a while), the rest at
    × 1.0: the shapes not yet finished are first read at × 1.6 and the last tasks dropped; as
    the later shapes finish at their prediction, the dropped tasks fit again and are taken
    back, and training still ends by the deadline."""
    tasks, cost, _ = issue_book()
    slow = {"mha", "s1", "s2"}
    measured = {s.run_id: cost[s.run_id] * (1.6 if s.shape in slow and s.run_id.endswith("seed0")
                                            else 1.0)
                for g in tasks for s in g}
    deadline_s = budget.makespan([sum(measured[s.run_id] for s in g) for g in tasks], 2,
                                 ordered=True) + 30
    d = pace.Deadline(tasks, cost, set(range(len(tasks))), deadline_s, 2)
    trained, finished_at, log = replay(d, measured)
    dropped = [i for _, drop, _ in log for i in drop]
    back = [i for _, _, b in log for i in b]
    assert dropped and set(back) == set(dropped)
    assert sorted(trained) == list(range(len(tasks))) and finished_at <= deadline_s
    assert d.runs_taken_back() == d.runs_dropped() > 0 and d.runs_read() == 0


def test_a_task_is_taken_back_only_if_no_kept_task_then_ends_late():
    """Taking a dropped task back would push a task kept behind it past the deadline: it stays
    dropped."""
    tasks = [[Run("a", "x")], [Run("b", "y")], [Run("c", "z")]]
    cost = {"a": 10.0, "b": 10.0, "c": 10.0}
    d = pace.Deadline(tasks, cost, {1, 2}, 25.0, 1)
    d.start(0, 0.0)
    d.dropped = {1}
    assert d.review(0.0) == ([], [])  # b back would end c at 30
    d.deadline = 30.0
    assert d.review(0.0) == ([], [1])


def test_the_jobs_deadline_line():
    line = budget.deadline_line({"budget_min": 60, "runs_dropped": 14, "runs_taken_back": 12},
                                43.5 * 60)
    assert line == ("deadline: 14 run(s) dropped for pace, 12 of them taken back when they fit "
                    "again; 16.5 of the budget's 60 minutes left")
    assert budget.deadline_line({"budget_min": 30}, 31 * 60).endswith(
        "1.0 minutes over the budget's 30")
