"""End to end at the ci preset: train (or reuse) the tiny run set, execute every notebook with
papermill, build the HTML with Jupyter Book and check it as CI does.

Slow (about 2-3 minutes on 2 cores: the runs are trained into the session's private run store,
see tests/conftest.py, never the user's): marked ``slow``; the README's test command includes it.
"""

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import nbformat
import pytest

from gtalib.book.design import chapters as registry
from gtalib.book.pipeline import execute as notebooks
from gtalib.book.pipeline import job as book

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow


def _outputs_text(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    parts = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            parts += [str(v) for k, v in o.get("data", {}).items() if k.startswith("text/")]
            parts.append(o.get("text", ""))
    return "\n".join(parts)


def _check_book():
    spec = importlib.util.spec_from_file_location("check_book", REPO / "scripts" / "check_book.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    return check


def test_ci_book_builds_and_passes_the_checks(built):
    """The static checks (the browser's are the next test, so that their skip is reported)."""
    dst, summary = built
    html = dst / "_build" / "html"
    assert _check_book().main(["--html-dir", str(html), "--no-browser"]) == 0
    assert json.loads((dst / "generated" / "build_summary.json").read_text())["preset"] == "ci"
    assert summary["total_s"] > 0


def test_every_page_passes_in_a_real_browser(built, tmp_path, real_parts_report):
    """scripts/check_book.py's browser checks (check_rendered) on every page of the built book,
    at 1400 and 390 px; skipped, with the reason, where no browser is installed (failed instead
    under ``GTALIB_REQUIRE_BROWSER=1``, as in CI, which installs one)."""
    check = _check_book()
    browser = check.chromium()
    if browser is None:
        reason = f"no browser installed ({', '.join(check.BROWSERS)}): the browser checks need one"
        real_parts_report(f"browser: test_every_page_passes_in_a_real_browser skipped: {reason}")
        if os.environ.get("GTALIB_REQUIRE_BROWSER") == "1":
            pytest.fail(f"GTALIB_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    dst, _ = built
    html = dst / "_build" / "html"
    problems = check.check_rendered(html, tmp_path / "shots", browser, check.site_url_prefix(dst),
                                    check.Repository.from_book(dst), check.SEARCH)
    assert problems == [], "\n".join(problems)
    version = subprocess.run([browser, "--version"], capture_output=True, text=True).stdout.strip()
    real_parts_report(f"browser: {len(check.site_pages(html))} pages of the ci book at "
                      f"{' and '.join(map(str, check.VIEWPORT_WIDTHS))} px in {version or browser}")


def test_the_predicted_wall_time_is_within_a_factor_of_the_measured(built):
    """The job's prediction before it trains (gtalib.book.pipeline.budget: FLOPs at the calibrated rate
    for the ci runs, none of which is recorded) against the training it then measured. A loose
    bound, since a test machine may be shared; benchmarks/budget_prediction.md records the ratio
    itself."""
    _, summary = built
    assert summary["runs_trained"] > 0 and summary["runs_read"] == 0
    ratio = summary["train_s"] / summary["predicted_train_s"]
    assert 0.2 < ratio < 5, summary


def test_ablation_page_reports_final_table_and_verdicts(built):
    dst, _ = built
    text = _outputs_text(dst / "generated" / "init_ablation.ipynb")
    # the caption's convention: glued from the figure's spec into the page's Markdown
    import html as html_lib
    import re

    page = (dst / "_build" / "html" / "generated" / "init_ablation.html").read_text()
    assert "ΔL = L(normal init) − L(zero init)" in html_lib.unescape(re.sub(r"<[^>]+>", "", page))
    assert "Incomplete" not in text
    # one verdict per variant of the ci subset (GQA, MLA)
    assert sum(text.count(v) for v in ("agrees", "differs", "within noise")) >= 2
    claims = _outputs_text(dst / "generated" / "claims.ipynb")
    assert "not measured (no GPU)" in claims  # decode: measured on the CPU only, never called a GPU result


def test_missing_runs_are_reported_on_the_page(built, tmp_path):
    params = notebooks.notebook_parameters("ci", 2, tmp_path / "empty_store")
    notebooks.execute_notebook("init_ablation", params, tmp_path)
    text = _outputs_text(tmp_path / "init_ablation.ipynb")
    assert "Incomplete: 8 of 8 runs are missing or failed" in text
    assert "not trained yet" in text


def _hrefs(page: Path) -> list[str]:
    import html as html_lib
    import re

    return [html_lib.unescape(h) for h in re.findall(r'href="([^"]+)"', page.read_text())]


def test_launch_and_download_buttons_open_files_that_exist(built):
    """Each notebook chapter: Binder and Colab open its source notebooks/<name>.ipynb, a tracked
    file of the repository named in _config.yml; the download button serves the executed
    notebook. Prose pages have no launch button."""
    import subprocess

    import yaml

    dst, _ = built
    html = dst / "_build" / "html"
    repo_cfg = yaml.safe_load((dst / "_config.yml").read_text())["repository"]
    org, name_ = repo_cfg["url"].removeprefix("https://github.com/").split("/")
    branch = repo_cfg["branch"]
    tracked = subprocess.run(["git", "ls-files", "notebooks"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout.split()
    for name in registry.notebooks():
        page = html / "generated" / f"{name}.html"
        hrefs = _hrefs(page)
        source = f"notebooks/{name}.ipynb"
        assert source in tracked
        binder = [h for h in hrefs if h.startswith("https://mybinder.org/")]
        colab = [h for h in hrefs if h.startswith("https://colab.research.google.com/")]
        assert binder == [f"https://mybinder.org/v2/gh/{org}/{name_}/{branch}"
                          f"?urlpath=lab/tree/{source}"], name
        assert colab == [f"https://colab.research.google.com/github/{org}/{name_}/blob/{branch}/"
                         f"{source}"], name
        downloads = [h for h in hrefs if h.endswith(f"_sources/generated/{name}.ipynb")]
        assert downloads, name
        executed = nbformat.read(page.parent / downloads[0], as_version=4)
        assert any(c.get("outputs") for c in executed.cells), name
    for prose in ("intro", "methods", "reproduction"):
        assert not [h for h in _hrefs(html / f"{prose}.html") if "mybinder.org" in h], prose


def test_404_page_and_paper_bibtex_are_published(built):
    """404.html links its assets under the Pages path of the configured repository (served at
    any depth); the introduction shows the paper's BibTeX."""
    import yaml

    dst, _ = built
    html = dst / "_build" / "html"
    repo_name = yaml.safe_load((dst / "_config.yml").read_text())["repository"]["url"]
    prefix = "/" + repo_name.rstrip("/").rsplit("/", 1)[1] + "/"
    not_found = (html / "404.html").read_text()
    assert "Page not found" in not_found
    assert f'href="{prefix}_static/styles/' in not_found
    assert f'href="{prefix}intro.html"' in not_found
    intro = (html / "intro.html").read_text()
    assert "highlight-bibtex" in intro and "2603.02188" in intro


def test_pages_carry_no_machine_paths_and_show_their_parameters(built):
    """No page or published source names the repository, home, temporary folders, run store or
    data cache of the build machine; each chapter shows its parameters as a small table."""
    dst, _ = built
    html = dst / "_build" / "html"
    folders = book.build_machine_folders(dst.parent / "runs", dst)  # the book's own store (conftest)
    assert book.machine_paths(html, folders) == []
    page = (html / "generated" / "gating_ablation.html").read_text()
    assert "Parameters of this page" in page and "injected-parameters" not in page
    assert "<th>train</th><td><code>False</code>" in page


def test_the_prose_numbers_are_pasted_from_the_data(built):
    """The facts (gtalib.book.chapters.prose) reach the built pages as text, in the sentences the
    template cells display, and no page shows a raw glue role."""
    import html as html_lib
    import re

    from gtalib.book.chapters import prose

    dst, _ = built
    html = dst / "_build" / "html" / "generated"
    facts = prose.facts()

    def text(stem):
        page = (html / f"{stem}.html").read_text()
        # Sphinx's smart quotes make the prose's apostrophes typographic
        return html_lib.unescape(re.sub(r"<[^>]+>", "", page)).replace("’", "'")

    gating = " ".join(text("gating_ablation").split())
    assert f"(average perplexity {facts['gate_mlra-4_rec_ppl']})" in gating
    assert (f"train {facts['gate_steps']} steps ({facts['gate_tokens']} tokens per run), "
            f"{facts['gate_factor']} times the other ablation pages' {facts['steps']}.") in gating
    init = " ".join(text("init_ablation").split())
    assert f"(final perplexity {facts['init_tpa_alt_ppl']} → {facts['init_tpa_rec_ppl']})" in init
    kv = " ".join(text("kv_cache").split())
    assert f"parameter-matched to MHA (≈ {facts['paper_matched_params']}) by the FFN width" in kv
    for stem in registry.notebooks():
        assert "glue:md" not in text(stem) and "format_map(facts)" not in text(stem), stem
