"""The README and the documents of ``docs/`` state the book's numbers as the code has them, and
name only paths that exist.

Each fact lives in one document (:data:`HOME`: the default book's runs and budget in
``docs/budget.md``, the chapters in ``docs/book.md``, the records in ``docs/records.md``, the
presets in ``docs/presets.md``, the notebooks' parameters in ``docs/parameters.md``), which must
state it; wherever else the README or a document states it again, it must say the same. Each
check reads a sentence or table row and compares its numbers with the tables they come from: the seed counts of the ablation figures, the main table and the scale
ladder at the ``cpu`` preset (the figure specs' ``seeds`` and ``looks``,
:mod:`gtalib.book.design.figures`), the run totals of the default book
(:func:`gtalib.book.design.plan.make_plan` at :data:`~gtalib.book.design.seeds.DEFAULT_SEEDS`:
its runs, its scale ladder's, their unique run ids) and of ``book/recorded/``, the core-hours
that ``benchmarks/cluster_wall_time.py`` generates, and each notebook's ``parameters`` cell.
Every check is a function of the documents' texts that returns its problems, so the tests at
the end can show that each one fails on a wrong text.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest

from gtalib.book.design import seeds
from gtalib.book.design.figures import ABLATIONS, by_preset, figure_spec
from gtalib.book.design.plan import make_plan

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
#: where each group of facts lives: its key → the document (relative to the repository)
HOME = {"readme": "README.md", "budget": "docs/budget.md", "book": "docs/book.md",
        "records": "docs/records.md", "presets": "docs/presets.md",
        "parameters": "docs/parameters.md"}
WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split())}
#: a seed count: "5 seeds", "10 seed pairs", "3 seeds per point"
SEED_COUNT = re.compile(r"(\d+) seed(?:s| pairs?)\b")


def readme() -> str:
    return README.read_text()


def documents() -> dict[str, str]:
    """The text of every document of :data:`HOME`, by its key."""
    return {key: (REPO / path).read_text() for key, path in HOME.items()}


def table_rows(text: str) -> dict[str, str]:
    """First cell (lower case, without backticks) → the whole row, for every Markdown table row."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            rows[line.split("|")[1].strip().strip("`").lower()] = line
    return rows


def flat(text: str) -> str:
    """``text`` with every run of white space as one space (sentences wrap across lines)."""
    return re.sub(r"\s+", " ", text)


def number(word: str) -> int:
    return int(word) if word.isdigit() else WORDS[word.lower()]


def stated(docs: dict[str, str], home: str, pattern: str, what: str, expected,
           problems: list) -> None:
    """Every match of ``pattern`` in any of ``docs`` (white space flattened) states ``expected``
    (its groups, as ints); a pattern that matches nowhere in ``docs[home]``, the fact's own
    document, is a problem too (the fact went missing)."""
    want = expected if isinstance(expected, tuple) else (expected,)
    for key, text in docs.items():
        found = [tuple(number(g) for g in m.groups()) for m in re.finditer(pattern, flat(text))]
        if key == home and not found:
            problems.append(f"{what}: {HOME[key]} no longer says it (pattern {pattern!r})")
        for got in found:
            if got != want:
                problems.append(f"{what}: {HOME[key]} says {got}, the code {want}")


# -------------------------------------------------------------------------------------------
# Seed counts at the cpu preset

def chapter_name(key: str) -> str:
    """The chapter table's first cell for ablation ``key`` ("Initialisation ablation: ..." →
    "initialisation", "Latent-scaling ablation" → "latent scaling")."""
    return ABLATIONS[key].title.split(" ablation")[0].replace("-", " ").lower()


def seed_problems(docs: dict[str, str]) -> list[str]:
    fixed, looks = by_preset("seeds")["cpu"], seeds.ablation_looks("cpu")
    problems = []
    ablation_counts = {fixed[k] for k in ABLATIONS}
    assert len(ablation_counts) == 1, "the README says one count for every ablation figure"
    (pairs,) = ablation_counts

    rows = table_rows(docs["book"])
    for key in ABLATIONS:
        row = rows.get(chapter_name(key))
        if row is None:
            problems.append(f"no chapter row for {key!r} ({chapter_name(key)!r})")
            continue
        counts = [int(n) for n in SEED_COUNT.findall(row)]
        if not counts or set(counts) != {fixed[key]}:
            problems.append(f"chapter row {key!r}: seeds {counts}, the code {fixed[key]}")
    main = rows.get("main results", "")
    counts = [int(n) for n in SEED_COUNT.findall(main)]
    if not counts or set(counts) != {fixed["main"]}:
        problems.append(f"chapter row 'Main results': seeds {counts}, the code {fixed['main']}")
    ladder = rows.get("scale ladder", "")
    depth, _, width = ladder.partition("against width")
    for part, key in ((depth, "ladder"), (width, "ladder_width")):
        counts = [int(n) for n in SEED_COUNT.findall(part)]
        if not counts or set(counts) != {fixed[key]}:
            problems.append(f"chapter row 'Scale ladder' ({key}): seeds {counts}, the code "
                            f"{fixed[key]}")

    cpu_row = next((r for c, r in table_rows(docs["presets"]).items()
                    if c.startswith("cpu")), "")
    stated({"presets": cpu_row}, "presets", r"(\d+) seed pairs per ablation figure",
           "presets row `cpu`, ablations", pairs, problems)
    stated({"presets": cpu_row}, "presets", r"(\d+) seeds for the main table",
           "presets row `cpu`, main table", fixed["main"], problems)
    if sorted({int(n) for n in SEED_COUNT.findall(cpu_row)}) != sorted({pairs, fixed["main"]}):
        problems.append(f"presets row `cpu`: seed counts {SEED_COUNT.findall(cpu_row)}")

    stated(docs, "budget", r"(\d+) seed pairs for every variant of the ablation figures",
           "the default book's ablation figures", pairs, problems)
    stated(docs, "budget", r"two looks declared beforehand, at (\d+) and at (\d+) pairs",
           "the looks of the ablation figures", tuple(looks), problems)
    stated(docs, "budget", r"(\d+) seeds for the main results", "the default book's main table",
           fixed["main"], problems)
    stated(docs, "parameters", r"(\d+) pairs for each ablation figure",
           "the parameters' seed counts", pairs, problems)
    stated(docs, "parameters", r"(\d+) seeds for the main table", "the parameters' main table",
           fixed["main"], problems)
    stated(docs, "parameters", r"`seeds` is the book's count per configuration \(default (\d+)\)",
           "the book's default count", seeds.DEFAULT_SEEDS, problems)
    return problems


def test_the_docs_state_the_seed_counts_of_the_cpu_preset():
    assert seed_problems(documents()) == []


# -------------------------------------------------------------------------------------------
# Run totals

@lru_cache(maxsize=None)
def totals() -> dict[str, int]:
    """The run counts the README states, from the plans (run ids need the built corpus, which
    ``tests/conftest.py`` provides) and from ``book/recorded/``."""
    cpu = make_plan("cpu", seeds.DEFAULT_SEEDS)
    ci = make_plan("ci", seeds.DEFAULT_SEEDS)
    book = {cpu.spec(r).run_id for r in cpu.runs}
    ladder = {cpu.spec(r).run_id for r in cpu.ladder_refs}
    mini = {ci.spec(r).run_id for r in ci.ladder_refs}
    def order_ids(design):
        return {cpu.spec(r).run_id for key, o in design.items()
                for r in figure_spec(key).data_order_runs("cpu", orders=o)}

    def joint_ids(design):
        # the joint design's own runs: pair 0 is the pair at seed 0 of the one-order design
        one_order = {cpu.spec(r).run_id for key in design
                     for r in figure_spec(key).runs("cpu", seeds.DEFAULT_SEEDS, joint=False)}
        return {cpu.spec(r).run_id for key, pairs in design.items()
                for r in figure_spec(key).joint_runs("cpu", pairs)} - one_order

    # the designs the book reads, and those declared for figures that do not read them yet
    orders, joint = order_ids(seeds.DATA_ORDERS["cpu"]), joint_ids(seeds.JOINT["cpu"])
    pending = (order_ids({k: o for k, o in seeds.DATA_ORDERS_DECLARED["cpu"].items()
                          if k not in seeds.DATA_ORDERS["cpu"]})
               | joint_ids({k: n for k, n in seeds.JOINT_DECLARED["cpu"].items()
                            if k not in seeds.JOINT["cpu"]})) - book - orders - joint
    recorded = {p.name for p in (REPO / "book" / "recorded").iterdir()
                if (p / "record.json").is_file()}
    assert len(book) == len(cpu.runs), "every run of the default book has its own run id"
    assert book | ladder | mini <= recorded, "the README says every one of these is recorded"
    return {"book": len(cpu.runs), "with ladder": len(book | ladder), "ladder": len(ladder),
            "ladder in book": len(ladder & book), "ci ladder": len(mini),
            "data orders": len(orders), "data orders in book": len(orders & book),
            "joint": len(joint), "joint in book": len(joint & book), "recorded": len(recorded),
            "pending": len(pending),
            "other records": len(recorded - book - ladder - mini - orders - pending)}


def cluster_table() -> dict[str, dict[str, str]]:
    """``benchmarks/cluster_wall_time.md``'s rows by their first cell: what the README's
    core-hours come from (``benchmarks/cluster_wall_time.py`` writes it from the records)."""
    lines = (REPO / "benchmarks" / "cluster_wall_time.md").read_text().splitlines()
    head = next(line for line in lines if line.startswith("| what |"))
    cols = [c.strip() for c in head.strip("|").split("|")]
    return {cells[0]: dict(zip(cols, cells)) for line in lines if line.startswith("| `")
            for cells in [[c.strip() for c in line.strip("|").split("|")]]}


def hours(cell: str) -> float:
    value, unit = cell.split()
    return float(value) if unit == "h" else float(value) / 60


def total_problems(docs: dict[str, str], t: dict[str, int]) -> list[str]:
    problems = []
    stated(docs, "budget", r"(\d+) runs, every one of them recorded", "the default book's runs",
           t["book"], problems)
    stated(docs, "budget", r"`--budget none` trains all (\d+)", "`--budget none`", t["book"],
           problems)
    stated(docs, "budget", r"`--train-recorded` trains the scale ladder's runs too \((\d+) runs",
           "`--train-recorded`", t["with ladder"], problems)
    stated(docs, "book", r"(\d+) new runs for the two figures", "the joint design's runs",
           t["joint"], problems)
    stated(docs, "book", r"latent-scaling and double-heads figures are declared in it too, "
           r"with their pair at seed 0 at data orders 1–4 \((\d+) new runs", "the runs declared "
           "for figures that do not read them yet", t["pending"], problems)
    stated(docs, "records", r"There are (\d+) in all: every run of the default book \((\d+),",
           "the records and the default book's runs", (t["recorded"], t["book"]), problems)
    stated(docs, "records", r"the (\d+) joint-design runs and the \d+ data-order runs",
           "the joint runs in the default book", t["joint in book"], problems)
    stated(docs, "records", r"the scale ladder \((\d+) runs of", "the scale ladder's runs",
           t["ladder"], problems)
    stated(docs, "records", r"(\d+) of them are book runs too", "ladder runs that are book runs",
           t["ladder in book"], problems)
    stated(docs, "records", r"its `ci` miniature \((\d+)\)", "the `ci` ladder's runs",
           t["ci ladder"], problems)
    stated(docs, "records", r"the (\d+) data-order runs of the curve figures among them",
           "the data-order runs declared", t["data orders"], problems)
    if t["data orders in book"] != t["data orders"]:
        problems.append(f"{HOME['records']} says the default book holds every declared data-order "
                        f"run; it holds {t['data orders in book']} of {t['data orders']}")
    stated(docs, "records", r"and (\w+) 250-step gated MLA runs the tests read",
           "the other records", t["other records"], problems)

    rows = cluster_table()
    budget_none = next(v for k, v in rows.items() if "`--budget none`" in k)
    everything = next(v for k, v in rows.items() if "`--train-recorded`" in k)
    for row, n in ((budget_none, t["book"]), (everything, t["with ladder"])):
        if int(row["runs"]) != n:
            problems.append(f"benchmarks/cluster_wall_time.md: {row['what']} has {row['runs']} "
                            f"runs, the code {n}: regenerate it")
    for pattern, row in (
            (r"trains all \d+ \(([\d.]+) core-hours as recorded, ([\d.]+) h on two cores",
             budget_none),
            (r"\(\d+ runs, ([\d.]+) core-hours, ([\d.]+) h on two cores", everything)):
        want = (hours(row["core time"]), hours(row["2 workers"]))
        found = {key: [tuple(float(g) for g in m.groups())
                       for m in re.finditer(pattern, flat(text))] for key, text in docs.items()}
        if not found["budget"] or any(got != want for said in found.values() for got in said):
            problems.append(f"core-hours of {row['what']}: the documents say "
                            f"{ {HOME[k]: v for k, v in found.items() if v} }, "
                            f"benchmarks/cluster_wall_time.md {want}")
    return problems


def test_the_docs_state_the_run_totals():
    assert total_problems(documents(), totals()) == []


# -------------------------------------------------------------------------------------------
# The notebooks' parameters cells

def notebook_parameters() -> dict[str, tuple[str, ...]]:
    """Each notebook's stem → the names its cell tagged ``parameters`` assigns."""
    out = {}
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        cells = [c for c in json.loads(path.read_text())["cells"]
                 if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(cells) == 1, f"{path.name}: {len(cells)} cells tagged parameters"
        tree = ast.parse("".join(cells[0]["source"]))
        out[path.stem] = tuple(t.id for node in tree.body if isinstance(node, ast.Assign)
                               for t in node.targets)
    return out


def parameter_problems(regen: str, actual: dict[str, tuple[str, ...]]) -> list[str]:
    """The list of ``docs/parameters.md`` (``regen``: "- `nb`, `nb`: `name`, `name` (...)")
    against the notebooks."""
    said = {}
    for item in re.findall(r"^- (.*?)(?=^- |^\s*$)", regen, re.S | re.M):
        head, _, names = item.partition(":")
        names = names.split("(")[0]  # a remark in parentheses names no parameter
        for stem in re.findall(r"`([\w-]+)`", head):
            said[stem] = tuple(re.findall(r"`(\w+)`", names))
    problems = []
    for stem in sorted(set(actual) | set(said)):
        if stem not in said:
            problems.append(f"notebooks/{stem}.ipynb: not in {HOME['parameters']}'s list")
        elif stem not in actual:
            problems.append(f"{HOME['parameters']} lists {stem}, which is no notebook")
        elif said[stem] != actual[stem]:
            problems.append(f"notebooks/{stem}.ipynb: parameters {actual[stem]}, "
                            f"{HOME['parameters']} {said[stem]}")
    return problems


def test_the_docs_list_every_notebooks_parameters():
    assert parameter_problems(documents()["parameters"], notebook_parameters()) == []


# -------------------------------------------------------------------------------------------
# Paths

#: a file name the text may give without its folder
SUFFIXES = ("py", "md", "sh", "ipynb", "json", "yml", "yaml", "toml", "txt", "cff", "csv", "html",
            "lock", "cfg")
#: paths a document names that are not meant to be in the repository: a file its how-to tells
#: the reader to create, a folder it explains the book must not have, files inside downloaded
#: archives
NOT_IN_REPOSITORY = {
    "docs/interfaces.md": {"notebooks/rope_width.ipynb", "my_attention.py", "out.ipynb",
                           "run_cards.csv"},
    "docs/environment.md": {"book/_static/", "manifest.json", "encoder.json"},
    # the page's own example of a scheduler file that does not exist
    "docs/troubleshooting.md": {"absent.json"},
}


@lru_cache(maxsize=None)
def tracked() -> tuple[frozenset, frozenset, frozenset]:
    """The repository's files and folders (relative paths) and the names of both, from git (or
    the tree)."""
    try:
        out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split("\n")
        files = {f for f in out if f}
    except (OSError, subprocess.CalledProcessError):  # an exported tree without .git
        skip = {".git", ".venv", "data_cache", "runs", ".cache", "_build", "generated"}
        files = {str(p.relative_to(REPO)) for p in REPO.rglob("*")
                 if p.is_file() and not skip & set(p.relative_to(REPO).parts)}
    folders = {str(parent) for f in files for parent in Path(f).parents if str(parent) != "."}
    names = {Path(p).name for p in files | folders}
    return frozenset(files), frozenset(folders), frozenset(names)


def ignored(paths: list[str]) -> set[str]:
    """Those of ``paths`` that git ignores: build outputs and stores (``runs/``, ``.venv/``, the
    built book), named in the text but never committed."""
    if not paths:
        return set()
    try:
        out = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=REPO,
                             input="\n".join(paths), capture_output=True, text=True)
        if out.returncode in (0, 1):  # 1: none of them is ignored
            return set(out.stdout.split("\n")) - {""}
    except OSError:
        pass
    # an exported tree without .git: the folders .gitignore names
    prefixes = [line.strip().strip("/") + "/" for line in
                (REPO / ".gitignore").read_text().splitlines() if line.strip().endswith("/")]
    return {p for p in paths if any(p.lstrip("/").startswith(x) for x in prefixes)}


def code_words(text: str) -> list[str]:
    """The words of every inline code span and fenced code block of ``text``; a span broken
    after a ``/`` at a line end is one path."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)
    rest = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)
    spans = [re.sub(r"/\s*\n\s*", "/", s) for s in re.findall(r"`([^`]+)`", rest)]
    words = []
    for chunk in spans + blocks:
        for word in chunk.split():
            word = word.strip("()[],;:'\"`").split("::")[0].rstrip(".")
            words.append(word)
    return words


def named_paths(text: str) -> list[str]:
    """The words of ``text``'s code that name a repository path: a path whose first folder is a
    top-level entry of the repository, or a file name with a known suffix. Placeholders
    (``<run_id>``, ``$(date)``, ``RUN_ID``), URLs, absolute and home paths and options are not."""
    files = tracked()[0]
    top = {f.split("/")[0] for f in files}
    out = []
    for word in code_words(text):
        if (not word or "://" in word or word.startswith(("/", "~", "-", "..."))
                or any(c in word for c in "$<>*{}|=@")
                or re.fullmatch(r"\.\w+", word)
                or any(re.fullmatch(r"[A-Z][A-Z_0-9]+", part) for part in word.split("/"))):
            continue
        first = word.split("/")[0]
        has_suffix = re.search(rf"\.(?:{'|'.join(SUFFIXES)})$", word) is not None
        if ("/" in word.rstrip("/") or word.endswith("/")) and first in top or has_suffix:
            out.append(word)
    return list(dict.fromkeys(out))


def path_problems(text: str, where: Path) -> list[str]:
    """Paths named in ``text`` (the content of ``where``) that are not in the repository."""
    files, folders, names = tracked()
    paths = named_paths(text)
    skip = ignored(paths) | NOT_IN_REPOSITORY.get(str(where.relative_to(REPO)), set())
    problems = []
    for p in paths:
        if p in skip:
            continue
        bare = p.rstrip("/")
        if "/" not in bare:
            if bare not in names:
                problems.append(p)
            continue
        here = (where.parent / bare).resolve()
        candidates = {bare, str(here.relative_to(REPO)) if here.is_relative_to(REPO) else bare}
        if not candidates & (files | folders) and not any(
                (REPO / c).exists() for c in candidates):  # a file not committed yet counts
            problems.append(p)
    return problems


def test_every_path_the_readme_names_exists():
    assert path_problems(readme(), README) == []


@pytest.mark.parametrize("doc", sorted(p.name for p in (REPO / "docs").iterdir() if p.suffix == ".md"))
def test_every_path_a_doc_names_exists(doc):
    path = REPO / "docs" / doc
    assert path_problems(path.read_text(), path) == []


# -------------------------------------------------------------------------------------------
# The README's first screen and the index of docs/

#: the README is read in two minutes: what gtalib is, the book's answer, the two commands, the
#: verdicts and where to go next; the reference is in docs/
README_LINES = 150


def test_the_readme_is_one_screen_that_points_to_the_docs_index():
    text = readme()
    assert len(text.splitlines()) <= README_LINES
    assert "`docs/README.md`" in text
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert images and all((REPO / image).is_file() for image in images), images


def test_the_docs_index_names_every_document():
    index = (REPO / "docs" / "README.md").read_text()
    named = set(re.findall(r"`docs/([\w.-]+\.md)`", index))
    documents = {p.name for p in (REPO / "docs").iterdir() if p.suffix == ".md"} - {"README.md"}
    assert named == documents


# -------------------------------------------------------------------------------------------
# The checks can fail

#: where each seed count is stated (its document's key in :data:`HOME`, and a pattern whose
#: group is the number, which a test changes)
SEED_STATEMENTS = {
    "initialisation row": ("book", r"\| Initialisation \|[^\n]*?(\d+) seed"),
    "gating row": ("book", r"\| Gating \|[^\n]*?(\d+) seed"),
    "latent-scaling row": ("book", r"\| Latent scaling \|[^\n]*?(\d+) seed"),
    "double-heads row": ("book", r"\| Double heads \|[^\n]*?(\d+) seed"),
    "main-results row": ("book", r"\| Main results \|[^\n]*?(\d+) seed"),
    "ladder row, depth and length": ("book", r"\| Scale ladder \|[^\n]*?(\d+) seed"),
    "ladder row, width": ("book", r"\| Scale ladder \|[^\n]*?against width[^\n]*?(\d+) seed"),
    "presets row, ablations": ("presets", r"\| `cpu` \(default\) \|[^\n]*?(\d+) seed pairs"),
    "presets row, main table": ("presets",
                                r"\| `cpu` \(default\) \|[^\n]*?(\d+) seeds for the main"),
    "default book, ablations": ("budget", r"(\d+) seed pairs for every variant"),
    "default book, looks": ("budget", r"two looks declared beforehand, at (\d+)"),
    "default book, main table": ("budget", r"(\d+) seeds for the main results"),
    "parameters, ablations": ("parameters", r"(\d+) pairs for each ablation figure"),
    "parameters, main table": ("parameters", r"(\d+) seeds for the main table"),
    "parameters, default": ("parameters", r"count per configuration \(default (\d+)"),
}


def bumped(docs: dict[str, str], key: str, pattern: str, by: float = 1) -> dict[str, str]:
    """``docs`` with the number of the first match of ``pattern`` (its group; a space matches any
    white space, as sentences wrap) in ``docs[key]`` made larger by ``by``."""
    text = docs[key]
    m = re.search(pattern.replace(" ", r"\s+"), text)
    assert m, f"{HOME[key]} does not match {pattern!r}"
    value = f"{float(m.group(1)) + by:.1f}" if "." in m.group(1) else str(int(m.group(1)) + by)
    return {**docs, key: text[:m.start(1)] + value + text[m.end(1):]}


@pytest.mark.parametrize("where", sorted(SEED_STATEMENTS))
def test_the_seed_check_fails_on_a_wrong_count(where):
    assert seed_problems(bumped(documents(), *SEED_STATEMENTS[where])) != []


@pytest.mark.parametrize("fact", ["book", "with ladder", "ladder", "ladder in book", "ci ladder",
                                  "data orders", "data orders in book", "joint", "joint in book", "recorded",
                                  "pending", "other records"])
def test_the_total_check_fails_on_a_wrong_total(fact):
    t = dict(totals())
    t[fact] += 1
    assert total_problems(documents(), t) != []


@pytest.mark.parametrize("pattern", [r"\(([\d.]+) core-hours as recorded",
                                     r"\(\d+ runs, ([\d.]+) core-hours"])
def test_the_total_check_fails_on_wrong_core_hours(pattern):
    assert total_problems(bumped(documents(), "budget", pattern, 0.1), totals()) != []


#: the facts the README's first screen states again (a pattern whose group is the number), which
#: the checks hold to the same values as their own documents
README_STATEMENTS = [r"(\d+) runs, every one of them recorded",
                     r"(\d+) seed pairs for every variant",
                     r"(\d+) seeds for the main results"]


@pytest.mark.parametrize("pattern", README_STATEMENTS)
def test_a_wrong_number_in_the_readme_fails_too(pattern):
    wrong = bumped(documents(), "readme", pattern)
    assert seed_problems(wrong) + total_problems(wrong, totals()) != []


def test_the_parameter_check_fails_on_a_wrong_list():
    regen, actual = documents()["parameters"], notebook_parameters()
    first = re.search(r"^- `[\w-]+`[^:]*: ", regen, re.M).group(0)
    assert parameter_problems(regen.replace(first, first + "`not_a_parameter`, ", 1),
                              actual) != []
    line = re.search(r"^- `[\w-]+`.*\n", regen, re.M).group(0)
    assert parameter_problems(regen.replace(line, "", 1), actual) != []


@pytest.mark.parametrize("text, bad", [
    ("`tests/book/\ntest_schedule_cluster.py`", ["tests/book/test_schedule_cluster.py"]),
    ("`tests/book/pipeline/test_schedule_cluster.py`", []),
    ("```bash\n.venv/bin/papermill notebooks/nothing.ipynb /tmp/x.ipynb\n```",
     ["notebooks/nothing.ipynb"]),
    ("`gtalib/book/figures.py`", ["gtalib/book/figures.py"]),
    ("`runs/<hash>/`, `book/_build/html/index.html`, `runs/RUN_ID`, `~/.config/x.yaml`", []),
    ("`spec.json` and `nothing_here.json`", ["nothing_here.json"]),
    ("`CITATION.cff`, `CITATION.txt`", ["CITATION.txt"]),
    ("`gloo/NCCL`, `true/false`, `tcp://HOST:8786`", []),
])
def test_the_path_check_can_fail(text, bad):
    assert path_problems(text, README) == bad


# -------------------------------------------------------------------------------------------
# The sample output of the budget (docs/budget.md)


def sample_output_problems(text: str) -> list[str]:
    """The sample of the job's first lines in ``docs/budget.md`` (``text``) is what :func:`budget.describe` prints for
    its own numbers, its runs trained and read add up to the default book's, and its spot-check
    count is the declared set's."""
    from types import SimpleNamespace

    from gtalib.book.design.spot_check import spot_check_refs
    from gtalib.book.pipeline import budget, calibration

    m = re.search(r"per configuration:\n\n```\n(.*?)```", text, re.S)
    if not m:
        return [f"sample output: {HOME['budget']} no longer shows it"]
    lines = m.group(1).splitlines()
    fields = re.search(
        r"calibration: (\d+) step shape\(s\) timed three times on (\d+) worker\(s\), as many at "
        r"once, "
        r"([\d.]+)–([\d.]+) s per step, a run's setup ([\d.]+) s; the reference run \(MHA\) "
        r"([\d.]+) s against ([\d.]+) s "
        r".*training (\d+) run\(s\) ≈ (\d+) min, the whole job ≈ (\d+) min"
        r".*spot-check: (\d+) run\(s\).*budget: (\d+) min; (\d+) run\(s\)", m.group(1), re.S)
    if not fields:
        return ["sample output: its lines are not those of the job:\n" + m.group(1)]
    n_shapes, workers, fastest, slowest, setup, step, recorded, n_train, train_min, job_min, \
        n_spot, budget_min, n_read = (float(x) for x in fields.groups())
    n_shapes, workers, n_train, n_spot, n_read = map(int, (n_shapes, workers, n_train, n_spot, n_read))
    where = re.search(r"prediction on (.*) \(\d+ worker", lines[1]).group(1)
    runs = [SimpleNamespace(run_id=str(i)) for i in range(n_train)]
    choice = budget.Choice([runs], [None] * n_read, {}, train_min * 60, job_min * 60,
                           budget_min * 60, workers, frozenset(r.run_id for r in runs[:n_spot]))
    per_step = [fastest, slowest] + [fastest] * (n_shapes - 2)
    cal = calibration.Calibration(step, recorded, 1e9, workers, {
        i: calibration.StepTiming("", s) for i, s in enumerate(per_step)}, setup_s=setup)
    problems = []
    if budget.describe(choice, cal, where).splitlines() != lines:
        problems.append("sample output: describe() prints other lines for these numbers:\n"
                        + budget.describe(choice, cal, where))
    plan = make_plan("cpu", seeds.DEFAULT_SEEDS)
    if n_train + n_read != len(plan.runs):
        problems.append(f"sample output: {n_train} trained + {n_read} read, the book has "
                        f"{len(plan.runs)} runs")
    if n_spot != len(spot_check_refs(plan)):
        problems.append(f"sample output: spot-check of {n_spot} runs, the declared set has "
                        f"{len(spot_check_refs(plan))}")
    return problems


def test_the_sample_output_is_what_the_job_prints():
    assert sample_output_problems(documents()["budget"]) == []


def test_a_sample_output_that_does_not_add_up_fails():
    def plus_one(pattern: str) -> str:
        return re.sub(pattern, lambda m: m.group(0).replace(m.group(1), str(int(m.group(1)) + 1)),
                      documents()["budget"], count=1)

    text = plus_one(r"(\d+) run\(s\) that would not fit")
    assert any("trained +" in p for p in sample_output_problems(text))
    text = plus_one(r"spot-check: (\d+) run\(s\)")
    assert any("spot-check of" in p for p in sample_output_problems(text))
