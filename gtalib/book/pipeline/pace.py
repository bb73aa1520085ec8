"""The deadline of the job's training (:func:`gtalib.book.pipeline.schedule.train_all`): the pace
of the finished runs, read per step shape, the optional tasks it says would end too late, and
those of them that fit again.

A run's prediction is off by its step shape's timing, not uniformly: on an Intel Xeon (family
6, model 106) MHA's runs took 1.40 and 1.51 times their prediction while the other 15
configurations took 0.98–1.20 times theirs. A deadline that scaled every task by the slowest
pace seen (or by the first runs' cumulative time) dropped 14 runs after the first four, and
the job ended with 16 of its 60 minutes unused. So :class:`Deadline` scales each run by the
median of measured / predicted seconds of the finished runs of its own step shape
(:func:`gtalib.book.pipeline.calibration.step_shape`: the runs one timing predicted); a run of
a shape not yet finished by the median over the finished shapes of its family
(:func:`gtalib.book.pipeline.calibration.family`), or of all families, once
:data:`MIN_SHAPES` shapes have finished (so that one shape cannot set it), else by its
prediction; never below 1 (a pace faster than predicted drops nothing that the budget chose).
A task dropped is taken back when it fits again without pushing another past the deadline.
:class:`Deadline` is bookkeeping on the caller's clock; :class:`ClusterDeadline` cancels its drops
on the cluster and submits its take-backs again.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict

from distributed import Event

from gtalib.book.pipeline.budget import late_tasks
from gtalib.book.pipeline.calibration import family, step_shape

#: Step shapes that must have finished runs before their median pace stands for a shape not
#: yet finished (with fewer, such a shape runs at its prediction): one shape's timing error
#: cannot then set the others' pace (Intel Xeon, family 6, model 106: MHA at × 1.40–1.51 of its
#: prediction, the other shapes' runs at × 0.98–1.20).
MIN_SHAPES = 3


def drop_event(key: str) -> str:
    """The name of the Dask event by which the deadline tells task ``key`` not to start."""
    return f"{key}-dropped"


class Deadline:
    """Which optional tasks not started would end after the deadline, on ``workers`` workers.

    Args:
        tasks: lists of RunSpecs, in the order the scheduler starts them
            (:func:`gtalib.book.pipeline.budget.start_order`); a task is named by its index.
        cost: run id → predicted seconds on one worker.
        optional: indices of the tasks that may be dropped (every run recorded).
        deadline: the time (the caller's clock, seconds) by which training should end.
        workers: the workers that train the tasks (≥ 1).
    """

    def __init__(self, tasks, cost: dict, optional, deadline: float, workers: int):
        self.tasks, self.cost, self.optional = tasks, cost, frozenset(optional)
        self.deadline, self.workers = deadline, max(1, workers)
        self.started: dict[int, float] = {}
        self.ended: set[int] = set()
        self.dropped: set[int] = set()
        self.ratios: dict[tuple, list[float]] = defaultdict(list)  # step shape → ratios
        self.ever_dropped: set[str] = set()  # run ids
        self.taken_back: set[str] = set()
        self.shape = {s.run_id: step_shape(s) for g in tasks for s in g}
        self.family = {self.shape[s.run_id]: family(s) for g in tasks for s in g}

    def task_cost(self, i: int) -> float:
        """Task ``i``'s predicted seconds on one worker."""
        return sum(self.cost[s.run_id] for s in self.tasks[i])

    def start(self, i: int, when: float) -> None:
        """Task ``i`` started at ``when`` (its first run's start)."""
        self.started.setdefault(i, when)

    def finish(self, i: int, seconds: dict) -> None:
        """Task ``i`` ended; ``seconds``: run id → measured seconds of its runs that succeeded
        (a failed run says nothing of the pace)."""
        self.ended.add(i)
        for s in self.tasks[i]:
            if seconds.get(s.run_id, 0) > 0 and self.cost[s.run_id] > 0:
                self.ratios[self.shape[s.run_id]].append(seconds[s.run_id] / self.cost[s.run_id])

    def pace(self, spec) -> float:
        """Measured over predicted seconds that ``spec``'s run is expected to take (module
        docstring): its step shape's median, else its family's or all shapes' median of shape
        medians once :data:`MIN_SHAPES` shapes have finished, else 1; never below 1."""
        own = self.ratios.get(self.shape[spec.run_id])
        if own:
            return max(1.0, statistics.median(own))
        medians = {k: statistics.median(v) for k, v in self.ratios.items() if v}
        for chosen in ([m for k, m in medians.items()
                        if self.family[k] == self.family[self.shape[spec.run_id]]],
                       list(medians.values())):
            if len(chosen) >= MIN_SHAPES:
                return max(1.0, statistics.median(chosen))
        return 1.0

    def expected(self, i: int) -> float:
        """Task ``i``'s expected seconds: each run's prediction at its :meth:`pace`."""
        return sum(self.cost[s.run_id] * self.pace(s) for s in self.tasks[i])

    def _late(self, keep, now: float) -> list:
        pending = [(i, i in self.optional) for i in keep]
        running = [self.started[i] + self.expected(i) for i in self.started
                   if i not in self.ended]
        return late_tasks(pending, {i: self.expected(i) for i in keep}, running, self.workers,
                          now, self.deadline)

    def review(self, now: float) -> tuple[list, list]:
        """``(drop, take_back)`` at ``now``: the tasks not started and not dropped that would
        end after the deadline at the expected paces (the scheduler starting the others in
        order as workers free up: :func:`gtalib.book.pipeline.budget.late_tasks`), and the
        dropped tasks that now fit, each taken back in order only if no task kept would then end
        after the deadline. Both are recorded as done; the caller cancels and resubmits."""
        waiting = [i for i in range(len(self.tasks))
                   if i not in self.started and i not in self.ended]
        keep = [i for i in waiting if i not in self.dropped]
        drop = self._late(keep, now)
        keep = [i for i in keep if i not in drop]
        back = []
        for i in sorted(self.dropped):
            trial = sorted([*keep, i])
            if not self._late(trial, now):
                keep, back = trial, [*back, i]
        self.dropped = (self.dropped | set(drop)) - set(back)
        self.ever_dropped |= {s.run_id for i in drop for s in self.tasks[i]}
        self.taken_back |= {s.run_id for i in back for s in self.tasks[i]}
        return drop, back

    def runs_dropped(self) -> int:
        """Runs dropped at least once."""
        return len(self.ever_dropped)

    def runs_taken_back(self) -> int:
        """Runs dropped and taken back at least once."""
        return len(self.taken_back)

    def runs_read(self) -> int:
        """Runs dropped now (read from their records)."""
        return sum(len(self.tasks[i]) for i in self.dropped)


class ClusterDeadline:
    """The :class:`Deadline` of :func:`gtalib.book.pipeline.schedule.train_all` on its Dask
    ``client``: the deadline reads the pace; here its drops are cancelled (each task's drop
    event set first, which a task just starting reads) and its take-backs submitted again
    (``submit(i)`` → a new future of task ``i``, under a new key), the progress bar's total
    follows, and one line names the runs of each. ``futures``: the tasks' futures, replaced in
    place; ``started``: run id → when its worker said it starts; ``say``: the line printer."""

    def __init__(self, client, tasks, futures, cost, started, optional, deadline, say, bar, name,
                 submit):
        self.client, self.tasks, self.futures, self.started = client, tasks, futures, started
        self.say, self.bar, self.name, self.submit = say, bar, name, submit
        self.deadline = Deadline(tasks, cost, optional, deadline, len(client.nthreads()))
        self.dropped = set()  # keys of the futures cancelled

    def finished(self, i: int, rows) -> None:
        """Task ``i`` ended with ``rows`` (:func:`gtalib.book.pipeline.schedule._train_group`'s)."""
        self.deadline.finish(i, {r["run_id"]: r.get("seconds") or 0.0 for r in rows
                                 if r["error"] is None})

    def review(self, pending) -> None:
        """Drop what would end too late and take back what fits again (``pending``: the
        ``as_completed`` of the job, to which a task taken back is added)."""
        d = self.deadline
        for i, g in enumerate(self.tasks):
            first = [self.started[s.run_id] for s in g if s.run_id in self.started]
            if first:
                d.start(i, min(first))
        d.workers = max(1, len(self.client.nthreads()))
        drop, back = d.review(time.perf_counter())
        for i in drop:  # first the event, which a task that is just starting reads
            Event(drop_event(self.futures[i].key), client=self.client).set()
        self.client.cancel([self.futures[i] for i in drop])
        self.dropped |= {self.futures[i].key for i in drop}
        for i in back:
            self.futures[i] = self.submit(i)
            pending.add(self.futures[i])
        self.bar.total = round(self.bar.total + sum(d.task_cost(i) for i in back)
                               - sum(d.task_cost(i) for i in drop), 1)
        self.bar.refresh()
        for tasks, words in ((drop, "not started would end after the budget at the pace "
                                    "measured so far per step shape: read from their records "
                                    "instead"),
                             (back, "dropped before fit again at the pace measured since: "
                                    "taken back")):
            runs = [s for i in tasks for s in self.tasks[i]]
            if runs:
                self.say(f"deadline: {len(runs)} run(s) of {len(tasks)} task(s) {words}: "
                         + "; ".join(f"{s.run_id} {self.name[s.run_id]} (× {d.pace(s):.2f})"
                                     for s in runs))
