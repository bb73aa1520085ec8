"""A run's training spec: the :class:`~gtalib.training.runs.RunSpec` of a
:class:`~gtalib.book.design.figure_plan.RunRef` (whose hash is the run id) under a preset's
training settings and corpus. The runs a figure needs are its spec's methods
(:meth:`~gtalib.book.design.figure_plan.AblationPlan.runs`); the scale ladder's are
:func:`gtalib.book.design.ladder.ladder_runs`. Reads the presets (:mod:`gtalib.model.presets`,
:mod:`gtalib.training.config`) and the built corpus (:func:`gtalib.training.runs.data_spec`).
"""

from __future__ import annotations

from gtalib.book.design.figure_plan import RunRef, run_identity
from gtalib.model.presets import model_config, preset_tokenizer
from gtalib.training import runs
from gtalib.training.config import train_config

__all__ = ["RunRef", "run_identity", "train_settings", "data_spec", "run_spec"]


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
    train = (train_settings(preset, max_steps) if not ref.train
             else train_config(preset, **dict(ref.train)))
    sampled = (data or {}).get("identity", {}).get("sampling", {}).get("data_seed")
    if data is None or sampled not in (None, train.data_seed):
        # the data identity names the data order: a run at another one has its own
        data = runs.data_spec(train, "default", preset_tokenizer(preset))
    model = model_config(preset, ref.variant, **dict(ref.options))
    return runs.RunSpec(model=model, train=train, data=data, seed=ref.seed)
