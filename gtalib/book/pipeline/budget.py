"""What the book's runs will cost on *this* machine, and which of them fit a time budget.

A run's expected cost is its configuration's recorded core-seconds (``book/recorded/``:
:func:`gtalib.training.record_costs.cost_table`, ``docs/recorded_runs.md``) scaled to this
machine, or, for a configuration never recorded, its training FLOPs at the rate measured here.
The scale comes from short timed calibrations (:func:`calibrate`), one per configuration family
(:func:`family`: depth, width and training length) among the runs to train: a few optimizer steps
of one run of the family (the preset's MHA for the reference family, else the first run of the
family in the job's order), one thread, on random tokens, whose seconds per step are compared
with the same configuration's recorded seconds per step *on each CPU kind that recorded it*. A
run is then scaled from the cost recorded on a CPU kind that recorded both it and its family's
calibration run (this machine's kind when it has one, else the kind with the most runs of it),
so that neither a family's own pace nor the machine and load a record was made on bleeds into
another's prediction: one factor for every configuration missed the 1,000-step gating runs by
1.28–1.44× on three CPU kinds (``benchmarks/budget_prediction.md``).

The wall time of a set of tasks on ``W`` workers is the makespan of the greedy schedule that
starts the spot-check tasks first and, within each class, the longest first (Graham 1969,
"Bounds on multiprocessing timing anomalies": LPT; :func:`start_order`), the order in which
:func:`gtalib.book.pipeline.schedule.train_all` submits them. :func:`choose` keeps the tasks
that must be trained (a run with no record) and adds the others in the order it is given (the
job's: :func:`gtalib.book.design.spot_check.training_tiers`, the spot-check set first) while the
predicted wall time of the job stays within the budget; the rest is read from records, whole
tasks (both arms of every ΔL pair) at a time. Beside the time, :func:`store_bytes` predicts the
space the chosen runs need in the run store (from the same records, and the models' sizes), which
the job checks before it trains. Reads the records (:mod:`gtalib.training.records`) and builds
models (:mod:`gtalib.model`); trains nothing.
"""

from __future__ import annotations

import heapq
import json
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field

import pandas as pd
import torch

from gtalib.book.design.names import display_name
from gtalib.book.design.run_specs import RunRef
from gtalib.model.gpt import GPT
from gtalib.model.params import count_params
from gtalib.training import record_costs
from gtalib.training.disk import run_bytes
from gtalib.training.machine import untrim_malloc
from gtalib.training.runs import RunSpec

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
#: A run's seconds outside its optimizer steps (Lightning's setup, the data module, the evaluations,
#: the probes, its files) within its card's wall time, added to the FLOPs estimate (a recorded
#: cost includes it). Two ``ci`` books of 34 runs of 20 steps on an idle Intel Xeon (family 6
#: model 207, 2026-12-06, benchmarks/budget_prediction.md): their cards took 29 s and 15 s where
#: their calibrated steps make 18 s and 7.5 s, 0.33 s and 0.22 s a run; their mean. (1.3 s,
#: taken from a whole training phase's wall time, had predicted that family 2.1× too long.)
RUN_SETUP_S = 0.27
#: Starting the cluster and its workers' first imports, and timing the calibration, before the
#: first run (seconds): the same two builds' training phases took 13 s and 7 s more than their
#: cards' seconds per worker.
START_S = 10.0
#: Optimizer steps timed by :func:`calibrate`, after :data:`WARMUP_STEPS` untimed ones.
CALIBRATION_STEPS = 4
WARMUP_STEPS = 1
#: A calibration step predicted longer than this (seconds, from its FLOPs at the recorded
#: throughput, :func:`recorded_flops_per_s`) is not timed: the ``paper`` preset's 2.9 B-parameter
#: step would take hours on a CPU. Its runs are then costed from FLOPs alone
#: (:func:`flops_calibration`).
MAX_TIMED_STEP_S = 10.0
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


def family(spec) -> tuple:
    """A run's configuration family, ``(n_layer, d_model, max_steps)``: the runs one calibration
    scales (:func:`calibrate`); at ``cpu`` the 250-step runs and the 1,000-step gating runs."""
    return (spec.model.n_layer, spec.model.d_model, spec.train.max_steps)


def family_words(fam: tuple) -> str:
    """A family (:func:`family`) in words: ``"1,000-step runs (8 layers, d_model 128)"``; a
    :func:`variant_family` with its variant first: ``"MLRA-4, 1,000-step runs (…)"``."""
    *variant, n_layer, d_model, steps = fam
    words = f"{steps:,}-step runs ({n_layer} layers, d_model {d_model})"
    return f"{display_name(variant[0])}, {words}" if variant else words


def training_flops(spec) -> float:
    """Training FLOPs of a run, ``6 · parameters · tokens`` (Kaplan et al. 2020, "Scaling Laws
    for Neural Language Models", Sec. 2.1)."""

    return 6.0 * count_params(spec.model)["total"] * spec.train.max_steps * spec.train.tokens_per_step


@dataclass(frozen=True)
class FamilyCalibration:
    """One configuration family's calibration (:func:`calibrate`).

    Attributes:
        run: the timed run's configuration in words (:meth:`RunSpec.describe`, less its seed).
        seconds_per_step: its optimizer step here (seconds; median over the workers).
        recorded: CPU kind (:func:`gtalib.training.record_costs.cost_table`'s names) → the same
            configuration's recorded seconds per step there (median; empty: never recorded).
        flops_per_s: training FLOPs per second of it here (:func:`training_flops` of one step
            over ``seconds_per_step``).
    """

    run: str
    seconds_per_step: float
    recorded: dict
    flops_per_s: float


@dataclass(frozen=True)
class Calibration:
    """The speed of the workers (or of this machine), from :func:`calibrate`.

    Attributes:
        seconds_per_step: one optimizer step of the reference run (seconds, ``threads`` torch
            threads).
        recorded_seconds_per_step: the same configuration's seconds per step in its records
            (median; ``None`` when it has none).
        flops_per_s: training FLOPs per second here (:func:`training_flops` of one step over
            ``seconds_per_step``).
        threads: torch threads of the calibration (those of one run).
        workers: the workers it was timed on at once (their median), or 0: in the job's own
            process.
        families: :func:`family` (or :func:`variant_family`) → :class:`FamilyCalibration`,
            of the reference run, of one run per other family to train and of one run per
            variant that this CPU kind has not recorded (:func:`calibration_specs`); empty: every
            run scaled by :attr:`factor`.
        cpu: this machine's CPU kind (:func:`gtalib.training.record_costs.this_cpu`).
        timed: ``False`` for :func:`flops_calibration`, which times nothing.
    """

    seconds_per_step: float
    recorded_seconds_per_step: float | None
    flops_per_s: float
    threads: int = 1
    workers: int = 0
    families: dict = field(default_factory=dict)
    cpu: str | None = None
    timed: bool = True

    @property
    def factor(self) -> float:
        """This machine's time for recorded work over the recorded time (1.0 without a record)."""
        if not self.recorded_seconds_per_step:
            return 1.0
        return self.seconds_per_step / self.recorded_seconds_per_step


def reference_spec(plan):
    """The calibration's run: the preset's MHA at its default options, seed 0."""

    return plan.spec(RunRef("mha", "main", (), 0))


def _row(costs, spec):
    """``costs``'s row of ``spec``'s configuration (empty when it has none)."""
    return costs[costs["key"] == record_costs.config_key(spec)]


def _by_cpu(row) -> dict:
    """CPU kind → ``{"runs", "core_s", "train_s"}`` of a cost-table row (empty without one)."""
    return dict(row["by_cpu"].iloc[0]) if len(row) and "by_cpu" in row else {}


def variant_family(spec) -> tuple:
    """A run's variant within its family, ``(variant, n_layer, d_model, max_steps)``: timed on
    its own where this CPU kind has no record of the run's configuration, since variants do not
    slow down alike from one CPU kind to another (MLRA-4 took 1.9× the prediction scaled from
    another kind through GLA-2's step on an Intel Xeon family 6 model 207:
    benchmarks/budget_prediction.md)."""
    return (spec.model.variant, *family(spec))


def calibration_specs(plan, todo=(), costs=None, cpu: str | None = None) -> dict:
    """The runs :func:`calibrate` times, by key: the reference (:func:`reference_spec`) and one
    run of every other family (:func:`family`) among ``todo`` (RunSpecs, in the job's order),
    its first run whose configuration is recorded, else its first run; and, for every
    :func:`variant_family` of ``todo`` with a run whose configuration the CPU kind ``cpu`` (this
    machine's, :func:`gtalib.training.record_costs.this_cpu`, when ``None``) has not recorded,
    such a run of it (one recorded elsewhere first)."""
    cpu = record_costs.this_cpu() if cpu is None else cpu
    ref = reference_spec(plan)
    chosen = {family(ref): ref}
    for s in todo:
        known = costs is not None and len(_row(costs, s))
        here = costs is not None and cpu in _by_cpu(_row(costs, s))
        for key, wanted in ((family(s), True), (variant_family(s), not here)):
            if wanted and (key not in chosen or (known and not len(_row(costs, chosen[key]))
                                                 and chosen[key] is not ref)):
                chosen[key] = s
    return chosen


def time_steps(spec_dict: dict, threads: int = 1, steps: int = CALIBRATION_STEPS) -> float:
    """Seconds per optimizer step of the run ``spec_dict`` (:meth:`RunSpec.to_dict`) in this
    process: ``steps`` steps (after :data:`WARMUP_STEPS` untimed ones) of its model, AdamW, its
    batch of random tokens, ``threads`` torch threads. Runs on a Dask worker too
    (:func:`gtalib.book.pipeline.schedule.calibrate_workers`), where it first resets glibc's malloc
    thresholds as a training task does.

    Raises:
        ValueError: ``steps`` or ``threads`` < 1.
    """


    if steps < 1 or threads < 1:
        raise ValueError(f"steps and threads must be >= 1, got steps={steps!r}, threads={threads!r}")
    untrim_malloc()
    spec = RunSpec.from_dict(spec_dict)
    cfg = spec.train
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        gen = torch.Generator().manual_seed(0)
        model = GPT(spec.model)
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
        micro = cfg.micro_batch_size or cfg.batch_size
        # (micro, seq_len + 1) token ids per forward; batch_size / micro forwards make one step
        idx = torch.randint(0, spec.model.vocab_size, (micro, cfg.seq_len + 1), generator=gen)
        t0 = 0.0
        for i in range(WARMUP_STEPS + steps):
            if i == WARMUP_STEPS:
                t0 = time.perf_counter()
            for _ in range(cfg.batch_size // micro):
                _, loss = model(idx[:, :-1], idx[:, 1:])
                loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return (time.perf_counter() - t0) / steps
    finally:
        torch.set_num_threads(old_threads)


def calibrate(plan, costs=None, threads: int = 1, steps: int = CALIBRATION_STEPS,
              measured: dict | None = None, todo=(),
              family_measured: dict | None = None) -> Calibration:
    """This machine's :class:`Calibration`: :func:`time_steps` of every run of
    :func:`calibration_specs` (the reference, and one run per other family of ``todo``), each
    compared with the recorded seconds per step of its configuration, overall (the median over
    its bundles, for the reference's :attr:`Calibration.factor`) and per CPU kind (for
    :func:`expected_seconds`); ``costs``: :func:`gtalib.training.record_costs.cost_table`, read
    when ``None``. ``measured``: the reference's seconds per step already timed on the workers
    (worker → seconds, from :func:`gtalib.book.pipeline.schedule.calibrate_workers`, all at once,
    so that they contend as the runs will), ``family_measured`` the same per family; their
    median is used, else the step is timed here, in this process.

    Raises:
        ValueError: ``steps`` or ``threads`` < 1.
    """

    def per_step_of(spec, timed) -> float:
        if timed:
            return float(pd.Series(list(timed.values())).median())
        return time_steps(spec.to_dict(), threads, steps)

    costs = record_costs.cost_table() if costs is None else costs
    families = {}
    for fam, spec in calibration_specs(plan, todo, costs).items():
        n = spec.train.max_steps
        per = per_step_of(spec, measured if fam == family(reference_spec(plan))
                          else (family_measured or {}).get(fam))
        recorded = {cpu: d["train_s"] / n for cpu, d in _by_cpu(_row(costs, spec)).items()
                    if d["train_s"] > 0}
        families[fam] = FamilyCalibration(spec.describe().replace(f" seed={spec.seed}", ""),
                                          per, recorded, training_flops(spec) / n / per)
    spec = reference_spec(plan)
    ref = families[family(spec)]
    row = _row(costs, spec)
    recorded = (float(row["train_s_median"].iloc[0]) / spec.train.max_steps
                if len(row) and not math.isnan(row["train_s_median"].iloc[0]) else None)
    return Calibration(ref.seconds_per_step, recorded, ref.flops_per_s, threads,
                       len(measured) if measured else 0, families, record_costs.this_cpu())


def _key_spec(key: str) -> RunSpec:
    """A RunSpec of a cost table's configuration (:func:`gtalib.training.record_costs.config_key`,
    which leaves the seed and the data order out): seed 0, data order 0."""
    d = json.loads(key)
    return RunSpec.from_dict({**d, "seed": 0, "train": {**d["train"], "data_seed": 0}})


def recorded_flops_per_s(costs) -> float:
    """The training throughput of the recorded runs, FLOPs per second of one thread: the median
    over the recorded configurations of :func:`training_flops` over their median core-seconds
    (``costs``: :func:`gtalib.training.record_costs.cost_table`, whose ``key`` is the spec).

    Raises:
        ValueError: ``costs`` has no timed configuration.
    """
    rates = [training_flops(_key_spec(r.key)) / r.core_s_median
             for r in costs.itertuples() if r.core_s_median > 0]
    if not rates:
        raise ValueError("no recorded run with a measured time: nothing to derive a throughput from")
    return float(pd.Series(rates).median())


def timed_step_s(spec, costs) -> float:
    """One optimizer step of ``spec``'s run at the recorded throughput (seconds): what timing it
    would cost before :data:`MAX_TIMED_STEP_S` stops it."""
    return training_flops(spec) / spec.train.max_steps / recorded_flops_per_s(costs)


def flops_calibration(plan, costs, threads: int = 1) -> Calibration:
    """A :class:`Calibration` that times nothing: the reference run's step from its FLOPs at
    :func:`recorded_flops_per_s`, so every run is costed from its FLOPs (no model is built), for
    a preset whose step is too large to time (:data:`MAX_TIMED_STEP_S`)."""
    rate = recorded_flops_per_s(costs)
    spec = reference_spec(plan)
    return Calibration(training_flops(spec) / spec.train.max_steps / rate, None, rate, threads, 0,
                       {}, record_costs.this_cpu(), timed=False)


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


def expected_seconds(spec, calibration: Calibration, costs) -> tuple[float, str]:
    """``(seconds, basis)``: a run's expected wall time on one worker here.

    Where this machine's CPU kind recorded the run's configuration and its family's timed run
    (:attr:`Calibration.families`): that configuration's recorded core-seconds here (median) ×
    the family's seconds per step now over its recorded seconds per step here. Otherwise the
    same through the run's own variant timed now (:func:`variant_family`), else through its
    family, on a CPU kind that recorded both, the kind with the most runs of it (``basis``
    ``"recorded"``). Otherwise its recorded core-seconds (median over every kind) ×
    :attr:`Calibration.factor` (``"recorded"``), and for a configuration never recorded its
    FLOPs at its variant's, else its family's, else the reference's rate plus
    :data:`RUN_SETUP_S` (``"FLOPs"``)."""

    row = _row(costs, spec)
    threads = calibration.threads
    fam = calibration.families.get(family(spec))
    if len(row) and not math.isnan(row["core_s_median"].iloc[0]):
        by = _by_cpu(row)
        # the run's family timed against this kind's records where this kind recorded the run;
        # else the run's variant timed on its own (variant_family), else the family elsewhere
        here = calibration.cpu in by and fam is not None and calibration.cpu in fam.recorded
        for fc in ((fam,) if here else (calibration.families.get(variant_family(spec)), fam)):
            common = [k for k in by if fc is not None and k in fc.recorded]
            if common:
                kind = (calibration.cpu if calibration.cpu in common
                        else max(common, key=lambda k: (by[k]["runs"], k)))
                return (by[kind]["core_s"] / threads * fc.seconds_per_step / fc.recorded[kind],
                        "recorded")
        return float(row["core_s_median"].iloc[0]) / threads * calibration.factor, "recorded"
    fc = calibration.families.get(variant_family(spec)) or fam
    rate = fc.flops_per_s if fc is not None else calibration.flops_per_s
    return training_flops(spec) / rate + RUN_SETUP_S, "FLOPs"


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
        seconds: run id → expected seconds here. basis: run id → ``"recorded"`` or ``"FLOPs"``.
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
    basis: dict
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
    seconds, basis = {}, {}
    for s in todo:
        seconds[s.run_id], basis[s.run_id] = expected_seconds(s, calibration, costs)
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
    return Choice(train, read, seconds, basis, train_s, before + train_s + after, budget_s,
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
    on = (f"on {calibration.workers} worker(s) at once" if calibration.workers
          else "in this process")
    cal = (f"{calibration.seconds_per_step:.3f} s per step of the reference run {on}"
           + (f" against {calibration.recorded_seconds_per_step:.3f} s recorded: recorded "
              f"costs × {calibration.factor:.2f}" if calibration.recorded_seconds_per_step
              else " (no record of it: costs from FLOPs at "
                   f"{calibration.flops_per_s / 1e9:.1f} GFLOP/s)"))
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
    for fam, fc in calibration.families.items():
        mine = calibration.cpu in fc.recorded
        rec = fc.recorded.get(calibration.cpu) if mine else (
            min(fc.recorded.values()) if fc.recorded else None)
        lines.append(f"  {family_words(fam)}: {fc.seconds_per_step:.3f} s per step of {fc.run}"
                     + ("" if rec is None else
                        f" against {rec:.3f} s recorded on "
                        + ("this CPU kind" if mine else
                           f"{len(fc.recorded)} other CPU kind(s) (fastest shown)")))
    return "\n".join(lines)


def family_times(specs, predicted: dict, measured: dict) -> list[dict]:
    """Predicted against measured seconds per configuration family (:func:`family`), for the
    job's last lines and ``benchmarks/budget_prediction.md``: one dict per family of the runs
    ``specs`` (RunSpecs) that ``measured`` (run id → wall seconds, from their cards) holds, in
    order of first appearance: ``family`` (words), ``runs``, ``predicted_s`` (sum of
    ``predicted``, run id → seconds) and ``measured_s``."""
    out = {}
    for s in specs:
        if s.run_id not in measured or s.run_id not in predicted:
            continue
        row = out.setdefault(family(s), {"family": family_words(family(s)), "runs": 0,
                                         "predicted_s": 0.0, "measured_s": 0.0})
        row["runs"] += 1
        row["predicted_s"] += float(predicted[s.run_id])
        row["measured_s"] += float(measured[s.run_id])
    return list(out.values())


def family_lines(rows: list[dict]) -> list[str]:
    """The job's lines for :func:`family_times`: runs, predicted and measured one-worker
    seconds and their ratio (measured / predicted) per family."""
    return [f"prediction: {r['family']}: {r['runs']} run(s), predicted "
            f"{_minutes(r['predicted_s'])}, measured {_minutes(r['measured_s'])} "
            f"(× {r['measured_s'] / r['predicted_s']:.2f})" for r in rows if r["predicted_s"] > 0]
