"""What the book's runs will cost on *this* machine, and which of them fit a time budget.

A run's expected cost is its steps at the seconds per step that the calibration of
:mod:`gtalib.book.pipeline.calibration` timed for its step shape here, with its evaluations and
its setup (:func:`expected_seconds`).

The wall time of a set of tasks on ``W`` workers is the makespan of the greedy schedule that
starts the spot-check tasks first and, within each class, the longest first (Graham 1969,
"Bounds on multiprocessing timing anomalies": LPT; :func:`start_order`), the order in which
:func:`gtalib.book.pipeline.schedule.train_all` submits them. :func:`choose` keeps the tasks
that must be trained (a run with no record) and adds the others in the order it is given (the
job's: :func:`gtalib.book.design.spot_check.training_tiers`, the spot-check set first) while the
predicted wall time of the job stays within the budget; the rest is read from records, whole
tasks (both arms of every ΔL pair) at a time. Beside the time, :func:`store_bytes` predicts the
space the chosen runs need in the run store (from the same records, and the models' sizes), which
the job checks before it trains. Reads the records (:mod:`gtalib.training.records`); trains nothing.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from dataclasses import dataclass

from gtalib.book.pipeline.calibration import (
    CALIBRATION_ROUNDS,
    Calibration,
    evaluation_share,
    family,
    family_words,
    run_words,
    step_shape,
    training_flops,
)
from gtalib.model.params import count_params
from gtalib.training import record_costs
from gtalib.training.disk import run_bytes

#: The rest of the job besides training, in seconds on the machine the README's wall time was
#: measured on (benchmarks/book_wall_time.md, default book: corpus 10.0 s, notebooks 45.0 s,
#: MathJax and HTML 3.3 s), scaled like the runs: before training (the corpus, unless the job
#: measured what it spent before it chose: :func:`choose`'s ``elapsed_s``) and after it.
BEFORE_TRAIN_S = 10.0
AFTER_TRAIN_S = 48.3
REST_S = BEFORE_TRAIN_S + AFTER_TRAIN_S
#: Share of the budget that the predicted wall time may fill: the rest absorbs the prediction's
#: error (measured in benchmarks/budget_prediction.md).
BUDGET_FILL = 0.9
#: A run's seconds outside its optimizer steps and evaluations (Lightning's setup, the data
#: module, its files) where the calibration did not time it (:func:`gtalib.book.pipeline.
#: calibration.time_setup`; a preset costed from FLOPs): two ``ci`` books of 34 runs of 20 steps
#: on an idle Intel Xeon (family 6 model 207, 2026-12-06, benchmarks/budget_prediction.md) spent
#: 0.33 s and 0.22 s a run outside their calibrated steps; their mean.
RUN_SETUP_S = 0.27
#: Starting the cluster and its workers' first imports, and timing the calibration, before the
#: first run (seconds): the same two builds' training phases took 13 s and 7 s more than their
#: cards' seconds per worker.
START_S = 10.0
#: What a GPU would need, for runs too large for a CPU (:func:`gpu_words`): an H100 SXM's dense
#: bf16 peak (989 TFLOP/s, NVIDIA's data sheet) at 40 % of it, a utilisation assumed, not
#: measured; and 16 bytes per parameter for fp32 master weights, their gradients and AdamW's two
#: moments (bf16 copies and activations come on top).
GPU_PEAK_FLOPS = 989e12
GPU_UTILISATION = 0.4
TRAIN_BYTES_PER_PARAM = 16


def group_key(spec) -> tuple:
    """The task a run belongs to: its variant, seed and training settings (both arms of every
    ΔL pair share one, so a pair is trained on one worker, one machine kind)."""
    return (spec.model.variant, spec.seed, spec.train)


def groups(specs) -> list[list]:
    """``specs`` (RunSpecs) grouped by :func:`group_key`, in first-seen order."""
    by = defaultdict(list)
    for s in specs:
        by[group_key(s)].append(s)
    return list(by.values())


def gpu_words(specs) -> str:
    """What the runs ``specs`` (RunSpecs) would need on GPUs, in words: their training FLOPs,
    GPU-hours at :data:`GPU_UTILISATION` of :data:`GPU_PEAK_FLOPS`, and the largest run's
    memory for weights, gradients and optimizer state (:data:`TRAIN_BYTES_PER_PARAM`)."""
    specs = list(specs)
    if not specs:
        return "gpu: nothing to train"
    flops = sum(training_flops(s) for s in specs)
    hours = flops / (GPU_PEAK_FLOPS * GPU_UTILISATION) / 3600
    params = max(count_params(s.model)["total"] for s in specs)
    return (f"gpu: {len(specs)} run(s), {flops:.3g} FLOPs (6 · parameters · tokens): ≈ "
            f"{hours:,.0f} GPU-hours on H100s at {GPU_UTILISATION:.0%} of their "
            f"{GPU_PEAK_FLOPS / 1e12:.0f} TFLOP/s bf16 peak (assumed), and per run ≥ "
            f"{params * TRAIN_BYTES_PER_PARAM / 1e9:.0f} GB of GPU memory for its "
            f"{params / 1e9:.2f} B parameters' weights, gradients and AdamW state, before "
            "activations")


def expected_seconds(spec, calibration: Calibration) -> tuple[float, str]:
    """``(seconds, basis)``: a run's expected wall time on one worker here: its ``max_steps``
    steps at the seconds per step timed for its step shape
    (:attr:`Calibration.steps`, basis ``"timed"``), or, for a shape not timed, at its
    :func:`training_flops` over the reference run's FLOP rate (``"FLOPs"``); × (1 +
    :func:`evaluation_share`) for its evaluations, plus its setup (:attr:`Calibration.setup_s`,
    else :data:`RUN_SETUP_S`)."""
    timing = calibration.steps.get(step_shape(spec))
    if timing is not None:
        steps_s, basis = spec.train.max_steps * timing.seconds_per_step, "timed"
    else:
        steps_s, basis = training_flops(spec) / calibration.flops_per_s, "FLOPs"
    setup = RUN_SETUP_S if calibration.setup_s is None else calibration.setup_s
    return steps_s * (1.0 + evaluation_share(spec)) + setup, basis


def start_order(tasks, cost, first=frozenset()) -> list:
    """``tasks`` (lists of RunSpecs) in the order the scheduler starts them: those holding a run
    of ``first`` (run ids: the spot-check set) before the others, each class longest first by
    ``cost`` (run id → seconds), so that the last to finish is a short one and a deadline drops
    the others first."""
    return sorted(tasks, key=lambda g: (not any(s.run_id in first for s in g),
                                        -sum(cost[s.run_id] for s in g)))


def makespan(task_seconds, workers: int, ordered: bool = False) -> float:
    """Wall seconds of tasks of ``task_seconds`` on ``workers`` workers, each task started on
    the worker free soonest: longest first (LPT), or in the order given with ``ordered``
    (:func:`start_order`: the order of :func:`gtalib.book.pipeline.schedule.train_all`).

    Raises:
        ValueError: ``workers`` < 1.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers!r}")
    loads = [0.0] * workers
    for t in (task_seconds if ordered else sorted(task_seconds, reverse=True)):
        heapq.heapreplace(loads, loads[0] + t)
    return max(loads)


@dataclass(frozen=True)
class Choice:
    """What :func:`choose` decided.

    Attributes:
        train: the tasks (lists of RunSpecs) to train here, in the order offered.
        read: the runs read from records instead (RunSpecs).
        seconds: run id → expected seconds here (:func:`expected_seconds`).
        train_wall_s: predicted wall seconds of training ``train`` on ``workers``
            (:data:`START_S` included).
        job_wall_s: the whole job: what comes before training (the seconds spent already, or
            :data:`BEFORE_TRAIN_S` scaled), ``train_wall_s`` and ``after_s``.
        budget_s: the budget in seconds (``None``: none).
        workers: workers the prediction assumes.
        first: the run ids among the candidates that belong to the spot-check set (trained
            first, :func:`start_order`).
        store_bytes: the bytes training ``train`` needs in the run store
            (:func:`store_bytes`).
        after_s: the job after training (:data:`AFTER_TRAIN_S`, scaled).
    """

    train: list
    read: list
    seconds: dict
    train_wall_s: float
    job_wall_s: float
    budget_s: float | None
    workers: int
    first: frozenset = frozenset()
    store_bytes: int = 0
    after_s: float = 0.0

    @property
    def over_budget(self) -> bool:
        """The runs that must be trained alone are predicted past the budget."""
        return self.budget_s is not None and self.job_wall_s > self.budget_s


def choose(todo, recorded, calibration: Calibration, costs, workers: int,
           budget_s: float | None, first=frozenset(), tier=None,
           elapsed_s: float | None = None) -> Choice:
    """Which of the runs ``todo`` (RunSpecs not in the local store) to train here.

    A task (:func:`groups`) with a run that ``recorded`` (run id → bool) says has no record must
    be trained; the others are added in ``todo``'s order while training, on the schedule the
    deadline will follow (:func:`late_tasks` at pace 1: :func:`makespan` of the tasks in
    :func:`start_order`, ``first`` being the spot-check run ids), starting :data:`START_S` after
    the job's ``elapsed_s`` seconds so far (its corpus, cluster and calibration; ``None``:
    :data:`BEFORE_TRAIN_S` × factor, a prediction made before the job), ends by
    :func:`train_deadline_s`; a task that does not fit is skipped for the smaller ones after
    it, but no task of a later ``tier`` (run id → tier number, a task's its smallest; default
    one tier) is added once one of an earlier tier was skipped. ``budget_s=None`` trains every
    task.

    Raises:
        ValueError: ``workers`` < 1, or ``budget_s`` not positive.
    """
    if budget_s is not None and not budget_s > 0:
        raise ValueError(f"budget must be a positive number of seconds or None, got {budget_s!r}")
    seconds = {s.run_id: expected_seconds(s, calibration)[0] for s in todo}
    first = frozenset(first) & {s.run_id for s in todo}
    tasks = groups(todo)
    after = AFTER_TRAIN_S * calibration.factor
    before = BEFORE_TRAIN_S * calibration.factor if elapsed_s is None else elapsed_s

    def wall(chosen) -> float:  # training's wall seconds, tasks started as the scheduler will
        ordered = start_order([tasks[i] for i in chosen], seconds, first)
        return makespan([sum(seconds[s.run_id] for s in g) for g in ordered], workers, True)

    chosen = {i for i, g in enumerate(tasks) if not all(recorded[s.run_id] for s in g)}
    if budget_s is None:
        chosen = set(range(len(tasks)))
    else:
        limit = BUDGET_FILL * budget_s - after - before - START_S
        skipped = math.inf  # the earliest tier of a task that did not fit
        for i, g in enumerate(tasks):
            t = min((tier or {}).get(s.run_id, 0) for s in g)
            if i in chosen or t > skipped:
                continue
            if wall(chosen | {i}) <= limit:
                chosen.add(i)
            else:
                skipped = min(skipped, t)
    train = [tasks[i] for i in sorted(chosen)]
    read = [s for i, g in enumerate(tasks) if i not in chosen for s in g]
    train_s = wall(chosen) + START_S if chosen else 0.0
    return Choice(train, read, seconds, train_s, before + train_s + after, budget_s,
                  workers, first, store_bytes([s for g in train for s in g], costs, workers),
                  after)


def store_bytes(specs, costs, workers: int) -> int:
    """The bytes that training ``specs`` (RunSpecs) on ``workers`` workers at once needs in the
    run store, as :func:`expected_seconds` predicts their time: what every run keeps once done
    (its configuration's recorded bundles, ``costs``'s ``result_bytes``, else estimated from its
    steps) plus, for the ``workers`` largest models, a checkpoint and the temporary file of the
    next one (from the model's size; :func:`gtalib.training.disk.run_bytes`)."""
    kept, training = 0, []
    for s in specs:
        row = costs[costs["key"] == record_costs.config_key(s)] if "result_bytes" in costs else ()
        measured = float(row["result_bytes"].iloc[0]) if len(row) else None
        k, t = run_bytes(s, measured)
        kept += k
        training.append(t)
    return kept + sum(sorted(training, reverse=True)[:workers])


def train_deadline_s(choice: Choice) -> float | None:
    """Seconds after the job's start by which its training must end so that the job stays
    within :data:`BUDGET_FILL` of its budget: the filled budget minus the job after training
    (:attr:`Choice.after_s`), the very limit :func:`choose` filled, so that at the predicted pace
    (× 1.00) nothing it chose is dropped; ``None`` without a budget. The job drops the tasks
    that the measured pace says would end later (:func:`late_tasks`), so a prediction that was
    low for this machine costs runs read from records, not the budget."""
    if choice.budget_s is None:
        return None
    return BUDGET_FILL * choice.budget_s - choice.after_s


def late_tasks(pending, cost, running_ends, workers: int, now: float, deadline: float,
               pace: float = 1.0) -> list:
    """The tasks of ``pending`` to drop: those that, started in order as workers free up,
    would end after ``deadline``.

    ``pending``: ``(key, optional)`` of the tasks not started, in the order the scheduler starts
    them (longest first); only ``optional`` ones (every run recorded) are dropped, and a dropped
    task leaves its worker free for the next. ``cost``: key → predicted seconds on one worker;
    ``pace``: measured over predicted seconds of the runs finished so far, which scales every
    prediction. ``running_ends``: predicted end times (scaled already) of the tasks running;
    the other of the ``workers`` workers are free at ``now`` (all times in the same clock,
    seconds).

    Returns:
        the keys to drop, in ``pending``'s order.
    """
    free = sorted(running_ends)[:workers] + [now] * max(0, workers - len(running_ends))
    heapq.heapify(free)
    late = []
    for key, optional in pending:
        start = max(now, free[0])
        end = start + cost[key] * pace
        if optional and end > deadline:
            late.append(key)
        else:
            heapq.heapreplace(free, end)
    return late


def _minutes(seconds: float) -> str:
    if seconds >= 2 * 365 * 86400:
        return f"{seconds / (365.25 * 86400):,.0f} years"
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:,.0f} days"
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def describe(choice: Choice, calibration: Calibration, where: str) -> str:
    """The lines the job prints before it trains: the calibration, the prediction on this
    machine and worker count, and what the budget leaves to the records."""
    n_train = sum(len(g) for g in choice.train)
    on = (f"on {calibration.workers} worker(s), as many at once" if calibration.workers
          else "in this process")
    rounds = {1: "once", 2: "twice", 3: "three times"}.get(CALIBRATION_ROUNDS,
                                                         f"{CALIBRATION_ROUNDS} times")
    per = [t.seconds_per_step for t in calibration.steps.values()]
    cal = (f"{len(per)} step shape(s) timed {rounds} {on}, {min(per, default=0):.3f}–"
           f"{max(per, default=0):.3f} s per step"
           + ("" if calibration.setup_s is None else
              f", a run's setup {calibration.setup_s:.2f} s")
           + "; the reference run (MHA) "
           f"{calibration.seconds_per_step:.3f} s"
           + (f" against {calibration.recorded_seconds_per_step:.3f} s recorded: the rest of the "
              f"job × {calibration.factor:.2f}" if calibration.recorded_seconds_per_step
              else " (no record of it: the rest of the job as recorded)"))
    if not calibration.timed:
        cal = (f"none timed: one step of the reference run would take "
               f"{_minutes(calibration.seconds_per_step)} here at the recorded runs' throughput "
               f"({calibration.flops_per_s / 1e9:.1f} GFLOP/s per thread): costs from FLOPs")
    lines = [f"calibration: {cal}",
             f"prediction on {where} ({choice.workers} worker(s)): training {n_train} run(s) "
             f"≈ {_minutes(choice.train_wall_s)}, the whole job ≈ {_minutes(choice.job_wall_s)}"]
    if choice.first:
        kept = sum(s.run_id in choice.first for g in choice.train for s in g)
        lines.append(f"spot-check: {len(choice.first)} run(s) of the declared set (seed 0 of one "
                     "variant per figure and table) not in the store, trained first"
                     + ("" if kept == len(choice.first) else
                        f"; {len(choice.first) - kept} of them do not fit: read from records"))
    if choice.budget_s is None:
        lines.append("budget: none (every run not in the store is trained)")
    else:
        lines.append(f"budget: {_minutes(choice.budget_s)}; {len(choice.read)} run(s) that would "
                     "not fit are read from records"
                     + (" (the runs without a record alone are predicted past it)"
                        if choice.over_budget else ""))
    return "\n".join(lines)


def step_lines(calibration: Calibration) -> str:
    """One line per step shape of the calibration: its timed run and seconds per step, and what
    the calibration says of it (:attr:`gtalib.book.pipeline.calibration.StepTiming.note`: timed
    again, or not timed and costed from its FLOPs)."""
    return "\n".join(f"  {t.run}: {t.seconds_per_step:.3f} s per step"
                     + (f" ({t.note})" if t.note else "") for t in calibration.steps.values())


#: How far a configuration's measured seconds may stray from its prediction and still count as
#: predicted (measured / predicted within 1 ± this; issue-level target, not a fitted value).
CONFIG_TOLERANCE = 0.15


def configuration_words(spec) -> str:
    """A run's configuration in words, without its seed and data order (which a cost leaves out:
    :func:`gtalib.training.record_costs.config_key`): its variant and options, then its family."""
    return f"{run_words(spec)}, {family_words(family(spec))}"


def family_times(specs, predicted: dict, measured: dict, per: str = "family") -> list[dict]:
    """Predicted against measured seconds per configuration family (:func:`family`), or with
    ``per="configuration"`` per configuration (:func:`gtalib.training.record_costs.config_key`),
    for the job's last lines and ``benchmarks/budget_prediction.md``: one dict per family (or
    configuration) of the runs ``specs`` (RunSpecs) that ``measured`` (run id → wall seconds,
    from their cards) holds, in order of first appearance: ``family`` (or ``configuration``:
    words), ``runs``, ``predicted_s`` (sum of ``predicted``, run id → seconds) and
    ``measured_s``.

    Raises:
        ValueError: ``per`` is neither ``"family"`` nor ``"configuration"``.
    """
    keys = {"family": (family, lambda s: family_words(family(s))),
            "configuration": (record_costs.config_key, configuration_words)}
    if per not in keys:
        raise ValueError(f"per must be 'family' or 'configuration', got {per!r}")
    key, words = keys[per]
    out = {}
    for s in specs:
        if s.run_id not in measured or s.run_id not in predicted:
            continue
        row = out.setdefault(key(s), {per: words(s), "runs": 0, "predicted_s": 0.0,
                                      "measured_s": 0.0})
        row["runs"] += 1
        row["predicted_s"] += float(predicted[s.run_id])
        row["measured_s"] += float(measured[s.run_id])
    return list(out.values())


def family_lines(rows: list[dict], configurations: list[dict] = ()) -> list[str]:
    """The job's lines for :func:`family_times`: runs, predicted and measured one-worker
    seconds and their ratio (measured / predicted) per family; then, of ``configurations``
    (the same per configuration), how many came within :data:`CONFIG_TOLERANCE` and the range
    of their ratios."""
    lines = [f"prediction: {r['family']}: {r['runs']} run(s), one worker's time predicted "
             f"{_minutes(r['predicted_s'])}, measured {_minutes(r['measured_s'])} "
             f"(× {r['measured_s'] / r['predicted_s']:.2f})" for r in rows if r["predicted_s"] > 0]
    ratios = [r["measured_s"] / r["predicted_s"] for r in configurations if r["predicted_s"] > 0]
    if ratios:
        within = sum(abs(x - 1) <= CONFIG_TOLERANCE for x in ratios)
        lines.append(f"prediction: {within} of {len(ratios)} configuration(s) within "
                     f"±{CONFIG_TOLERANCE * 100:.0f} % of their measured time (× {min(ratios):.2f}"
                     f"–{max(ratios):.2f})")
    return lines


def deadline_line(summary: dict, total_s: float) -> str:
    """The job's line on its deadline: the runs it dropped for pace (``runs_dropped`` of
    ``summary``, the job's build summary), how many of them it took back when they fit again
    (``runs_taken_back``), and the minutes of the budget (``budget_min``) left after
    ``total_s`` seconds, the whole job's."""
    dropped, back = summary.get("runs_dropped", 0), summary.get("runs_taken_back", 0)
    budget_min = summary["budget_min"]
    left = budget_min - total_s / 60
    return (f"deadline: {dropped} run(s) dropped for pace, {back} of them taken back when they "
            f"fit again; " + (f"{left:.1f} of the budget's {budget_min:g} minutes left"
                              if left >= 0 else
                              f"{-left:.1f} minutes over the budget's {budget_min:g}"))
