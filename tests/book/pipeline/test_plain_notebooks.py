"""The notebooks read right outside the book: opened in Colab, on GitHub, in VS Code, through
nbconvert or as a papermill output, executed or not, they hold no MyST markup that a plain
CommonMark renderer shows raw, and an ablation page's verdict is the first thing under its figure.

Two renderers, as the readers use them: nbconvert's plain Markdown exporter (what GitHub, VS Code
and a papermill CI user read, the code cells included) and markdown-it-py in CommonMark mode (how
Colab and JupyterLab without jupyterlab-myst render a Markdown cell or a cell's Markdown output).
The source notebooks are checked in a second; the executed ones are those of the ci book that the
session builds once (the ``built`` fixture, tests/book/conftest.py).
"""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import nbformat
import pytest
from markdown_it import MarkdownIt
from nbconvert import MarkdownExporter

from gtalib.book.design import chapters as registry
from gtalib.book.design.names import display_name
from gtalib.book.design.figures import figure_spec

REPO = Path(__file__).resolve().parents[3]
SOURCES = sorted((REPO / "notebooks").glob("*.ipynb"))

#: What a plain renderer shows raw: a MyST role (``{glue:md}`x```, ``{ref}`x```, ``{doc}``,
#: ``{numref}``...), a directive fence (```` ```{note} ````, ``:::{dropdown}``), a target line
#: (``(label)=``) and a substitution (``{{ name }}``).
RAW = {
    "role": re.compile(r"\{[a-z][\w:-]*\}`"),
    "directive fence": re.compile(r"^\s*(?:`{3,}|~{3,}|:{3,})\s*\{", re.M),
    "target": re.compile(r"^\(\S+\)=\s*$", re.M),
    "substitution": re.compile(r"\{\{\s*[\w.-]+\s*\}\}"),
}

#: The ablation pages (the figure a page draws → its notebook) and the verdict words a verdict
#: paragraph may give (gtalib.book.analysis.stats: a variant's verdict, the figure's aggregate).
ABLATION_PAGES = {"init": "init_ablation", "gate": "gating_ablation",
                  "latent_scale": "latent_scaling", "double_heads": "double_heads",
                  "init-own": "own_attention"}
VERDICT_WORDS = ("agrees", "differs", "within noise", "mixed", "not measured")


def raw_markup(text: str) -> list[str]:
    """The pieces of ``text`` a plain CommonMark renderer would show raw, each ``kind: text``."""
    return [f"{kind}: {m.group(0).strip()}" for kind, rx in RAW.items() for m in rx.finditer(text)]


def markdown_export(path: Path) -> str:
    """The notebook at ``path`` as nbconvert's plain Markdown exporter writes it (code cells as
    fenced code, outputs after them)."""
    body, _ = MarkdownExporter().from_filename(str(path))
    return body


def commonmark_html(path: Path) -> list[str]:
    """Every Markdown cell and every Markdown output of the notebook at ``path``, rendered to HTML
    by markdown-it-py in CommonMark mode."""
    md = MarkdownIt("commonmark")
    nb = nbformat.read(path, as_version=4)
    sources = [c.source for c in nb.cells if c.cell_type == "markdown"]
    sources += [o["data"]["text/markdown"] for c in nb.cells if c.cell_type == "code"
                for o in c.get("outputs", []) if "text/markdown" in o.get("data", {})]
    return [md.render(s) for s in sources]


def rendered_raw(html: str) -> list[str]:
    """The raw markup a reader sees in CommonMark's ``html``: a role renders as its name before
    inline code (``{ref}<code>x</code>``), a backtick directive fence as a code block of language
    ``{name}``; a colon fence, a target line and a substitution stay text."""
    text = unescape(re.sub(r"<[^>]+>", "", html))
    return ([f"role: {m.group(0)}" for m in re.finditer(r"\{[a-z][\w:-]*\}<code>", html)]
            + [f"directive fence: {m.group(0)}" for m in
               re.finditer(r'<code class="language-\{[^"]*"', html)] + raw_markup(text))


def without_code(markdown: str) -> str:
    """An nbconvert export without its fenced code blocks (the cells' sources)."""
    return re.sub(r"^```.*?^```[ \t]*$", "", markdown, flags=re.S | re.M)


def verdict_under_figure(markdown: str) -> str:
    """The first paragraph after the first image of an nbconvert export, code left out: an
    ablation page's verdict paragraph."""
    text = without_code(markdown)
    image = re.search(r"!\[[^\]]*\]\([^)]*\)", text)
    assert image, "no figure"
    return text[image.end():].strip().split("\n\n")[0]


def test_the_detector_finds_each_kind_and_passes_plain_markdown():
    myst = ("See {ref}`statistics` and {glue:md}`fig_verdict`.\n\n:::{dropdown} Fold\nx\n:::\n\n"
            "```{note}\ny\n```\n\n(width-gap)=\n## Heading\n\n{{ runs }} runs")
    found = [f.split(":")[0] for f in raw_markup(myst)]
    assert found == ["role", "role", "directive fence", "directive fence", "target",
                     "substitution"]
    plain = ("See [Statistics](../methods.md#statistics); $\\sigma(0) = 0.5$, "
             "$d_{model}$.\n\n<details><summary>Fold</summary>\n\nx\n\n</details>\n\n"
             "```python\nprint({'a': 1})\n```\n")
    assert raw_markup(plain) == []


def test_commonmark_shows_roles_fences_and_targets_raw():
    myst = ("See {ref}`statistics`.\n\n```{note}\ny\n```\n\n:::{dropdown} Fold\nx\n:::\n\n"
            "(width-gap)=\n## Heading\n")
    html = MarkdownIt("commonmark").render(myst)
    assert [f.split(":")[0] for f in rendered_raw(html)] == [
        "role", "directive fence", "directive fence", "target"]
    plain = "[Statistics](../methods.md#statistics)\n\n```python\nx = {'a': 1}\n```\n"
    assert rendered_raw(MarkdownIt("commonmark").render(plain)) == []


def test_the_verdict_under_the_figure_is_read_from_an_export():
    export = ("```python\nfig.tight_layout()\n```\n\n\n![png](x_files/x_4_0.png)\n\n"
              "```python\n# The verdict\nMarkdown(...)\n```\n\n"
              "**Verdict: agrees.** Over 2 seed pairs, *agrees* for GQA\n(paper: x).\n\n"
              "**Caption.** More.\n")
    assert verdict_under_figure(export) == (
        "**Verdict: agrees.** Over 2 seed pairs, *agrees* for GQA\n(paper: x).")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_a_source_notebook_holds_no_markup_a_plain_renderer_shows_raw(path):
    """Unexecuted, as a reader opens it from the repository: the nbconvert export (its text: a
    cell's source is code, shown as such) and every Markdown cell rendered in CommonMark mode."""
    assert raw_markup(without_code(markdown_export(path))) == [], path.name
    for html in commonmark_html(path):
        assert rendered_raw(html) == [], (path.name, html[:200])


def test_every_notebook_of_the_book_is_checked():
    assert {p.stem for p in SOURCES} == set(registry.notebooks())


@pytest.mark.slow
def test_the_executed_ci_notebooks_read_right_outside_the_book(built):
    """Every executed notebook of the ci book, as a papermill CI user or GitHub reads it: no raw
    markup in its nbconvert export nor in its Markdown cells and outputs rendered in CommonMark
    mode, and, on each ablation page, the first paragraph under the figure is the verdict: the
    figure's (one of the verdict words), then each of the ci preset's variants of the figure
    with its own."""
    dst, _ = built
    generated = dst / "generated"
    for stem in registry.notebooks():
        path = generated / f"{stem}.ipynb"
        assert raw_markup(without_code(markdown_export(path))) == [], stem
        for html in commonmark_html(path):
            assert rendered_raw(html) == [], (stem, html[:200])
    for key, stem in ABLATION_PAGES.items():
        verdict = " ".join(verdict_under_figure(markdown_export(generated / f"{stem}.ipynb"))
                           .split())
        head = re.match(r"\*\*Verdict: ([^.*]+)\.\*\*", verdict)
        assert head and head.group(1) in VERDICT_WORDS, (stem, verdict[:300])
        groups = dict((names, word) for word, names in
                      re.findall(r"\*(agrees|differs|within noise)\* for ([^;(]+)", verdict))
        named = {n.strip() for names in groups for n in re.split(r",| and ", names) if n.strip()}
        if key == "init-own":  # the page draws the init figure's ci variants beside the class
            key = "init"
        assert named == {display_name(v) for v in figure_spec(key).variants_at("ci")}, (stem, verdict)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_the_first_toggle_is_the_plotting_code_and_says_what_it_draws(path):
    """On the book's page, the first folded code is the plotting code's: above it the setup,
    imports and runs are left off the page (their outputs kept), and on an ablation page it is
    the figure's cell. In Colab, which shows every cell, it opens with a comment line that says
    what it draws, so that a reader can skip it (the setup cell's: test_notebook_setup.py)."""
    cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    tags = [set(c.metadata.get("tags", [])) for c in cells]
    assert all(t & {"hide-input", "remove-input", "remove-cell"} for t in tags), path.name
    folded = [i for i, t in enumerate(tags) if "hide-input" in t]
    assert folded, path.name
    first = cells[folded[0]]
    assert first.source.startswith("# "), (path.name, first.source[:80])
    if "ablation-figure" in {t for tag in tags for t in tag}:
        assert "ablation-figure" in first.metadata["tags"], path.name
