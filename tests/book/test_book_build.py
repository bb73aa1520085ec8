"""End to end at the ci preset: train (or reuse) the tiny run set, execute every notebook with
papermill, build the HTML with Jupyter Book and check it as CI does.

Slow (about 2-3 minutes on 2 cores the first time, ~1 minute with the runs cached in the run
store, $GTALIB_RUN_DIR or <repo>/runs): marked ``slow``; the README's test command includes it.
"""

import importlib.util
import json
import shutil
from pathlib import Path

import nbformat
import pytest

from gtalib import book

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _outputs_text(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    parts = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            parts += [str(v) for k, v in o.get("data", {}).items() if k.startswith("text/")]
            parts.append(o.get("text", ""))
    return "\n".join(parts)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The ci book built into a temporary copy of book/ (the user's book is left alone)."""
    dst = tmp_path_factory.mktemp("book") / "book"
    shutil.copytree(REPO / "book", dst, ignore=shutil.ignore_patterns("_build", "generated"))
    summary = book.build_book("ci", seeds=2, jobs=2, threads=1, book_dir=dst, log=print)
    return dst, summary


def test_ci_book_builds_and_passes_the_checks(built, tmp_path):
    dst, summary = built
    html = dst / "_build" / "html"
    spec = importlib.util.spec_from_file_location("check_book", REPO / "scripts" / "check_book.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    assert check.main(["--html-dir", str(html), "--screenshots", str(tmp_path / "shots")]) == 0
    assert json.loads((dst / "generated" / "build_summary.json").read_text())["preset"] == "ci"
    assert summary["total_s"] > 0


def test_ablation_page_reports_final_table_and_verdicts(built):
    dst, _ = built
    text = _outputs_text(dst / "generated" / "init_ablation.ipynb")
    assert "ΔL = L(normal init) − L(zero init)" in text
    assert "Incomplete" not in text
    # one verdict per variant of the ci subset (GQA, MLA)
    assert sum(text.count(v) for v in ("agrees", "differs", "within noise")) >= 2
    claims = _outputs_text(dst / "generated" / "claims.ipynb")
    assert "not measured on a GPU" in claims  # decode: measured on the CPU only, never called a GPU result


def test_missing_runs_are_reported_on_the_page(built, tmp_path):
    params = book.notebook_parameters("ci", 2, tmp_path / "empty_store")
    book.execute_notebook("init_ablation", params, tmp_path)
    text = _outputs_text(tmp_path / "init_ablation.ipynb")
    assert "Incomplete: 8 of 8 runs are missing or failed" in text
    assert "not trained yet" in text
