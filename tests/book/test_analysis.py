"""Analysis of the book on synthetic metrics whose ΔL, CI and verdicts are known in closed form."""

import math

import numpy as np
import pandas as pd
import pytest

from gtalib.book import analysis as A


def metrics(steps, losses, tokens_per_step=100, **extra):
    return pd.DataFrame({"step": steps, "tokens": np.asarray(steps) * tokens_per_step,
                         "train_loss": losses, "val_loss": losses, **extra})


def runs_frame(spec):
    """spec: {(variant, arm, seed): metrics frame} -> runs frame."""
    out = []
    for (v, arm, seed), df in spec.items():
        df = df.copy()
        df.insert(0, "seed", seed)
        df.insert(0, "label", f"{v} {arm}")
        df.insert(0, "arm", arm)
        df.insert(0, "variant", v)
        out.append(df)
    return pd.concat(out, ignore_index=True)


# --- Student t ---------------------------------------------------------------------------------

def test_t_critical_matches_closed_forms():
    # dof 1 is Cauchy: F(t) = 1/2 + atan(t)/π  =>  t_0.975 = tan(0.475 π)
    assert A.t_critical(0.95, 1) == pytest.approx(math.tan(0.475 * math.pi), rel=1e-7)
    # dof 2: F(t) = 1/2 + t / (2 sqrt(2 + t²))  =>  t² = 2 p² / (1 − p²) with p = 0.95
    assert A.t_critical(0.95, 2) == pytest.approx(math.sqrt(2 * 0.95**2 / (1 - 0.95**2)), rel=1e-7)
    # large dof -> normal quantile 1.959964
    assert A.t_critical(0.95, 10**6) == pytest.approx(1.959964, abs=1e-4)
    # a textbook table value (dof 4, 90 % two-sided): 2.132
    assert A.t_critical(0.90, 4) == pytest.approx(2.1318, abs=1e-4)


def test_t_cdf_closed_form_and_errors():
    for t in (-3.0, -0.5, 0.0, 1.0, 7.0):
        assert A.t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-9)
    with pytest.raises(ValueError, match="dof"):
        A.t_cdf(1.0, 0)
    with pytest.raises(ValueError, match="confidence"):
        A.t_critical(1.5, 3)


def test_mean_ci_two_values():
    m, lo, hi, n = A.mean_ci([1.0, 3.0], 0.95)
    # s = sqrt(2), n = 2: half width = t_{.975,1} * sqrt(2)/sqrt(2)
    half = math.tan(0.475 * math.pi)
    assert (m, n) == (2.0, 2)
    assert lo == pytest.approx(2 - half) and hi == pytest.approx(2 + half)
    m1, lo1, hi1, n1 = A.mean_ci([5.0])
    assert m1 == 5.0 and n1 == 1 and math.isnan(lo1) and math.isnan(hi1)
    with pytest.raises(ValueError):
        A.mean_ci([math.nan])


# --- ΔL ----------------------------------------------------------------------------------------

def test_paired_delta_uses_common_steps_only():
    rec = metrics([0, 10, 20, 30], [5.0, 4.0, 3.0, 2.5])
    alt = metrics([0, 10, 30], [5.5, 4.25, 2.6])
    d = A.paired_delta(alt, rec)
    assert d["step"].tolist() == [0, 10, 30]
    assert d["delta"].tolist() == pytest.approx([0.5, 0.25, 0.1])
    assert d["tokens"].tolist() == [0, 1000, 3000]


def test_paired_delta_rejects_unpaired_runs():
    rec = metrics([0, 10], [5.0, 4.0], tokens_per_step=100)
    alt = metrics([0, 10], [5.0, 4.0], tokens_per_step=200)
    with pytest.raises(ValueError, match="not paired"):
        A.paired_delta(alt, rec)
    with pytest.raises(ValueError, match="share no step"):
        A.paired_delta(metrics([1], [1.0]), metrics([2], [1.0]))
    with pytest.raises(KeyError, match="val_loss"):
        A.paired_delta(rec.drop(columns="val_loss"), rec)


def test_smoothing_is_trailing_mean():
    s = A.smooth(pd.Series([0.0, 2.0, 4.0, 6.0]), 2)
    assert s.tolist() == [0.0, 1.0, 3.0, 5.0]
    with pytest.raises(ValueError, match="window"):
        A.smooth(pd.Series([1.0]), 0)


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
    curves = A.delta_curves(runs)
    band = A.seed_band(curves)
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


def test_verdict_rules():
    assert A.verdict(0.1, 0.3, 0.2, 0.05, 0.02, 2) == "agrees"
    assert A.verdict(-0.3, -0.1, -0.2, 0.05, 0.02, 2) == "differs"
    assert A.verdict(-0.1, 0.3, 0.1, 0.0, 0.02, 2) == "within noise"  # CI covers 0
    assert A.verdict(0.1, 0.3, 0.2, 0.25, 0.02, 2) == "within noise"  # below seed spread
    assert A.verdict(math.nan, math.nan, 0.2, 0.0, 0.02, 1) == "undetermined (1 seed)"


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


# --- entropy, plateau, main table -------------------------------------------------------------

def test_entropy_gap():
    runs = runs_frame({("mla", "main", 0): metrics([0, 5], [5.0, 2.0]),
                       ("mla", "main", 1): metrics([0, 5], [5.0, 2.5])})
    g = A.entropy_gap(runs, entropy=3.0)
    assert g.loc["mla main", "final val loss"] == pytest.approx(2.25)
    assert g.loc["mla main", "gap"] == pytest.approx(0.75)
    assert g.loc["mla main", "seeds"] == 2


def test_plateau_escape_step():
    steps = list(range(10))
    # starts at ln V, drops to the plateau 3.0, leaves it at step 6
    loss = [5.5, 3.05, 3.0, 3.0, 3.0, 3.0, 2.8, 2.6, 2.5, 2.4]
    runs = runs_frame({("mla", "rec", 0): metrics(steps, loss),
                       ("mla", "alt", 0): metrics(steps, [3.0] * 10)})
    e = A.plateau_escape(runs, entropy=3.0, margin=0.1, window=1).set_index("arm")
    assert e.loc["rec", "escape_step"] == 6 and e.loc["rec", "escape_tokens"] == 600
    assert math.isnan(e.loc["alt", "escape_step"])


def test_main_table_perplexity_and_avg():
    la, lb = math.log(10.0), math.log(20.0)
    spec = {}
    for seed in (0, 1):
        m = metrics([0, 100], [4.0, 3.0], **{"val_loss/news": [5.0, la], "val_loss/bible": [5.0, lb]})
        spec[("mla", "main", seed)] = m
    mean, half = A.main_table(runs_frame(spec))
    assert list(mean.columns) == ["news", "bible", "avg"]
    assert mean.loc["mla main", "news"] == pytest.approx(10.0)
    assert mean.loc["mla main", "avg"] == pytest.approx(15.0)  # mean of perplexities, as the paper
    assert half.loc["mla main", "avg"] == pytest.approx(0.0)
    loss, _ = A.main_table(runs_frame(spec), metric="loss")
    assert loss.loc["mla main", "bible"] == pytest.approx(lb)
    with pytest.raises(ValueError, match="metric"):
        A.main_table(runs_frame(spec), metric="acc")


def test_auto_smoothing():
    assert A.auto_smoothing(20) == 1 and A.auto_smoothing(300) == 15 and A.auto_smoothing(0) == 1


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

    from gtalib.book import figures, plotting

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
    notice = plotting.missing_notice(r.collected)
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
    """A final-ΔL table with the given per-variant verdicts (ΔL values are placeholders)."""
    return pd.DataFrame({"ΔL": [0.01 * (i + 1) for i in range(len(verdicts))],
                         "verdict": list(verdicts.values())},
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


def test_aggregate_verdicts_refuses_unknown_or_empty():
    with pytest.raises(ValueError, match="non-empty"):
        A.aggregate_verdicts([])
    with pytest.raises(ValueError, match="'maybe'"):
        A.aggregate_verdicts(["agrees", "maybe"])
