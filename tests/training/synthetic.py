"""A tiny synthetic corpus following the training data contract (see gtalib.training.loop), for tests.

Tokens come from a fixed random first-order Markov chain over 256 symbols with a few likely
successors per symbol, so a small model learns it within tens of steps (the loss falls well
below ln 256) and two sources with different chains give different validation losses. The batch
rule mirrors gtalib.data.TokenDataModule: global batch ``i`` draws its window starts from a
generator seeded with ``(data_seed, i)``; rank ``r`` of ``W`` takes rows ``[r*b, (r+1)*b)``.
"""

import numpy as np
import torch


def markov_stream(n_tokens: int, seed: int, vocab: int = 256, fanout: int = 4) -> np.ndarray:
    """``n_tokens`` token ids from a random chain where each symbol has ``fanout`` successors."""
    rng = np.random.default_rng(seed)
    succ = rng.integers(0, vocab, size=(vocab, fanout))
    out = np.empty(n_tokens, dtype=np.int64)
    out[0] = 0
    picks = rng.integers(0, fanout, size=n_tokens)
    for i in range(1, n_tokens):
        out[i] = succ[out[i - 1], picks[i]]
    return out


def _xy(w: np.ndarray):
    t = torch.from_numpy(w)
    return t[:, :-1], t[:, 1:]


class SyntheticData:
    """Datamodule-like object over a 20k-token train stream and sources ``"a"``, ``"b"``."""

    def __init__(self, seq_len: int, batch_size: int, data_seed: int = 0, eval_windows: int = 4):
        self.seq_len, self.batch_size, self.data_seed = seq_len, batch_size, data_seed
        self.eval_windows = eval_windows
        self.val_source_names = ["a", "b"]
        self.trainer = None

    def setup(self, stage=None):
        w = self.seq_len + 1
        self.train = markov_stream(20_000, seed=1)
        self.val = {"a": markov_stream(self.eval_windows * w, seed=11).reshape(-1, w),
                    "b": markov_stream(self.eval_windows * w, seed=2).reshape(-1, w)}

    def train_batch(self, index: int):
        rng = np.random.default_rng([self.data_seed, index])
        starts = rng.integers(0, len(self.train) - self.seq_len, size=self.batch_size)
        return _xy(np.stack([self.train[s:s + self.seq_len + 1] for s in starts]))

    def val_dataloader(self):
        rank, world = (self.trainer.global_rank, self.trainer.world_size) if self.trainer else (0, 1)
        b = self.eval_windows // world
        return [[_xy(v[rank * b:(rank + 1) * b])] for v in self.val.values()]
