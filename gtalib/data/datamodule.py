"""``TokenDataModule``: training windows in a seed-determined order and a fixed validation set.

Training batches. Global batch ``i`` (``i = 0, 1, ...``, one per optimizer micro-step) holds
``batch_size`` windows of ``block_size + 1`` tokens; its window starts are drawn uniformly, with
replacement, from every valid start of every train shard (so sources are weighted by their token
counts), by a PCG64 generator seeded with ``(data_seed, i)``. Batch ``i`` is therefore a function of
``data_seed`` and ``i`` only: independent of the model seed, of the number of processes and of
where a run was resumed. Under DDP with ``world_size`` processes, rank ``r`` takes rows
``[r*b, (r+1)*b)`` of each global batch, ``b = batch_size / world_size``: the ranks see disjoint
slices and together exactly the single-process batch. ``x = window[:-1]``, ``y = window[1:]``,
both int64 of shape ``(b, block_size)``. Windows never cross shard (source) boundaries; they may
cross document boundaries (marked by the end-of-text token), as in GPT-2 training.

Validation. For each source, ``val_windows`` windows whose starts are evenly spaced over its
validation shard, ``start_j = j * (n - block_size - 1) // (val_windows - 1)``: the same windows for
every run, seed and process count (they overlap when the shard holds fewer than
``val_windows * (block_size + 1)`` tokens). One validation dataloader per source, in manifest order
(``val_source_names``), so the training module can log ``val_loss/<source>``; under DDP each rank
takes an equal slice of every validation batch.
"""
from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Callable, Iterable

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from .build import build_default, corpus_dir, corpus_identity, identity_hash, load_manifest
from .archives import sha256_file
from .shards import ShardError, open_shard

SAMPLER = "iid-uniform-windows-pcg64-v1"  # bump when the batch order rule changes


@dataclasses.dataclass(frozen=True)
class DataSpec:
    """What the data of a run is, for ``RunSpec``: corpus, tokenizer, order seed, validation size.

    ``corpus`` is ``"default"`` (registry corpus, built on demand) or a FineWeb-Edu corpus name from
    :func:`gtalib.data.fineweb.fineweb_corpus_name` (built beforehand). Block and batch sizes belong
    to the training config and are passed to :class:`TokenDataModule` separately.
    """

    corpus: str = "default"
    tokenizer: str = "bytes"
    data_seed: int = 0
    val_windows: int = 64

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class TrainWindows:
    """Random training windows over a list of token arrays (see module docstring).

    Args:
        shards: 1-D token arrays (e.g. memory-mapped shards), each longer than ``block_size``.
        block_size: tokens per input row ``T``; windows hold ``T + 1`` tokens.
        data_seed: seeds the order; batch ``i`` depends only on ``(data_seed, i)``.

    Raises:
        ValueError: ``block_size < 1`` or no shard longer than ``block_size``.
    """

    def __init__(self, shards: list[np.ndarray], block_size: int, data_seed: int):
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.shards = [s for s in shards if len(s) > block_size]
        if not self.shards:
            raise ValueError(f"no train shard has more than block_size={block_size} tokens")
        self.block_size, self.data_seed = block_size, data_seed
        # valid starts per shard: s with s + T + 1 <= len
        self.cum = np.cumsum([len(s) - block_size for s in self.shards])

    def batch(self, index: int, batch_size: int) -> np.ndarray:
        """Global batch ``index``: uint16 array ``(batch_size, block_size + 1)``."""
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.data_seed, index])))
        g = rng.integers(0, int(self.cum[-1]), size=batch_size)
        which = np.searchsorted(self.cum, g, side="right")
        offsets = g - np.concatenate([[0], self.cum[:-1]])[which]
        T1 = self.block_size + 1
        return np.stack([self.shards[w][o:o + T1] for w, o in zip(which, offsets)])


def val_windows(tokens: np.ndarray, block_size: int, n: int, name: str = "") -> np.ndarray:
    """``n`` windows of ``block_size + 1`` tokens, evenly spaced over ``tokens``: ``(n, block_size + 1)``.

    Raises:
        ValueError: ``tokens`` shorter than ``block_size + 1`` (names the source) or ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"val_windows must be >= 1, got {n}")
    span = len(tokens) - block_size - 1
    if span < 0:
        raise ValueError(f"validation shard of source {name!r} has {len(tokens)} tokens, fewer than "
                         f"block_size + 1 = {block_size + 1}")
    starts = [j * span // (n - 1) if n > 1 else 0 for j in range(n)]
    return np.stack([tokens[s:s + block_size + 1] for s in starts])


def _xy(windows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    w = torch.from_numpy(windows.astype(np.int64))
    return w[:, :-1], w[:, 1:]  # (b, T) each


class _RankSlices(IterableDataset):
    """Yields ``(x, y)`` for rank ``rank`` of each global batch ``make(i)``, ``i`` in ``indices``."""

    def __init__(self, make: Callable[[int], np.ndarray], indices: Iterable[int], rank: int, world: int):
        self.make, self.indices, self.rank, self.world = make, indices, rank, world

    def __iter__(self):
        for i in self.indices:
            full = self.make(i)
            b = full.shape[0] // self.world
            yield _xy(full[self.rank * b:(self.rank + 1) * b])


class TokenDataModule(L.LightningDataModule):
    """Lightning data module over a built corpus (batch order and validation set: module docstring).

    Args:
        corpus: ``"default"`` or a built FineWeb-Edu corpus name.
        tokenizer: ``"bytes"`` or ``"gpt2"``.
        block_size: tokens per row ``T``.
        batch_size: rows per global batch (all processes together); divisible by the world size.
        data_seed: seeds the training batch order only.
        val_windows: validation windows per source; a multiple of ``val_batch_size``.
        val_batch_size: rows per global validation batch; divisible by the world size.
        data_dir: cache root (default ``$GTALIB_DATA_DIR`` or ``<repo>/data_cache``).
        build: build the default corpus in ``prepare_data`` if it is missing.
        verify: check every shard's sha256 against the manifest in ``setup`` (~0.1 s per 30 MB).

    Raises (``setup``/dataloaders):
        FileNotFoundError: corpus not built (and not buildable here).
        ShardError: a shard is missing, truncated, corrupt or differs from the manifest.
        ValueError: batch sizes not divisible as required.
    """

    def __init__(self, corpus: str = "default", tokenizer: str = "bytes", block_size: int = 128,
                 batch_size: int = 16, data_seed: int = 0, val_windows: int = 64, val_batch_size: int = 16,
                 data_dir=None, build: bool = True, verify: bool = True):
        super().__init__()
        if val_windows % val_batch_size:
            raise ValueError(f"val_windows ({val_windows}) must be a multiple of val_batch_size ({val_batch_size})")
        self.corpus, self.tokenizer, self.block_size = corpus, tokenizer, block_size
        self.batch_size, self.data_seed = batch_size, data_seed
        self.val_windows, self.val_batch_size = val_windows, val_batch_size
        self.data_dir, self.build, self.verify = data_dir, build, verify
        self.start_batch: int | None = None  # overrides the resume position derived from the trainer
        self._manifest: dict | None = None
        self._train: TrainWindows | None = None
        self._val: dict[str, np.ndarray] = {}

    @classmethod
    def from_spec(cls, spec: DataSpec, block_size: int, batch_size: int, **kwargs) -> "TokenDataModule":
        """A module for ``spec`` with the training config's block and batch sizes."""
        return cls(corpus=spec.corpus, tokenizer=spec.tokenizer, data_seed=spec.data_seed,
                   val_windows=spec.val_windows, block_size=block_size, batch_size=batch_size, **kwargs)

    @property
    def path(self) -> Path:
        return corpus_dir(self.corpus, self.tokenizer, self.data_dir)

    @property
    def manifest(self) -> dict:
        if self._manifest is None:
            self._manifest = load_manifest(self.path)
        return self._manifest

    @property
    def val_source_names(self) -> list[str]:
        """Source names in validation-dataloader order (``dataloader_idx`` → name)."""
        return [s["name"] for s in self.manifest["sources"]]

    @property
    def vocab_size(self) -> int:
        return self.manifest["tokenizer"]["vocab_size"]

    def prepare_data(self) -> None:
        if not (self.path / "manifest.json").is_file():
            if not (self.build and self.corpus == "default"):
                raise FileNotFoundError(f"corpus {self.corpus!r} with tokenizer {self.tokenizer!r} is not built "
                                        f"at {self.path}; build it with `gtalib data build`")
            build_default(self.tokenizer, self.data_dir)

    def _open(self, entry: dict) -> np.ndarray:
        path = self.path / entry["file"]
        arr = open_shard(path)
        if self.verify and sha256_file(path) != entry["sha256"]:
            raise ShardError(f"token shard {path} does not match the sha256 in its manifest; rebuild the corpus")
        return arr

    def setup(self, stage: str | None = None) -> None:
        if self._train is not None:
            return
        srcs = self.manifest["sources"]
        self._train = TrainWindows([self._open(s["train"]) for s in srcs], self.block_size, self.data_seed)
        self._val = {s["name"]: val_windows(self._open(s["val"]), self.block_size, self.val_windows, s["name"])
                     for s in srcs}

    def _rank_world(self, global_batch: int) -> tuple[int, int]:
        trainer = getattr(self, "trainer", None)
        rank, world = (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)
        if global_batch % world:
            raise ValueError(f"batch size {global_batch} must be divisible by the world size {world}")
        return rank, world

    def train_batch(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Global training batch ``index`` as ``(x, y)``, each ``(batch_size, block_size)`` int64."""
        self.setup()
        return _xy(self._train.batch(index, self.batch_size))

    def _start(self) -> int:
        if self.start_batch is not None:
            return self.start_batch
        trainer = getattr(self, "trainer", None)
        # Lightning restores global_step before it asks for the dataloader, so a resumed run
        # continues with the batch after the last one it trained on.
        return trainer.global_step * trainer.accumulate_grad_batches if trainer is not None else 0

    def train_dataloader(self) -> DataLoader:
        self.setup()
        rank, world = self._rank_world(self.batch_size)
        ds = _RankSlices(lambda i: self._train.batch(i, self.batch_size), itertools.count(self._start()),
                         rank, world)
        return DataLoader(ds, batch_size=None, num_workers=0)

    def val_dataloader(self) -> list[DataLoader]:
        self.setup()
        rank, world = self._rank_world(self.val_batch_size)
        vb = self.val_batch_size
        return [DataLoader(_RankSlices(lambda i, w=w: w[i * vb:(i + 1) * vb], range(len(w) // vb), rank, world),
                           batch_size=None, num_workers=0)
                for w in self._val.values()]

    def data_identity(self) -> dict:
        """Everything that determines the batches, for the run store: the corpus identity
        (sources, versions, archive sha256s, tokenizer, shard sha256s) and the sampling settings;
        ``hash`` is the sha256 of the rest."""
        ident = {"corpus": corpus_identity(self.manifest),
                 "sampling": {"sampler": SAMPLER, "block_size": self.block_size, "batch_size": self.batch_size,
                              "data_seed": self.data_seed, "val_windows": self.val_windows}}
        return {**ident, "hash": identity_hash(ident)}
