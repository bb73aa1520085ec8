"""Analysis of the book on synthetic metrics whose ΔL, CI and verdicts are known in closed form."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from gtalib.book import analysis as A
from gtalib.book import curves as C
from synthetic import metrics, runs_frame


# --- ΔL ----------------------------------------------------------------------------------------


def _ablation_runs(deltas, rec_finals=(3.0, 3.0), steps=(0, 50, 100)):
    """Two seeds; alt = rec + delta_seed at every step; rec final loss per seed given."""
    spec = {}
    for seed, (dl, rf) in enumerate(zip(deltas, rec_finals)):
        rec = np.linspace(rf + 2, rf, len(steps))
        spec[("mla", "rec", seed)] = metrics(list(steps), rec)
        spec[("mla", "alt", seed)] = metrics(list(steps), rec + dl)
    return runs_frame(spec)


def test_band_and_final_table_closed_form():
    runs = _ablation_runs([0.10, 0.30])
    curves = C.delta_curves(runs)
    band = C.seed_band(curves)
    half = math.tan(0.475 * math.pi) * (0.2 / math.sqrt(2)) / math.sqrt(2)  # s = 0.1·√2
    last = band[band["step"] == 100].iloc[0]
    assert last["mean"] == pytest.approx(0.2)
    assert last["hi"] - last["mean"] == pytest.approx(half)
    table = A.final_delta_table(runs, {"mla": 0.02})
    row = table.loc["mla"]
    assert row["ΔL"] == pytest.approx(0.2) and row["seeds"] == 2 and row["step"] == 100
    # CI (0.2 ± 1.27) covers zero: within noise even though both seeds are positive
    assert row["verdict"] == "within noise"
    # alt finals 3.1 and 3.3 -> spread 0.2 (the larger arm); rec spread 0
    assert row["seed spread"] == pytest.approx(0.2)
    # resolvable |ΔL| = the half-width; 0.2 needs the smallest n with t_{n-1}·0.1√2/√n < 0.2:
    # n = 4: 3.182·0.1414/2 = 0.225, n = 5: 2.776·0.1414/√5 = 0.176
    assert row["resolvable |ΔL|"] == pytest.approx(half)
    sd = 0.2 / math.sqrt(2)
    need = min(n for n in range(2, 21) if stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n) < 0.2)
    assert row["pairs to resolve"] == need == 5


def test_final_table_differs_when_seeds_agree_against_paper():
    # three seeds, ΔL = -0.20, -0.21, -0.19 (tight), rec finals equal -> spread 0.02 (alt arm)
    spec = {}
    for seed, dl in enumerate([-0.20, -0.21, -0.19]):
        rec = np.array([5.0, 4.0, 3.0])
        spec[("gqa", "rec", seed)] = metrics([0, 1, 2], rec)
        spec[("gqa", "alt", seed)] = metrics([0, 1, 2], rec + dl)
    t = A.final_delta_table(runs_frame(spec), {"gqa": 0.02})
    assert t.loc["gqa", "ΔL"] == pytest.approx(-0.20)
    assert t.loc["gqa", "seed spread"] == pytest.approx(0.02)
    assert t.loc["gqa", "verdict"] == "differs"



def test_ablation_result_on_a_synthetic_store(tmp_path, monkeypatch):
    import shutil
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import synthetic

    from gtalib.book import figures

    monkeypatch.setattr(figures, "data_spec", synthetic.synthetic_identity)
    synthetic.write_store(tmp_path, "ci", seeds=2, max_steps=20)
    r = A.ablation_result("init", "ci", 2, tmp_path)
    # 20 logged steps -> no smoothing; curves from the training loss at every step
    assert r.smoothing == 1 and r.curves["step"].nunique() == 20
    # synthetic alternative arm = recommended + EFFECT["init"] at every step and seed
    assert r.curves["delta"].to_numpy() == pytest.approx(synthetic.EFFECT["init"])
    assert r.final.loc["gqa", "ΔL"] == pytest.approx(synthetic.EFFECT["init"])
    assert r.incomplete == []
    # delete one run: its variant leaves the figure entirely and is named as incomplete
    missing = r.collected.status.query("variant == 'mla' and arm == 'alt' and seed == 1")
    shutil.rmtree(tmp_path / missing["run_id"].iloc[0])
    r2 = A.ablation_result("init", "ci", 2, tmp_path)
    assert r2.complete == ["gqa"] and r2.incomplete == ["mla"]
    assert set(r2.curves["variant"]) == {"gqa"} and list(r2.final.index) == ["gqa"]
    assert r2.collected.incomplete["state"].tolist() == ["missing"]
    # a finished run whose metrics were truncated is reported corrupt, never plotted
    cut = r.collected.status.query("variant == 'gqa' and arm == 'rec' and seed == 0")
    metrics = tmp_path / cut["run_id"].iloc[0] / "metrics.csv"
    metrics.write_text("".join(metrics.read_text().splitlines(keepends=True)[:11]))  # steps 1-10
    r3 = A.ablation_result("init", "ci", 2, tmp_path)
    assert r3.complete == [] and sorted(r3.incomplete) == ["gqa", "mla"]
    failed = r3.collected.incomplete.query("state == 'corrupt'")
    assert len(failed) == 1 and "truncated" in failed["detail"].iloc[0]


@pytest.mark.parametrize("row, text, needle", [
    (7, "5.6x", "'5.6x' is not a number"), (3, "", "empty cell"), (20, "inf", "not a finite number")])
def test_corrupt_cell_is_named_on_the_page_and_other_runs_still_plot(tmp_path, monkeypatch, row,
                                                                     text, needle):
    import sys
    from pathlib import Path

    import pandas as pd

    sys.path.insert(0, str(Path(__file__).parent))
    import synthetic

    from gtalib.book import collect, figures

    monkeypatch.setattr(figures, "data_spec", synthetic.synthetic_identity)
    synthetic.write_store(tmp_path, "ci", seeds=2, max_steps=20)
    status = A.ablation_result("init", "ci", 2, tmp_path).collected.status
    rid = status.query("variant == 'mla' and arm == 'alt' and seed == 1")["run_id"].iloc[0]
    cells = pd.read_csv(tmp_path / rid / "metrics.csv", dtype=str, keep_default_na=False)
    cells.loc[row - 1, "train_loss"] = text
    cells.to_csv(tmp_path / rid / "metrics.csv", index=False)
    r = A.ablation_result("init", "ci", 2, tmp_path)
    assert r.complete == ["gqa"] and r.incomplete == ["mla"]  # gqa still plots
    assert set(r.curves["variant"]) == {"gqa"}
    bad = r.collected.incomplete
    assert bad["state"].tolist() == ["corrupt"] and bad["run_id"].tolist() == [rid]
    want = f"run {rid}: {rid}/metrics.csv, column 'train_loss', row {row} (step {row}): "
    assert bad["detail"].iloc[0].startswith(want) and needle in bad["detail"].iloc[0]
    assert str(tmp_path) not in bad["detail"].iloc[0]  # no machine path on the page
    notice = collect.missing_notice(r.collected)
    assert f"`{rid}`): corrupt — {want}" in notice


@pytest.mark.parametrize("variant,blocks", [("mla", 1), ("gla-2", 2), ("mlra-4", 4)])
def test_key_variance_ratio_matches_d_over_w(variant, blocks):
    """Claim 3's statistic: d/w without the latent scale (w = 4·head_dim / blocks), 1 with it.
    d_model 1024, head_dim 64: d/w = 4, 8, 16; ±15 % covers the sampling spread (a few %)."""
    from gtalib.book.analysis import key_variance_ratio

    off, expected = key_variance_ratio(variant, False, d_model=1024, n_head=8, head_dim=64,
                                       tokens=256)
    assert expected == 1024 / (256 / blocks)
    assert off == pytest.approx(expected, rel=0.15)
    on, one = key_variance_ratio(variant, True, d_model=1024, n_head=8, head_dim=64, tokens=256)
    assert one == 1.0 and on == pytest.approx(1.0, rel=0.15)


def test_key_variance_ratio_rejects_non_latent_variant():
    from gtalib.book.analysis import key_variance_ratio

    with pytest.raises(ValueError, match="variant"):
        key_variance_ratio("gqa", True)


# --- one aggregation rule for every claim ------------------------------------------------------

def _final(verdicts: dict) -> pd.DataFrame:
    """A final-ΔL table with the given per-variant verdicts (numbers are placeholders)."""
    k = len(verdicts)
    return pd.DataFrame({"seeds": 3, "ΔL": [0.01 * (i + 1) for i in range(k)], "CI low": -0.1,
                         "CI high": 0.1, "resolvable |ΔL|": 0.1, "pairs to resolve": math.nan,
                         "seed spread": 0.02, "verdict": list(verdicts.values())},
                        index=pd.Index(list(verdicts), name="variant"))


@pytest.mark.parametrize("verdicts, expected", [
    # the gate claim of the issue: only GQA differs, four of five within noise
    ({"gqa": "differs", "mla": "within noise", "gla-2": "within noise", "mlra-2": "within noise",
      "mlra-4": "within noise"}, "mixed: within noise 4/5, differs 1/5"),
    # the init claim with a similar mix
    ({"mha": "within noise", "mqa": "differs", "gqa": "within noise", "mla": "agrees"},
     "mixed: within noise 2/4, agrees 1/4, differs 1/4"),
    ({"gqa": "agrees", "mla": "within noise"}, "mixed: agrees 1/2, within noise 1/2"),
    ({"gqa": "differs", "mla": "differs", "gla-2": "agrees"}, "mixed: differs 2/3, agrees 1/3"),
    ({"gqa": "within noise", "mla": "undetermined (1 seed)"},
     "mixed: within noise 1/2, undetermined (1 seed) 1/2"),
    ({"gqa": "differs", "mla": "differs"}, "differs"),
    ({"gqa": "agrees", "mla": "agrees", "gla-2": "agrees"}, "agrees"),
    ({"gqa": "within noise"}, "within noise"),
])
def test_claims_aggregate_verdicts_by_one_rule(verdicts, expected):
    assert A.aggregate_verdicts(verdicts.values()) == expected
    for largest in (None, "gqa"):  # every ablation claim goes through the same rule
        assert A._claim_from_final(_final(verdicts), largest)[1] == expected


def test_claims_resolution_names_each_variants_n_interval_and_what_could_hide():
    final = _final({"mha": "within noise", "tpa": "agrees"})
    final["pair source"] = ["both local on X", "seed 0: both local on X; seed 1: MIXED: ..."]
    final.loc["tpa", "pairs to resolve"] = 3
    _, _, seen = A._claim_from_final(final, None)
    assert seen == (
        "MHA: n 3, ΔL +0.010 [-0.100, +0.100], resolvable |ΔL| ≥ 0.100, pairs to resolve — "
        "(within noise: |ΔL| < 0.100 nats could hide here); "
        "TPA: n 3, ΔL +0.020 [-0.100, +0.100], resolvable |ΔL| ≥ 0.100, pairs to resolve 3, "
        "with MIXED pairs (see its page)")
    one = _final({"gqa": "undetermined (1 seed)"}).assign(seeds=1)
    assert A._claim_from_final(one, None)[2] == "GQA: 1 pair, ΔL +0.010, no interval"


def test_aggregate_verdicts_refuses_unknown_or_empty():
    with pytest.raises(ValueError, match="non-empty"):
        A.aggregate_verdicts([])
    with pytest.raises(ValueError, match="'maybe'"):
        A.aggregate_verdicts(["agrees", "maybe"])


def test_main_claim_verdict_needs_the_ranking_resolved():
    import pandas as pd

    from gtalib.book.analysis import main_claim_verdict

    ppl = pd.Series({"MHA": 10.0, "MLRA-4": 9.0, "MLRA-4 + gate": 8.0})
    tight = pd.Series({"MHA": 0.1, "MLRA-4": 0.1, "MLRA-4 + gate": 0.1})
    wide = pd.Series({"MHA": 0.6, "MLRA-4": 0.6, "MLRA-4 + gate": 0.6})
    assert main_claim_verdict(ppl, tight)[0] == "agrees"
    v, seen = main_claim_verdict(ppl, wide)
    assert v == "within noise" and "intervals overlap" in seen
    worse = ppl.copy()
    worse["MLRA-4 + gate"] = 9.5  # the gate makes it worse, resolved at tight intervals
    assert main_claim_verdict(worse, tight)[0] == "differs"
    assert main_claim_verdict(worse, wide)[0] == "within noise"
    v, seen = main_claim_verdict(pd.Series({"MHA": 9.0, "MLRA-4": 9.05}),
                                 pd.Series({"MHA": 0.3, "MLRA-4": 0.3}))
    assert v == "within noise" and "MLRA-4 lowest of the eleven: no (MLRA-4 9.050" in seen
    assert main_claim_verdict(pd.Series({"MHA": 9.0}), pd.Series({"MHA": 0.1}))[0].startswith(
        "not measured")
