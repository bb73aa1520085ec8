"""How fast this machine trains the book's runs: a short timed calibration of every step shape.

A run's optimizer step costs what its model's arithmetic and its batch cost: runs that differ only
in seed, data order, training length or an option that changes no arithmetic (the
initialisation, the latent family's scaling constants: :data:`FREE_OPTIONS`) share a *step
shape* (:func:`step_shape`). :func:`calibrate` times a few optimizer steps of one run of every
step shape among the runs to train (:func:`calibration_specs`), one thread each, on random
tokens, on the workers that will train them, as many at once as there are workers, so that they
share the machine as the runs will, :data:`CALIBRATION_ROUNDS` times beside different shapes
(:func:`calibrate_workers`), and keeps the median of a shape's timings once its seconds per FLOP
agree with the other shapes' (:func:`settle`, which times a shape that strays again, and costs
one that cannot be timed from its FLOPs); :func:`gtalib.book.pipeline.budget.expected_seconds`
makes a run's time of its steps, its evaluations and its setup. Records do not enter a run's prediction: a
recorded run may have shared its machine with other work (on AMD EPYC family 25 the fastest of a
configuration's records was 1.4× a fresh run: benchmarks/budget_prediction.md), and another CPU
kind's records scale by a ratio that differs from variant to variant. They give the reference
run's :attr:`Calibration.factor`, which scales the rest of the job (corpus, notebooks), and the
throughput of a preset whose step is too large to time (:func:`flops_calibration`). Reads the
records (:mod:`gtalib.training.record_costs`) and builds models (:mod:`gtalib.model`); trains
only the throwaway two-step runs of :func:`time_setup`, in temporary stores.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import statistics
import tempfile
import time
from dataclasses import dataclass, field

import pandas as pd
import torch

from gtalib.book.design.run_specs import RunRef
from gtalib.model.flops import step_flops
from gtalib.model.gpt import GPT
from gtalib.model.params import count_params
from gtalib.training import record_costs
from gtalib.training.machine import untrim_malloc
from gtalib.training.runs import RunSpec
from gtalib.training.train import ensure_run

#: Optimizer steps timed by :func:`calibrate`, after :data:`WARMUP_STEPS` untimed ones; their
#: median is the step's time (:func:`steady_step_s`). A fresh model's first steps run slow (its
#: allocations): on an idle Intel Xeon (family 6 model 207) the mean of 4 steps after 1 gave the
#: same 1,000-step GQA run 0.24–0.29 s per step across fresh processes, the median of 8 after 3
#: 0.235–0.248 s (benchmarks/calibration_noise.md).
CALIBRATION_STEPS = 8
WARMUP_STEPS = 3
#: Seconds the timed steps last at least: a step shorter than ``MIN_TIMED_S /
#: CALIBRATION_STEPS`` is timed over more steps. The ``ci`` preset's 20 ms steps, 8 at a time,
#: are a few scheduler time slices, and one slice given to the other worker's task moved a
#: shape's prediction by up to 25 % (benchmarks/budget_prediction.md, 2026-12-06 23:13). A
#: timing never runs more steps than the shape's run has (the ``ci`` preset's 20): timing more
#: would cost more than training the run it predicts.
MIN_TIMED_S = 1.0
#: A calibration step predicted longer than this (seconds, from its FLOPs at the recorded
#: throughput, :func:`recorded_flops_per_s`) is not timed: the ``paper`` preset's 2.9 B-parameter
#: step would take hours on a CPU. Its runs are then costed from FLOPs alone
#: (:func:`flops_calibration`).
MAX_TIMED_STEP_S = 10.0

#: Model options that change no arithmetic of a step (the initialisation's values, the latent
#: family's constant scalings α: Liu et al. 2026, MLRA, Sec. 3): runs that differ only in them
#: share a step shape (:func:`step_shape`) and one timing.
FREE_OPTIONS = ("init", "init_std", "latent_scale")
#: Optimizer steps of the short run that :func:`time_setup` trains end to end.
SETUP_STEPS = 2
#: Times each step shape is timed (:func:`calibrate_workers`, :func:`calibrate`), each round on
#: the workers beside another shape; a shape's seconds per step is the median of its rounds, which
#: one timing cannot move. Work outside the job slows a timing (on an idle AMD EPYC, family 25,
#: model 17, one calibration, started as another book's processes ended, timed MLRA-2 at 0.756 s
#: and GQA at 0.503 s per step, the next 0.569 s and 0.403 s, as fresh runs then measured:
#: benchmarks/budget_prediction.md, 2026-12-06 23:27), and a timing can also run fast: on an
#: Intel Xeon (family 6, model 106) the least of two rounds timed MHA at 0.354 s per step, below
#: GQA's 0.364 s though MHA does more arithmetic, and MHA's runs then took 1.40 and 1.51 times
#: their prediction; the least of two rounds keeps such a timing, the median of three does not.
CALIBRATION_ROUNDS = 3
#: How far a shape's seconds per FLOP (:func:`shape_flops`) may stray from the median over the
#: timed shapes before it is timed again (:func:`settle`): within a factor ``1 + FLOP_TOLERANCE``
#: either way. The variants do not all run their arithmetic equally fast (the latent family's
#: small products, the gate): the recorded runs of the ``cpu`` book's 19 step shapes (AMD EPYC,
#: family 25, model 17; their configurations' median seconds per step, ``record_costs``) lie at
#: 0.84–1.39 times the median seconds per FLOP, within 1.5 of it; a timing outside is taken for
#: the machine's, not the shape's, and timed again.
FLOP_TOLERANCE = 0.5
#: More timings of a shape that strays from the others' seconds per FLOP; its seconds per step
#: is then the median of all its timings.
RETIME_ROUNDS = 2


def family(spec) -> tuple:
    """A run's configuration family, ``(n_layer, d_model, max_steps)``, by which the job reports
    predicted against measured time: at ``cpu`` the 250-step runs and the 1,000-step gating
    runs."""
    return (spec.model.n_layer, spec.model.d_model, spec.train.max_steps)


def family_words(fam: tuple) -> str:
    """A family (:func:`family`) in words: ``"1,000-step runs (8 layers, d_model 128)"``."""
    n_layer, d_model, steps = fam
    return f"{steps:,}-step runs ({n_layer} layers, d_model {d_model})"


def step_shape(spec) -> tuple:
    """What a run's optimizer step costs depends on: its model configuration less
    :data:`FREE_OPTIONS`, and its batch (``batch_size``, ``micro_batch_size``, ``seq_len``,
    ``precision``); hashable. Seed, data order and training length are left out."""
    model = {k: v for k, v in dataclasses.asdict(spec.model).items() if k not in FREE_OPTIONS}
    t = spec.train
    return (tuple(sorted(model.items())), t.batch_size, t.micro_batch_size, t.seq_len, t.precision)


def training_flops(spec) -> float:
    """Training FLOPs of a run, ``6 · parameters · tokens`` (Kaplan et al. 2020, "Scaling Laws
    for Neural Language Models", Sec. 2.1)."""

    return 6.0 * count_params(spec.model)["total"] * spec.train.max_steps * spec.train.tokens_per_step


def evaluation_share(spec) -> float:
    """A run's evaluations over its optimizer steps, in FLOPs: forward passes only (``2 · N`` per
    token against training's ``6 · N``: Kaplan et al. 2020, Sec. 2.1) over ``eval_windows``
    held-out windows of ``seq_len`` tokens per corpus source, at every ``eval_every``-th step and
    the last (:mod:`gtalib.training.loop`); at ``cpu`` 5 evaluations of 6 × 32 windows in 250
    steps of 16 windows: 0.08. A data identity without its sources counts one."""
    t = spec.train
    sources = len(spec.data.get("identity", {}).get("corpus", {}).get("sources", ())) or 1
    evals = math.ceil(t.max_steps / t.eval_every)
    return evals * sources * t.eval_windows * t.seq_len / (3.0 * t.max_steps * t.tokens_per_step)


@dataclass(frozen=True)
class StepTiming:
    """One step shape's calibration (:func:`calibrate`).

    Attributes:
        run: the timed run in words (:meth:`RunSpec.describe`, less its seed, data order and
            length).
        seconds_per_step: its optimizer step here (seconds).
        basis: ``"timed"``, or ``"FLOPs"``: it could not be timed, and ``seconds_per_step`` is
            its :func:`shape_flops` at the median seconds per FLOP of the shapes timed.
        note: what the calibration says of it in one line (empty: nothing), e.g. why it could
            not be timed, or that it was timed again (:func:`settle`).
    """

    run: str
    seconds_per_step: float
    basis: str = "timed"
    note: str = ""


@dataclass(frozen=True)
class Calibration:
    """The speed of the workers (or of this machine), from :func:`calibrate`.

    Attributes:
        seconds_per_step: one optimizer step of the reference run (seconds, at the threads of
            one run).
        recorded_seconds_per_step: the same configuration's seconds per step in its records
            (median; ``None`` when it has none).
        flops_per_s: training FLOPs per second of the reference run here (:func:`training_flops`
            of one step over ``seconds_per_step``); a run of a shape not timed is costed at it.
        workers: the workers it was timed on, or 0: in the job's own process.
        steps: :func:`step_shape` → :class:`StepTiming`, of the reference run and of one run
            per step shape to train (:func:`calibration_specs`); empty: nothing timed.
        timed: ``False`` for :func:`flops_calibration`, which times nothing.
        setup_s: a run's seconds here outside its steps and evaluations (:func:`time_setup`);
            ``None``: not timed.
    """

    seconds_per_step: float
    recorded_seconds_per_step: float | None
    flops_per_s: float
    workers: int = 0
    steps: dict = field(default_factory=dict)
    timed: bool = True
    setup_s: float | None = None

    @property
    def factor(self) -> float:
        """This machine's time for recorded work over the recorded time (1.0 without a record)."""
        if not self.recorded_seconds_per_step:
            return 1.0
        return self.seconds_per_step / self.recorded_seconds_per_step


def reference_spec(plan):
    """The calibration's reference run: the preset's MHA at its default options, seed 0."""

    return plan.spec(RunRef("mha", "main", (), 0))


def cost_row(costs, spec):
    """``costs``'s row of ``spec``'s configuration (empty when it has none)."""
    return costs[costs["key"] == record_costs.config_key(spec)]


def calibration_specs(plan, todo=()) -> dict:
    """The runs :func:`calibrate` times, by :func:`step_shape`: the reference
    (:func:`reference_spec`) first, then the first run of every other step shape of ``todo``
    (RunSpecs, in the job's order)."""
    chosen = {}
    for s in (reference_spec(plan), *todo):
        chosen.setdefault(step_shape(s), s)
    return chosen


def run_words(spec) -> str:
    """A run in words without its seed, data order and length: ``"mla n_head=4 init=zero gate"``."""
    return re.sub(r" (data_seed|seed|steps)=\d+", "", spec.describe())


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
    process: the :func:`steady_step_s` of ``steps`` steps, or of more until they last
    :data:`MIN_TIMED_S` or reach the run's own ``max_steps`` (after :data:`WARMUP_STEPS`
    untimed ones), of its model, AdamW, its
    batch of random tokens, ``threads`` torch threads. Runs on a Dask worker too
    (:func:`calibrate_workers`), where it first resets glibc's malloc thresholds as a training
    task does.

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
        while (len(seconds) < WARMUP_STEPS + steps
               or (sum(seconds[WARMUP_STEPS:]) < MIN_TIMED_S and len(seconds) < cfg.max_steps)):
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


def time_setup(spec_dict: dict, threads: int = 1) -> float:
    """Seconds of a run here outside its optimizer steps and evaluations (Lightning's setup, the
    data module, the model, its files): the run ``spec_dict`` (:meth:`RunSpec.to_dict`) trained
    for :data:`SETUP_STEPS` steps into a temporary store
    (:func:`gtalib.training.train.ensure_run`), its wall time less its card's ``train_wall_s``
    (the steps and the evaluation at the last one). Timed on a second such run: the first pays
    the process's first imports, which a worker pays once. Runs on a Dask worker too
    (:func:`calibrate_workers`).

    Raises:
        ValueError: ``threads`` < 1.
    """
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads!r}")
    untrim_malloc()
    spec = RunSpec.from_dict(spec_dict)
    short = dataclasses.replace(spec, train=dataclasses.replace(
        spec.train, max_steps=SETUP_STEPS, warmup_steps=0))
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for _ in range(2):
            with tempfile.TemporaryDirectory(prefix="gtalib-setup-") as store:
                t0 = time.perf_counter()
                path = ensure_run(short, store)
                wall = time.perf_counter() - t0
                train_s = json.loads((path / "card.json").read_text())["train_wall_s"]
        return max(0.0, wall - train_s)
    finally:
        torch.set_num_threads(old_threads)


def shape_flops(spec_dict: dict) -> float:
    """FLOPs of one optimizer step of the run ``spec_dict`` (:meth:`RunSpec.to_dict`), forward
    and backward of its batch as counted (:func:`gtalib.model.flops.step_flops`: attention at
    each variant's own widths, on the ``meta`` device): the arithmetic by which :func:`settle`
    checks a shape's timing against the others'. Runs on a Dask worker too."""
    spec = RunSpec.from_dict(spec_dict)
    return float(step_flops(spec.model, spec.train.batch_size, spec.train.seq_len))


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def settle(specs: dict, flops: dict, rounds: dict, errors: dict, retime) -> dict:
    """Each shape's :class:`StepTiming` from its timings, checked against the other shapes'.

    A shape's seconds per step is the median of its timings (``rounds``: key → seconds per
    step of each round; ``specs``: key → RunSpec). Their seconds per FLOP (``flops``: key →
    FLOPs of a step, :func:`shape_flops`) are then compared: a shape whose rate lies outside a
    factor ``1 + FLOP_TOLERANCE`` of the median rate over the timed shapes is timed :data:`RETIME_ROUNDS` more times
    (``retime(keys)`` → ``(rounds, errors)`` as given here) and takes the median of all its
    timings, with a note saying so. A shape with no timing (``errors``: key → why, one line: a
    worker lost, a step that fails) is predicted from its FLOPs at the median seconds per FLOP
    of the timed shapes (basis ``"FLOPs"``), its note saying why.

    Raises:
        ValueError: no shape could be timed (the first reason is named).
    """
    rounds = {k: list(v) for k, v in rounds.items() if v}
    errors = {k: e for k, e in errors.items() if k not in rounds}
    if not rounds:
        why = next(iter(errors.values()), "nothing to time")
        raise ValueError(f"calibration: no step shape could be timed ({why})")

    def rates():
        return {k: statistics.median(v) / flops[k] for k, v in rounds.items()}

    rate = rates()
    mid = first_mid = statistics.median(rate.values())
    first = dict(rate)
    off = [k for k, r in rate.items()
           if not mid / (1 + FLOP_TOLERANCE) <= r <= mid * (1 + FLOP_TOLERANCE)]
    if off and len(rounds) > 1:
        more, _ = retime(off)  # a shape that fails now keeps its first timings
        for k in off:
            rounds[k] += more.get(k, [])
        rate = rates()
        mid = statistics.median(rate.values())
    out = {}
    for k, spec in specs.items():
        if k in rounds:
            note = ""
            if k in off and len(rounds) > 1:
                note = (f"timed {len(rounds[k])} times: its first {CALIBRATION_ROUNDS} at "
                        f"{first[k] / first_mid:.2f} × the shapes' median seconds per FLOP, all "
                        f"{len(rounds[k])} at {rate[k] / mid:.2f} ×")
            out[k] = StepTiming(run_words(spec), statistics.median(rounds[k]), "timed", note)
        else:
            out[k] = StepTiming(run_words(spec), flops[k] * mid, "FLOPs",
                                f"could not be timed ({errors.get(k, 'no timing')}): predicted "
                                "from its FLOPs at the timed shapes' seconds per FLOP")
    return out


def round_order(keys: list, i: int) -> list:
    """The order of the ``i``-th round of timings (from 0) of the shapes ``keys``: rotated by
    ``i``, the rounds ``i = 2, 5, …`` taking every other shape first (the even places, then the
    odd), so that two workers, which take the tasks in pairs, time a shape beside another shape
    each round (rotations alone pair an even number of shapes alike every other round)."""
    if i % 3 == 2:
        keys = keys[::2] + keys[1::2]
    i %= max(1, len(keys))
    return keys[i:] + keys[:i]


def _time_on_workers(client, specs: dict, order: list, threads: int) -> tuple[dict, dict]:
    """``(key → seconds per step of each timing, key → one-line error)`` of :func:`time_steps`
    of ``specs[k]`` for each ``k`` of ``order`` on the workers of ``client``, as many at once as
    there are workers; a timing that fails (its step raised, its worker lost more often than
    Dask retries) is an error, not a timing. Behind the last timings come as many more, of the
    order's first shapes, as there are other workers, their results not kept: the last
    timings would otherwise run with the other workers idle, alone on the machine, faster than
    any run will (the least of two rounds kept such a timing of MHA, the last of its order,
    1.4–1.5 times too fast: :data:`CALIBRATION_ROUNDS`)."""
    fillers = order[:max(0, len(client.scheduler_info()["workers"]) - 1)]
    futures = client.map(time_steps, [specs[k].to_dict() for k in order + fillers],
                         threads=threads, pure=False)
    rounds, errors = {}, {}
    for k, fut in zip(order, futures):
        try:
            rounds.setdefault(k, []).append(float(fut.result()))
        except Exception as e:  # noqa: BLE001 - any failure of a timing: said, costed from FLOPs
            errors.setdefault(k, _one_line(e))
    for fut in futures[len(order):]:  # a filler left running would slow what comes next
        try:
            fut.result()
        except Exception:  # noqa: BLE001, S110 - a filler's own failure is no timing's
            pass
    return rounds, errors


def calibrate_workers(client, specs: dict, threads: int = 1, timeout: float = 30.0,
                      setup=None) -> tuple[dict, float | None, int]:
    """Each run of ``specs`` (key → RunSpec; the key is kept) timed on the workers of ``client``
    (a ``dask.distributed.Client``): :data:`CALIBRATION_ROUNDS` :func:`time_steps` each, one task
    each, as many at once as there are workers, so that they share the machine as the runs
    will, each round in another order (:func:`round_order`), settled by :func:`settle` (the median, checked
    against the shapes' FLOPs, counted on the workers first, and timed again on the workers
    where it strays); and a run's setup seconds (the least of :func:`time_setup` of the RunSpec
    ``setup`` on each worker; ``None`` without one): ``(key → StepTiming, setup seconds,
    workers)``. ``({}, None, 0)`` when no worker joins within ``timeout`` seconds (batch jobs
    still queued): the caller then times the steps in its own process.

    Raises:
        ValueError: no shape could be timed (:func:`settle`).
    """
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        return {}, None, 0
    keys = list(specs)
    # the setup first, on every worker: a worker's first run pays its first imports and
    # Lightning's first start (1-2 s), which time_setup leaves out and no book's run should pay
    setup_futures = [] if setup is None else [
        client.submit(time_setup, setup.to_dict(), threads, workers=[w], pure=False)
        for w in client.scheduler_info()["workers"]]
    flops = dict(zip(keys, client.gather(client.map(
        shape_flops, [specs[k].to_dict() for k in keys], pure=False))))
    order = [k for i in range(CALIBRATION_ROUNDS) for k in round_order(keys, i)]
    rounds, errors = _time_on_workers(client, specs, order, threads)
    timings = settle(specs, flops, rounds, errors, lambda off: _time_on_workers(
        client, specs, [k for _ in range(RETIME_ROUNDS) for k in off], threads))
    return (timings, min((f.result() for f in setup_futures), default=None),
            len(client.scheduler_info()["workers"]))


def _time_here(specs: dict, order: list, threads: int, steps: int) -> tuple[dict, dict]:
    """:func:`_time_on_workers` in this process, one timing after another."""
    rounds, errors = {}, {}
    for k in order:
        try:
            rounds.setdefault(k, []).append(time_steps(specs[k].to_dict(), threads, steps))
        except Exception as e:  # noqa: BLE001 - any failure of a timing: said, costed from FLOPs
            errors.setdefault(k, _one_line(e))
    return rounds, errors


def calibrate(plan, costs=None, threads: int = 1, steps: int = CALIBRATION_STEPS,
              timed: dict | None = None, todo=(), workers: int = 0,
              setup_s: float | None = None) -> Calibration:
    """This machine's :class:`Calibration`: the seconds per step of every run of
    :func:`calibration_specs` (the reference, and one run per other step shape of ``todo``):
    from ``timed`` (:func:`step_shape` → :class:`StepTiming` or seconds, timed on the workers
    by :func:`calibrate_workers`; ``workers`` of them), else :data:`CALIBRATION_ROUNDS`
    :func:`time_steps` each here, in this process, settled as on the workers (:func:`settle`).
    The reference's is compared with its recorded seconds per step (the median over its bundles
    in ``costs``, :func:`gtalib.training.record_costs.cost_table`, read when ``None``) for
    :attr:`Calibration.factor`. ``setup_s``: :func:`time_setup`'s seconds, kept as they are.

    Raises:
        ValueError: ``steps`` or ``threads`` < 1; no shape could be timed.
    """
    if steps < 1 or threads < 1:
        raise ValueError(f"steps and threads must be >= 1, got steps={steps!r}, threads={threads!r}")
    costs = record_costs.cost_table() if costs is None else costs
    shapes = calibration_specs(plan, todo)
    timings = {k: v if isinstance(v, StepTiming) else StepTiming(run_words(shapes[k]), float(v))
               for k, v in (timed or {}).items() if k in shapes}
    here = {k: s for k, s in shapes.items() if k not in timings}
    if here:
        rounds, errors = _time_here(here, [k for _ in range(CALIBRATION_ROUNDS) for k in here],
                                    threads, steps)
        flops = {k: shape_flops(spec.to_dict()) for k, spec in here.items()}
        timings.update(settle(here, flops, rounds, errors, lambda off: _time_here(
            here, [k for _ in range(RETIME_ROUNDS) for k in off], threads, steps)))
    timings = {k: timings[k] for k in shapes}
    spec = reference_spec(plan)
    ref = timings[step_shape(spec)].seconds_per_step
    row = cost_row(costs, spec)
    recorded = (float(row["train_s_median"].iloc[0]) / spec.train.max_steps
                if len(row) and not math.isnan(row["train_s_median"].iloc[0]) else None)
    return Calibration(ref, recorded, training_flops(spec) / spec.train.max_steps / ref, workers,
                       timings, setup_s=setup_s)


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


def flops_calibration(plan, costs) -> Calibration:
    """A :class:`Calibration` that times nothing: the reference run's step from its FLOPs at
    :func:`recorded_flops_per_s`, so every run is costed from its FLOPs (no model is built), for
    a preset whose step is too large to time (:data:`MAX_TIMED_STEP_S`)."""
    rate = recorded_flops_per_s(costs)
    spec = reference_spec(plan)
    return Calibration(training_flops(spec) / spec.train.max_steps / rate, None, rate, 0, {},
                       timed=False)
