"""A preset resolved once into everything the book does with it: the :class:`Plan`.

The main job, the notebooks' analyses and the scale ladder all read one ``Plan`` instead of each
re-deriving runs, tokenizer and training settings from the preset's name::

    plan = make_plan("cpu", seeds=2)
    plan.runs            # every RunRef the book needs (each configuration once; recorded ones are read, not trained)
    plan.figure_refs     # {"init": (...), "gate": (...), ..., "main": (...)}
    plan.ladder_refs     # the scale ladder's runs, at its own seed counts (recorded)
    plan.data_order_refs # {"init": (...)}: a pair of each variant at other data orders (recorded)
    plan.one_order_refs  # a joint-design figure's one-order pairs (all at data order 0), read beside
    plan.spec(ref)       # the RunSpec of a ref (run id = its hash)
    plan.own_design()    # the preset's lengths and seed counts, whatever the book overrides
    plan.notebooks       # the chapters to execute, in book order
    plan.reads           # the figure data those chapters read (their runs are plan.runs)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gtalib.book.design import ladder as ladders
from gtalib.book.design import run_specs as specs
from gtalib.book.design.chapters import notebooks as chapter_notebooks
from gtalib.book.design.chapters import reads
from gtalib.book.design.figure_plan import run_identity
from gtalib.book.design.figures import ABLATIONS, TABLES
from gtalib.book.design.names import is_user_variant
from gtalib.book.design.ladder import ladder_runs
from gtalib.book.design.seeds import LADDER_KEYS
from gtalib.model.presets import PRESETS, preset_tokenizer
from gtalib.training import runs
from gtalib.training.config import TrainConfig


@dataclass(frozen=True)
class Plan:
    """What the book does at one preset (built by :func:`make_plan`; frozen).

    Attributes:
        preset: preset name (:data:`gtalib.model.presets.PRESETS`). seeds: seeds per configuration.
        max_steps: the book's training-length override (``None``: the preset's).
        tokenizer: ``"bytes"`` or ``"gpt2"``, from the preset's vocabulary.
        train: the resolved :class:`~gtalib.training.config.TrainConfig` of the default runs.
        figure_refs: per ablation key and ``"main"``, the runs of that figure or table.
        ladder_refs: the scale ladder's runs at its own seed counts (the seed table's
            ``"ladder"`` and ``"ladder_width"``); empty at a preset without a ladder or when no
            chapter of the plan reads the ladder.
        notebooks: the chapters to execute, in book order
            (:func:`gtalib.book.design.chapters.notebooks`).
        data_order_refs: per ablation key, its data-order runs
            (its spec's :meth:`~gtalib.book.design.figure_plan.AblationPlan.data_order_runs`); empty
            for most figures.
        one_order_refs: per ablation key read in the joint design
            (its spec's :meth:`~gtalib.book.design.figure_plan.AblationPlan.reads_joint`), its
            one-order pairs (every pair at
            data order 0), read beside the joint pairs; empty for the other figures.
        user_variants: the user's own variants (``module:Class``) drawn beside the paper's in
            every ablation figure whose arms they can take
            (:meth:`~gtalib.book.design.figure_plan.AblationPlan.variants_at`); their runs are in
            :attr:`figure_refs`.
    """

    preset: str
    seeds: int
    max_steps: int | None
    tokenizer: str
    train: TrainConfig
    figure_refs: dict
    ladder_refs: tuple
    notebooks: tuple[str, ...] = ()
    data_order_refs: dict = field(default_factory=dict)
    one_order_refs: dict = field(default_factory=dict)
    user_variants: tuple = ()
    _data: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def reads(self) -> set[str]:
        """The figure data the plan's chapters read (:func:`gtalib.book.design.chapters.reads`)."""
        return reads(self.notebooks)

    @property
    def runs(self) -> tuple:
        """Every run of every figure and table the plan's chapters read, each configuration and
        seed once (the job trains these; MLA at default options appears in every ablation
        and the main table but is one run)."""
        seen, out = set(), []
        # a joint figure's one-order pairs first, so that a run its figure shares with others
        # keeps that figure's label (the run cards' rows)
        groups = [*self.one_order_refs.items(), *self.figure_refs.items(),
                  *self.data_order_refs.items()]
        for key, refs in groups:
            if key not in self.reads:
                continue
            for r in refs:
                ident = run_identity(r)
                if ident not in seen:
                    seen.add(ident)
                    out.append(r)
        return tuple(out)

    def data(self, build: bool = False) -> dict:
        """The run specs' ``data`` (corpus identity), read once from the built corpus;
        ``build``: first build the preset's default corpus if it is missing (from the archives
        that the install step fetched: seconds).

        Raises:
            FileNotFoundError: the corpus is not built (``gtalib data build``) and ``build`` is
                False, or its archives are missing (the message names the command).
        """
        if not self._data:
            if build:
                runs.make_datamodule("default", self.tokenizer, self.train, build=True).prepare_data()
            self._data.update(specs.data_spec(self.preset, self.max_steps))
        return self._data

    def spec(self, ref):
        """The :class:`gtalib.training.runs.RunSpec` of ``ref`` under this plan."""
        return specs.run_spec(ref, self.preset, self.max_steps, self.data())

    def specs(self, refs=None) -> list:
        """``(label, RunSpec)`` of ``refs`` (default :attr:`runs`), for the job's trainer."""
        return [(r.label, self.spec(r)) for r in (self.runs if refs is None else refs)]

    def own_design(self, seeds: int = 1) -> "Plan":
        """The plan of the preset's own design, whatever this book overrides: the preset's
        training lengths (no ``max_steps``) and each figure the larger of its fixed seed count
        and ``seeds`` (its spec's ``seeds_at``; the default, 1, the smallest
        count a book can ask for, leaves every figure its fixed count). The scale ladder reads
        its runs, and the other figures' runs it draws on, under this plan: they were recorded
        at these lengths and counts.

        Raises:
            ValueError: ``seeds`` not a positive integer.
        """
        if seeds == self.seeds and not isinstance(seeds, bool) and self.max_steps is None:
            return self
        return make_plan(self.preset, seeds, None, self.notebooks, self.user_variants)

    def of_chapter(self, notebook: str) -> "Plan":
        """The plan of one of this plan's chapters alone: the runs and the ladder it reads.

        Raises:
            KeyError: ``notebook`` is not one of :attr:`notebooks`.
        """
        if notebook not in self.notebooks:
            raise KeyError(f"notebook {notebook!r} is not in this plan; its chapters: "
                           f"{', '.join(self.notebooks)}")
        return make_plan(self.preset, self.seeds, self.max_steps, (notebook,), self.user_variants)


def make_plan(preset: str, seeds: int, max_steps=None, notebooks=None, variants=()) -> Plan:
    """Resolve ``preset`` once (see :class:`Plan`); ``notebooks``: the chapters to execute
    (default: every notebook chapter, :func:`gtalib.book.design.chapters.notebooks`);
    ``variants``: the user's own variants (``module:Class``) to draw beside the paper's.

    Raises:
        KeyError: unknown preset or notebook (lists the allowed ones), or a variant in
            ``variants`` that is no import path (the paper's variants are always shown).
        ValueError: ``seeds`` or ``max_steps`` not a positive integer.
    """
    variants = tuple(dict.fromkeys(variants))
    builtin = [v for v in variants if not is_user_variant(v)]
    if builtin:
        raise KeyError(f"variants {builtin} are not a user's variants (module:Class); the "
                       f"paper's variants are always shown")

    if preset not in PRESETS:
        raise KeyError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise ValueError(f"seeds must be a positive integer, got {seeds!r}")
    train = specs.train_settings(preset, max_steps)  # refuses a bad max_steps before any run
    allowed = chapter_notebooks()
    notebooks = allowed if notebooks is None else tuple(notebooks)
    unknown = [n for n in notebooks if n not in allowed]
    if unknown:
        raise KeyError(f"unknown notebook(s) {unknown}; allowed: {', '.join(allowed)}")
    notebooks = tuple(n for n in allowed if n in notebooks)  # book order, each once
    refs = {k: tuple(a.runs(preset, seeds, variants or None, max_steps))
            for k, a in ABLATIONS.items()}
    refs["main"] = tuple(TABLES["main"].runs(preset, seeds, max_steps=max_steps))
    read = reads(notebooks)
    ladder = () if preset not in ladders.LADDERS or not read & set(LADDER_KEYS) else tuple(
        ladder_runs(preset, part=None if "ladder" in read else "width"))
    orders = {k: tuple(a.data_order_runs(preset, max_steps=max_steps)) for k, a in ABLATIONS.items()}
    one_order = {k: tuple(a.runs(preset, seeds, joint=False)) for k, a in ABLATIONS.items()
                 if a.reads_joint(preset, max_steps)}
    return Plan(preset, seeds, max_steps, preset_tokenizer(preset), train, refs, ladder,
                tuple(notebooks), {k: r for k, r in orders.items() if r}, one_order, variants)
