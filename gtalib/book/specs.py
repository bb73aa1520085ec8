"""From the runs a figure needs to the training layer's run specs: the preset's training
settings, the data spec of its corpus and the :class:`~gtalib.training.runs.RunSpec` of a
:class:`~gtalib.book.figures.RunRef` (whose hash is the run id). Reads the presets
(:mod:`gtalib.model.presets`, :mod:`gtalib.training.config`), the built corpus
(:func:`gtalib.training.runs.data_spec`) and :mod:`gtalib.book.figures`.
"""

from __future__ import annotations

from gtalib.book.figures import RunRef, preset_tokenizer


def train_settings(preset: str, max_steps=None):
    """The preset's :class:`~gtalib.training.config.TrainConfig`, with ``max_steps`` overridden if
    given (the warmup then keeps the preset's fraction: :func:`gtalib.training.config.train_config`).

    Raises:
        ValueError: ``max_steps`` not a positive integer.
    """
    from gtalib.training.config import train_config

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
    from gtalib.training import runs

    return runs.data_spec(train_settings(preset, max_steps), "default", preset_tokenizer(preset))


def run_spec(ref: RunRef, preset: str, max_steps=None, data: dict | None = None):
    """The :class:`gtalib.training.runs.RunSpec` of ``ref`` at ``preset``.

    Args:
        data: the spec's data (default :func:`data_spec`; pass it when building many specs).
    """
    from gtalib.model.presets import model_config
    from gtalib.training.config import train_config
    from gtalib.training.runs import RunSpec

    # The ladder's own training overrides win over the book's max_steps; the data spec depends
    # only on the sampling settings (block, batch, data seed, windows), which neither changes.
    train = (train_config(preset, **dict(ref.train)) if ref.train
             else train_settings(preset, max_steps))
    if data is None:
        data = data_spec(preset, max_steps)
    model = model_config(preset, ref.variant, **dict(ref.options))
    return RunSpec(model=model, train=train, data=data, seed=ref.seed)
