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


#: a dotted name of the package (``gtalib.book.design.plan.Plan.own_design``)
DOTTED = re.compile(r"(?<![\w/.])gtalib(?:\.[A-Za-z_]\w*)+")


def dotted_name_exists(name: str) -> bool:
    """Whether ``name`` is a module of the package or an attribute (a dataclass field counts) of
    one; imports the longest module prefix."""
    import dataclasses
    import importlib

    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            fields = ({f.name for f in dataclasses.fields(obj)}
                      if dataclasses.is_dataclass(obj) else set())
            if attr in fields and attr == parts[-1]:
                return True
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_dotted_name_of_the_package_that_the_text_names_exists():
    """A docstring, a doc or a notebook that names ``gtalib.x.y`` names something that is there
    (a moved module leaves no stale name behind); the tests may name made-up ones."""
    problems = []
    for path in text_files():
        if path.suffix not in (".py", ".md", ".ipynb") or path.parts[len(REPO.parts)] == "tests":
            continue
        for name in sorted(set(DOTTED.findall(path.read_text(errors="replace")))):
            if not dotted_name_exists(name.rstrip(".")):
                problems.append(f"{path.relative_to(REPO)}: {name}")
    assert problems == []


@pytest.mark.parametrize("name, exists", [
    ("gtalib.book.design.plan.Plan.own_design", True),
    ("gtalib.book.chapters.gate_probes.Probes.summary", True),  # a dataclass field
    ("gtalib.book.chapters.scale_ladder.width_gap", False),  # it lives in ladder_width
    ("gtalib.book.Ladder", False),
])
def test_the_dotted_name_check_can_fail(name, exists):
    assert dotted_name_exists(name) is exists
