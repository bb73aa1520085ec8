"""The runs a figure needs, and their training specs: :class:`RunRef` (a configuration and a
seed), the runs of each ablation figure and of the main table, and the
:class:`~gtalib.training.runs.RunSpec` of a ref (whose hash is the run id) under a preset's
training settings and corpus. The scale ladder's runs are :func:`gtalib.book.design.ladder.ladder_runs`.
Reads the presets (:mod:`gtalib.model.presets`, :mod:`gtalib.training.config`), the built corpus
(:func:`gtalib.training.runs.data_spec`), :mod:`gtalib.book.design.figures` and
:mod:`gtalib.book.design.seeds`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gtalib.book.design.figures import ablation, figure_variants, main_configs
from gtalib.book.design.names import canonical_options, config_label, option_pairs
from gtalib.book.design.seeds import DATA_ORDER_SEED, figure_seeds, reads_joint, seeds_of
from gtalib.model.presets import PRESETS, model_config
from gtalib.training import runs
from gtalib.training.config import train_config


@dataclass(frozen=True)
class RunRef:
    """One training run a figure needs: a configuration and a seed.

    ``arm`` is ``"alt"`` or ``"rec"`` for ablations (see module docstring), ``"main"`` for
    the main-results table, and a ladder arm name (``"scaled"``) for the scale ladder's extra
    arms; ``options`` are ``gtalib.model.presets.model_config`` keywords (the ladder adds
    ``n_layer``); ``train`` are :func:`gtalib.training.config.train_config` overrides of the
    preset's training settings (the ladder's longer runs set ``max_steps``).
    """

    variant: str
    arm: str
    options: tuple  # sorted (key, value) pairs: hashable
    seed: int
    train: tuple = ()  # sorted (field, value) pairs: hashable

    @property
    def label(self) -> str:
        return config_label(self.variant, dict(self.options))


def run_identity(ref: RunRef) -> tuple:
    """What makes two refs one run: variant, canonical options (a default spelled out or left
    out is one configuration), seed and training overrides."""
    return (ref.variant, canonical_options(ref.options), ref.seed, ref.train)


def figure_runs(key: str, preset: str, seeds: int, variants=None, max_steps=None,
                joint: bool | None = None) -> list[RunRef]:
    """Every run an ablation figure needs: both arms of each variant for its seeds
    ``0..n-1`` (:func:`gtalib.book.design.seeds.figure_seeds`), at the figure's own training length at ``preset``
    (:attr:`~gtalib.book.design.figures.Ablation.train`) unless the book overrides the length for every figure
    (``max_steps`` not ``None``). In the joint design (``joint``; default
    :func:`gtalib.book.design.seeds.reads_joint`) pair ``k`` also reads data order ``k``
    (:func:`joint_runs`); ``joint=False`` gives the one-order pairs (every pair at data order 0).

    Raises:
        ValueError: ``seeds`` < 1.  KeyError: unknown figure or variant.
    """
    fig = ablation(key)
    if joint is None:
        joint = reads_joint(key, preset, max_steps)
    if joint:
        return joint_runs(key, preset, seeds_of(key, preset, seeds), variants)
    train = fig.train.get(preset, ()) if max_steps is None else ()
    return [
        RunRef(v, arm, option_pairs(opts), s, train)
        for v, n in figure_seeds(key, preset, seeds, variants, max_steps).items()
        for arm, opts in (("alt", fig.alt), ("rec", fig.rec))
        for s in range(n)
    ]


def data_order_runs(key: str, preset: str, orders=None, max_steps=None) -> list[RunRef]:
    """The data-order runs of ablation figure ``key``: both arms of each variant at the
    initialisation seed :data:`~gtalib.book.design.seeds.DATA_ORDER_SEED` and each data order of
    ``orders`` (default the figure's :attr:`~gtalib.book.design.figures.Ablation.data_orders` at
    ``preset``; none where it has none, or when the book overrides the length, since they are recorded at the
    figure's own length). Each is the figure's own run with ``data_seed`` set.

    Raises:
        KeyError: unknown figure.
    """
    fig = ablation(key)
    if orders is None:
        orders = fig.data_orders.get(preset, ())
    if max_steps is not None:
        return []
    base = dict(fig.train.get(preset, ()))
    return [
        RunRef(v, arm, option_pairs(opts), DATA_ORDER_SEED,
               tuple(sorted({**base, "data_seed": d}.items())))
        for d in orders
        for v in figure_variants(key, preset)
        for arm, opts in (("alt", fig.alt), ("rec", fig.rec))
    ]


def joint_runs(key: str, preset: str, pairs: int, variants=None) -> list[RunRef]:
    """The joint-design runs of ablation figure ``key``
    (:attr:`~gtalib.book.design.figures.Ablation.joint_declared`): both arms of each variant (default the
    figure's at ``preset``) for pairs ``k = 0…pairs−1``, pair ``k`` at initialisation seed ``k``
    and data order ``k`` at the figure's own training length; pair 0 is the figure's own run at
    seed 0, data order 0.

    Raises:
        KeyError: unknown figure or variant.  ValueError: ``pairs`` < 0.
    """
    fig = ablation(key)
    if not isinstance(pairs, int) or isinstance(pairs, bool) or pairs < 0:
        raise ValueError(f"pairs must be a non-negative integer, got {pairs!r}")
    base = dict(fig.train.get(preset, ()))
    return [
        # data order 0 is the default: pair 0 is spelled exactly as the figure's own run
        RunRef(v, arm, option_pairs(opts), k,
               tuple(sorted({**base, **({"data_seed": k} if k else {})}.items())))
        for k in range(pairs)
        for v in figure_variants(key, preset, variants)
        for arm, opts in (("alt", fig.alt), ("rec", fig.rec))
    ]


def main_runs(preset: str, seeds: int, max_steps=None) -> list[RunRef]:
    """Every run of the main-results table at ``preset`` for seeds ``0..n-1``, ``n`` from
    :func:`gtalib.book.design.seeds.seeds_of`."""
    n = seeds_of("main", preset, seeds, max_steps)
    return [RunRef(v, "main", option_pairs(o), s) for v, o in main_configs(preset) for s in range(n)]


def preset_tokenizer(preset: str) -> str:
    """``"bytes"`` or ``"gpt2"``: the tokenizer a preset's vocabulary implies (presets.py:
    byte-level vocabulary 256 for cpu/ci, GPT-2 BPE padded to 50304 for gpu/paper).

    Raises:
        KeyError: unknown preset; the message lists the allowed ones.
    """
    if preset not in PRESETS:
        raise KeyError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
    return "bytes" if PRESETS[preset]["vocab_size"] == 256 else "gpt2"


def train_settings(preset: str, max_steps=None):
    """The preset's :class:`~gtalib.training.config.TrainConfig`, with ``max_steps`` overridden if
    given (the warmup then keeps the preset's fraction: :func:`gtalib.training.config.train_config`).

    Raises:
        ValueError: ``max_steps`` not a positive integer.
    """
    if max_steps is not None and (
        not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1
    ):
        raise ValueError(f"max_steps must be a positive integer or None, got {max_steps!r}")
    return train_config(preset, max_steps=max_steps)


def data_spec(preset: str, max_steps=None) -> dict:
    """The ``data`` of the preset's run specs: the default registry corpus with the preset's
    tokenizer (:func:`gtalib.training.runs.data_spec`; builds nothing).

    Raises:
        FileNotFoundError: the corpus is not built (``gtalib data build`` or ``gtalib book``).
    """
    return runs.data_spec(train_settings(preset, max_steps), "default", preset_tokenizer(preset))


def run_spec(ref: RunRef, preset: str, max_steps=None, data: dict | None = None):
    """The :class:`gtalib.training.runs.RunSpec` of ``ref`` at ``preset``.

    Args:
        data: the spec's data (default :func:`data_spec`; pass it when building many specs).
    """
    # The ladder's own training overrides win over the book's max_steps; the data spec depends
    # only on the sampling settings (block, batch, data seed, windows), which neither changes.
    train = (train_config(preset, **dict(ref.train)) if ref.train
             else train_settings(preset, max_steps))
    sampled = (data or {}).get("identity", {}).get("sampling", {}).get("data_seed")
    if data is None or sampled not in (None, train.data_seed):
        # the data identity names the data order: a run at another one has its own
        data = runs.data_spec(train, "default", preset_tokenizer(preset))
    model = model_config(preset, ref.variant, **dict(ref.options))
    return runs.RunSpec(model=model, train=train, data=data, seed=ref.seed)
