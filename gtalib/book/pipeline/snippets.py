"""The generated Markdown snippets of the methods and reproduction chapters: the presets' sizes
and training recipe, what the seed count means for the intervals, how the verdict rules compare
on this build's runs, the corpus provenance and this build's settings and run cards, written as
Markdown files into the ``book/generated/`` folder (included by
``book/methods.md`` and ``book/reproduction.md``). Reads the presets
(:mod:`gtalib.model.presets`, :mod:`gtalib.training.config`), the figures
(:mod:`gtalib.book.design.figures`), the corpus manifest (:mod:`gtalib.data`) and the run cards of the
store and of the recorded bundles (:mod:`gtalib.training.records`).
"""

from __future__ import annotations

import html
import json
import os
import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pandas as pd
import torch

from gtalib import data as gdata
from gtalib.book.analysis.curves import corpus_entropy
from gtalib.book.analysis.sequential import nominal_levels
from gtalib.book.analysis.stats import MAX_PAIRS, t_critical
from gtalib.book.analysis.style import MIN_BAND_SEEDS, and_join, md_table, plural
from gtalib.book.chapters.ablation import ablation_results
from gtalib.book.chapters.against_records import against_records, against_records_markdown
from gtalib.book.chapters.claims import claims_table
from gtalib.book.chapters.curve_features import data_order_table
from gtalib.book.chapters.curve_features import methods_markdown as curve_methods_markdown
from gtalib.book.chapters.figure_tests import prediction_table, rule_comparison
from gtalib.book.chapters.headline import data_order_verdicts, write_headline
from gtalib.book.design.chapters import chapters
from gtalib.book.design.figures import ABLATIONS, TABLES, ablation
from gtalib.book.design.plan import Plan
from gtalib.book.design.seeds import ablation_looks, counts_words, seed_counts
from gtalib.book.pipeline.paths import BOOK_DIR
from gtalib.model.presets import PRESETS, preset_tokenizer
from gtalib.training import records
from gtalib.training.config import train_config
from gtalib.training.runs import is_done, run_path


def presets_markdown() -> str:
    """Markdown table of every preset's model sizes and training settings (from the code), one
    column per preset so that it fits the text column."""
    rows = {}
    for name, p in PRESETS.items():
        t = train_config(name)
        rows[name] = {
            "layers": p["n_layer"], "d_model": p["d_model"],
            "heads × d_h": f"{p['n_head']} × {p['head_dim']}", "vocab": p["vocab_size"],
            "steps": f"{t.max_steps:,}", "tokens/run": f"{t.max_steps * t.tokens_per_step:,}",
            "peak LR": t.lr, "warmup steps": f"{t.warmup_steps:,}",
        }
    df = pd.DataFrame(rows)
    df.index.name = "preset"
    own = [f"the {fig.heading.lower()} trains {t.max_steps:,} steps "
           f"({t.max_steps * t.tokens_per_step:,} tokens per run) at `{name}`"
           for fig in ABLATIONS.values() for name, over in fig.train.items()
           for t in [train_config(name, **dict(over))]]
    note = f"\nFigures with their own training length: {'; '.join(own)}.\n" if own else ""
    return md_table(df) + "\n" + note


def recipe_markdown() -> str:
    """The training recipe sentence of the methods chapter, from the presets' training settings
    (every preset shares it; a preset that does not is named with its own values)."""

    def recipe(t):
        return (f"AdamW $\\beta = ({t.beta1}, {t.beta2})$, weight decay {t.weight_decay}, "
                f"gradient-norm clip {t.grad_clip}, linear warmup then cosine decay to "
                f"{t.min_lr_ratio}× the peak learning rate")

    by_recipe: dict[str, list[str]] = {}
    for name in PRESETS:
        by_recipe.setdefault(recipe(train_config(name)), []).append(name)
    if len(by_recipe) == 1:
        return (f"Same recipe at every preset ({next(iter(by_recipe))}); the presets change the "
                "sizes:\n")
    return ("The recipe by preset: " + "; ".join(
        f"{', '.join(f'`{n}`' for n in names)}: {r}" for r, names in by_recipe.items())
        + ". The sizes:\n")


def statistics_markdown(seeds: int, confidence: float = 0.95, preset: str | None = None,
                        max_steps=None) -> str:
    """What this build's seed count means for its intervals (methods chapter): the Student-t
    factor at ``seeds − 1`` degrees of freedom (:func:`gtalib.book.analysis.stats.t_critical`),
    whether the figures shade the interval (from :data:`gtalib.book.analysis.style.MIN_BAND_SEEDS`
    seeds), the cap of *pairs to resolve* (:data:`gtalib.book.analysis.stats.MAX_PAIRS`) and, given
    ``preset``, the figures and table that run more seeds (each spec's
    ``seeds_at``); when all of them run the same larger count, the intervals
    are those of that count."""

    q = 0.5 + confidence / 2
    cap = f"*Pairs to resolve* is sought up to {MAX_PAIRS} pairs."
    if seeds < 2:
        return (f"This build trains {plural(seeds, 'seed')} per configuration: there is no "
                f"interval, and every verdict is *undetermined (1 seed)*. {cap}\n")
    def name(key):
        if key == "main":
            return "the main-results table"
        title = ablation(key).heading.lower()
        return f"the {title.removesuffix(' ablation')} figure"

    counts = ({name(k): n for k, n in seed_counts(preset, seeds, max_steps).items()}
              if preset else {})

    def factor(n):
        t = t_critical(confidence, n - 1)
        return (f"factor is $t_{{{q:g},\\,{n - 1}}} = {t:.3g}$: an effect is resolved only when it "
                f"exceeds {t / n ** 0.5:.3g} times the standard deviation of ΔL over seeds "
                f"(before the Holm adjustment above, which asks more where a figure has "
                f"several variants)")

    one_n = set(counts.values())
    if len(one_n) == 1 and (n := one_n.pop()) > seeds:
        # every figure raises the book's count alike: the intervals are those of n seeds
        lead = (f"This build asks for {plural(seeds, 'seed')} per configuration (`--seeds`), "
                f"and at the `{preset}` preset every ablation figure and the main-results table "
                f"run {n}, every variant and both arms alike, the count fixed before the runs, "
                f"so the interval's {factor(n)}.")
    elif counts and min(counts.values()) > seeds:
        # no figure at the book's count: each group's intervals are those of its own count
        by_n = {}
        for figure, k in counts.items():
            by_n.setdefault(k, []).append(figure)
        parts = [f"{and_join(names)} {'run' if len(names) > 1 else 'runs'} {k}, so "
                 f"{'their' if len(names) > 1 else 'its'} interval's {factor(k)}"
                 for k, names in sorted(by_n.items(), reverse=True)]
        looks = ablation_looks(preset)
        lead = (f"This build asks for {plural(seeds, 'seed')} per configuration (`--seeds`); at "
                f"the `{preset}` preset " + "; ".join(parts) + ", every variant and both arms "
                "alike, the counts fixed before the runs." + (
                    f" The ablation figures are read at {looks[0]} and at {looks[-1]} pairs "
                    f"(the second look above)." if looks else ""))
        n = min(by_n)
    else:
        n = seeds
        by_n = {}
        for figure, k in counts.items():
            if k > seeds:
                by_n.setdefault(k, []).append(figure)
        more = [f"{and_join(names)} "
                f"{'run' if len(names) > 1 else 'runs'} {k} "
                f"(factor {t_critical(confidence, k - 1):.3g}: "
                f"{t_critical(confidence, k - 1) / k ** 0.5:.3g} standard deviations)"
                for k, names in sorted(by_n.items())]
        lead = (f"This build trains {plural(seeds, 'seed')} per configuration, so the interval's "
                f"{factor(seeds)}." + ("" if not more else
                " A figure may run more seeds than this, every variant and both arms alike and "
                "the count fixed before its runs: " + "; ".join(more) + "."))
    shade = f"The figures shade the interval from {plural(MIN_BAND_SEEDS, 'seed')} on, " + (
        "as here." if n >= MIN_BAND_SEEDS else
        f"so this build's figures do not: at {n} the factor makes it wider than the curves.")
    return f"{lead} {shade} {cap}\n"


def methods_summary_markdown(preset: str = "cpu", seeds: int = 3) -> str:
    """The methods chapter's opening summary, one screen: this build's model and training
    length (:data:`gtalib.model.presets.PRESETS`), its seed counts and looks
    (each spec's ``seeds_at``, :func:`gtalib.book.design.seeds.ablation_looks`), and
    the verdict rule with its levels (:func:`gtalib.book.analysis.sequential.nominal_levels`)."""
    p, t = PRESETS[preset], train_config(preset)
    own = [f"{a.heading.lower()} {train_config(preset, **dict(a.train[preset])).max_steps:,}"
           for a in ABLATIONS.values() if preset in a.train]
    n_fig = {a.seeds_at(preset, seeds) for a in ABLATIONS.values()}
    looks = ablation_looks(preset)
    read = (f", read at {looks[0]} and at {looks[-1]} pairs (two looks declared beforehand, "
            f"nominal levels {' and '.join(f'{x:.4f}' for x in nominal_levels(looks))})"
            if len(looks) == 2 else "")
    return "\n".join([
        f"- **Models** (this build, preset `{preset}`): every variant is the same pre-norm decoder "
        f"of {p['n_layer']} layers, d_model {p['d_model']}, {p['n_head']} heads of "
        f"{p['head_dim']}, vocabulary {p['vocab_size']}, parameter-matched to MHA by the FFN "
        f"width alone; only the attention differs (the table below).",
        f"- **Training**: {t.max_steps:,} steps ({t.max_steps * t.tokens_per_step:,} tokens per "
        f"run)" + (f"; the {'; the '.join(own)} steps" if own else "") + "; AdamW with warmup "
        "and cosine decay, on a real-text corpus built from pinned archives.",
        f"- **Pairs**: ΔL = L(alternative) − L(recommended) from two runs with the same seed and "
        f"batches; {and_join(sorted(map(str, n_fig)))} seed pairs per ablation variant{read}; "
        f"{TABLES['main'].seeds_at(preset, seeds)} seeds per main-table configuration.",
        "- **Verdict rule**: per variant, the paired t-test of ΔL = 0, Holm-adjusted across the "
        "figure's variants at 5 %: *agrees* / *differs* when resolved with the paper's / the "
        "opposite sign, else *within noise* (with the |ΔL| that could hide). A claim over "
        "several variants is *mixed* when their verdicts differ.",
        ""])


def rule_comparison_markdown(results: dict) -> str:
    """The methods chapter's comparison of verdict rules on this build's runs: every ablation
    variant whose verdict under the seed-spread rule differs from its verdict here
    (:func:`gtalib.book.chapters.figure_tests.rule_comparison`; ``results``: key → ablation result,
    :func:`gtalib.book.chapters.ablation.ablation_results`)."""
    tables = [rule_comparison(r) for r in results.values()]
    moved = pd.concat([t for t in tables if not t.empty] or [pd.DataFrame()])
    if moved.empty:
        return ("On this build's runs no ablation verdict would differ under the seed-spread "
                "rule.\n")
    return (f"On this build's runs, {len(moved)} ablation verdict(s) would differ under the "
            f"seed-spread rule (*within noise* unless the unadjusted interval excludes zero and "
            f"|ΔL| exceeds the max − min of one arm's final loss over seeds):\n\n"
            + md_table(moved.set_index("figure")) + "\n")


def second_look_markdown(results: dict) -> str:
    """The methods chapter's check of the first look's prediction by the second
    (:func:`gtalib.book.chapters.figure_tests.prediction_table`), with the count that held."""
    table = prediction_table(results)
    if table.empty:
        return ("No ablation figure of this build is read in two looks (only the `cpu` "
                "preset's are, at its own seed counts and lengths).\n")
    judged = table[table["held"] != "—"]
    held = int((judged["held"] == "yes").sum())
    n1, n2 = (int(c.split()[-1]) for c in table.columns[2:4])
    return (f"Per variant, the pairs that its first {n1} pairs' mean and spread predicted it "
            f"would need to be decided at the final look's level (Holm's threshold for its rank "
            f"there), its verdict at {n2} pairs, and whether the prediction held (predicted "
            f"≤ {n2} exactly when it was decided by {n2}): it held for {held} of "
            f"{len(judged)} variants with a prediction.\n\n"
            + md_table(table.set_index("figure")) + "\n")


def intro_markdown() -> str:
    """The introduction's list of what the book shows: one bullet per chapter with a title
    (:func:`gtalib.book.design.chapters.chapters`, in book order), the ablation chapters sharing
    one bullet that says how their ΔL figures are drawn (the band's smallest seed count and the
    t factor below it from :data:`~gtalib.book.analysis.style.MIN_BAND_SEEDS`)."""
    listed = [c for c in chapters() if c.title]
    ablations = [c for c in listed if set(c.reads) and set(c.reads) <= set(ABLATIONS)]
    t_below = t_critical(0.95, MIN_BAND_SEEDS - 2)
    out = []
    for c in listed:
        if c not in ablations:
            out.append(f"- **{c.title}**: {c.summary}.")
        elif c is ablations[0]:
            out.append(
                f"- **Ablations** (one chapter each): {and_join(a.summary for a in ablations)}, "
                f"as loss differences $\\Delta L$ between paired runs: every seed's curve, their "
                f"mean, and a light band for the 95 % Student-t interval of the mean at each "
                f"step, drawn only from {MIN_BAND_SEEDS} seeds up (with {MIN_BAND_SEEDS - 1} "
                f"seeds the t factor is {t_below:.1f} and the band would be wider than the "
                f"curves' whole range); the paper's curves beside them and a verdict per variant "
                f"(the rule is in the methods chapter).")
    return "\n".join(out) + "\n"


def short_hash(value, n: int = 12) -> str:
    """A hash shown by its first ``n`` characters with the full value in a tooltip (inline HTML
    for the Markdown snippets); empty for a missing value."""
    value = str(value or "")
    if len(value) <= n:
        return f"<code>{html.escape(value)}</code>" if value else ""
    return f'<code title="{html.escape(value)}">{html.escape(value[:n])}…</code>'


def provenance_markdown(preset: str) -> str:
    """The provenance of the preset's corpus for the methods chapter, from its ``manifest.json``
    (:mod:`gtalib.data.build`; the same facts as its ``PROVENANCE.md``): the split rule, then two
    tables that fit the text column, the archives (sha256 shortened, full value in a tooltip)
    and the split sizes per source."""


    folder = gdata.corpus_dir("default", preset_tokenizer(preset))
    if not (folder / "manifest.json").exists():
        return f"*(corpus not built: run `gtalib data build` for the {preset} preset)*\n"
    m = gdata.load_manifest(folder)
    tok, sources = m["tokenizer"], m["sources"]
    archives = pd.DataFrame([{
        "source": s["name"], "package": s.get("package"), "version": s.get("version"),
        "sha256": short_hash(s.get("sha256")), "licence (as stated)": s.get("licence"),
    } for s in sources]).set_index("source")
    sizes = pd.DataFrame([{
        "source": s["name"], "duplicates dropped": s["duplicates_dropped"],
        "train docs": f"{s['train']['documents']:,}", "train tokens": f"{s['train']['tokens']:,}",
        "val docs": f"{s['val']['documents']:,}", "val tokens": f"{s['val']['tokens']:,}",
        "unigram entropy (nats)": f"{s['train']['unigram_entropy_nats']:.4f}",
    } for s in sources]).set_index("source")
    n_tr = sum(s["train"]["tokens"] for s in sources)
    n_va = sum(s["val"]["tokens"] for s in sources)
    return "\n".join([
        f"**Corpus `{m['corpus']}`, tokenizer `{tok['name']}`** (vocabulary {tok['vocab_size']}, "
        f"end-of-text id {tok['eot']}). Split rule: {m['split_rule']}.", "",
        "Archives (sha256 of each archive, shortened; hover for the full value):", "",
        md_table(archives), "",
        "Documents and tokens per split (entropy of the training split):", "",
        md_table(sizes), "",
        f"Total: {n_tr:,} training tokens, {n_va:,} validation tokens; unigram entropy of the "
        f"training split {m['train_unigram_entropy_nats']:.4f} nats/token.", ""])


def build_info_markdown(summary: dict, plan: Plan, run_dir: Path,
                        csv_path: Path | None = None) -> str:
    """This build's settings, environment and the run cards of its runs: values every run
    shares (source, device, threads, git commit) stated once, then, in a closed dropdown, one
    row per configuration with each seed's run id (shortened, full value in a tooltip) and the
    mean wall time and throughput. A run the store lacks is described by its recorded bundle's
    card (source ``recorded``), if the repository holds one. With ``csv_path``, every run's
    card (one row per run, full run ids) is also written there as CSV, for the page's download
    link."""
    def ver(pkg):
        try:
            return version(pkg)
        except PackageNotFoundError:
            return "not installed"

    pkgs = ("torch", "lightning", "numpy", "pandas", "matplotlib", "seaborn", "papermill",
            "jupyter-book", "triton")

    words = counts_words(plan.preset, plan.seeds, plan.max_steps)
    seeds = plural(plan.seeds, "seed") + ("" if words is None else f" asked ({words})")
    length = ("each chapter's own training length" if plan.max_steps is None
              else f"every run {plan.max_steps:,} steps (`--max-steps`)")
    lines = [
        f"- preset `{summary['preset']}`, {seeds}, {length}, "
        f"{plural(summary['jobs'], 'training job')}",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPU(s), Python "
        f"{platform.python_version()}, torch {torch.__version__}",
        "- versions: " + ", ".join(f"{p} {ver(p)}" for p in pkgs),
        "- time of this build: " + ", ".join(
            f"{k[:-2]} {v:.0f} s" for k, v in summary.items() if k.endswith("_s")),
    ]
    rows = []
    for ref in plan.runs:
        spec = plan.spec(ref)
        card, source = run_dir / spec.run_id / "card.json", "trained here"
        if not card.exists():  # read from the repository's bundle, if recorded
            record = records.find_record(spec)
            card, source = ((record / "card.json", "recorded") if record is not None
                            else (card, "missing"))
        c = json.loads(card.read_text()) if card.exists() else {}
        # a figure with its own length shares labels with the other figures' runs, and a
        # data-order run its configuration and seed with the figure's own
        own = dict(ref.train)
        extra = ([f"{spec.train.max_steps:,} steps"] if "max_steps" in own else []) + (
            [f"data order {own['data_seed']}"] if "data_seed" in own else [])
        label = f"{ref.label} ({', '.join(extra)})" if extra else ref.label
        rows.append({"configuration": label, "seed": ref.seed, "run": spec.run_id,
                     "source": source,
                     "device": c.get("device", "missing"), "threads": c.get("threads", ""),
                     "git": str(c.get("git_commit") or "")[:12],
                     "wall s": c.get("wall_time_s"), "tokens/s": c.get("tokens_per_s")})
    runs = pd.DataFrame(rows, columns=["configuration", "seed", "run", "source", "device",
                                       "threads", "git", "wall s", "tokens/s"])
    for k in ("wall s", "tokens/s"):
        runs[k] = pd.to_numeric(runs[k], errors="coerce")
    if csv_path is not None:
        runs.to_csv(csv_path, index=False)
    shared = {k: runs[k].iloc[0] for k in ("source", "device", "threads", "git")
              if runs[k].nunique() == 1}
    if any(str(v) for v in shared.values()):
        lines.append("- every run: " + ", ".join(f"{k} `{v}`" for k, v in shared.items()
                                                 if str(v)))
    # a configuration without a run at some seed (the data-order pairs run at seed 0 only): "—"
    table = runs.pivot(index="configuration", columns="seed", values="run").map(
        lambda r: short_hash(r) if isinstance(r, str) else "—")
    table = table.loc[list(dict.fromkeys(runs["configuration"]))]
    table.columns = [f"seed {c}" for c in table.columns]
    grouped = runs.groupby("configuration", sort=False)
    for k in ("source", "device", "threads", "git"):
        if k not in shared:
            table[k] = grouped[k].agg(lambda v: " / ".join(map(str, dict.fromkeys(v))))
    for k in ("wall s", "tokens/s"):
        table[f"{k} (mean)"] = grouped[k].mean().map(lambda x: "" if pd.isna(x) else f"{x:,.1f}")
    return ("\n".join(lines) + "\n\n"
            + f":::{{dropdown}} Run cards: {plural(len(table), 'configuration')}, "
              f"{plural(len(runs), 'run')}\n" + md_table(table) + "\n:::\n")


#: Where a chapter's run comes from in this build, the execution table's columns in order.
RUN_SOURCES = ("trained in this build", "in the store before", "read from records", "missing")


def run_source(spec, run_dir: Path, trained: set) -> str:
    """Where the run of ``spec`` that a chapter read comes from (one of :data:`RUN_SOURCES`):
    trained by this build (its id in ``trained``), already in the store ``run_dir``, read from
    its recorded bundle (:func:`gtalib.training.records.find_record`), or missing."""
    if spec.run_id in trained:
        return RUN_SOURCES[0]
    if is_done(run_path(spec, run_dir)):
        return RUN_SOURCES[1]
    return RUN_SOURCES[2] if records.find_record(spec) is not None else RUN_SOURCES[3]


def execution_markdown(executed, plan: Plan, run_dir: Path, trained: set) -> str:
    """The execution-status table of this build: one row per executed notebook
    (:class:`gtalib.book.pipeline.execute.NotebookRun`) with its status, code cells run,
    runtime (seconds), start (UTC) and machine, and how many of the runs it reads
    (:meth:`Plan.of_chapter`, the scale ladder's included) came from each of
    :data:`RUN_SOURCES`."""
    rows = []
    for run in executed:
        chapter = plan.of_chapter(run.name)
        read = {s.run_id: s for _, s in chapter.specs([*chapter.runs, *chapter.ladder_refs])}
        sources = [run_source(s, run_dir, trained) for s in read.values()]
        rows.append({"notebook": run.name, "status": run.status,
                     "cells run": f"{run.executed} of {run.cells}",
                     "runtime (s)": f"{run.seconds:.1f}",
                     "started (UTC)": run.started_utc.replace("T", " ").removesuffix("Z"),
                     **{k: sources.count(k) for k in RUN_SOURCES}})
    if not rows:
        return "No notebook was executed in this build.\n"
    machines = sorted({r.machine for r in executed})
    table = pd.DataFrame(rows).set_index("notebook")
    return ("Every notebook of this build ran on " + and_join(machines) + ". The last four "
            "columns count the runs each one reads, by where they came from.\n\n"
            + md_table(table) + "\n")


def write_chapter_snippets(summary: dict, plan: Plan, run_dir: Path, out_dir: Path | None = None,
                           executed=(), trained: set = frozenset(), against=None) -> None:
    """Write ``intro_chapters.md``, ``presets.md``, ``recipe.md``, ``statistics.md``,
    ``rule_comparison.md``, ``second_look.md``, ``curve_features.md``,
    ``provenance.md``, ``build_info.md`` (with ``run_cards.csv``), ``execution.md``,
    ``against_records.md``, ``methods_summary.md`` and the introduction's ``headline.md``
    (:func:`gtalib.book.chapters.headline.write_headline`, from the claims table and the
    figures' results of this build)
    (``executed``: the job's :class:`gtalib.book.pipeline.execute.NotebookRun` list;
    ``trained``: the ids of the runs it trained; ``against``: this build against its records,
    :func:`gtalib.book.chapters.against_records.against_records`, computed if ``None``) into
    ``book/generated/`` (included by the methods and reproduction chapters: numbers in their
    prose come from the configuration and this build)."""
    out_dir = Path(out_dir or BOOK_DIR / "generated")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "intro_chapters.md").write_text(intro_markdown())
    (out_dir / "presets.md").write_text(presets_markdown())
    (out_dir / "recipe.md").write_text(recipe_markdown())
    (out_dir / "statistics.md").write_text(statistics_markdown(
        summary["seeds"], preset=summary["preset"], max_steps=summary["max_steps"]))
    results = ablation_results(plan, run_dir)
    (out_dir / "rule_comparison.md").write_text(rule_comparison_markdown(results))
    (out_dir / "second_look.md").write_text(second_look_markdown(results))
    (out_dir / "curve_features.md").write_text(curve_methods_markdown(
        results, plan, run_dir, corpus_entropy(plan.preset)))
    (out_dir / "provenance.md").write_text(provenance_markdown(summary["preset"]))
    (out_dir / "build_info.md").write_text(build_info_markdown(
        summary, plan, run_dir, csv_path=out_dir / "run_cards.csv"))
    (out_dir / "execution.md").write_text(execution_markdown(executed, plan, run_dir, trained))
    (out_dir / "methods_summary.md").write_text(methods_summary_markdown(
        summary["preset"], summary["seeds"]))
    against = against or against_records(plan, run_dir, trained, results=results)
    (out_dir / "against_records.md").write_text(against_records_markdown(against))
    read = {s.run_id: s for _, s in plan.specs([*plan.runs, *plan.ladder_refs])}
    sources = [run_source(s, run_dir, trained) for s in read.values()]
    outcomes = {k: int((against.runs["outcome"] == k).sum()) for k in records.OUTCOMES}
    orders = {key: data_order_table(r, plan, run_dir) for key, r in results.items()}
    (out_dir / "headline.md").write_text(write_headline(
        claims_table(plan, run_dir, results=results), results,
        {k: sources.count(k) for k in RUN_SOURCES}, outcomes, out_dir,
        data_orders=data_order_verdicts(orders)))
