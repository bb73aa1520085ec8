"""The curve features' statistics against values computed independently: synthetic curves with a
known course, a known crossing and a known convergence; scipy's one-sample t-test, a hand count
of Kendall's τ-b, statsmodels' Holm adjustment, and a simulation of the two-way random-effects
model for the data-order interval."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from gtalib.book.analysis import features as ft
from gtalib.book.analysis.stats import data_order_stats

STEPS = np.arange(10, 110, 10)


def _curves_frame(C, variants, steps=STEPS):
    rows = [(v, s, int(t), float(C[s, i, j])) for s in range(C.shape[0])
            for i, v in enumerate(variants) for j, t in enumerate(steps)]
    return pd.DataFrame(rows, columns=["variant", "seed", "step", "delta"])


def test_curve_array_keeps_the_window_and_the_common_seeds_in_order():
    rng = np.random.default_rng(1)
    C = rng.normal(size=(4, 3, len(STEPS)))
    frame = _curves_frame(C, ["a", "b", "c"])
    frame = frame[~((frame["variant"] == "c") & (frame["seed"] == 3))]  # c lacks seed 3
    got, steps, seeds = ft.curve_array(frame.sample(frac=1, random_state=0), ["c", "a"], 40)
    assert seeds == [0, 1, 2]
    assert steps.tolist() == list(range(40, 110, 10))
    np.testing.assert_array_equal(got[:, 0], C[:3, 2, 3:])
    np.testing.assert_array_equal(got[:, 1], C[:3, 0, 3:])
    with pytest.raises(ValueError, match="no seed and step"):
        ft.curve_array(frame, ["a", "b"], 1000)


def test_the_course_is_the_paired_t_test_of_each_variants_change():
    rng = np.random.default_rng(2)
    n, slopes = 8, {"falls": -0.004, "flat": 0.0}
    C = np.stack([np.stack([0.1 + b * STEPS + rng.normal(0, 0.01, len(STEPS)) for b in
                            slopes.values()]) for _ in range(n)])
    got = ft.course(C, list(slopes), {"falls": -1, "flat": -1})
    for f, i in zip(got, range(2)):
        change = C[:, i, -1] - C[:, i, 0]
        ref = sps.ttest_1samp(change, 0.0)
        ci = ref.confidence_interval(0.95)
        assert f.estimate == pytest.approx(change.mean(), abs=1e-12)
        assert (f.low, f.high) == pytest.approx((ci.low, ci.high), abs=1e-12)
        assert f.p == pytest.approx(ref.pvalue, rel=1e-9)
    # the known course: −0.004 × 90 steps = −0.36 nats, well inside the interval
    assert got[0].low < -0.36 < got[0].high


def test_a_curve_crossing_its_rival_inside_the_window_differs_from_highest_throughout():
    """The named curve is above its rival everywhere but at one step, where it is 0.01 below:
    the margin over the window is exactly −0.01, and with identical seeds every bootstrap
    replicate says so."""
    n, rival = 6, np.full(len(STEPS), 0.05)
    top = rival + 0.02
    top[6] = rival[6] - 0.01  # the crossing
    C = np.stack([np.stack([top, rival, rival - 0.03])] * n)
    f = ft.top_margin(C, ["top", "rival", "low"], "top")
    assert f.estimate == pytest.approx(-0.01)
    assert (f.low, f.high) == pytest.approx((-0.01, -0.01))
    assert f.p == pytest.approx(2 / (ft.BOOTSTRAP_RESAMPLES + 1))
    _, verdicts = ft.feature_verdicts([f])
    assert verdicts == ["differs"]
    # without the crossing it is above throughout, by the smallest gap (0.02 to the rival)
    C[:, 0, 6] = 0.07
    f = ft.top_margin(C, ["top", "rival", "low"], "top")
    assert f.estimate == pytest.approx(0.02)
    assert ft.feature_verdicts([f])[1] == ["agrees"]


def test_two_curves_whose_means_meet_are_within_noise():
    rng = np.random.default_rng(3)
    n = 10
    base = np.linspace(0.08, 0.02, len(STEPS))
    C = np.stack([np.stack([base + rng.normal(0, 0.02), base + rng.normal(0, 0.02)])
                  for _ in range(n)])
    f = ft.top_margin(C, ["a", "b"], "a")
    assert f.low < 0 < f.high
    assert f.p > 0.05
    assert ft.feature_verdicts([f])[1] == ["within noise"]


def test_convergence_is_the_ratio_of_the_spreads_at_the_windows_ends():
    start, end = np.array([0.08, 0.06, 0.04]), np.array([0.03, 0.025, 0.02])
    curve = np.linspace(start, end, len(STEPS)).T  # variants × steps
    C = np.stack([curve] * 5)
    f = ft.convergence(C, expected=-1)
    assert f.estimate == pytest.approx(0.25)  # sd(end) / sd(start) = 0.005 / 0.02
    assert f.null == 1.0
    assert ft.feature_verdicts([f])[1] == ["agrees"]
    g = ft.convergence(C[:, :, ::-1], expected=-1)  # the same curves run backwards spread out
    assert g.estimate == pytest.approx(4.0)
    assert ft.feature_verdicts([g])[1] == ["differs"]


def test_slowest_and_lowest_margins_from_known_changes_and_ends():
    falls = {"a": -0.05, "b": -0.03, "slow": -0.01}
    C = np.stack([np.stack([np.linspace(0.1, 0.1 + d, len(STEPS)) for d in falls.values()])] * 4)
    f = ft.slowest_margin(C, list(falls), "slow", expected=-1)
    assert f.estimate == pytest.approx(0.02)  # its fall (0.01) is 0.02 below the next (0.03)
    F = np.tile([0.03, 0.02, 0.025], (4, 1))
    f = ft.lowest_margin(F, ["a", "b", "c"], "b")
    assert f.estimate == pytest.approx(0.005)
    f = ft.lowest_margin(F, ["a", "b", "c"], "a")
    assert f.estimate == pytest.approx(-0.01)


def _tau_b(x, y):
    """Kendall's τ-b by counting pairs (Kendall 1945)."""
    conc = disc = tx = ty = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        if dx == 0 and dy == 0:
            continue
        if dx == 0:
            tx += 1
        elif dy == 0:
            ty += 1
        elif dx == dy:
            conc += 1
        else:
            disc += 1
    return (conc - disc) / math.sqrt((conc + disc + tx) * (conc + disc + ty))


def test_order_is_kendalls_tau_b_of_the_mean_final_deltas_with_the_papers_ties():
    paper = [0.035, 0.02, 0.02, 0.017, 0.0145]
    F = np.tile([0.20, 0.05, 0.06, 0.07, 0.04], (6, 1))
    f = ft.order(F, paper)
    assert f.estimate == pytest.approx(_tau_b(F[0], paper))
    assert f.p == pytest.approx(sps.kendalltau(F.mean(axis=0), paper).pvalue)
    assert ft.order(np.tile(paper, (3, 1)), paper).estimate == pytest.approx(1.0)


def test_the_bootstrap_p_value_is_the_dual_of_its_percentile_interval():
    rng = np.random.default_rng(5)
    for shift in (0.0, 0.3, 1.5):
        x = rng.normal(shift, 1.0, 12)
        est, lo, hi, p = ft.bootstrap(lambda idx: float(x[idx].mean()), len(x))
        assert est == pytest.approx(x.mean())
        # p below 5 % exactly when the 95 % percentile interval leaves out zero (up to the
        # one-count correction at the edge)
        assert (p <= 0.05) == (not lo <= 0 <= hi) or abs(p - 0.05) < 0.002


def test_feature_verdicts_adjust_the_figures_features_as_one_holm_family():
    feats = [ft.Feature("course", v, m, 0, 0, p, 0.0, -1, 10) for v, m, p in
             [("a", -0.1, 0.004), ("b", 0.1, 0.011), ("c", -0.1, 0.03), ("d", -0.1, 0.2)]]
    adj, verdicts = ft.feature_verdicts(feats)
    ref = multipletests([f.p for f in feats], method="holm")[1]
    np.testing.assert_allclose(adj, ref)
    assert verdicts == ["agrees", "differs", "within noise", "within noise"]


def test_the_data_order_interval_matches_its_formula():
    x = np.array([0.02, 0.05, 0.01, 0.04, 0.03])
    y = np.array([0.02, 0.06, -0.01])
    st = data_order_stats(x, y)
    a, b = x.var(ddof=1) / 5, y.var(ddof=1)
    dof = (a + b) ** 2 / (a ** 2 / 4 + b ** 2 / 2)
    assert st.se == pytest.approx(math.sqrt(a + b))
    assert st.dof == pytest.approx(dof)
    assert st.high - st.mean == pytest.approx(sps.t.ppf(0.975, dof) * math.sqrt(a + b))
    assert st.p == pytest.approx(2 * sps.t.sf(x.mean() / math.sqrt(a + b), dof))
    with pytest.raises(ValueError, match="two data orders"):
        data_order_stats(x, [0.1])


def test_the_data_order_interval_covers_the_mean_over_data_orders_where_the_seed_interval_does_not():
    """Simulate ΔL = μ + a_s + b_d + e with data-order effects as large as the seeds': every
    pair of the seed interval shares one data order, so it misses μ far more often than 5 %;
    the interval with the data order's variance keeps at least its nominal coverage."""
    rng = np.random.default_rng(7)
    mu, reps, n, k = 0.02, 2000, 10, 5
    seed_cover = order_cover = 0
    for _ in range(reps):
        a, b = rng.normal(0, 0.02, n), rng.normal(0, 0.02, k)
        e = rng.normal(0, 0.005, (n, k))
        x = mu + a + b[0] + e[:, 0]  # the figure's pairs: every seed at data order 0
        y = mu + a[0] + b + e[0, :]  # the pair at seed 0 at every data order
        t = sps.ttest_1samp(x, 0.0).confidence_interval(0.95)
        seed_cover += t.low <= mu <= t.high
        st = data_order_stats(x, y)
        order_cover += st.low <= mu <= st.high
    assert seed_cover / reps < 0.75
    assert order_cover / reps >= 0.94


def test_the_convergence_test_holds_its_level_when_the_spread_does_not_change():
    """Five variants whose ΔL differ by a fixed amount plus seed noise, the same at the window's
    start and end: the convergence test rejects about 5 % of such figures (a bootstrap of the
    spread of the mean curves rejected 8–10 %)."""
    rng = np.random.default_rng(13)
    trials, rejected = 1000, 0
    for _ in range(trials):
        base = rng.normal(0, 0.02, 5)
        C = base[None, :, None] + rng.normal(0, 0.02, (5, 5, 2))  # seeds × variants × (start, end)
        rejected += ft.convergence(C, -1).p <= 0.05
    assert 0.025 <= rejected / trials <= 0.075
