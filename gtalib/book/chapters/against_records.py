"""This build against the repository's records: every run the build's store holds that also has
a record, compared with it cell by cell, and every verdict as the records alone give it beside
the verdict with this build's runs. Shown on the reproduction page (:func:`against_records_markdown`)
and in the job's last lines (:func:`gtalib.book.pipeline.job.summary_lines`).

A re-trained run is *bit-identical* to its record, *within the cross-machine envelope* (another
kind of CPU: rounding differs, :data:`gtalib.training.records.CROSS_MACHINE_ENVELOPE`), or
*outside* it (on the record's own machine kind: not bit-identical). Differences in nats.

Reads :mod:`gtalib.book.analysis.collect` (each local run's ``record_check``),
:mod:`gtalib.book.chapters.ablation` and :mod:`gtalib.book.chapters.claims` (the verdicts, read
with ``source="records"`` and ``"build"``) and the spot-check set
(:mod:`gtalib.book.design.spot_check`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from gtalib.book.analysis.collect import OUTCOME_WORDS, collect_runs
from gtalib.book.analysis.style import md_table
from gtalib.book.chapters.ablation import ablation_result, ablation_results
from gtalib.book.chapters.claims import claims_table
from gtalib.book.design.figures import ABLATIONS
from gtalib.book.design.figures import claims as paper_claims
from gtalib.book.design.names import display_name
from gtalib.book.design.plan import Plan
from gtalib.book.design.spot_check import spot_check_refs, spot_check_words
from gtalib.training.runs import is_done, resolve_run_dir, run_path

#: Columns of :attr:`AgainstRecords.runs`.
RUN_COLUMNS = ["run_id", "configuration", "seed", "figures", "spot-check", "trained here",
               "outcome", "max |Δ| train_loss", "max |Δ| val_loss", "rule", "message"]
#: Columns of :attr:`AgainstRecords.verdicts`.
VERDICT_COLUMNS = ["figure", "variant", "re-trained", "records", "this build", "changed"]


@dataclass
class AgainstRecords:
    """What :func:`against_records` found.

    Attributes:
        runs: one row per run of the book held in the store and recorded (:data:`RUN_COLUMNS`;
            ``trained here``: trained by this job, else by an earlier one into the same store).
        verdicts: one row per ablation variant and per trained-run claim
            (:data:`VERDICT_COLUMNS`), for the figures with a re-trained run: how many of its
            runs were re-trained, its verdict read from the records alone (``records``) and
            with this build's runs in their place (``this build``); ``changed`` True where the
            two verdicts differ.
    """

    runs: pd.DataFrame
    verdicts: pd.DataFrame
    preset: str = "cpu"

    @property
    def outside(self) -> pd.DataFrame:
        """The runs outside the envelope (or not bit-identical on the record's kind)."""
        return self.runs[self.runs["outcome"] == "mismatch"]


def _figures_of(plan: Plan) -> dict:
    """Run id → the figures (short titles) whose runs include it, in book order."""
    out = {}
    for key, refs in plan.figure_refs.items():
        if key not in plan.reads:
            continue
        title = ("main results" if key == "main"
                 else ABLATIONS[key].heading.removesuffix(" ablation"))
        for r in refs:
            out.setdefault(plan.spec(r).run_id, []).append(title)
    return {k: list(dict.fromkeys(v)) for k, v in out.items()}


def run_checks(plan: Plan, run_dir, trained=frozenset()) -> pd.DataFrame:
    """Every run of ``plan`` and of its scale ladder (under its own design) that ``run_dir``
    holds and that has a record, compared with it (:data:`RUN_COLUMNS`); a local run whose
    files do not check out counts as outside the envelope, its message naming the file.
    ``trained``: the run ids this job trained."""
    run_dir = resolve_run_dir(run_dir)
    status = []
    for p, refs in ((plan, plan.runs), (plan.own_design(), plan.ladder_refs)):
        local = [r for r in refs if is_done(run_path(p.spec(r), run_dir))]
        status.append(collect_runs(local, p, run_dir).status)
    status = pd.concat(status, ignore_index=True).drop_duplicates("run_id")
    figures = _figures_of(plan)
    spot = {plan.spec(r).run_id for r in spot_check_refs(plan)}
    rows = []
    for r in status.itertuples():
        check = r.record_check
        if check is None:
            continue
        rows.append((r.run_id, r.label, r.seed,
                     ", ".join(figures.get(r.run_id, ())) or "scale ladder",
                     r.run_id in spot, r.run_id in trained, check.outcome,
                     check.max_abs_diff.get("train_loss", float("nan")),
                     check.max_abs_diff.get("val_loss", float("nan")), check.reason,
                     check.message()))
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def verdict_checks(plan: Plan, run_dir, retrained, confidence: float = 0.95,
                   results=None, identical=frozenset()) -> pd.DataFrame:
    """Each ablation variant's verdict and each trained-run claim's verdict read from the
    records alone beside the one with this build's runs (:data:`VERDICT_COLUMNS`), for the
    figures that hold a run of ``retrained`` (run ids); ``results``: this build's ablation
    results (:func:`gtalib.book.chapters.ablation.ablation_results`), computed if ``None``.
    A figure whose re-trained runs are all in ``identical`` (bit-identical to their records)
    reads the same numbers either way, so its records' result is this build's, not computed
    again."""
    results = results or ablation_results(plan, run_dir, confidence)
    rows, touched, unmoved = [], {}, set()  # unmoved: figures whose runs are bit for bit the same
    moved = set(retrained) - set(identical)
    for key, refs in plan.figure_refs.items():
        ids = {}
        for r in refs:
            ids.setdefault(r.variant, set()).add(plan.spec(r).run_id)
        touched[key] = {v: len(i & set(retrained)) for v, i in ids.items()}
        if not any(i & moved for i in ids.values()):
            unmoved.add(key)
    recorded = {}
    for key in ABLATIONS:
        if key not in plan.reads or not any(touched[key].values()):
            continue
        recorded[key] = results[key] if key in unmoved else ablation_result(
            key, plan, run_dir, confidence=confidence, source="records")
        build, rec = results[key].final, recorded[key].final
        for v in dict.fromkeys([*rec.index, *build.index]):
            a = rec["verdict"].get(v, "not measured") if len(rec) else "not measured"
            b = build["verdict"].get(v, "not measured") if len(build) else "not measured"
            rows.append((ABLATIONS[key].heading, display_name(v),
                         touched[key].get(v, 0), a, b, a != b))
    sources = {c.number: c.source for c in paper_claims()}
    read = [k for k in (*recorded, "main") if k in plan.reads and any(touched[k].values())]
    if read:
        build = claims_table(plan, run_dir, confidence, results, trained_only=True)
        same = set(read) <= unmoved
        both = {"build": build, "records": build if same else claims_table(
            plan, run_dir, confidence, {**results, **recorded}, source="records",
            trained_only=True)}
        for claim, row in both["build"].iterrows():
            if sources[int(str(claim).split()[0])] not in read:  # "8 (ranking)": claim 8's
                continue
            a, b = both["records"].loc[claim, "verdict"], row["verdict"]
            rows.append((f"claim {claim}", "—", "", a, b, a != b))
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def against_records(plan: Plan, run_dir, trained=frozenset(), confidence: float = 0.95,
                    results=None) -> AgainstRecords:
    """This build against its records (module docstring): :func:`run_checks` and, for the
    figures those runs belong to, :func:`verdict_checks`."""
    runs = run_checks(plan, run_dir, trained)
    identical = set(runs.loc[runs["outcome"] == "bit-identical", "run_id"])
    return AgainstRecords(runs, verdict_checks(plan, run_dir, set(runs["run_id"]), confidence,
                                               results, identical), plan.preset)


def counts_table(found: AgainstRecords) -> pd.DataFrame:
    """One row: the build's ``preset``, its spot-check set in words (``spot checks``,
    :func:`gtalib.book.design.spot_check.spot_check_words`; ``"—"`` where none is declared),
    the runs of the store compared with their records (``compared``), how many of those this
    build trained (``trained here``) and how many are of the spot-check set
    (``spot-checked``), then one count per outcome
    (:data:`gtalib.book.analysis.collect.OUTCOME_WORDS`)."""
    runs = found.runs
    counts = runs["outcome"].value_counts()
    return pd.DataFrame([{
        "preset": f"`{found.preset}`", "spot checks": spot_check_words(found.preset) or "—",
        "compared": len(runs), "trained here": int(runs["trained here"].sum()),
        "spot-checked": int(runs["spot-check"].sum()),
        **{w: counts.get(k, 0) for k, w in OUTCOME_WORDS.items()}}])


def against_records_markdown(found: AgainstRecords) -> str:
    """The reproduction page's section, its tables in Markdown (``book/reproduction.md`` says
    what they hold): :func:`counts_table`; where a run was compared, one row per run (an
    outcome outside the envelope in bold; differences in nats); where a figure holds a
    re-trained run, each verdict read both ways (:data:`VERDICT_COLUMNS`, a changed one in
    bold)."""
    runs = found.runs
    out = [md_table(counts_table(found), index=False)]
    if len(runs):
        out.append(md_table(pd.DataFrame({
            "run": [f"`{r}`" for r in runs["run_id"]], "configuration": runs["configuration"],
            "seed": runs["seed"], "figures": runs["figures"],
            "trained": ["this build" if t else "earlier" for t in runs["trained here"]],
            "outcome": [OUTCOME_WORDS[o] if o != "mismatch" else f"**{OUTCOME_WORDS[o]}**"
                        for o in runs["outcome"]],
            "max Δ train": [f"{x:.2g}" for x in runs["max |Δ| train_loss"]],
            "max Δ val": [f"{x:.2g}" for x in runs["max |Δ| val_loss"]],
            "rule": runs["rule"]}), index=False))
    if len(found.verdicts):
        v = found.verdicts.copy()
        v["changed"] = ["**changed**" if d else "same" for d in v["changed"]]
        out.append(md_table(v, index=False))
    return "\n\n".join(out) + "\n"
