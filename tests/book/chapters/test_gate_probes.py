"""The gating page's gate probes: reading ``probes.json`` of local and recorded runs into a frame
(means computed by hand), the sentence that says what they explain, and the recorded bundles."""

import json
import math
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from gtalib.book.analysis import collect, style
from gtalib.book.chapters import gate_probes as P
from gtalib.book.design.paper import QIU_SCALE
from gtalib.book.design.run_specs import RunRef

REC = "recorded 2026-12-01 on AMD EPYC (2 logical CPUs)"


def _write(folder, run_id, share, resid, gate=None, n_layer=2):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "probes.json").write_text(json.dumps({
        "run_id": run_id, "n_layer": n_layer, "gate_mean": gate, "first_token_share": share,
        "max_abs_residual": resid, "max_abs_residual_overall": max(resid),
        "batch": {"windows": 8, "tokens_per_window": 128}}))


def _hand_store(tmp_path):
    """MLA, 2 layers: no gate seeds 0-1 local with probes; gate seed 0 recorded with probes,
    seed 1 recorded without, seeds 2, 4, 5 local with another run's file, too few values, broken
    JSON; seed 3 not finished."""
    store, records = tmp_path / "store", tmp_path / "recorded"
    _write(store / "a0", "a0", [0.1, 0.3], [1.0, 3.0])
    _write(store / "a1", "a1", [0.2, 0.4], [2.0, 6.0])
    _write(records / "r0", "r0", [0.05, 0.15], [1.0, 2.0], gate=[0.4, 0.2])
    (records / "r1").mkdir(parents=True)
    _write(store / "r2", "someone-else", [0.5, 0.5], [9.0, 9.0], gate=[0.9, 0.9])
    _write(store / "r4", "r4", [0.5], [9.0, 9.0], gate=[0.9, 0.9])  # one share for two layers
    (store / "r5").mkdir()
    (store / "r5" / "probes.json").write_text("{")
    rows = [("alt", 0, "a0", "done", "local"), ("alt", 1, "a1", "done", "local"),
            ("rec", 0, "r0", "done", REC), ("rec", 1, "r1", "done", REC),
            ("rec", 2, "r2", "done", "local"), ("rec", 3, "r3", "missing", "local"),
            ("rec", 4, "r4", "done", "local"), ("rec", 5, "r5", "done", "local")]
    status = pd.DataFrame([("mla", arm, f"MLA {arm}", seed, 2, 250, rid, state, "", source, None,
                            None, [], None) for arm, seed, rid, state, source in rows],
                          columns=collect.STATUS_COLUMNS)
    return collect.Collected(pd.DataFrame(), status, [], store, records)


def test_read_probes_gives_the_hand_computed_means_and_counts_missing_files(tmp_path):
    pr = P.read_probes(_hand_store(tmp_path))
    # every done run gives one row per layer; the unfinished run none
    assert len(pr.per_layer) == 7 * 2 and "r3" not in set(pr.per_layer["run_id"])
    assert pr.per_layer.query("run_id == 'r0'")["gate_mean"].tolist() == [0.4, 0.2]
    unread = pr.per_layer.query("run_id in ['r1', 'r2', 'r4', 'r5']")
    assert unread[list(P.PROBE_KEYS)].isna().all().all()
    alt, rec = (pr.summary.set_index("arm").loc[arm] for arm in ("alt", "rec"))
    assert (alt["runs"], alt["with_probes"], rec["runs"], rec["with_probes"]) == (2, 2, 5, 1)
    # means over seeds and layers: (0.1 + 0.3 + 0.2 + 0.4) / 4; last layer (0.3 + 0.4) / 2
    assert alt["first_token_share"] == pytest.approx(0.25)
    assert alt["first_token_share_last"] == pytest.approx(0.35)
    assert alt["first_token_share_max"] == pytest.approx(0.35)  # each run's top layer, mean
    assert rec["gate_mean_max"] == pytest.approx(0.4)
    assert alt["max_abs_residual"] == pytest.approx(3.0)  # (1 + 3 + 2 + 6) / 4
    assert alt["max_abs_residual_max"] == pytest.approx(4.5)  # (3 + 6) / 2
    assert math.isnan(alt["gate_mean"]) and alt["tokens"] == 128
    # the gated arm: only seed 0 counts, the others are NaN
    assert rec["gate_mean"] == pytest.approx(0.3) and rec["gate_mean_last"] == pytest.approx(0.2)
    assert rec["first_token_share"] == pytest.approx(0.1)
    assert rec["max_abs_residual_max"] == pytest.approx(2.0)
    why = pr.missing.set_index("run_id")["detail"]
    assert list(why.index) == ["r1", "r2", "r4", "r5"]
    assert why["r1"] == "no probes.json: recorded before probes were stored"
    assert why["r2"] == "probes.json is of run someone-else with 2 layers, not of this run"
    assert why["r4"] == "probes.json does not hold one value per layer"
    assert why["r5"].startswith("unreadable probes.json: JSONDecodeError")


@pytest.fixture
def shown(monkeypatch):
    """What the page displays: the text of each Markdown, every other object as it is."""
    out = []
    monkeypatch.setattr(P, "display",
                        lambda obj: out.append(getattr(obj, "data", obj)))
    return out


def test_a_page_without_probes_names_the_runs_that_lack_them(tmp_path, shown):
    import shutil

    col = _hand_store(tmp_path)
    for folder in ("a0", "a1"):
        shutil.rmtree(col.run_dir / folder)
    shutil.rmtree(col.record_dir / "r0")
    pr = P.read_probes(col)
    assert pr.summary["with_probes"].sum() == 0 and len(pr.missing) == 7
    assert P.probe_findings(pr.summary) == (
        "No run of this page has gate probes: nothing to explain.")
    P.show_probes(SimpleNamespace(collected=col, complete=["mla"]))
    assert len(shown) == 1  # nothing else is shown
    out = shown[0]
    assert "No run of this page has gate probes" in out
    assert "MLA alt, seed 0 (`a0`): no probes.json: trained before probes were stored" in out
    assert "MLA rec, seed 1 (`r1`): no probes.json: recorded before probes were stored" in out


def _summary(**arms):
    """A :attr:`Probes.summary` of MLA from ``alt=(share, resid)``, ``rec=(gate, share, resid)``."""
    rows = []
    if "alt" in arms:
        share, resid = arms["alt"]
        rows.append({"variant": "mla", "arm": "alt", "runs": 2, "with_probes": 2, "tokens": 128,
                     "gate_mean": math.nan, "first_token_share": share,
                     "first_token_share_max": 2 * share, "max_abs_residual_max": resid})
    if "rec" in arms:
        gate, share, resid = arms["rec"]
        rows.append({"variant": "mla", "arm": "rec", "runs": 2, "with_probes": 2, "tokens": 128,
                     "gate_mean": gate, "first_token_share": share,
                     "max_abs_residual_max": resid})
    return pd.DataFrame(rows).reindex(columns=P.PROBE_SUMMARY_COLUMNS)


def test_the_sentence_says_no_sink_forms_at_this_scale():
    text = P.probe_findings(_summary(alt=(0.03, 2.5), rec=(0.33, 0.025, 2.0)))
    assert text.startswith(
        "No attention sink forms at this scale: without the gate the first-token share is 0.030 "
        "(MLA; mean over layers, at most 2× the 0.035 of uniform attention over 128 tokens; "
        "0.060 in the largest layer), against 0.467 in Qiu et al., so the gate's effect here "
        "cannot come from removing one.")
    assert "No massive activations form without the gate: the largest residual activation is " \
           "2.50, against 1053 in Qiu et al." in text
    assert "the gate scales it by 0.80 (MLA; Qiu et al.: 94 / 1053 = 0.09)" in text
    # (0.5 − 0.33) / (0.5 − 0.116) = 44 %
    assert ("The gate is selective, but less sparse than in Qiu et al.: its mean is 0.330 (MLA) "
            "after training, from 0.5 at initialisation, 44 % of the way to Qiu et al.'s 0.116."
            ) in text
    assert text.endswith("and its query-dependent scores.")
    # a gate still at 0.5
    assert "The gate stays near its initial value" in P.probe_findings(
        _summary(alt=(0.03, 2.5), rec=(0.49, 0.03, 2.5)))


def test_the_sentence_says_when_a_sink_forms_and_the_gate_removes_it():
    text = P.probe_findings(_summary(alt=(0.45, 1000.0), rec=(0.116, 0.05, 90.0)))
    assert text.startswith(
        "An attention sink forms without the gate in MLA: first-token share 0.450, against the "
        "0.035 of uniform attention over 128 tokens (Qiu et al.: 0.467); with the gate it is "
        "0.050 (MLA; Qiu et al.: 0.048), so the gate removes it.")
    assert "Massive activations form without the gate in MLA: the largest residual " \
           "activation is 1000.00" in text
    assert "The gate is as sparse as in Qiu et al." in text
    assert "non-linearity" not in text
    # a sink the gate leaves in place
    assert "so the gate does not remove it" in P.probe_findings(
        _summary(alt=(0.45, 1000.0), rec=(0.3, 0.4, 900.0)))


def test_the_sentence_with_one_arm_probed():
    text = P.probe_findings(_summary(rec=(0.38, 0.03, 2.0)))
    assert text.startswith("No run without the gate has probes here, so whether an attention "
                           "sink or massive activations form without it is not measured.")
    assert "non-linearity" not in text  # not shown without the ungated arm
    assert P.probe_findings(_summary(alt=(0.03, 2.5))).endswith(
        "No gated run has probes here, so the gate's values are not measured. With neither a "
        "sink nor massive activations to remove, the gate can act here only through Qiu et al.'s "
        "two other explanations of its gain: the non-linearity it adds between the value and "
        "output projections, and its query-dependent scores.")


def test_uniform_first_token_share_and_range_text():
    # docs/probes.md: 0.0349 at 128 tokens (cpu), 0.0594 at 64 (ci)
    assert P.uniform_first_token_share(128) == pytest.approx(0.0349, abs=5e-5)
    assert P.uniform_first_token_share(64) == pytest.approx(0.0594, abs=5e-5)
    assert P.uniform_first_token_share(2) == 0.5
    with pytest.raises(ValueError):
        P.uniform_first_token_share(1)
    assert style.range_text([0.0301, 0.0299]) == "0.030"
    assert style.range_text([0.35, 0.026, 0.03]) == "0.026–0.350"
    assert style.range_text([1.051, 1.26], ".2f") == "1.05–1.26"


def test_qiu_values_are_in_the_table():
    table = P.format_probe_table(_summary(alt=(0.03, 2.5), rec=(0.33, 0.025, 2.0)))
    qiu = table.loc[f"Qiu et al. 2025 ({QIU_SCALE})"]
    assert qiu.tolist() == ["", "0.116", "0.467", "0.048", "1053", "94"]
    assert table.loc["MLA"].tolist() == ["2 of 2; 2 of 2", "0.330", "0.030", "0.025", "2.500",
                                         "2.000"]


# --- the recorded bundles of book/recorded ------------------------------------------------------

#: Recorded bundles (variant, arm, seed) -> run id: the gating chapter's 1000-step MLRA-2 and MLA
#: pairs (both arms probed) and the 250-step MLA pair (only the gated arm probed; the book reads
#: no 250-step gated MLA run, these two bundles are kept for this test).
BUNDLES_1000 = {("mlra-2", "alt", 0): "6282e169c50ed09e", ("mlra-2", "rec", 0): "7e36405a67995cc1",
                ("mla", "alt", 0): "12e02a5c39291862", ("mla", "rec", 0): "887299de88065a8c"}
BUNDLES_250 = {("mla", "alt", 0): "e86943321ee66dda", ("mla", "alt", 1): "93d0cbd8738bf115",
               ("mla", "rec", 0): "a6e4edb107fff161", ("mla", "rec", 1): "e3280eba32c3fc52"}


def _collect_bundles(bundles, store):
    """collect_runs over recorded bundles with an empty run store and the default record dir."""
    from gtalib.training import records
    from gtalib.training import runs as gruns

    specs = {k: gruns.load_spec(records.default_record_dir() / rid) for k, rid in bundles.items()}
    refs = [RunRef(v, arm, (("gate", True),) if arm == "rec" else (), seed)
            for v, arm, seed in bundles]
    plan = SimpleNamespace(spec=lambda ref: specs[(ref.variant, ref.arm, ref.seed)])
    col = collect.collect_runs(refs, plan, store)
    assert col.status["state"].tolist() == ["done"] * len(bundles)
    assert col.status["run_id"].tolist() == list(bundles.values())
    return col


def test_the_recorded_bundles_give_their_probes_and_no_sink(tmp_path):
    from gtalib.training import records

    col = _collect_bundles(BUNDLES_1000, tmp_path / "store")
    assert col.record_dir == records.default_record_dir()
    pr = P.read_probes(col)
    assert pr.missing.empty and pr.summary["with_probes"].tolist() == [1, 1, 1, 1]
    for rid in BUNDLES_1000.values():
        stored = json.loads((records.default_record_dir() / rid / "probes.json").read_text())
        got = pr.per_layer[pr.per_layer["run_id"] == rid]
        assert got["first_token_share"].tolist() == stored["first_token_share"]
        assert got["max_abs_residual"].max() == stored["max_abs_residual_overall"]
        row = pr.summary.set_index(["variant", "arm"]).loc[(stored["variant"],
                                                            "rec" if stored["gate"] else "alt")]
        assert row["gate_mean"] == pytest.approx(
            math.nan if stored["gate_mean"] is None else
            sum(stored["gate_mean"]) / len(stored["gate_mean"]), nan_ok=True)
    text = P.probe_findings(pr.summary)
    assert text.startswith("No attention sink forms at this scale")
    assert "No massive activations form without the gate" in text
    assert "(MLRA-2, MLA)" in text


def test_bundles_without_probes_are_counted_and_the_rest_shown(tmp_path, shown, monkeypatch):
    col = _collect_bundles(BUNDLES_250, tmp_path / "store")
    pr = P.read_probes(col)
    assert pr.missing["run_id"].tolist() == ["e86943321ee66dda", "93d0cbd8738bf115"]
    assert set(pr.missing["detail"]) == {"no probes.json: recorded before probes were stored"}
    alt, rec = (pr.summary.set_index("arm").loc[arm] for arm in ("alt", "rec"))
    assert (alt["with_probes"], rec["with_probes"]) == (0, 2)
    assert math.isnan(alt["first_token_share"])
    assert 0.2 < rec["gate_mean"] < 0.5
    monkeypatch.setattr(plt, "show", lambda: None)
    P.show_probes(SimpleNamespace(collected=col, complete=["mla"]))
    assert [ax.get_title() for ax in plt.gcf().axes] == ["MLA"]  # one panel per variant
    plt.close("all")
    notice, caption, table, findings = shown
    assert notice.startswith("**2 of 4 runs have no gate probes**")
    assert "windows of 128 tokens" in caption and "0.035" in caption
    assert table.loc["MLA", "runs with probes (no gate; gate)"] == "0 of 2; 2 of 2"
    assert table.loc["MLA", "first-token share, no gate"] == "—"
    assert findings.startswith("No run without the gate has probes here")
