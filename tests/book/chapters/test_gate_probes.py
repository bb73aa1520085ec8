"""The gating page's gate probes: reading ``probes.json`` of local and recorded runs into a frame
(means computed by hand), the verdict words and numbers the page states, and the recorded
bundles."""

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
    assert why["r1"] == "absent"
    assert why["r2"] == "of someone-else, 2 layers"
    assert why["r4"] == "wrong length"
    assert why["r5"].startswith("unreadable: JSONDecodeError")


@pytest.fixture
def shown(monkeypatch):
    """What the page displays (a Styler as its frame)."""
    out = []
    monkeypatch.setattr(P, "display", lambda obj: out.append(getattr(obj, "data", obj)))
    return out


def test_a_page_without_probes_lists_the_runs_that_lack_them(tmp_path, shown):
    import shutil

    col = _hand_store(tmp_path)
    for folder in ("a0", "a1"):
        shutil.rmtree(col.run_dir / folder)
    shutil.rmtree(col.record_dir / "r0")
    pr = P.read_probes(col)
    assert pr.summary["with_probes"].sum() == 0 and len(pr.missing) == 7
    words = P.probe_findings(pr.summary)
    assert (words["probe_runs"], words["probe_probed"]) == ("7", "0")
    assert [words[k] for k in ("probe_sink", "probe_massive", "probe_gate")] == [
        "not measured"] * 3
    assert [words[k] for k in ("probe_sink_gated", "probe_ratio", "probe_gate_way",
                               "probe_tokens", "probe_uniform")] == ["—"] * 5
    probes = P.probes_of(SimpleNamespace(collected=col, complete=["mla"]))
    P.show_probes(probes)
    assert P.probe_findings(probes.summary) == words and tuple(words) == P.FACT_NAMES
    lacking, table = shown  # no figure without probes
    assert list(lacking["run_id"]) == ["a0", "a1", "r0", "r1", "r2", "r4", "r5"]
    assert lacking.set_index("run_id").loc["a0", "detail"] == "absent"
    assert table.loc["MLA"].tolist() == ["0 of 2", "0 of 5", "—", "—", "—", "—", "—"]


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


def test_the_words_say_no_sink_forms_at_this_scale():
    w = P.probe_findings(_summary(alt=(0.03, 2.5), rec=(0.33, 0.025, 2.0)))
    # 0.03 < 2 × 0.035 (uniform over 128 tokens); 2.5 < 100; no sink, so nothing to remove
    assert (w["probe_sink"], w["probe_sink_gated"], w["probe_massive"]) == ("none", "—", "none")
    assert (w["probe_tokens"], w["probe_uniform"], w["qiu_share"]) == ("128", "0.035", "0.467")
    # the gate scales the largest |h| by 2.0 / 2.5; Qiu et al. 94 / 1053
    assert (w["probe_ratio"], w["qiu_ratio"]) == ("0.80", "0.09")
    # (0.5 − 0.33) / (0.5 − 0.116) = 44 % of the way: selective
    assert (w["probe_gate"], w["probe_gate_way"], w["qiu_gate"]) == ("selective", "44 %", "0.116")
    assert (w["probe_sink_factor"], w["probe_massive_at"], w["probe_gate_init"]) == (
        "2", "100", "0.5")
    assert (w["qiu_resid"], w["qiu_resid_gate"], w["qiu_share_gate"]) == ("1053", "94", "0.048")
    # a gate still at 0.5
    assert P.probe_findings(_summary(alt=(0.03, 2.5), rec=(0.49, 0.03, 2.5)))[
        "probe_gate"] == "near init"


def test_the_words_say_when_a_sink_forms_and_the_gate_removes_it():
    w = P.probe_findings(_summary(alt=(0.45, 1000.0), rec=(0.116, 0.05, 90.0)))
    assert (w["probe_sink"], w["probe_sink_gated"]) == ("in MLA", "removed")  # 0.05 < 0.45 / 2
    assert (w["probe_massive"], w["probe_ratio"]) == ("in MLA", "0.09")  # 1000 ≥ 100; 90 / 1000
    assert (w["probe_gate"], w["probe_gate_way"]) == ("as sparse", "100 %")
    # a sink the gate leaves in place: 0.4 is not below 0.45 / 2
    assert P.probe_findings(_summary(alt=(0.45, 1000.0), rec=(0.3, 0.4, 900.0)))[
        "probe_sink_gated"] == "kept"


def test_the_words_with_one_arm_probed():
    w = P.probe_findings(_summary(rec=(0.38, 0.03, 2.0)))
    assert (w["probe_sink"], w["probe_massive"], w["probe_ratio"]) == (
        "not measured", "not measured", "—")
    assert w["probe_gate"] == "selective"  # (0.5 − 0.38) / 0.384 = 31 %
    w = P.probe_findings(_summary(alt=(0.03, 2.5)))
    assert (w["probe_sink"], w["probe_massive"], w["probe_gate"], w["probe_ratio"]) == (
        "none", "none", "not measured", "—")


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
    assert table.loc["Qiu et al."].tolist() == ["", "", "0.116", "0.467", "0.048", "1053", "94"]
    assert table.loc["MLA"].tolist() == ["2 of 2", "2 of 2", "0.330", "0.030", "0.025", "2.500",
                                         "2.000"]
    assert P.probe_findings(_summary(alt=(0.03, 2.5)))["qiu_scale"] == QIU_SCALE


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
    w = P.probe_findings(pr.summary)
    assert (w["probe_sink"], w["probe_massive"], w["probe_probed"]) == ("none", "none", "4")
    share = pr.summary.set_index("arm").loc["alt", "first_token_share"]
    assert (share < 2 * P.uniform_first_token_share(128)).all()


def test_bundles_without_probes_are_counted_and_the_rest_shown(tmp_path, shown, monkeypatch):
    col = _collect_bundles(BUNDLES_250, tmp_path / "store")
    pr = P.read_probes(col)
    assert pr.missing["run_id"].tolist() == ["e86943321ee66dda", "93d0cbd8738bf115"]
    assert set(pr.missing["detail"]) == {"absent"}
    alt, rec = (pr.summary.set_index("arm").loc[arm] for arm in ("alt", "rec"))
    assert (alt["with_probes"], rec["with_probes"]) == (0, 2)
    assert math.isnan(alt["first_token_share"])
    assert 0.2 < rec["gate_mean"] < 0.5
    monkeypatch.setattr(plt, "show", lambda: None)
    probes = P.probes_of(SimpleNamespace(collected=col, complete=["mla"]))
    P.show_probes(probes)
    assert [ax.get_title() for ax in plt.gcf().axes] == ["MLA"]  # one panel per variant
    plt.close("all")
    lacking, table = shown
    words = P.probe_findings(probes.summary)
    assert list(lacking["run_id"]) == list(pr.missing["run_id"])
    assert table.loc["MLA", ["probed (no gate)", "probed (gate)"]].tolist() == ["0 of 2", "2 of 2"]
    assert table.loc["MLA", "share (no gate)"] == "—"
    assert (words["probe_sink"], words["probe_gate"], words["probe_uniform"]) == (
        "not measured", P.probe_findings(pr.summary)["probe_gate"], "0.035")
