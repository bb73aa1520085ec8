"""Collecting a page's runs (gtalib.book.analysis.collect): both arms of a pair from one source and one
machine, and what the pages say about where their runs come from."""

import pandas as pd
import pytest

from gtalib.book.analysis import collect
from gtalib.book.design.run_specs import RunRef

# --- both arms of a pair from one source and one machine ----------------------------------------


def _status(*runs):
    """Status rows (alt/rec of MHA, 8 layers, 250 steps) from (arm, seed, source, device, kind)."""
    return pd.DataFrame([("mha", arm, f"MHA {arm}", seed, 8, 250, f"{arm}{seed}", "done", "",
                          source, device, kind, [kind] if kind else [], None)
                         for arm, seed, source, device, kind in runs],
                        columns=collect.STATUS_COLUMNS)


def test_same_machine_compares_kind_dicts_else_device_strings():
    amd = {"vendor": "AuthenticAMD", "model": "EPYC"}
    row = lambda device, kind=None: {"device": device, "machine_kind": kind}  # noqa: E731
    assert collect.same_machine(row("AMD EPYC (2 logical CPUs)", amd), row("other text", dict(amd)))
    assert collect.same_machine(row("x", amd), row("x", {"vendor": "GenuineIntel"})) is False
    # one kind unknown: a CPU name covers several kinds, so equal names leave it unknown
    assert collect.same_machine(row("AMD EPYC", amd), row("AMD EPYC")) is None
    assert collect.same_machine(row("AMD EPYC"), row("Intel Xeon")) is False
    assert collect.same_machine(row(None), row("AMD EPYC")) is None  # unknown, never "same"


def test_same_machine_accepts_a_kind_that_reproduced_a_record_bit_for_bit():
    """Two arms trained on different kinds are paired when a recorded re-training shows one
    arm's record comes out bit for bit on the other's kind; a record reproduced elsewhere
    only stays mixed."""
    zen4, zen5, xeon = ({"cpu_family": f, "cpu_model": m} for f, m in
                        (("25", "17"), ("26", "2"), ("6", "143")))
    row = lambda trained, *also: {"device": "AMD EPYC (2 logical CPUs)",  # noqa: E731
                                  "machine_kind": trained, "kinds": [trained, *also]}
    assert collect.same_machine(row(zen4), row(zen5, zen4)) is True
    assert collect.same_machine(row(zen5, zen4), row(zen4)) is True
    assert collect.same_machine(row(zen5, xeon), row(zen4, xeon)) is True  # a third kind shared
    assert collect.same_machine(row(zen4), row(zen5, xeon)) is False
    assert collect.same_machine(row(zen4), row(zen5)) is False
    rec = "recorded 2026-12-02 on AMD EPYC (2 logical CPUs)"
    status = _status(("alt", 0, rec, "AMD EPYC (2 logical CPUs)", zen4),
                     ("rec", 0, rec, "AMD EPYC (2 logical CPUs)", zen5),
                     ("alt", 1, rec, "AMD EPYC (2 logical CPUs)", zen4),
                     ("rec", 1, rec, "AMD EPYC (2 logical CPUs)", zen5))
    status["kinds"] = [[zen4], [zen5, zen4], [zen4], [zen5]]
    pairs = collect.run_pairs(status).set_index("seed")
    assert pairs["mixed"].tolist() == [False, True]
    # the same CPU name on two kinds: the mixed pair says how the kinds differ
    assert pairs.loc[1, "pair_source"] == (
        f"MIXED: alt {rec[:8]} on AMD EPYC (2 logical CPUs), rec {rec[:8]} on AMD EPYC (2 logical "
        "CPUs) (cpu_family: 25 -> 26; cpu_model: 17 -> 2)")
    assert pairs.loc[0, "pair_source"] == ("both recorded on AMD EPYC (2 logical CPUs), its arms "
                                           "trained on two CPU kinds, each shown to give both "
                                           "bit for bit")


def test_run_pairs_mark_mixed_source_and_machine():
    rec = "recorded 2026-11-30 on AMD EPYC (2 logical CPUs)"
    amd, intel = "AMD EPYC (2 logical CPUs)", "Intel Xeon (16 logical CPUs)"
    status = _status(("alt", 0, rec, amd, None), ("rec", 0, rec, amd, None),
                     ("alt", 1, rec, amd, None), ("rec", 1, "local", intel, None),
                     ("alt", 2, "local", amd, None), ("rec", 2, "local", intel, None),
                     ("alt", 3, "local", None, None), ("rec", 3, "local", intel, None))
    pairs = collect.run_pairs(status).set_index("seed")
    assert pairs.loc[0, "pair_source"] == f"both recorded on {amd}, machine kind unknown"
    assert not pairs.loc[0, "mixed"]
    assert pairs.loc[1, "pair_source"] == f"MIXED: alt recorded on {amd}, rec local on {intel}"
    assert pairs.loc[2, "pair_source"] == f"MIXED: alt local on {amd}, rec local on {intel}"
    assert pairs.loc[3, "pair_source"] == "both local, machine unknown"
    assert pairs["mixed"].tolist() == [False, True, True, False]
    assert pairs["unknown"].tolist() == [True, False, False, True]
    known = _status(("alt", 0, rec, amd, {"cpu_family": "25"}), ("rec", 0, rec, amd, {"cpu_family": "25"}))
    assert collect.run_pairs(known)["pair_source"].tolist() == [f"both recorded on {amd}"]
    assert collect.pair_source_summary(pairs.reset_index().iloc[:1]) == (
        f"both recorded on {amd}, machine kind unknown")
    assert collect.pair_source_summary(pairs.reset_index().iloc[:2]) == (
        f"seed 0: both recorded on {amd}, machine kind unknown; seed 1: MIXED: alt recorded on "
        f"{amd}, rec local on {intel}")
    # a missing run makes no pair; a main-table run is never one
    assert len(collect.run_pairs(status.assign(state=["done"] * 7 + ["missing"]))) == 3
    assert collect.run_pairs(status.assign(arm="main")).empty


def _real_gate_pair():
    """Specs of a recorded GQA pair (no gate / gate, seed 0, the shortest recorded length)."""
    from gtalib.training import records
    from gtalib.training import runs as store

    found = {}
    for folder in records.list_records():
        spec = store.load_spec(folder)
        if spec.model.variant == "gqa" and spec.seed == 0:
            key = (spec.model.n_layer, spec.train.max_steps)
            found.setdefault(key, {})["rec" if spec.model.gate else "alt"] = (spec, folder)
    pairs = sorted(k for k, v in found.items() if len(v) == 2)
    if not pairs:
        pytest.fail("no recorded GQA gate pair in book/recorded/")
    return found[pairs[0]]


def test_a_recorded_and_a_local_arm_are_marked_mixed_on_the_page(tmp_path):
    """Real bundles of book/recorded: both arms read from records are one pair; with the
    recommended arm trained in the local store (here: its bundle copied there, its card naming
    another CPU) the pair is MIXED, in the table's column and in the sources notice."""
    import json
    import shutil
    from types import SimpleNamespace


    specs = _real_gate_pair()
    refs = [RunRef("gqa", "alt", (), 0), RunRef("gqa", "rec", (("gate", True),), 0)]
    plan = SimpleNamespace(spec=lambda ref: specs[ref.arm][0])
    store = tmp_path / "store"
    both = collect.collect_runs(refs, plan, store)
    device = both.cards[0]["device"]
    # (these old bundles may predate machine kinds: then the text says the kind is unknown)
    assert both.pairs["pair_source"].tolist()[0] in (
        f"both recorded on {device}", f"both recorded on {device}, machine kind unknown")
    assert "of which **0 mixed**" in collect.sources_notice(both)

    spec, folder = specs["rec"]
    local = store / spec.run_id
    shutil.copytree(folder, local)
    (local / "DONE").write_text("copied for the test\n")
    card = json.loads((local / "card.json").read_text())
    (local / "card.json").write_text(json.dumps({**card, "device": "Intel Xeon (16 logical CPUs)"}))
    mixed = collect.collect_runs(refs, plan, store)
    assert mixed.status.set_index("arm")["source"]["rec"] == "local"
    assert mixed.pairs["pair_source"].tolist() == [
        f"MIXED: alt recorded on {device}, rec local on Intel Xeon (16 logical CPUs)"]
    notice = collect.sources_notice(mixed)
    assert "of which **1 mixed**" in notice and "GQA alt seed 0" in notice
    # same machine, different source: still not paired as the figures assume
    (local / "card.json").write_text(json.dumps(card))
    assert collect.collect_runs(refs, plan, store).pairs["mixed"].tolist() == [True]


def test_pair_source_is_printed_under_the_tables_grouped_by_text():
    """The long pair-source text leaves the final-ΔL and ladder tables (so they fit the text
    column) for lines under them: one line when every row shares it, else one per text."""
    from gtalib.book.chapters import ablation
    from gtalib.book.chapters import scale_ladder as ladder

    final = pd.DataFrame({"seeds": [3, 3], "ΔL": [0.02, 0.01], "CI low": [0.0, -0.01],
                          "CI high": [0.04, 0.03], "resolvable |ΔL|": [0.02, 0.02],
                          "pairs to resolve": [3.0, 5.0], "seed sd": [0.01, 0.02], "p (Holm)": [0.3, 0.4], "one run shows it?": ["no", "no"],
                          "paper ΔL (≈)": [0.02, 0.01], "verdict": ["agrees", "within noise"],
                          "pair source": ["both recorded on X", "both recorded on X"]},
                         index=pd.Index(["gqa", "mla"], name="variant"))
    assert "pair source" not in ablation.format_final_table(final).columns
    assert collect.pair_source_lines({"GQA": "both on X", "MLA": "both on X"}) == (
        "*Pair source* (every row): both on X.")
    assert collect.pair_source_lines({"GQA": "both on X", "MLA": "seed 1: MIXED", "GLA-2":
                                       "both on X"}) == (
        "*Pair source*:\n\n- both on X: GQA; GLA-2\n- seed 1: MIXED: MLA")
    assert collect.pair_source_lines({}) == ""
    points = pd.DataFrame({"part": ["gate"], "variant": ["gqa"], "arm": ["alt"], "n_layer": [8],
                           "max_steps": [1000], "pair_source": ["both on X"]})
    assert ladder.ladder_pair_sources(points) == "*Pair source* (every row): both on X."


def test_collect_runs_trains_a_run_that_is_neither_local_nor_recorded(tmp_path, monkeypatch):
    """With ``train=True`` a missing run is trained through gtalib.training.train.ensure_run (here
    a stand-in that writes a finished synthetic run) and read back as a local run."""
    import json
    from pathlib import Path

    import numpy as np
    import synthetic

    from gtalib.book.design import run_specs as specs
    from gtalib.book.design.plan import make_plan

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    trained = []

    def fake_ensure_run(spec, run_dir, **kw):
        path = Path(run_dir) / spec.run_id
        path.mkdir(parents=True)
        steps = np.arange(1, spec.train.max_steps + 1)
        on_eval = (steps % spec.train.eval_every == 0) | (steps == steps[-1])
        df = synthetic.metrics(steps, 2.0, tokens_per_step=spec.train.tokens_per_step)
        df["val_loss"] = np.where(on_eval, 2.0, np.nan)
        df["lr"] = 1e-3
        df.to_csv(path / "metrics.csv", index=False)
        (path / "spec.json").write_text(json.dumps(spec.to_dict()))
        (path / "card.json").write_text(json.dumps({"threads": 1}))
        (path / "DONE").write_text("synthetic\n")
        trained.append(spec.run_id)
        return path

    monkeypatch.setattr(collect, "ensure_run", fake_ensure_run)
    ref = RunRef("gqa", "main", (), 0)
    plan = make_plan("ci", 1)
    col = collect.collect_runs([ref], plan, tmp_path, train=True, record_dir=tmp_path / "none")
    assert trained == [plan.spec(ref).run_id]
    assert col.status["state"].tolist() == ["done"] and col.status["source"].tolist() == ["local"]
    assert col.runs["val_loss"].dropna().tolist() == [2.0, 2.0]  # steps 10 and 20 at ci


def test_a_local_run_with_a_record_is_compared_and_the_records_can_be_read_instead(tmp_path,
                                                                                  monkeypatch):
    """The store's run is what a page reads, with its comparison to the record beside it;
    ``source="records"`` reads the record in its place (the figure as recorded)."""
    import synthetic

    from gtalib.book.design import run_specs as specs
    from gtalib.book.design.plan import make_plan
    from gtalib.training import records

    monkeypatch.setattr(specs, "data_spec", synthetic.synthetic_identity)
    plan = make_plan("ci", 1)
    ref = plan.runs[0]
    rid = plan.spec(ref).run_id
    synthetic.write_store(tmp_path / "store", "ci", 1)
    records.record_run(tmp_path / "store" / rid, tmp_path / "rec")
    m = pd.read_csv(tmp_path / "store" / rid / "metrics.csv")
    m.loc[m.index[-1], "train_loss"] += 0.25  # this build's run differs from its record
    m.to_csv(tmp_path / "store" / rid / "metrics.csv", index=False)

    build = collect.collect_runs([ref], plan, tmp_path / "store", record_dir=tmp_path / "rec")
    [row] = build.status.to_dict("records")
    assert row["source"] == "local"
    assert row["record_check"].outcome == "within envelope"  # machine kinds unknown
    assert row["record_check"].max_abs_diff["train_loss"] == pytest.approx(0.25)
    assert ("1 of them trained in the local run store, 1 of which compared with their records: "
            "0 bit-identical, 1 within the envelope, 0 outside the envelope (") in \
        collect.sources_notice(build)
    rec = collect.collect_runs([ref], plan, tmp_path / "store", record_dir=tmp_path / "rec",
                               source="records")
    [row] = rec.status.to_dict("records")
    assert row["source"].startswith("recorded ") and row["record_check"] is None
    assert rec.runs["train_loss"].iloc[-1] == pytest.approx(build.runs["train_loss"].iloc[-1] - 0.25)
    with pytest.raises(ValueError, match=r"source must be one of \('build', 'records'\)"):
        collect.collect_runs([ref], plan, tmp_path / "store", source="record")
