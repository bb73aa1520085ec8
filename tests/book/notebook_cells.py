"""The ablation notebooks' visible plotting cell (tagged ``ablation-figure``), read and run as
the tests of the figure's drawing need it, and every notebook's template cells (the sentences that
state the values of its runs)."""

from __future__ import annotations

import re
import string
from pathlib import Path

import matplotlib.pyplot as plt
import nbformat

from gtalib.book.chapters import ablation
from gtalib.book.design.chapters import ablation_notebooks

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def ablation_stems() -> tuple[str, ...]:
    """The ablation figures' notebooks, read from the registry at call time (a figure added
    there has its cells checked too)."""
    return tuple(ablation_notebooks().values())


def figure_cell(name: str, notebook_dir: Path = NOTEBOOKS) -> str:
    """The source of notebook ``name``'s one cell tagged ``ablation-figure`` (in
    ``notebook_dir``)."""
    cells = [c for c in nbformat.read(notebook_dir / f"{name}.ipynb", as_version=4).cells
             if "ablation-figure" in c.metadata.get("tags", [])]
    assert len(cells) == 1, name
    return cells[0].source


def notebook_figure(result, monkeypatch):
    """The figure the ablation notebooks' plotting cell draws of ``result``."""
    monkeypatch.setattr(plt, "show", lambda: None)
    namespace = {"result": result, "ablation": ablation}
    exec(figure_cell("init_ablation"), namespace)
    return namespace["fig"]


#: A template cell's sentence: ``Markdown("""<English with {name} fields>""".format_map(facts))``
#: (the notebooks state every value of their runs in such an output, not in Markdown cells).
TEMPLATE = re.compile(r'Markdown\(r?"""\n(.*?)"""\.format_map\(facts\)\)', re.S)


def templates(name: str) -> list[str]:
    """The English templates of notebook ``name``'s template cells, in order."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    return [t for c in nb.cells if c.cell_type == "code" for t in TEMPLATE.findall(c.source)]


def stated_names(name: str) -> set[str]:
    """The value names notebook ``name``'s sentences state: the fields of its templates."""
    return {field for t in templates(name) for _, field, _, _ in string.Formatter().parse(t)
            if field}


def static_text(name: str) -> str:
    """What notebook ``name`` writes itself: its Markdown cells and its templates without their
    fields (the values the runs and the data give)."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    bare = ["".join(text for text, *_ in string.Formatter().parse(t)) for t in templates(name)]
    return "\n".join([*(c.source for c in nb.cells if c.cell_type == "markdown"), *bare])
