"""This build against its records (:mod:`gtalib.book.chapters.against_records`): each run of
the store that has a record compared with it, each verdict read both ways."""

import shutil
from pathlib import Path

import pandas as pd
import pytest
from synthetic import synthetic_identity, write_store  # noqa: E402

from gtalib.book.chapters import against_records as AR
from gtalib.book.pipeline.job import summary_lines
from gtalib.book.design import run_specs as specs
from gtalib.book.design.plan import make_plan
from gtalib.training import records


@pytest.fixture(scope="module")
def store_and_records(tmp_path_factory):
    """A synthetic ci store (2 seeds) whose runs are all recorded, the records as they were
    trained; then three local runs of the initialisation figure: one left as recorded, one
    moved a little inside the envelope, one moved outside it (made once: the tests only read)."""
    tmp_path = tmp_path_factory.mktemp("against")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(specs, "data_spec", synthetic_identity)
        mp.setenv("GTALIB_RECORD_DIR", str(tmp_path / "recorded"))
        yield _store_and_records(tmp_path)


def _store_and_records(tmp_path):
    plan = make_plan("ci", 2)
    store = tmp_path / "store"
    write_store(store, "ci", 2)
    for r in plan.runs:
        records.record_run(store / plan.spec(r).run_id, tmp_path / "recorded")
    # normal-init arms: runs of this figure alone (a zero-init arm is also other figures' run)
    init = [plan.spec(r).run_id for r in plan.figure_refs["init"] if r.arm == "alt"]
    same, near, far = init[:3]
    for rid in {plan.spec(r).run_id for r in plan.runs} - {same, near, far}:
        shutil.rmtree(store / rid)  # read from its record
    for rid, dv in ((near, 1e-3), (far, 0.5)):
        m = pd.read_csv(store / rid / "metrics.csv")
        m.loc[m.index[-1], "val_loss"] += dv
        m.to_csv(store / rid / "metrics.csv", index=False)
    return plan, store, (same, near, far)


@pytest.fixture(scope="module")
def found(store_and_records):
    plan, store, (same, near, far) = store_and_records
    return AR.against_records(plan, store, trained={near, far})


def test_each_local_run_is_compared_with_its_record(store_and_records, found):
    plan, store, (same, near, far) = store_and_records
    runs = found.runs.set_index("run_id")
    assert set(runs.index) == {same, near, far}
    assert runs.loc[same, "outcome"] == "bit-identical"
    assert runs.loc[near, "outcome"] == "within envelope"
    assert runs.loc[near, "max |Δ| val_loss"] == pytest.approx(1e-3)
    assert runs.loc[far, "outcome"] == "mismatch"
    assert list(runs["trained here"]) == [r in (near, far) for r in runs.index]
    assert list(found.outside["run_id"]) == [far]
    lines = summary_lines(found)
    assert lines[0].startswith("against records: 3 runs of the store compared with their "
                               "records: 1 bit-identical, 1 within the envelope, 1 outside the "
                               "envelope; largest |Δ val_loss| 0.5 nats (" + far)
    assert lines[1].startswith(f"  OUTSIDE THE ENVELOPE: {far}: MISMATCH")
    counts = AR.counts_table(found).iloc[0]
    assert (counts["compared"], counts["trained here"], counts["bit-identical"],
            counts["within the envelope"], counts["outside the envelope"]) == (3, 2, 1, 1, 1)
    assert counts["spot-checked"] == int(found.runs["spot-check"].sum())
    md = AR.against_records_markdown(found)
    assert "**outside the envelope**" in md and f"`{far}`" in md
    assert md.count("\n| ") >= 3 + len(found.verdicts)  # counts, runs and verdicts tables


def test_verdicts_are_read_from_the_records_and_from_this_build(store_and_records, found):
    plan, store, _ = store_and_records
    v = found.verdicts
    # the initialisation figure holds the re-trained runs, its variants and claims are compared;
    # the other figures hold none
    init = v[v["figure"] == "Initialisation ablation"]
    assert set(init["variant"]) == {"GQA", "MLA"}
    assert not v["figure"].str.startswith("Gating").any()
    assert v[v["figure"].str.startswith("claim")]["figure"].tolist()[0] == "claim 4"
    # the records' verdicts are the build's where nothing moved, and the table says which
    recorded = AR.ablation_result("init", plan, store, source="records")
    assert dict(zip(init["variant"], init["records"])) == {
        "GQA": recorded.final.loc["gqa", "verdict"], "MLA": recorded.final.loc["mla", "verdict"]}
    assert list(v["changed"]) == [a != b for a, b in zip(v["records"], v["this build"])]


def test_a_store_without_recorded_runs_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(specs, "data_spec", synthetic_identity)
    monkeypatch.setenv("GTALIB_RECORD_DIR", str(tmp_path / "none"))
    write_store(tmp_path / "store", "ci", 1)
    found = AR.against_records(make_plan("ci", 1), tmp_path / "store")
    assert found.runs.empty and found.verdicts.empty
    assert summary_lines(found) == [
        "against records: no run of this build's store has a record to compare with"]
    assert AR.counts_table(found).iloc[0]["compared"] == 0
    md = AR.against_records_markdown(found)
    assert md.count("\n| ") == 1  # the counts table alone: no run, no verdict to show
    reproduction = (Path(__file__).resolve().parents[3] / "book" / "reproduction.md").read_text()
    assert "nothing was compared" in reproduction  # the empty state, said once on the page


def test_an_unreadable_run_of_the_store_counts_outside_the_envelope(tmp_path, monkeypatch):
    monkeypatch.setattr(specs, "data_spec", synthetic_identity)
    monkeypatch.setenv("GTALIB_RECORD_DIR", str(tmp_path / "recorded"))
    plan = make_plan("ci", 1)
    write_store(tmp_path / "store", "ci", 1)
    rid = plan.spec(plan.runs[0]).run_id
    records.record_run(tmp_path / "store" / rid, tmp_path / "recorded")
    metrics = tmp_path / "store" / rid / "metrics.csv"
    metrics.write_text(metrics.read_text().rsplit("\n", 3)[0][:-3] + "\n")  # a cut last row
    runs = AR.run_checks(plan, tmp_path / "store")
    [row] = runs.to_dict("records")
    assert row["run_id"] == rid and row["outcome"] == "mismatch"
    assert "this build's run is unreadable" in row["message"]


def test_bit_identical_runs_reuse_the_builds_verdicts(store_and_records, monkeypatch):
    """With every re-trained run bit-identical, the records give the same numbers: nothing is
    read again from the records, and every verdict is the build's."""
    plan, store, (same, near, far) = store_and_records
    calls = []
    real = AR.ablation_result
    monkeypatch.setattr(AR, "ablation_result", lambda *a, **kw: calls.append(kw) or real(*a, **kw))
    v = AR.verdict_checks(plan, store, {same}, identical={same})
    assert not [kw for kw in calls if kw.get("source") == "records"]
    assert len(v) and not v["changed"].any()
    AR.verdict_checks(plan, store, {same, far}, identical={same})
    assert [kw for kw in calls if kw.get("source") == "records"]
