"""The book's chapters, declared once: each page's file, its part of the book, the figure it shows
and the figure data it reads.

Everything that lists chapters derives from :func:`chapters`: the table of contents
(:func:`toc_yaml`, written to ``book/_toc.yml`` by the main job), the notebooks the pipeline
executes and the pages it checks for figures (:func:`notebooks`, :func:`figure_notebooks`), the
introduction's list of chapters
(:func:`gtalib.book.pipeline.snippets.intro_markdown`), the runs a subset of chapters needs
(:func:`reads`) and the tests' lists. The ablation chapters come from
:data:`gtalib.book.design.figures.ABLATIONS` (their :attr:`~gtalib.book.design.figures.Ablation.
notebook` and :attr:`~gtalib.book.design.figures.Ablation.summary`), so a new ablation figure is
a new chapter without an entry here. Reads :mod:`gtalib.book.design.figures`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gtalib.book.design.figures import ABLATIONS


@dataclass(frozen=True)
class Chapter:
    """One page of the book.

    Attributes:
        stem: the file: ``notebooks/<stem>.ipynb`` (executed into ``book/generated/``) for a
            notebook chapter, else ``book/<stem>.md``.
        part: the caption of its part in the table of contents.
        notebook: whether it is a papermill-executed notebook (else a Markdown page).
        figure: whether its page carries a figure (an image the build checks is not blank).
        reads: the figure data whose runs it reads: ablation keys, ``"main"`` (the main table),
            ``"ladder"`` (the scale ladder's depth and length axes), ``"ladder_width"`` (its
            width axis); empty for a page that trains nothing.
        title: its name in the introduction's list (``""``: not listed).
        summary: what it shows, as the introduction lists it.
    """

    stem: str
    part: str
    notebook: bool = True
    figure: bool = False
    reads: tuple[str, ...] = ()
    title: str = ""
    summary: str = ""


def chapters() -> tuple[Chapter, ...]:
    """Every page after the introduction, in book order (read at call time, so a figure added to
    :data:`~gtalib.book.design.figures.ABLATIONS` is a chapter at once)."""
    ablations = tuple(Chapter(a.notebook, "Ablations", figure=True, reads=(key,),
                              title=a.heading, summary=a.summary)
                      for key, a in ABLATIONS.items())
    return (
        Chapter("methods", "Background", notebook=False),
        Chapter("scale_ladder", "Ablations", figure=True, reads=("ladder", "ladder_width"),
                title="The scale ladder",
                summary="where the paper's effects appear at the sizes a CPU can train: the "
                        "initialisation and gate ΔL against depth and training length, and "
                        "MLRA-4's gap to the best other variant against width and training "
                        "length, each with its interval"),
        *ablations,
        Chapter("main_results", "Results and costs", figure=True, reads=("main", "ladder_width"),
                title="Main results",
                summary="validation loss and perplexity of the eleven variants and gated MLRA-4 "
                        "per held-out source, and MLRA-4's gap to the best of the others"),
        Chapter("kv_cache", "Results and costs", title="KV cache and parameters",
                summary="the per-device KV load under TP and the paper-size parameter counts, "
                        "computed by the package"),
        Chapter("decode_speed", "Results and costs", figure=True, title="Decode speed",
                summary="the paper's four per-device decode shards timed on this book's CPU "
                        "against a roofline model of their FLOPs and bytes, and the same model "
                        "at H100 peaks next to the paper's measured latencies (no GPU "
                        "measurement is part of this book)"),
        Chapter("claims", "Verdicts", reads=(*ABLATIONS, "main"), title="Claims",
                summary="every claim with the paper's value, ours and a verdict, stated plainly "
                        "where they differ"),
        Chapter("reproduction", "Verdicts", notebook=False),
        Chapter("own_attention", "Your own attention", figure=True,
                title="Bring your own attention",
                summary="an attention class of your own, by import path, in the initialisation "
                        "figure at the ci preset beside the paper's variants, tested apart from "
                        "its claims"),
    )


def notebooks() -> tuple[str, ...]:
    """The notebook chapters' stems, in book order."""
    return tuple(c.stem for c in chapters() if c.notebook)


def figure_notebooks() -> tuple[str, ...]:
    """The notebook chapters whose pages carry a figure."""
    return tuple(c.stem for c in chapters() if c.notebook and c.figure)


def ablation_notebooks() -> dict[str, str]:
    """Ablation key → the stem of its chapter."""
    return {key: a.notebook for key, a in ABLATIONS.items()}


def chapter(stem: str) -> Chapter:
    """The chapter of ``stem``.

    Raises:
        KeyError: no such chapter; the message lists the allowed stems.
    """
    found = {c.stem: c for c in chapters()}
    if stem not in found:
        raise KeyError(f"no chapter {stem!r}; allowed: {', '.join(found)}")
    return found[stem]


def reads(stems) -> set[str]:
    """The figure data (see :attr:`Chapter.reads`) that the chapters ``stems`` read together.

    Raises:
        KeyError: an unknown stem.
    """
    return {key for s in stems for key in chapter(s).reads}


def toc_yaml() -> str:
    """``book/_toc.yml`` (Jupyter Book 1.x): the introduction as root, then each part's chapters
    in book order, a notebook chapter as its executed copy under ``generated/``."""
    lines = ["# Table of contents (Jupyter Book 1.x), generated from gtalib.book.design.chapters",
             "# by `gtalib book`. Chapters under generated/ are the papermill-executed copies of",
             "# notebooks/*.ipynb.",
             "format: jb-book", "root: intro", "parts:"]
    part = None
    for c in chapters():
        if c.part != part:
            part = c.part
            lines += [f"  - caption: {part}", "    chapters:"]
        lines.append(f"      - file: {'generated/' if c.notebook else ''}{c.stem}")
    return "\n".join(lines) + "\n"
