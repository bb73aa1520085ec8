"""The page "Bring your own attention": the attention class of docs/interfaces.md ("Your own
attention variant"), taken from that page as written, put through the initialisation figure at
the ``ci`` preset beside the paper's variants of that preset. The page trains the few ``ci`` runs
it lacks itself (each a few seconds), whatever the book's preset, so that it shows the whole path
in every build; its result is an :class:`gtalib.book.chapters.ablation.AblationResult`, drawn and
tabled by the ablation page's own functions.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import tempfile
from pathlib import Path

from gtalib.book.chapters.ablation import ablation_result
from gtalib.book.design.plan import make_plan

REPO = Path(__file__).resolve().parents[3]
#: The page of the docs that shows the class, and its section.
DOCS = REPO / "docs" / "interfaces.md"
SECTION = "## Your own attention variant"
#: The module the class is written to, and the class's import path.
MODULE = "my_attention"
#: The preset, seed count and figure this page draws.
PRESET, SEEDS, FIGURE = "ci", 2, "init"


def docs_class_text() -> str:
    """The docs' class as written: the first Python block of :data:`SECTION` in :data:`DOCS`.

    Raises:
        ValueError: the section or its block is missing.
    """
    text = DOCS.read_text()
    if SECTION not in text:
        raise ValueError(f"{DOCS} has no section {SECTION!r}")
    block = re.search(r"```python\n(.*?)```", text.split(SECTION, 1)[1], re.S)
    if block is None:
        raise ValueError(f"{DOCS}: section {SECTION!r} has no Python block")
    return block.group(1)


#: The temporary folder of :func:`docs_variant`, kept while this process lives: it is removed
#: when the process exits (``tempfile.TemporaryDirectory``'s finaliser), not when the figure is
#: drawn, since the runs' specs import the class until then.
_FOLDERS: list = []


def docs_variant() -> str:
    """Write the docs' class to ``my_attention.py`` in a temporary folder put first on
    ``sys.path`` and removed when the process exits, and return its import path
    (``my_attention:<Class>``). Its run ids hash the class's source, not the folder, so every
    build names its runs alike."""
    text = docs_class_text()
    name = re.search(r"^class (\w+)\(", text, re.M).group(1)
    if not _FOLDERS:
        _FOLDERS.append(tempfile.TemporaryDirectory(prefix="gtalib-own-attention-"))
    folder = _FOLDERS[0].name
    (Path(folder) / f"{MODULE}.py").write_text(text)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules.pop(MODULE, None)
    return f"{MODULE}:{name}"


def own_attention_result(run_dir, confidence: float = 0.95):
    """The initialisation figure at :data:`PRESET` with the docs' class beside the paper's
    variants (:func:`gtalib.book.chapters.ablation.ablation_result`), its missing runs trained
    first (their "training ..." lines are not printed: the page's provenance names the runs
    trained here)."""
    variant = docs_variant()
    plan = make_plan(PRESET, SEEDS, variants=(variant,))
    plan.data(build=True)
    with contextlib.redirect_stdout(io.StringIO()):
        return ablation_result(FIGURE, plan, run_dir, variants=[variant], train=True,
                               confidence=confidence)
