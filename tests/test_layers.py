"""The package's layers, read from the code: every import (module level or inside a function, and
every ``importlib.import_module("gtalib...")``) points down, as each layer's ``__init__``
docstring declares ("May import: ..."), and no modules import each other in a circle.

Layers, bottom to top: ``kernels`` and ``data`` and ``model`` (ground), ``training`` and
``decode``, ``book``, ``cli``. ``__main__`` modules are entry points and belong to the cli layer
wherever they stand.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "gtalib"
LAYERS = ("kernels", "data", "model", "training", "decode", "book", "cli")
#: the order the declarations must respect: a layer may import only layers of a lower rank
RANK = {"kernels": 0, "data": 0, "model": 1, "training": 2, "decode": 2, "book": 3, "cli": 4}
MAX_LINES = 650  # "no module over about 600 lines"


def _modules() -> dict[str, Path]:
    """Dotted name -> file of every module of gtalib (``gtalib.kernels`` is the kernels/ folder)."""
    mods = {}
    for f in sorted(PKG.rglob("*.py")):
        parts = f.relative_to(REPO).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    for f in sorted((REPO / "kernels").rglob("*.py")):
        parts = ("gtalib", "kernels", *f.relative_to(REPO / "kernels").with_suffix("").parts)
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return mods


MODULES = _modules()


def layer_of(module: str, file: Path | None = None) -> str | None:
    """The layer of a gtalib module (``None`` for the root package ``gtalib`` itself)."""
    if file is not None and file.name == "__main__.py":
        return "cli"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def imports_of(module: str, file: Path) -> set[str]:
    """The gtalib modules that ``file`` imports anywhere in its code (resolved to modules: a name
    imported from a package counts as that submodule when there is one)."""
    tree = ast.parse(file.read_text(), str(file))
    package = module if file.name == "__init__.py" else module.rpartition(".")[0]
    found = set()

    def add(name: str) -> None:
        if name == "gtalib" or name.startswith("gtalib."):
            found.add(name)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                add(sub if sub in MODULES else base)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) \
                == "import_module" and node.args and isinstance(node.args[0], ast.Constant):
            add(str(node.args[0].value))
    # the root's lazy map names modules as strings
    if module in ("gtalib", "gtalib.model"):
        for c in ast.walk(tree):
            if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value in MODULES:
                add(c.value)
    return {m for m in found if m != module}


def declared(layer: str) -> set[str]:
    """The layers that ``layer``'s ``__init__`` docstring allows ("May import: ..." up to the
    next full stop; layer names written as ``gtalib.<layer>``)."""
    init = MODULES["gtalib" + ("" if layer is None else f".{layer}")]
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    m = re.search(r"May import:(.*?)(?:\.\s|\.$)", doc, re.S)
    assert m, f"{init.relative_to(REPO)}: the docstring has no 'May import: ...' line"
    return set(re.findall(r"gtalib\.(\w+)", m.group(1))) & set(LAYERS)


def test_every_layer_declares_what_it_may_import_and_the_declarations_point_down():
    for layer in LAYERS:
        allowed = declared(layer)
        for other in allowed:
            assert RANK[other] < RANK[layer], f"gtalib.{layer} declares it may import gtalib.{other}"
    assert declared("kernels") == set() and declared("data") == set()


def test_no_module_imports_from_a_layer_above_its_own():
    bad = []
    for module, file in MODULES.items():
        layer = layer_of(module, file)
        if layer is None:  # the root package: lazy names of the model layer only
            allowed = {"model"}
        else:
            allowed = declared(layer) | {layer}
        for target in imports_of(module, file):
            t = layer_of(target)
            if t is not None and t not in allowed:
                bad.append(f"{file.relative_to(REPO)} ({layer or 'gtalib'}) imports {target} ({t})")
    assert not bad, "imports that climb a layer:\n" + "\n".join(bad)


def test_no_circles_between_modules():
    graph = {m: {t for t in imports_of(m, f) if t in MODULES} for m, f in MODULES.items()}
    # a package's __init__ that re-exports its submodules is not a circle with them
    graph = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()}
    index, low, stack, on, circles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert not circles, f"modules that import each other: {circles}"


#: The book layer's folders, bottom to top: each may import only those before it.
BOOK_FOLDERS = ("design", "analysis", "chapters", "pipeline")


def book_folder_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == ["gtalib", "book"] else None


def test_the_book_folders_declare_what_they_may_import_and_keep_to_it():
    """Inside ``gtalib.book``: design → analysis → chapters → pipeline, as each folder's
    ``__init__`` declares ("May import: gtalib.book.<folder>, ..."), and no module loose at the
    layer's root."""
    book = PKG / "book"
    assert sorted(f.name for f in book.glob("*.py")) == ["__init__.py"]
    assert sorted(d.name for d in book.iterdir() if (d / "__init__.py").exists()) == \
        sorted(BOOK_FOLDERS)
    bad = []
    for rank, folder in enumerate(BOOK_FOLDERS):
        doc = ast.get_docstring(ast.parse((book / folder / "__init__.py").read_text())) or ""
        m = re.search(r"May import:(.*?)(?:\.\s|\.$)", doc, re.S)
        assert m, f"gtalib/book/{folder}/__init__.py: no 'May import: ...' line"
        allowed = set(re.findall(r"gtalib\.book\.(\w+)", m.group(1))) | {folder}
        assert allowed <= set(BOOK_FOLDERS[: rank + 1]), f"{folder} declares {allowed}"
        for module, file in MODULES.items():
            if book_folder_of(module) != folder:
                continue
            for target in imports_of(module, file):
                t = book_folder_of(target)
                if target.startswith("gtalib.book") and t not in allowed:
                    bad.append(f"{file.relative_to(REPO)} ({folder}) imports {target}")
    assert not bad, "imports that climb inside the book layer:\n" + "\n".join(bad)


def test_the_root_holds_only_the_layers():
    loose = sorted(f.name for f in PKG.glob("*.py") if f.name not in ("__init__.py", "__main__.py"))
    assert not loose, f"modules at gtalib/'s root, outside every layer: {loose}"
    folders = sorted(d.name for d in PKG.iterdir() if d.is_dir() and (d / "__init__.py").exists())
    assert folders == sorted(set(LAYERS) - {"kernels"})


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_over_about_600_lines(module):
    n = len(MODULES[module].read_text().splitlines())
    assert n <= MAX_LINES, f"{MODULES[module].relative_to(REPO)}: {n} lines (split it by concern)"


def test_the_checker_sees_a_climbing_import(tmp_path):
    """The reader of imports finds an import inside a function and a relative one."""
    f = tmp_path / "x.py"
    f.write_text("def f():\n    from gtalib.book.pipeline import job\n    from ..training import runs\n")
    assert imports_of("gtalib.model.x", f) == {"gtalib.book.pipeline.job", "gtalib.training.runs"}
