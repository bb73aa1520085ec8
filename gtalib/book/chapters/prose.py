"""The numbers the chapters' prose states, taken from the data that holds them, so that no
sentence can drift from its figure.

A notebook states a number in a sentence displayed from a code cell, which holds the English as
a template with ``{name}`` fields, ``Markdown(template.format_map(facts))``: the names are keys
of :func:`facts` (or of a page's own values, such as
:func:`gtalib.book.chapters.ablation.page_facts`), and the sentence reads the same wherever the
notebook is opened (the book, Colab, GitHub, nbconvert). The paper's values come from
:mod:`gtalib.book.design.figures` and :mod:`gtalib.book.design.paper`, the book's sizes and
lengths from the ``cpu`` presets (:mod:`gtalib.model.presets`, :mod:`gtalib.training.config`),
the scale ladder's axes from :mod:`gtalib.book.design.ladder`, the looks from
:mod:`gtalib.book.design.seeds`. The prose speaks of the ``cpu`` preset (the book's default)
whatever preset a page runs at, as its sentences say.
"""

from __future__ import annotations

from gtalib.book.analysis.stats import MAX_PAIRS
from gtalib.book.design.figures import ABLATIONS, ablation
from gtalib.book.design.ladder import ladder
from gtalib.book.design.names import and_join, display_name
from gtalib.book.design.paper import (
    PAPER_ABLATION_TOKENS_B,
    PAPER_MAIN_TOKENS_B,
    PAPER_MATCHED_PARAMS_B,
    PAPER_PARAMS_B,
)
from gtalib.book.design.seeds import ablation_looks
from gtalib.model.presets import PRESETS
from gtalib.training.config import train_config

#: The preset the prose speaks of.
PRESET = "cpu"

_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}


def _times(factor: float) -> str:
    """``4`` → ``"four"`` (a whole factor the prose writes as a word), else ``"4.5"``."""
    return _WORDS.get(factor, f"{factor:g}") if float(factor).is_integer() else f"{factor:g}"


def _names(variants) -> str:
    return and_join([display_name(v) for v in variants])


def _millions_of_tokens(steps: int, preset: str = PRESET) -> str:
    """Tokens of a run of ``steps`` optimiser steps at ``preset`` (batch × sequence length per
    step), in millions: ``"2.05"``."""
    train = train_config(preset)
    return f"{steps * train.batch_size * train.seq_len / 1e6:.2f}"


def figure_facts(preset: str = PRESET) -> dict[str, str]:
    """The facts every ablation figure brings with its spec (:data:`ABLATIONS`), so a new figure's
    page can paste them without an entry here: ``<key>_steps`` and ``<key>_tokens`` (its runs'
    length at ``preset``: the figure's own ``train`` override, else the preset's; tokens per run
    in millions), and for each variant with paper perplexities ``<key>_<variant>_alt_ppl`` and
    ``<key>_<variant>_rec_ppl`` (the 7-set averages of the arm argued against and the one
    recommended, 3 decimals as printed)."""
    train = train_config(preset)
    out = {}
    for key, fig in ABLATIONS.items():
        steps = dict(fig.train.get(preset, ())).get("max_steps", train.max_steps)
        out[f"{key}_steps"] = f"{steps:,}"
        out[f"{key}_tokens"] = f"{_millions_of_tokens(steps, preset)} M"
        for variant, (alt, rec) in fig.paper_ppl.items():
            out[f"{key}_{variant}_alt_ppl"] = f"{alt:.3f}"
            out[f"{key}_{variant}_rec_ppl"] = f"{rec:.3f}"
    return out


def facts() -> dict[str, str]:
    """Every number the notebooks' prose states, by name, as the text it reads (Markdown):
    :func:`figure_facts`, and the paper's sizes, the ``cpu`` model and lengths, the scale
    ladder's axes and the claims page's looks and cap.

    Raises:
        KeyError: a figure, preset or variant the prose names is gone from the data (the
            message names it).
    """
    paper, cpu = PRESETS["paper"], PRESETS[PRESET]
    train = train_config(PRESET)
    lad = ladder(PRESET)
    wide_d, wide_heads, wide_hd = lad.widths[-1]  # (d_model, n_head, head_dim)
    lengths = [lad.base_steps * f for f in lad.token_factors]
    gate_steps = dict(ablation("gate").train[PRESET])["max_steps"]  # the figure's own length
    return {
        **figure_facts(),
        # the paper's models (docs/paper_values.md)
        "paper_params": f"{PAPER_PARAMS_B:g} B",
        "paper_matched_params": f"{PAPER_MATCHED_PARAMS_B:g} B",
        "paper_layers": f"{paper['n_layer']}",
        "paper_tokens": f"{PAPER_ABLATION_TOKENS_B:g} B",
        "paper_main_tokens": f"{PAPER_MAIN_TOKENS_B:g} B",
        "paper_heads": f"{paper['n_head']}",
        "paper_heads_doubled": f"{paper['n_head'] * ablation('double_heads').alt['head_multiplier']}",
        "paper_head_dim": f"{paper['head_dim']}",
        # the book's model and training lengths at the cpu preset
        "d_model": f"{cpu['d_model']}",
        "n_head": f"{cpu['n_head']}",
        "head_dim": f"{cpu['head_dim']}",
        "steps": f"{train.max_steps:,}",
        "gate_factor": _times(gate_steps / train.max_steps),
        # the scale ladder's axes
        "ladder_init_variants": _names(lad.init_variants),
        "ladder_gate_lengths": and_join([f"{lad.base_steps * f:,}" for f in lad.step_factors]),
        "ladder_step_factor": _times(lad.step_factors[-1]),
        "ladder_token_variants": _names(lad.token_variants),
        "ladder_token_depth": f"{lad.token_depth}",
        "ladder_token_lengths": and_join([f"{n:,}" for n in lengths]),
        "ladder_token_tokens": and_join([_millions_of_tokens(n) for n in lengths]),
        "ladder_token_first": f"{lengths[0]:,}",
        "ladder_token_last": f"{lengths[-1]:,}",
        "ladder_width_variants": _names(lad.width_variants),
        "ladder_base_steps": f"{lad.base_steps:,}",
        "ladder_long_steps": f"{lad.base_steps * lad.step_factors[-1]:,}",
        "wide_d_model": f"{wide_d}",
        "wide_n_head": f"{wide_heads}",
        "wide_head_dim": f"{wide_hd}",
        # the claims page's statistics
        "looks": " and then ".join(f"{n}" for n in ablation_looks(PRESET)),
        "max_pairs": f"{MAX_PAIRS}",
    }

