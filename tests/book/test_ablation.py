"""Analysis of the book on synthetic metrics whose ΔL, CI and verdicts are known in closed form."""

import math

import numpy as np
import pytest
from scipy import stats

from gtalib.book import ablation as A
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
