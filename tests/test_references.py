"""The repository stands on its own: every Markdown document that the README, the book, the docs,
a docstring or a comment cites is in the repository (or is a file the code itself writes), and
nothing points outside it."""

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TEXT_SUFFIXES = (".md", ".py", ".ipynb", ".txt", ".yml", ".yaml", ".toml", ".sh", ".cfg", "")
#: ``foo.md`` or ``some/path/foo.md``, not in the middle of a longer path or a URL
MD_REF = re.compile(r"(?<![\w/.:-])((?:\.\.?/)*[\w.*-]+(?:/[\w.*-]+)*\.md)\b")
#: files the code writes (``folder / "name.md"``): cited by name, never committed
WRITTEN = re.compile(r"/\s*[\"']([\w.-]+\.md)[\"']")
OUTSIDE = re.compile(r"\.\./shared|shared/design")


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):  # an exported tree without .git
        skip = {".git", ".venv", "data_cache", "runs", ".cache", "_build", "generated"}
        return [p for p in REPO.rglob("*") if p.is_file() and not skip & set(p.parts)]
    return [REPO / f for f in out]


def text_files() -> list[Path]:
    return [p for p in tracked_files() if p.suffix in TEXT_SUFFIXES and p.is_file()
            and p.resolve() != Path(__file__).resolve()]


def written_names(files) -> set[str]:
    return {m for p in files if p.suffix == ".py" for m in WRITTEN.findall(p.read_text())}


def broken_references(path: Path, text: str, names: set[str], written: set[str]) -> list[str]:
    """References of ``text`` (the content of ``path``) to Markdown files that neither exist in
    the repository nor are written by its code; and any pointer to the shared design folder."""
    bad = [f"{m.group(0)} (outside the repository)" for m in OUTSIDE.finditer(text)]
    for ref in MD_REF.findall(text):
        base = ref.rsplit("/", 1)[-1]
        if base in written:
            continue
        if "/" not in ref:
            if base in names:
                continue
        else:
            here = (path.parent / ref).resolve()
            root = (REPO / ref).resolve()
            inside = [p for p in (here, root) if p.is_relative_to(REPO)]
            if any(p.exists() or ("*" in ref and list(p.parent.glob(p.name))) for p in inside):
                continue
        bad.append(ref)
    return bad


def test_every_cited_document_is_in_the_repository():
    files = text_files()
    names = {p.name for p in tracked_files()}
    written = written_names(files)
    problems = []
    for path in files:
        for ref in broken_references(path, path.read_text(errors="replace"), names, written):
            problems.append(f"{path.relative_to(REPO)}: {ref}")
    assert problems == []


@pytest.mark.parametrize("text, expected", [
    ("see ../shared/design/variants.md",
     ["../shared (outside the repository)", "../shared/design/variants.md"]),
    ("(paper.md, \"Main results\")", ["paper.md"]),  # a bare name no file here has
    ("the pilot (pilot.md)", ["pilot.md"]),
    ("docs/variants.md and `docs/paper_values.md`", []),
    ("docs/nothing.md", ["docs/nothing.md"]),
    ("see cpu_regime.md and ../benchmarks/train_cpu.md", []),  # relative to docs/
    ("../../outside.md", ["../../outside.md"]),
    ("writes PROVENANCE.md; https://example.org/a/paper.md", []),
])
def test_the_reference_check_can_fail(text, expected):
    names = {p.name for p in tracked_files()}
    found = broken_references(REPO / "docs" / "x.md", text, names, {"PROVENANCE.md"})
    assert found == expected


#: a dotted name of the package (``gtalib.book.design.plan.Plan.own_design``); the short forms
#: (``figures.claims``, ``~plan.make_plan``) are not checked
DOTTED = re.compile(r"(?<![\w/.])gtalib(?:\.[A-Za-z_]\w*)+")


def dotted_name_exists(name: str) -> bool:
    """Whether ``name`` is a module of the package, or a name one of its modules defines (a
    dataclass field counts; a function or class only in the module that defines it or in a
    package that hands it on, not in a module that imports it, so a moved function leaves no
    stale name). The longest prefix that is a module is imported: its import errors are raised,
    not taken for a missing name."""
    import dataclasses
    import importlib
    import inspect

    parts = name.split(".")
    i = next(i for i in range(len(parts), 0, -1) if _is_module(".".join(parts[:i])))
    obj = importlib.import_module(".".join(parts[:i]))
    for attr in parts[i:]:
        if dataclasses.is_dataclass(obj) and attr in {f.name for f in dataclasses.fields(obj)}:
            return attr == parts[-1]
        if not hasattr(obj, attr):
            return False
        value = getattr(obj, attr)
        if inspect.ismodule(obj) and not hasattr(obj, "__path__") and (
                inspect.isfunction(value) or inspect.isclass(value)) \
                and value.__module__ != obj.__name__:
            return False  # imported into a module from where it is defined (a package's
            # __init__ may hand names on: it is the package's face)
        obj = value
    return True


def _is_module(name: str) -> bool:
    """Whether ``name`` is a module (a ``ModuleNotFoundError`` of another module, a missing
    dependency, is raised)."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError as e:  # a parent that is a module, not a package
        if e.name is not None and not name.startswith(e.name):
            raise
        return False


def test_every_dotted_name_of_the_package_that_the_text_names_exists():
    """A docstring, a doc or a notebook that names ``gtalib.x.y`` names something that is there
    (a moved module leaves no stale name behind); the tests may name made-up ones."""
    problems = []
    for path in text_files():
        if path.suffix not in (".py", ".md", ".ipynb") or path.parts[len(REPO.parts)] == "tests":
            continue
        for name in sorted(set(DOTTED.findall(path.read_text(errors="replace")))):
            if "__" in name:  # gtalib.__main__ would run the CLI
                continue
            if not dotted_name_exists(name):
                problems.append(f"{path.relative_to(REPO)}: {name}")
    assert problems == []


@pytest.mark.parametrize("name, exists", [
    ("gtalib.book.design.plan.Plan.own_design", True),
    ("gtalib.book.chapters.gate_probes.Probes.summary", True),  # a dataclass field
    ("gtalib.book.chapters.scale_ladder.width_gap", False),  # it lives in ladder_width
    ("gtalib.book.Ladder", False),
    ("gtalib.book.chapters.scale_ladder.collect_runs", False),  # imported there, defined in collect
    ("gtalib.book.analysis.collect.collect_runs", True),
    ("gtalib.book.design", True),
])
def test_the_dotted_name_check_can_fail(name, exists):
    assert dotted_name_exists(name) is exists
