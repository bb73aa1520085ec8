"""Lightning training of a :class:`gtalib.model.gpt.GPT`: optimiser, schedule, data order, evaluation.

The recipe is the paper's (MLRA, arXiv 2603.02188, App. B; ``docs/variants.md``, "Training recipe"):
AdamW β = (0.9, 0.95), ε = 1e-8, weight decay 0.1, gradient-norm clip 1.0, linear warmup then a
cosine to 0.1 × the peak LR, fp32 on CPU and bf16 autocast on GPU.

Design choices that the run store (:mod:`gtalib.training.runs`) relies on:

* **Data order belongs to the datamodule**: global batch ``s`` is ``datamodule.train_batch(s)``,
  a function of ``(data_seed, s)`` only (:class:`gtalib.data.TokenDataModule`). Optimizer step
  ``s`` always trains on global batch ``s``; each device takes its slice of rows and splits it
  into micro-batches (:class:`StepBatches`). So paired ablation runs see the same batches in the
  same order, a resumed run continues with exactly the batches it would have seen, and a run on
  ``W`` devices or with gradient accumulation equals the one-device run up to floating-point
  reduction order.
* **The clean metrics history lives in the checkpoint** (:class:`LitGPT` ``history``): one row
  per optimizer step, recorded (and evaluated, on eval steps) by :class:`StepRecorder` *before*
  :class:`~lightning.pytorch.callbacks.ModelCheckpoint` saves, so a resumed run restores every
  row up to its checkpoint and appends the rest; no step is ever duplicated. Lightning's
  ``CSVLogger`` (and TensorBoard when installed) receive the same rows for live viewing.
* **Validation is our own loop** over the fixed held-out windows of every source, sharded over
  devices without padding and summed with an all-reduce, so the DDP value equals the
  single-device value.

Data contract (what :func:`fit` uses of a datamodule): ``setup(stage)``; ``batch_size`` (rows
of a global batch, must equal ``TrainConfig.batch_size``); ``train_batch(index) -> (x, y)``, the
global batch ``index``, int64 ``(batch_size, seq_len)`` each; ``val_source_names`` and
``val_dataloader()``, one loader of ``(x, y)`` per source, each device's slice (the datamodule
reads rank and world size from its ``trainer`` attribute, which :func:`fit` sets).
"""

from __future__ import annotations

import io
import math
import time
from pathlib import Path

import torch
import lightning as L
from lightning.pytorch.callbacks import Callback, TQDMProgressBar
from lightning.pytorch.plugins.io import TorchCheckpointIO
from torch.utils.data import DataLoader, IterableDataset

from gtalib.model.config import ModelConfig
from gtalib.training.config import TrainConfig
from gtalib.training.disk import write_file


# ---------------------------------------------------------------------------------------------
# Optimiser and schedule


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """AdamW parameter groups: weight decay on every tensor with ≥ 2 dimensions, none on 1-D.

    The paper states a weight decay of 0.1 without saying which tensors it applies to; we follow
    the usual GPT practice: linear weights and the (tied) token embedding are decayed, RMSNorm
    gains (1-D) are not (decaying them would pull every norm gain toward zero).

    Returns:
        ``[{"params": decayed, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0}]``
        (tied parameters appear once).
    """
    decay, no_decay = [], []
    for p in model.parameters():  # ``parameters()`` yields tied tensors once
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def lr_factor(step: int, cfg: TrainConfig) -> float:
    """Learning-rate multiplier (of ``cfg.lr``) for the update at 0-based optimizer step ``step``.

    ``(step + 1) / warmup_steps`` during warmup (so the first update is not wasted at LR 0), then
    ``r + (1 - r) * (1 + cos(pi * p)) / 2`` with ``p = (step - warmup) / (max_steps - warmup)``
    and ``r = min_lr_ratio``: 1 at the end of warmup, ``r`` at ``max_steps`` (paper: peak 1.6e-4,
    2000 warmup steps, cosine to 1.6e-5).
    """
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    p = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps))
    return cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * p))


# ---------------------------------------------------------------------------------------------
# Data order


class StepBatches(IterableDataset):
    """This device's micro-batches for optimizer steps ``start_step .. max_steps - 1``.

    Step ``s`` uses global batch ``train_batch(s)`` (``batch_size`` rows); ``start_step`` may be a
    callable, read when iteration starts (after Lightning has restored a checkpoint); device ``rank`` of
    ``world_size`` takes rows ``[rank * b, (rank + 1) * b)``, ``b = batch_size / world_size`` (the
    slicing rule of :class:`gtalib.data.TokenDataModule`), split into ``accumulate`` consecutive
    micro-batches. Yields ``(x, y)``, int64 ``(b / accumulate, T)`` each.

    Raises:
        ValueError: ``batch_size`` not divisible by ``world_size * accumulate``.
    """

    def __init__(self, train_batch, batch_size: int, start_step, max_steps: int,
                 rank: int = 0, world_size: int = 1, accumulate: int = 1):
        if batch_size % (world_size * accumulate):
            raise ValueError(
                f"batch_size={batch_size} must be divisible by world_size * accumulate = "
                f"{world_size} * {accumulate}"
            )
        self.train_batch, self.batch_size = train_batch, batch_size
        self.start_step, self.max_steps = start_step, max_steps
        self.rank, self.world_size, self.accumulate = rank, world_size, accumulate

    def __iter__(self):
        b = self.batch_size // self.world_size
        m = b // self.accumulate
        start = self.start_step() if callable(self.start_step) else self.start_step
        for step in range(start, self.max_steps):
            x, y = self.train_batch(step)  # (batch_size, T) each
            if x.shape[0] != self.batch_size:
                raise ValueError(f"train_batch({step}) has {x.shape[0]} rows, expected batch_size={self.batch_size}")
            x, y = x[self.rank * b:(self.rank + 1) * b], y[self.rank * b:(self.rank + 1) * b]
            for j in range(self.accumulate):
                yield x[j * m:(j + 1) * m].long(), y[j * m:(j + 1) * m].long()


# ---------------------------------------------------------------------------------------------
# LightningModule


class LitGPT(L.LightningModule):
    """A :class:`gtalib.model.gpt.GPT` with the paper's optimiser and schedule.

    Args:
        model_cfg: the model (``intermediate_size`` solved, see :func:`gtalib.model.presets.model_config`).
        train_cfg: optimiser, schedule and sizes.
        run_id: named in errors (non-finite loss) and logs.

    Attributes:
        history: one dict per completed optimizer step: ``step`` (1-based count of updates done),
            ``tokens`` (training tokens consumed, ``step * batch_size * seq_len``), ``train_loss``
            (mean cross-entropy in nats/token of that step's global batch, before its update),
            ``lr`` (the LR of that update), and on eval steps ``val_loss`` and
            ``val_loss/<source>`` (nats/token on the fixed held-out windows after the update).
            Saved in and restored from checkpoints.
    """

    def __init__(self, model_cfg: ModelConfig, train_cfg: TrainConfig, run_id: str = "?"):
        super().__init__()
        from gtalib.model.gpt import GPT

        if train_cfg.seq_len > model_cfg.block_size:
            raise ValueError(
                f"TrainConfig.seq_len={train_cfg.seq_len} exceeds ModelConfig.block_size="
                f"{model_cfg.block_size}"
            )
        self.model_cfg, self.train_cfg, self.run_id = model_cfg, train_cfg, run_id
        self.model = GPT(model_cfg)
        self.history: list[dict] = []
        self.wall_s = 0.0  # training wall time summed over all attempts (restored on resume)
        self._loss_sum = torch.zeros(())
        self._loss_n = 0

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """``idx`` ``(B, T)`` → ``(logits (B, T, V), loss)`` (see :meth:`GPT.forward`)."""
        return self.model(idx, targets)

    def training_step(self, batch, batch_idx):
        x, y = batch  # (B, T) each
        _, loss = self.model(x, y)
        self._loss_sum = self._loss_sum.to(loss.device) + loss.detach().float()
        self._loss_n += 1
        return loss

    def pop_step_loss(self) -> torch.Tensor:
        """Mean loss of the micro-batches since the last call (this device only); resets."""
        out = self._loss_sum / max(1, self._loss_n)
        self._loss_sum, self._loss_n = torch.zeros((), device=out.device), 0
        return out

    def configure_optimizers(self):
        cfg = self.train_cfg
        opt = torch.optim.AdamW(
            param_groups(self.model, cfg.weight_decay), lr=cfg.lr,
            betas=(cfg.beta1, cfg.beta2), eps=cfg.eps,
        )
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, cfg))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["gtalib_history"] = list(self.history)
        checkpoint["gtalib_wall_s"] = self.wall_s

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.history = list(checkpoint.get("gtalib_history", []))
        self.wall_s = float(checkpoint.get("gtalib_wall_s", 0.0))


# ---------------------------------------------------------------------------------------------
# Per-step recording and evaluation


class StepRecorder(Callback):
    """After every optimizer step: record the step's global train loss (stopping on NaN/Inf),
    evaluate on eval steps, log the row. Runs before ``ModelCheckpoint`` (Lightning orders
    checkpoint callbacks last), so a checkpoint always contains its own step's row.

    Args:
        datamodule: provides ``val_source_names`` and ``val_dataloader()`` (this device's slice
            of each source's fixed held-out windows).
    """

    def __init__(self, datamodule):
        self.datamodule = datamodule
        self._t0 = None

    def on_train_start(self, trainer, pl_module):
        self._t0 = time.perf_counter()
        self._wall0 = pl_module.wall_s

    def on_train_batch_end(self, trainer, pl_module: LitGPT, outputs, batch, batch_idx):
        if pl_module._loss_n < trainer.accumulate_grad_batches:
            return  # mid-accumulation: the optimizer has not stepped yet
        cfg, step = pl_module.train_cfg, trainer.global_step
        loss = trainer.strategy.reduce(pl_module.pop_step_loss(), reduce_op="mean")
        loss = float(loss)
        if not math.isfinite(loss):
            raise FloatingPointError(
                f"run {pl_module.run_id}: non-finite training loss ({loss}) at step {step}; "
                f"stopping (lower the learning rate or check the data)"
            )
        row = {"step": step, "tokens": step * cfg.tokens_per_step, "train_loss": loss,
               "lr": cfg.lr * lr_factor(step - 1, cfg)}
        if step % cfg.eval_every == 0 or step == cfg.max_steps:
            row.update(self.evaluate(trainer, pl_module))
        pl_module.history.append(row)
        pl_module.wall_s = self._wall0 + time.perf_counter() - self._t0
        pl_module.log("train_loss", loss, prog_bar=True, logger=False, on_step=True)
        for lg in trainer.loggers:
            lg.log_metrics({k: v for k, v in row.items() if k != "step"}, step=step)

    @torch.no_grad()
    def evaluate(self, trainer, pl_module: LitGPT) -> dict[str, float]:
        """Mean loss (nats/token) over the fixed held-out windows: ``val_loss/<source>`` per
        source and ``val_loss`` over all windows of all sources (token-weighted). Windows are
        sharded over devices without padding and the sums all-reduced, so the value does not
        depend on the device count."""
        model = trainer.strategy.model  # the wrapped module (DDP/FSDP) so sharded params work
        was_training = pl_module.training
        pl_module.eval()
        sums = []
        names = list(self.datamodule.val_source_names)
        loaders = list(self.datamodule.val_dataloader())
        if len(names) != len(loaders):
            raise ValueError(f"datamodule gives {len(loaders)} validation loaders for sources {names}")
        for name, loader in zip(names, loaders):
            total = torch.zeros((), dtype=torch.float64, device=pl_module.device)
            count = torch.zeros((), dtype=torch.float64, device=pl_module.device)
            for x, y in loader:
                x, y = x.long().to(pl_module.device), y.long().to(pl_module.device)  # (b, T)
                with trainer.precision_plugin.forward_context():
                    _, loss = model(x, y)
                total += loss.double() * y.numel()
                count += y.numel()
            sums.append((name, total, count))
        out, all_total, all_count = {}, 0.0, 0.0
        for name, total, count in sums:
            total = float(trainer.strategy.reduce(total, reduce_op="sum"))
            count = float(trainer.strategy.reduce(count, reduce_op="sum"))
            out[f"val_loss/{name}"] = total / count
            all_total, all_count = all_total + total, all_count + count
        out["val_loss"] = all_total / all_count
        if was_training:
            pl_module.train()
        return out


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer (its ``CheckpointIO`` plugin), writing a checkpoint as every
    file of the run store is written (:func:`gtalib.training.disk.write_file`): into a temporary
    file in the checkpoint's own folder, ``fsync``, then ``os.replace``.

    Lightning's own :class:`~lightning.fabric.plugins.io.torch_io.TorchCheckpointIO` commits an
    fsspec transaction whose temporary file lies in the system's temporary folder (``/tmp``),
    and the final move from there is a copy whenever the store is on another file system: a
    full disk or a kill during that copy left a partial ``last.ckpt`` in place of the good one.
    Here a failed or killed write leaves the previous checkpoint whole, and the run resumes
    from it. Local paths only (the run store is a folder); loading is Lightning's.
    """

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options")
        buffer = io.BytesIO()
        torch.save(checkpoint, buffer)  # in memory first, as Lightning does: a write error is an OSError
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_file(path, buffer.getbuffer())


class ProgressBar(TQDMProgressBar):
    """Lightning's progress bar, closed when training stops on an error, so that the error
    message (``gtalib train: error: ...``) starts on a line of its own instead of after the bar."""

    def on_exception(self, trainer, pl_module, exception):
        if self._train_progress_bar is not None:
            self._train_progress_bar.close()


# ---------------------------------------------------------------------------------------------
# Fitting one run


def resolve_precision(precision: str, accelerator: str) -> str:
    """``"auto"`` → ``"bf16-mixed"`` on GPU (bf16 autocast, the paper's setting), ``"32-true"``
    otherwise; explicit values pass through."""
    if precision != "auto":
        return precision
    on_gpu = accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available())
    return "bf16-mixed" if on_gpu else "32-true"


def accumulation(train_cfg: TrainConfig, world_size: int) -> int:
    """Gradient-accumulation steps: ``batch_size / (micro_batch_size * world_size)``.

    Raises:
        ValueError: the global batch does not split evenly over devices and micro-batches.
    """
    if train_cfg.batch_size % world_size:
        raise ValueError(
            f"TrainConfig.batch_size={train_cfg.batch_size} is not divisible by the "
            f"{world_size} devices"
        )
    per_device = train_cfg.batch_size // world_size
    micro = train_cfg.micro_batch_size or per_device
    if per_device % micro:
        raise ValueError(
            f"per-device batch {per_device} is not divisible by TrainConfig.micro_batch_size={micro}"
        )
    return per_device // micro


def fit(module: LitGPT, datamodule, run_path, *, ckpt_path=None, accelerator: str = "cpu",
        devices: int | str = 1, num_nodes: int = 1, strategy: str = "auto",
        progress: bool = False, extra_callbacks: list | None = None) -> L.Trainer:
    """Train ``module`` to ``train_cfg.max_steps`` under a Lightning ``Trainer``.

    Checkpoints go to ``run_path/checkpoints`` (``last.ckpt`` every ``checkpoint_every`` steps
    and at the end, each written atomically by :class:`AtomicCheckpointIO`); Lightning's CSV
    logs to ``run_path/logs/version_<attempt>/`` (and
    TensorBoard's, if installed, to ``run_path/tensorboard/``).
    ``ckpt_path`` resumes from a checkpoint, loaded weights-only (torch's restricted unpickler:
    tensors, containers and plain values; a file holding anything else raises
    ``pickle.UnpicklingError`` before any of it runs). Returns the finished ``Trainer``.
    """
    from lightning.fabric.plugins.environments import LightningEnvironment
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger

    cfg, run_path = module.train_cfg, Path(run_path)
    loggers = [CSVLogger(run_path, name="logs")]  # logs/version_<attempt>/metrics.csv
    try:
        from lightning.pytorch.loggers import TensorBoardLogger
        import tensorboard  # noqa: F401  (TensorBoardLogger needs it, or tensorboardX)

        loggers.append(TensorBoardLogger(run_path, name="tensorboard"))
    except ImportError:
        pass
    datamodule.setup("fit")
    if getattr(datamodule, "batch_size", cfg.batch_size) != cfg.batch_size:
        raise ValueError(f"datamodule.batch_size={datamodule.batch_size} differs from "
                         f"TrainConfig.batch_size={cfg.batch_size}")
    recorder = StepRecorder(datamodule)
    ckpt = ModelCheckpoint(dirpath=run_path / "checkpoints", every_n_train_steps=cfg.checkpoint_every,
                           save_top_k=0, save_last=True, save_on_train_epoch_end=False)
    callbacks = [recorder, ckpt, *(extra_callbacks or [])] + ([ProgressBar()] if progress else [])
    # One device on one node is one plain process, whatever the environment says: inside a batch
    # scheduler's job (a dask-jobqueue worker under Slurm, say) Lightning would otherwise read
    # SLURM_NTASKS & co. and wait for srun's other processes.
    single = devices in (1, "1") and num_nodes == 1 and strategy == "auto"
    plugins = [AtomicCheckpointIO()] + ([LightningEnvironment()] if single else [])
    trainer = L.Trainer(plugins=plugins,
        accelerator=accelerator, devices=devices, num_nodes=num_nodes, strategy=strategy,
        precision=resolve_precision(cfg.precision, accelerator),
        max_steps=cfg.max_steps, max_epochs=-1, gradient_clip_val=cfg.grad_clip,
        gradient_clip_algorithm="norm", limit_val_batches=0, num_sanity_val_steps=0,
        logger=loggers, callbacks=callbacks,
        enable_progress_bar=progress, enable_model_summary=False, log_every_n_steps=1,
        use_distributed_sampler=False, deterministic=False,
    )
    world = trainer.world_size
    accumulate = accumulation(cfg, world)
    trainer.accumulate_grad_batches = accumulate

    datamodule.trainer = trainer  # the datamodule slices validation batches by rank

    # the resume step is read when Lightning asks for batches, after it restored the checkpoint
    batches = StepBatches(datamodule.train_batch, cfg.batch_size, lambda: trainer.global_step, cfg.max_steps,
                          rank=trainer.global_rank, world_size=world, accumulate=accumulate)
    # batches are memory-mapped slices: loader workers would only duplicate the iterable stream
    loader = DataLoader(batches, batch_size=None, num_workers=0)
    trainer.fit(module, train_dataloaders=loader, ckpt_path=ckpt_path, weights_only=True)
    # the full state (optimizer, loops, callbacks; still only tensors and plain data, so it loads
    # weights-only), said explicitly: Lightning logs "`weights_only` was not set" otherwise
    trainer.save_checkpoint(run_path / "checkpoints" / "last.ckpt", weights_only=False)
    return trainer
