"""Training settings: the frozen :class:`TrainConfig` and the named training presets.

The optimiser, clipping and schedule follow the paper's recipe (MLRA, arXiv 2603.02188, App. B;
``docs/variants.md``, "Training recipe"): AdamW β = (0.9, 0.95), ε = 1e-8, weight
decay 0.1, gradient-norm clip 1.0, linear warmup then cosine decay to 0.1 × the peak learning
rate. The ``paper`` preset uses the paper's sizes; the smaller presets keep the recipe and change
only the sizes, the learning rate and the warmup fraction (sized by measurement, see
``benchmarks/train_cpu.md`` and ``docs/cpu_regime.md``).

Keyed by the preset names of :mod:`gtalib.model.presets`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gtalib.model.config import check_int, check_number

#: TrainConfig fields that do not change a run's result (how often it is checkpointed); they
#: are left out of the run hash (:mod:`gtalib.training.runs`).
NON_RESULT_FIELDS: frozenset[str] = frozenset({"checkpoint_every"})

PRECISIONS = ("auto", "32-true", "bf16-mixed", "16-mixed")


@dataclass(frozen=True)
class TrainConfig:
    """Everything about a training run except the model, the data source and the seed.

    Sizes:
        max_steps: optimizer steps.
        batch_size: sequences per optimizer step, summed over all devices (the *global* batch);
            tokens per step = ``batch_size * seq_len`` (paper: 480 × 2048 = 983,040).
        seq_len: tokens per training sequence (≤ the model's ``block_size``; each window holds
            ``seq_len + 1`` tokens, inputs and shifted targets).
        micro_batch_size: sequences per forward pass on one device; ``None`` = the whole
            per-device share (``batch_size / world_size``). Gradient accumulation makes up the
            rest: ``accumulate = batch_size / (micro_batch_size * world_size)``, which must be a
            whole number.

    Optimiser (paper values by default):
        lr: peak learning rate. min_lr_ratio: final LR as a fraction of the peak (0.1).
        warmup_steps: linear warmup length in optimizer steps; the LR at step ``s < warmup`` is
            ``lr * (s + 1) / warmup_steps``; after it a half cosine goes to ``min_lr_ratio * lr``
            at ``max_steps``.
        weight_decay: AdamW decay on every tensor with ≥ 2 dimensions (linear weights and the
            tied embedding); 1-D tensors (RMSNorm gains) are not decayed (see
            :func:`gtalib.training.loop.param_groups`).
        beta1, beta2, eps: AdamW moments (0.9, 0.95, 1e-8).
        grad_clip: global gradient-norm clip (1.0).

    Evaluation and data order:
        eval_every: validation every this many steps, and always at the last step.
        eval_windows: held-out windows per source in the fixed validation set.
        data_seed: seeds the order of training windows only. Runs that differ in model or model
            seed but share ``data_seed`` see the same batches in the same order.

    Execution:
        precision: ``"auto"`` = fp32 on CPU, ``"bf16-mixed"`` (bf16 autocast) on GPU; or an
            explicit Lightning precision string.
        checkpoint_every: steps between checkpoints (resume points). Not part of the run hash.

    Raises:
        ValueError: a size that is not a positive ``int`` (``bool``/``float`` refused), a negative
            ``data_seed``, ``warmup_steps`` outside ``[0, max_steps)``, a float field that is not a
            finite number in its range (``lr``, ``eps``, ``grad_clip`` > 0; ``min_lr_ratio`` in
            [0, 1]; ``weight_decay`` >= 0; ``beta1``, ``beta2`` in [0, 1)), an unknown precision
            (the message names the field and the allowed values).
    """

    max_steps: int = 20
    batch_size: int = 4
    seq_len: int = 32
    micro_batch_size: int | None = None

    lr: float = 1e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 2
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    grad_clip: float = 1.0

    eval_every: int = 10
    eval_windows: int = 4
    data_seed: int = 0

    precision: str = "auto"
    checkpoint_every: int = 10

    def __post_init__(self):
        own = "TrainConfig"
        for name in ("max_steps", "batch_size", "seq_len", "eval_every", "eval_windows",
                     "checkpoint_every"):
            check_int(own, name, getattr(self, name), 1)
        check_int(own, "micro_batch_size", self.micro_batch_size, 1, optional=True)
        check_int(own, "data_seed", self.data_seed, 0)  # numpy seeds are non-negative
        check_int(own, "warmup_steps", self.warmup_steps, 0)
        if self.warmup_steps >= self.max_steps:
            raise ValueError(
                f"TrainConfig.warmup_steps must be an integer in [0, max_steps={self.max_steps}), "
                f"got {self.warmup_steps!r}"
            )
        check_number(own, "lr", self.lr, 0, low_open=True)
        check_number(own, "min_lr_ratio", self.min_lr_ratio, 0, 1)
        check_number(own, "weight_decay", self.weight_decay, 0)
        check_number(own, "grad_clip", self.grad_clip, 0, low_open=True)
        for name in ("beta1", "beta2"):  # torch.optim.AdamW's ranges
            check_number(own, name, getattr(self, name), 0, 1, high_open=True)
        check_number(own, "eps", self.eps, 0, low_open=True)
        if self.precision not in PRECISIONS:
            raise ValueError(f"TrainConfig.precision must be one of {PRECISIONS}, got {self.precision!r}")

    @property
    def tokens_per_step(self) -> int:
        """Training tokens per optimizer step (``batch_size * seq_len``)."""
        return self.batch_size * self.seq_len

    def replace(self, **changes) -> "TrainConfig":
        """A copy with ``changes`` applied; unknown fields raise ``TypeError`` naming them."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """Plain-dict (JSON-serialisable) form."""
        return dataclasses.asdict(self)


#: Named training presets. ``ci``: seconds, for tests. ``cpu``: the book's default workload on a
#: 2-core machine (byte-level text; depth from the scale ladder, cost in
#: ``benchmarks/train_cpu.md``). ``gpu``: one GPU in minutes. ``paper``: the paper's recipe
#: (docs/variants.md, "Training recipe").
TRAIN_PRESETS: dict[str, TrainConfig] = {
    "ci": TrainConfig(
        max_steps=20, batch_size=4, seq_len=64, lr=1e-3, warmup_steps=2,
        eval_every=10, eval_windows=4, checkpoint_every=10,
    ),
    # Pilot (docs/cpu_regime.md): LR 1e-3 keeps the zero-init arm 3-25x less noisy than 3e-3, and a 2 %
    # warmup hurt every run, so warmup is 10 % here. 250 steps: the scale ladder's base length,
    # at which 8 layers show the init effect with the paper's sign; an 8-layer run costs
    # about 100-220 s on one core (benchmarks/train_cpu.md), so longer runs would not fit the book's
    # 60-minute budget (benchmarks/book_wall_time.md).
    "cpu": TrainConfig(
        max_steps=250, batch_size=16, seq_len=128, lr=1e-3, warmup_steps=25,
        eval_every=50, eval_windows=32, checkpoint_every=125,
    ),
    "gpu": TrainConfig(
        max_steps=2000, batch_size=32, seq_len=1024, lr=6e-4, warmup_steps=200,
        eval_every=100, eval_windows=64, checkpoint_every=500,
    ),
    # 480 sequences x 2048 tokens = 983,040 tokens/step, 100k steps ~ 98.3 B tokens; peak LR
    # 1.6e-4, 2000 warmup steps, cosine to 1.6e-5; bf16 autocast.
    "paper": TrainConfig(
        max_steps=100_000, batch_size=480, seq_len=2048, micro_batch_size=4, lr=1.6e-4,
        warmup_steps=2000, eval_every=1000, eval_windows=64, precision="bf16-mixed",
        checkpoint_every=1000,
    ),
}


def train_config(preset: str, **overrides) -> TrainConfig:
    """The named training preset with ``overrides`` applied (``None`` values are ignored, so CLI
    options that were not given leave the preset unchanged).

    Overriding ``max_steps`` without ``warmup_steps`` rescales the warmup to keep the preset's
    fraction, ``round(warmup · max_steps / preset max_steps)``; the CLI and the book both rely on
    this one rule, so they name the same run by the same hash.

    Raises:
        KeyError: unknown preset (the message lists the allowed ones).
        ValueError: an override out of range (from :class:`TrainConfig`).
        TypeError: an unknown override field.
    """
    if preset not in TRAIN_PRESETS:
        raise KeyError(f"unknown training preset {preset!r}; allowed: {', '.join(TRAIN_PRESETS)}")
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise TypeError(f"unknown TrainConfig field(s) {unknown}; allowed: {sorted(fields)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    base = TRAIN_PRESETS[preset]
    if "max_steps" in given and "warmup_steps" not in given and isinstance(given["max_steps"], int):
        given["warmup_steps"] = round(base.warmup_steps * given["max_steps"] / base.max_steps)
    return base.replace(**given)
