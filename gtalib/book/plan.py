"""A preset resolved once into everything the book does with it: the :class:`Plan`.

The main job, the notebooks' analyses and the scale ladder all read one ``Plan`` instead of each
re-deriving runs, tokenizer and training settings from the preset's name::

    plan = make_plan("cpu", seeds=2)
    plan.runs            # every RunRef the book needs (each configuration once; recorded ones are read, not trained)
    plan.figure_refs     # {"init": (...), "gate": (...), ..., "main": (...)}
    plan.ladder_refs     # the scale ladder's runs, at its own seed counts (recorded)
    plan.spec(ref)       # the RunSpec of a ref (run id = its hash)
    plan.notebooks       # the chapters, in book order
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gtalib.book import figures, ladders, specs
from gtalib.training.config import TrainConfig

#: Notebooks in book order (file stem in notebooks/ → chapter in book/_toc.yml).
NOTEBOOKS = (
    "scale_ladder", "init_ablation", "gating_ablation", "latent_scaling", "double_heads",
    "main_results", "kv_cache", "decode_speed", "claims",
)


@dataclass(frozen=True)
class Plan:
    """What the book does at one preset (built by :func:`make_plan`; frozen).

    Attributes:
        preset: preset name (:data:`gtalib.model.presets.PRESETS`). seeds: seeds per configuration.
        max_steps: the book's training-length override (``None``: the preset's).
        tokenizer: ``"bytes"`` or ``"gpt2"``, from the preset's vocabulary.
        train: the resolved :class:`~gtalib.training.config.TrainConfig` of the default runs.
        figure_refs: per ablation key and ``"main"``, the runs of that figure or table.
        ladder_refs: the scale ladder's runs at its own seed counts (``Ladder.seeds`` for
            depth and length, ``Ladder.width_seeds`` for the width axis; empty at a preset
            without a ladder).
        notebooks: the chapters to execute, in book order.
    """

    preset: str
    seeds: int
    max_steps: int | None
    tokenizer: str
    train: TrainConfig
    figure_refs: dict
    ladder_refs: tuple
    notebooks: tuple[str, ...] = NOTEBOOKS
    _data: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def runs(self) -> tuple:
        """Every run of every figure and table, each configuration and seed once (the default
        job trains these; MLA at default options appears in all four ablations and the main
        table but is one run)."""
        seen, out = set(), []
        for refs in self.figure_refs.values():
            for r in refs:
                ident = (r.variant, figures.canonical_options(r.options), r.seed, r.train)
                if ident not in seen:
                    seen.add(ident)
                    out.append(r)
        return tuple(out)

    def data(self) -> dict:
        """The run specs' ``data`` (corpus identity), read once from the built corpus.

        Raises:
            FileNotFoundError: the corpus is not built (``gtalib data build``).
        """
        if not self._data:
            self._data.update(specs.data_spec(self.preset, self.max_steps))
        return self._data

    def spec(self, ref):
        """The :class:`gtalib.training.runs.RunSpec` of ``ref`` under this plan."""
        return specs.run_spec(ref, self.preset, self.max_steps, self.data())

    def specs(self, refs=None) -> list:
        """``(label, RunSpec)`` of ``refs`` (default :attr:`runs`), for the job's trainer."""
        return [(r.label, self.spec(r)) for r in (self.runs if refs is None else refs)]


def make_plan(preset: str, seeds: int, max_steps=None, notebooks=NOTEBOOKS) -> Plan:
    """Resolve ``preset`` once (see :class:`Plan`).

    Raises:
        KeyError: unknown preset or notebook (lists the allowed ones).
        ValueError: ``seeds`` or ``max_steps`` not a positive integer.
    """
    from gtalib.model.presets import PRESETS

    if preset not in PRESETS:
        raise KeyError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise ValueError(f"seeds must be a positive integer, got {seeds!r}")
    unknown = [n for n in notebooks if n not in NOTEBOOKS]
    if unknown:
        raise KeyError(f"unknown notebook(s) {unknown}; allowed: {', '.join(NOTEBOOKS)}")
    refs = {k: tuple(figures.figure_runs(k, preset, seeds, max_steps=max_steps))
            for k in figures.ABLATIONS}
    refs["main"] = tuple(figures.main_runs(preset, seeds, max_steps))
    ladder = tuple(figures.ladder_runs(preset)) if preset in ladders.LADDERS else ()
    return Plan(preset, seeds, max_steps, figures.preset_tokenizer(preset),
                specs.train_settings(preset, max_steps), refs, ladder, tuple(notebooks))
