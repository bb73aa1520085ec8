"""The ablation notebooks' visible plotting cell (tagged ``ablation-figure``), read and run as
the tests of the figure's drawing need it."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import nbformat

from gtalib.book.chapters import ablation

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
ABLATION_NOTEBOOKS = ("init_ablation", "gating_ablation", "latent_scaling", "double_heads")


def figure_cell(name: str) -> str:
    """The source of notebook ``name``'s one cell tagged ``ablation-figure``."""
    cells = [c for c in nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells
             if "ablation-figure" in c.metadata.get("tags", [])]
    assert len(cells) == 1, name
    return cells[0].source


def notebook_figure(result, monkeypatch):
    """The figure the ablation notebooks' plotting cell draws of ``result``."""
    monkeypatch.setattr(plt, "show", lambda: None)
    namespace = {"result": result, "ablation": ablation}
    exec(figure_cell("init_ablation"), namespace)
    return namespace["fig"]
