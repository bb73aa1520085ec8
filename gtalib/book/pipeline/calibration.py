"""How fast this machine trains the book's runs: short timed calibrations, each compared with
the records.

A calibration (:func:`calibrate`) times a few optimizer steps of one run per configuration family
(:func:`family`: depth, width and training length) among the runs to train (the preset's MHA for
the reference family, else the first run of the family in the job's order), and of one run per
variant that this CPU kind never recorded (:func:`variant_family`), one thread, on random tokens;
their seconds per step are compared with the same configuration's recorded seconds per step *on
each CPU kind that recorded it*, so that :func:`gtalib.book.pipeline.budget.expected_seconds`
scales a run from the cost recorded on a CPU kind that recorded both it and its family's (or its
variant's) calibration run: neither a family's own pace nor the machine and load a record was made
on bleeds into another's prediction (one factor for every configuration missed the 1,000-step
gating runs by 1.28–1.44× on three CPU kinds: ``benchmarks/budget_prediction.md``). A preset
whose step is too large to time is costed from FLOPs at the recorded throughput
(:func:`flops_calibration`). Reads the records (:mod:`gtalib.training.record_costs`) and builds
models (:mod:`gtalib.model`); trains nothing.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import dataclass, field

import pandas as pd
import torch

from gtalib.book.design.names import display_name
from gtalib.book.design.run_specs import RunRef
from gtalib.model.gpt import GPT
from gtalib.model.params import count_params
from gtalib.training import record_costs
from gtalib.training.machine import untrim_malloc
from gtalib.training.runs import RunSpec

#: Optimizer steps timed by :func:`calibrate`, after :data:`WARMUP_STEPS` untimed ones; their
#: median is the step's time (:func:`steady_step_s`). A fresh model's first steps run slow (its
#: allocations): on an idle Intel Xeon (family 6 model 207) the mean of 4 steps after 1 gave the
#: same 1,000-step GQA run 0.24–0.29 s per step across fresh processes, the median of 8 after 3
#: 0.235–0.248 s (benchmarks/calibration_noise.md).
CALIBRATION_STEPS = 8
WARMUP_STEPS = 3
#: A calibration step predicted longer than this (seconds, from its FLOPs at the recorded
#: throughput, :func:`recorded_flops_per_s`) is not timed: the ``paper`` preset's 2.9 B-parameter
#: step would take hours on a CPU. Its runs are then costed from FLOPs alone
#: (:func:`flops_calibration`).
MAX_TIMED_STEP_S = 10.0

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
            configuration's recorded seconds per step there (of its fastest run there,
            :func:`gtalib.training.record_costs.cost_table`'s ``by_cpu``; empty: never recorded).
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


def cost_row(costs, spec):
    """``costs``'s row of ``spec``'s configuration (empty when it has none)."""
    return costs[costs["key"] == record_costs.config_key(spec)]


def cost_by_cpu(row) -> dict:
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
        known = costs is not None and len(cost_row(costs, s))
        here = costs is not None and cpu in cost_by_cpu(cost_row(costs, s))
        for key, wanted in ((family(s), True), (variant_family(s), not here)):
            if wanted and (key not in chosen or (known and not len(cost_row(costs, chosen[key]))
                                                 and chosen[key] is not ref)):
                chosen[key] = s
    return chosen


def steady_step_s(step_seconds) -> float:
    """The seconds of one step in steady state: the median of ``step_seconds`` (each timed
    step's seconds, the warm-up left out), so that one step slowed by the machine's other work
    does not move a calibration.

    Raises:
        ValueError: ``step_seconds`` is empty (``statistics.StatisticsError``).
    """
    return statistics.median(step_seconds)


def time_steps(spec_dict: dict, threads: int = 1, steps: int = CALIBRATION_STEPS) -> float:
    """Seconds per optimizer step of the run ``spec_dict`` (:meth:`RunSpec.to_dict`) in this
    process: the :func:`steady_step_s` of ``steps`` steps (after :data:`WARMUP_STEPS` untimed
    ones) of its model, AdamW, its batch of random tokens, ``threads`` torch threads. Runs on a
    Dask worker too (:func:`gtalib.book.pipeline.schedule.calibrate_workers`), where it first
    resets glibc's malloc thresholds as a training task does.

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
        seconds = []
        for _ in range(WARMUP_STEPS + steps):
            t0 = time.perf_counter()
            for _ in range(cfg.batch_size // micro):
                _, loss = model(idx[:, :-1], idx[:, 1:])
                loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            seconds.append(time.perf_counter() - t0)
        return steady_step_s(seconds[WARMUP_STEPS:])
    finally:
        torch.set_num_threads(old_threads)


def calibrate(plan, costs=None, threads: int = 1, steps: int = CALIBRATION_STEPS,
              measured: dict | None = None, todo=(),
              family_measured: dict | None = None) -> Calibration:
    """This machine's :class:`Calibration`: :func:`time_steps` of every run of
    :func:`calibration_specs` (the reference, and one run per other family of ``todo``), each
    compared with the recorded seconds per step of its configuration, overall (the median over
    its bundles, for the reference's :attr:`Calibration.factor`) and per CPU kind (its fastest
    run there, for :func:`gtalib.book.pipeline.budget.expected_seconds`); ``costs``:
    :func:`gtalib.training.record_costs.cost_table`, read
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
        recorded = {cpu: d["train_s"] / n for cpu, d in cost_by_cpu(cost_row(costs, spec)).items()
                    if d["train_s"] > 0}
        families[fam] = FamilyCalibration(spec.describe().replace(f" seed={spec.seed}", ""),
                                          per, recorded, training_flops(spec) / n / per)
    spec = reference_spec(plan)
    ref = families[family(spec)]
    row = cost_row(costs, spec)
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
