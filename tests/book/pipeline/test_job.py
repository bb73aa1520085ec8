"""Book machinery without training: error detection, blank-image check, notebooks' contract."""

import ast
import importlib.util
import re
from pathlib import Path

import matplotlib.image
import nbformat
import numpy as np
import pytest

from gtalib.book.chapters import shared
from gtalib.book.design.chapters import (
    ablation_notebooks,
    chapters,
    figure_notebooks,
    notebooks,
    toc_yaml,
)
from gtalib.book.design import seeds
from gtalib.book.design.figures import figure_spec
from gtalib.book.design.plan import make_plan
from gtalib.book.design.seeds import DEFAULT_SEEDS
from gtalib.book.pipeline import job as book
from gtalib.book.pipeline import paths as layout
from gtalib.book.pipeline import snippets
from gtalib.cli import build_parser

REPO = Path(__file__).resolve().parents[3]
ABLATION_NOTEBOOKS = tuple(ablation_notebooks().values())


def _load_check_book():
    spec = importlib.util.spec_from_file_location("check_book", REPO / "scripts" / "check_book.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_html_error_outputs_finds_tracebacks_and_stderr_errors(tmp_path):
    (tmp_path / "ok.html").write_text(
        '<div class="cell_output docutils container"><div class="output stderr highlight-myst-ansi'
        ' notranslate"><pre>UserWarning: deprecated</pre></div></div>')
    (tmp_path / "bad.html").write_text(
        '<div class="output traceback highlight-ipythontb notranslate"><pre>KeyError</pre></div>')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "err.html").write_text(
        '<div class="output stderr"><pre>ValueError: &lt;boom&gt;</pre></div>')
    found = book.html_error_outputs(tmp_path)
    assert found == ["bad.html: traceback output", "sub/err.html: stderr output: ValueError: <boom>"]


def test_blank_image_check(tmp_path):
    check = _load_check_book()
    matplotlib.image.imsave(tmp_path / "blank.png", np.full((50, 80, 3), 0.97))
    img = np.full((50, 80, 3), 1.0)
    img[20:30, :, :] = 0.0  # a black band: clearly not blank
    matplotlib.image.imsave(tmp_path / "plot.png", img)
    assert check.image_is_blank(tmp_path / "blank.png")
    assert not check.image_is_blank(tmp_path / "plot.png")


@pytest.mark.parametrize("name", notebooks())
def test_notebooks_hold_parameters_and_no_logic(name):
    nb = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    if name in ABLATION_NOTEBOOKS:
        assert len(params) == 1
        names = {t.id for n in ast.parse(params[0].source).body for t in n.targets}
        assert {"preset", "seeds", "max_steps", "variants", "run_dir", "train"} <= names
    setup = code[code.index(params[0]) + 1] if params else None
    for c in code:
        assert not c.outputs, f"{name}: stored outputs in the source notebook"
        if c is setup or "ablation-figure" in c.metadata.get("tags", []):
            continue  # the setup cell and the figure's plotting code are shown on purpose, and
            # tested where they are (tests/book/pipeline/test_notebook_setup.py, test_ablation.py)
        for node in ast.walk(ast.parse(c.source)):
            # narrative and parameters only: every other computation lives in gtalib, where it
            # is tested
            assert not isinstance(node, (ast.FunctionDef, ast.For, ast.While, ast.If, ast.Lambda,
                                         ast.ListComp, ast.BinOp)), f"{name}: logic in a cell"


def test_the_committed_toc_is_the_chapter_registrys():
    """book/_toc.yml is the registry's (the job rewrites it; this keeps the committed copy
    equal), every chapter's file exists and every notebook is a chapter."""
    assert (REPO / "book" / "_toc.yml").read_text() == toc_yaml()
    for c in chapters():
        path = REPO / ("notebooks" if c.notebook else "book") / f"{c.stem}.{'ipynb' if c.notebook else 'md'}"
        assert path.is_file(), path
    assert sorted(notebooks()) == sorted(p.stem for p in (REPO / "notebooks").glob("*.ipynb"))


def test_cli_registers_book():
    from gtalib.cli import build_parser

    args = build_parser().parse_args(["book", "--preset", "ci", "--seeds", "3", "--jobs", "2"])
    assert (args.preset, args.seeds, args.jobs, args.no_train) == ("ci", 3, 2, False)
    from gtalib.cli import book as book_cli

    assert args.func is book_cli._run_cli


def test_build_book_rejects_bad_input():
    with pytest.raises(KeyError, match="allowed"):
        book.build_book(preset="laptop")
    with pytest.raises(ValueError, match="seeds"):
        book.build_book(preset="ci", seeds=0)
    # checked before anything is built or run (no notebook starts with a bad value)
    for kw, needle in ((dict(jobs=0), "jobs (--jobs) must be a positive integer or None, got 0"),
                       (dict(threads=0), "threads (--threads) must be a positive integer or None"),
                       (dict(max_steps=-5), "max_steps (--max-steps) must be a positive integer or None"),
                       (dict(seeds=True), "seeds (--seeds) must be a positive integer, got True")):
        with pytest.raises(ValueError, match=re.escape(needle)):
            book.build_book(preset="ci", **kw)


def test_check_book_fails_on_a_broken_book(tmp_path):
    """The checker must fail on missing pages, a missing or blank figure, an error output and
    MathJax from the network (and pass once they are fixed)."""
    check = _load_check_book()
    html = tmp_path / "html"
    (html / "generated").mkdir(parents=True)
    (html / "_static" / "mathjax").mkdir(parents=True)
    (html / "_static" / "mathjax" / "tex-chtml.js").write_text("")
    img = np.full((40, 60, 3), 1.0)
    img[10:20] = 0.0
    matplotlib.image.imsave(html / "generated" / "fig.png", img)
    for name in (*check.PROSE_PAGES, *notebooks()):
        page = check.page_path(html, name)
        page.write_text('<img alt="" src="fig.png" />' if name in figure_notebooks() else "ok")
    assert check.check_static(html) == []

    (html / "generated" / "claims.html").unlink()
    matplotlib.image.imsave(html / "generated" / "fig.png", np.full((40, 60, 3), 1.0))
    (html / "methods.html").write_text(
        '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"></script>'
        '<div class="output traceback"><pre>boom</pre></div>')
    problems = check.check_static(html)
    assert any("missing page" in p and "claims.html" in p for p in problems)
    assert sum("is blank" in p for p in problems) == len(figure_notebooks())
    assert "error output: methods.html: traceback output" in problems
    assert "methods.html: loads MathJax from the network" in problems


def test_table_claims_are_computed_from_the_package():
    from gtalib.book.chapters import claims

    ours, verdict, short = claims._table_claim(1)
    # docs/variants.md: MLRA-4 4.5 / 2.5 / 1.5 / 1.5 d_h at TP 1/2/4/8; MLA 4.5 at every degree
    assert ours.startswith("MLRA-4 4.5 / 2.5 / 1.5 / 1.5 dₕ") and verdict == "agrees"
    assert short == "MLRA-4 1.5/1.5 dₕ at TP 4/8, MLA 4.5/4.5"
    ours, verdict, short = claims._table_claim(2)
    assert ours.startswith("2.8720–2.8732 B") and verdict == "agrees"
    assert short.startswith("2.872–2.873 B")


def test_machine_paths_finds_build_folders_in_pages_and_sources(tmp_path):
    html = tmp_path / "html"
    (html / "_sources" / "generated").mkdir(parents=True)
    (html / "_static" / "mathjax").mkdir(parents=True)
    (html / "ok.html").write_text("<p>run store: runs (default); /tmpfile is not a folder</p>")
    (html / "page.html").write_text('<td><code>/home/someone/gtalib/runs/abc</code></td>')
    (html / "_sources" / "generated" / "x.ipynb").write_text('{"run_dir": "/scratch/t1"}')
    (html / "_static" / "mathjax" / "tex.js").write_text("/scratch/t1")  # vendored: not ours
    (html / "fig.png").write_bytes(b"/scratch/t1")  # binary files are not pages
    found = book.machine_paths(html, ["/home/someone", "/scratch/t1", "/tmp", "/nowhere/"])
    assert found == ["_sources/generated/x.ipynb: /scratch/t1", "page.html: /home/someone"]
    folders = [str(f) for f in book.build_machine_folders(tmp_path / "runs", tmp_path / "book")]
    assert str(REPO) in folders and str(Path.home()) in folders and str(tmp_path / "runs") in folders


@pytest.fixture()
def untimed(monkeypatch):
    """No step or setup is timed: a synthetic data identity has no corpus to train a setup run
    on, and these tests are about which runs the job chooses."""
    from gtalib.book.pipeline import calibration

    monkeypatch.setattr(calibration, "time_steps", lambda *a, **k: 0.01)
    monkeypatch.setattr(calibration, "time_setup", lambda *a, **k: 0.2)
    monkeypatch.setattr(calibration, "calibrate_workers", lambda client, specs, *a, **k: (
        dict.fromkeys(specs, 0.01), 0.2, 2))


def test_the_job_reads_recorded_runs_that_do_not_fit_its_budget(tmp_path, monkeypatch, untimed):
    """A task (both arms of a pair) whose runs the repository holds is read from its bundles
    when the budget has no room for it; one with a run that has no record is trained whatever
    the budget; ``budget_min=None`` trains every run of the book, ``train_recorded=True`` the
    ladder's too."""

    import synthetic

    from gtalib.book.design import run_specs as specs
    from gtalib.book.pipeline import budget
    from gtalib.training import records

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    monkeypatch.setattr(book, "ensure_corpus", lambda plan, log=print: None)
    monkeypatch.setattr(book, "execute_notebooks", lambda *a, **k: [])  # every chapter's runs
    trained = []

    def train_all(specs, *a, report=None, **k):  # its deadline dropped 3 runs, took 1 back
        trained.append({s.run_id for _, s in specs})
        if k.get("deadline") is not None:
            report.update(dropped=3, taken_back=1, read=2)
        return []

    monkeypatch.setattr(book, "train_all", train_all)
    plan = make_plan("ci", 1)
    refs = synthetic.write_store(tmp_path / "store", "ci", 1)
    rec_dir = tmp_path / "recorded"
    every_spec = [s for _, s in plan.specs()]
    tasks = budget.groups(every_spec)
    recorded = {s.run_id for g in tasks[:2] for s in g}  # two whole tasks recorded ...
    recorded.add(tasks[2][0].run_id)  # ... and one arm of a third
    for rid in recorded:
        (tmp_path / "store" / rid / "card.json").write_text(
            '{"threads": 1, "device": "cpu", "wall_time_s": 1.0, "train_wall_s": 1.0}')
        records.record_run(tmp_path / "store" / rid, rec_dir)
    monkeypatch.setenv("GTALIB_RECORD_DIR", str(rec_dir))
    every = {s.run_id for s in every_spec}
    ladder = {s.run_id for _, s in plan.specs(plan.ladder_refs)}
    read_whole = {s.run_id for g in tasks[:2] for s in g}
    for budget_min, train_recorded, expected in (
            (1e-6, False, every - read_whole),  # the half-recorded task is trained whole
            (None, False, every), (1e-6, True, every | ladder)):
        trained.clear()
        lines = []
        book.build_book("ci", 1, run_dir=tmp_path / "empty", html=False,
                        train_recorded=train_recorded, book_dir=tmp_path / "book",
                        budget_min=budget_min, log=lines.append)
        assert trained == [expected]
        text = "\n".join(lines)
        assert "calibration: " in text and "prediction on this machine" in text
        # the job's last lines say what the deadline dropped and took back, and the time left
        said = [ln for ln in lines if ln.startswith("deadline: ")]
        if budget_min is None or train_recorded:  # no budget: no deadline
            assert said == []
        else:
            [line] = said
            assert line.startswith("deadline: 3 run(s) dropped for pace, 1 of them taken back "
                                   "when they fit again; ")
            assert line.endswith("minutes over the budget's 1e-06")
        if train_recorded:  # each run once, though the ladder shares some with the figures
            assert f"runs: {len(every | ladder)} with the ladder's, 0 in " in text
    with pytest.raises(ValueError, match="--budget"):
        book.build_book("ci", 1, budget_min=0)
    # without training, the job says how many runs are local, recorded and missing
    lines = []
    book.build_book("ci", 1, run_dir=tmp_path / "empty", html=False, train=False,
                    book_dir=tmp_path / "book", log=lines.append)
    assert (f"runs: {len(every)} needed, 0 in {tmp_path / 'empty'}, {len(recorded)} recorded, "
            f"{len(every) - len(recorded)} missing") in "\n".join(lines)
    with pytest.raises(ValueError, match="--train-recorded.*--no-train"):
        book.build_book("ci", 1, train=False, train_recorded=True)
    # --only on a book never built whole: no HTML (its links to the other pages cannot
    # resolve, and the -W build would fail after the notebooks ran), one line says why
    monkeypatch.setattr(book, "build_html", lambda *a, **k: pytest.fail("HTML built"))
    lines = []
    book.build_book("ci", 1, run_dir=tmp_path / "empty", train=False, notebooks=["kv_cache"],
                    book_dir=tmp_path / "fresh", log=lines.append)
    assert any(ln.startswith("html: not built: ") and "init_ablation" in ln for ln in lines)
    # the reproduction page's run cards read a recorded run's card from its bundle
    info = snippets.build_info_markdown({"preset": "ci", "seeds": 1, "max_steps": None, "jobs": 1},
                                        plan, tmp_path / "empty")
    info = re.sub(r" {2,}", " ", info)  # the table's cell padding (DataFrame.to_markdown)
    rows = {ln.split(" | ")[0].strip("| "): ln for ln in info.splitlines() if ln.startswith("| ")}
    for ref in refs:
        rid = specs.run_spec(ref, "ci", None, synthetic.synthetic_identity("ci")).run_id
        order = dict(ref.train).get("data_seed")  # a data-order run has a row of its own
        label = ref.label if order is None else f"{ref.label} (data order {order})"
        assert ("| recorded |" if rid in recorded else "| missing |") in rows[label]


def test_only_trains_the_runs_its_notebooks_read(tmp_path, monkeypatch, untimed):
    """``--only init_ablation`` trains the initialisation figure's runs and nothing else;
    ``--only kv_cache`` (a page that reads no runs) trains none."""
    import synthetic

    from gtalib.book.design import run_specs as specs

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    monkeypatch.setattr(book, "ensure_corpus", lambda plan, log=print: None)
    monkeypatch.setattr(book, "execute_notebooks", lambda *a, **k: [])
    trained = []
    monkeypatch.setattr(book, "train_all", lambda specs, *a, **k: trained.append(
        {s.run_id for _, s in specs}) or [])
    plan = make_plan("ci", 2)
    init = {plan.spec(r).run_id for r in (*plan.figure_refs["init"],
                                          *plan.one_order_refs["init"],
                                          *plan.data_order_refs["init"])}
    for only, expected in ((("init_ablation",), init), (("kv_cache",), set())):
        trained.clear()
        book.build_book("ci", 2, run_dir=tmp_path / "empty", notebooks=only, html=False,
                        book_dir=tmp_path / "book", budget_min=None, log=lambda _: None)
        assert trained == [expected]
    # 2 variants x 2 arms x (2 joint pairs + 1 more one-order pair + 2 more data orders of seed 0)
    assert len(init) == 8 + 4 + 8


def test_the_pages_of_a_build_read_one_computation_of_each_figure(tmp_path, monkeypatch):
    """Before the pages run, the job computes each ablation figure's result once into a folder
    private to the build, named to the kernels by ENV_SHARED_RESULTS; the snippets read the same
    (nothing collects runs after the pages); the folder is gone after the build."""
    import os

    import synthetic

    from gtalib.book.chapters import ablation
    from gtalib.book.design import run_specs as specs

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    monkeypatch.setattr(book, "ensure_corpus", lambda plan, log=print: None)
    seen = {}

    def pages(*a, **k):
        folder = os.environ[shared.ENV_SHARED_RESULTS]
        seen["folder"], seen["files"] = folder, sorted(p.name.split("-")[0]
                                                        for p in Path(folder).iterdir())
        return []

    monkeypatch.setattr(book, "execute_notebooks", pages)
    collected = []
    real = ablation.collect_runs
    monkeypatch.setattr(ablation, "collect_runs", lambda *a, **k: collected.append(1)
                        or real(*a, **k))
    book.build_book("ci", 2, run_dir=tmp_path / "store", train=False, html=False,
                    book_dir=tmp_path / "book", log=lambda _: None)
    assert seen["files"] == sorted(ablation.ABLATIONS)  # one result per figure, before the pages
    # and the snippets computed none again (a joint-design figure also reads its one-order pairs)
    joint = sum(figure_spec(key).reads_joint("ci") for key in ablation.ABLATIONS)
    assert joint and len(collected) == len(ablation.ABLATIONS) + joint
    assert not Path(seen["folder"]).exists() and shared.ENV_SHARED_RESULTS not in os.environ


def test_pages_say_which_runs_are_recorded(tmp_path):
    """A page's provenance: one row per source, date and machine with its run count (a local
    run dated by its card), the configurations and seeds of each row in a closed dropdown, and
    a lead line counting the runs and the mixed pairs."""
    import json

    import pandas as pd

    from gtalib.book.analysis.collect import (
        STATUS_COLUMNS,
        Collected,
        provenance_html,
        provenance_table,
        seeds_words,
        sources_notice,
    )

    rec = "recorded 2026-11-30 on AMD EPYC (2 logical CPUs)"
    status = pd.DataFrame({
        "variant": ["mha", "mha", "mqa", "mlra-4", "gqa"], "arm": "main",
        "label": ["MHA zero init", "MHA zero init", "MQA zero init", "MLRA-4 + gate", "GQA x"],
        "seed": [0, 1, 0, 0, 0], "n_layer": 2, "max_steps": 10, "run_id": list("abcde"),
        "state": ["done", "done", "done", "done", "missing"],
        "detail": [""] * 5, "source": [rec, rec, "local", rec, "local"],
        "device": "AMD EPYC (2 logical CPUs)", "machine_kind": None,
        "kinds": [[]] * 5, "record_check": [None] * 5})[STATUS_COLUMNS]

    def notice(st):
        return sources_notice(Collected(pd.DataFrame(), st))

    assert notice(status) == ("**Where these runs come from:** 4 complete runs, 1 of them "
                              "trained in the local run store.")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "card.json").write_text(json.dumps({"finished_utc": "2026-12-04T23:34:58"}))
    collected = Collected(pd.DataFrame(), status, run_dir=tmp_path)
    table = provenance_table(collected)
    assert table[["source", "date", "machine", "runs"]].values.tolist() == [
        ["recorded", "2026-11-30", "AMD EPYC (2 logical CPUs)", 3],
        ["trained here", "2026-12-04", "AMD EPYC (2 logical CPUs)", 1]]
    assert table["configurations"][0] == {"MHA zero init": [0, 1], "MLRA-4 + gate": [0]}
    page = provenance_html(collected)
    assert "<details" in page and "<details open" not in page  # closed
    assert "MHA zero init (seeds 0–1); MLRA-4 + gate (seed 0)" in page
    assert page.index("<table") < page.index("<details")
    assert seeds_words([0, 1, 2, 5, 7, 8]) == "seeds 0–2, 5, 7–8" and seeds_words([3]) == "seed 3"
    assert notice(status[status["state"] == "missing"]) == "**No complete run.**"
    # an ablation page also counts its pairs, and names the mixed ones
    paired = status.iloc[:2].assign(variant="mha", arm=["alt", "rec"], seed=0)
    assert notice(paired).endswith(
        " ΔL pairs (both arms of one seed): 1, of which **0 mixed** (arms from different sources "
        "or machines, not paired as the figure assumes); 1 with an arm whose run card names no "
        "machine kind.")
    kind = {"cpu_family": "25"}
    known = paired.assign(machine_kind=[kind, kind], kinds=[[kind], [kind]])
    assert notice(known).endswith("not paired as the figure assumes).")
    mixed = paired.assign(source=[rec, "local"])
    assert notice(mixed).endswith(
        "of which **1 mixed** (arms from different sources or machines, not paired as the figure "
        "assumes): MHA alt seed 0 (2 layers, 10 steps) (*pair source* under the table above).")


def test_every_pair_of_the_default_book_is_recorded_whole_or_not_at_all():
    """Pairs come from one machine: at the default preset and seed count, both arms of every ΔL
    pair are bundles in the repository with the numbers of one machine kind (trained on it, or
    re-trained there bit for bit: records.bit_identical_kinds), or neither arm is (then the job
    trains both locally). A pair with one recorded arm would mix CPU kinds on any machine other
    than the recording one."""
    from gtalib.training import records

    plan = make_plan("cpu", DEFAULT_SEEDS)
    groups = [(key, refs) for key, refs in plan.figure_refs.items() if key != "main"]
    groups += list(plan.data_order_refs.items())  # r.train holds each pair's data order
    groups.append(("ladder", plan.ladder_refs))
    pairs = {}
    for key, refs in groups:
        for r in refs:
            if r.arm == "main":  # the ladder's width axis: single runs, no ΔL pair
                continue
            depth = dict(r.options).get("n_layer")
            pairs.setdefault((key, r.variant, r.seed, depth, r.train), {})[r.arm] = r
    checked = known = 0
    for arms in pairs.values():
        folders = [records.find_record(plan.spec(r)) for r in arms.values()]
        recorded = [f for f in folders if f is not None]
        assert len(recorded) in (0, len(folders)), \
            f"pair {[r.label for r in arms.values()]}: only {len(recorded)} arm(s) recorded"
        machines = {records.load_record_info(f)["machine"]["cpu"] for f in recorded}
        assert len(machines) <= 1, f"pair {[r.label for r in arms.values()]}: arms from {machines}"
        kinds = [records.bit_identical_kinds(f) for f in recorded]
        if kinds and all(kinds):  # bundles older than machine kinds: held to the CPU name only
            common = [k for k in kinds[0] if all(k in other for other in kinds[1:])]
            assert common, f"pair {[r.label for r in arms.values()]}: no machine kind gives both"
            known += 1
        checked += bool(recorded)
    assert checked >= 20 and known >= 20  # the ladder and the default book's recorded pairs


def test_the_makefile_and_the_cli_default_to_the_same_seed_count():
    from gtalib.book.pipeline.parameters import NotebookParams

    assert NotebookParams().seeds == DEFAULT_SEEDS
    make = (Path(layout.REPO) / "Makefile").read_text()
    # the Makefile passes --seeds only when SEEDS is given, so the CLI's default is the one
    assert "SEEDS ?=\n" in make and "$(if $(SEEDS),--seeds $(SEEDS))" in make
    assert build_parser().parse_args(["book"]).seeds == DEFAULT_SEEDS


def test_predict_lists_the_runs_it_would_train_by_figure(monkeypatch):
    """--predict's list: each figure's runs among those to train (its data-order and one-order
    runs too), a run two figures read under both, the spot-check set starred, every run to
    train listed; a ladder run that a figure lists is not listed again."""
    from synthetic import synthetic_identity

    from gtalib.book.design import run_specs as specs
    from gtalib.book.design.spot_check import spot_check_refs
    from gtalib.book.pipeline.job import runs_by_figure

    monkeypatch.setattr(specs, "data_spec", synthetic_identity)
    plan = make_plan("ci", 1)
    chosen = [r for r in plan.runs if r.variant == "gqa"]
    first = {plan.spec(r).run_id for r in spot_check_refs(plan)}
    text = runs_by_figure(plan, plan.specs(chosen), first)
    lines = text.splitlines()
    ids = {plan.spec(r).run_id for r in chosen}
    assert lines[0] == f"the {len(ids)} run(s) it would train, by figure (* spot-check set):"
    for key in ("init", "gate", "double_heads", "main"):
        refs = (*plan.figure_refs[key], *plan.one_order_refs.get(key, ()),
                *plan.data_order_refs.get(key, ()))
        mine = {plan.spec(r).run_id for r in refs} & ids
        title = "Main results" if key == "main" else figure_spec(key).heading
        assert f"  {title}: {len(mine)}" in lines
    listed = [ln for ln in lines if ln.startswith("    ")]
    assert {ln.split("(")[-1].rstrip(")") for ln in listed} == ids  # every run, none else
    assert plan.data_order_refs["init"]  # ci: the init figure's data-order runs are among them
    assert {ln.split("(")[-1].rstrip(")") for ln in listed if ln.startswith("    *")} == ids & first
    assert "Latent-scaling" not in text  # GQA is not in that figure


def test_more_embedded_workers_than_cores_is_said_before_training(tmp_path, monkeypatch, untimed):
    """``--jobs`` above the cores this process may use: the job says that the workers share
    them (each run slower, as the calibration timed them) and which ``--jobs`` gives each run a
    core; at as many workers as cores it says nothing of it."""
    import synthetic

    from gtalib.book.design import run_specs as specs

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    monkeypatch.setattr(book, "usable_cores", lambda: 1)
    plan = make_plan("ci", 1)
    said = {}
    for workers in (2, 1):
        lines = []
        book.runs_to_train(plan, tmp_path / "empty", workers, 1, None, log=lines.append)
        said[workers] = [line for line in lines if line.startswith("jobs: ")]
    assert said[1] == []
    assert said[2] == ["jobs: 2 workers on 1 core(s) share them, each run slower (the calibration "
                       "timed them sharing); --jobs 1 gives each its own"]
