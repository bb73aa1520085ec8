"""The book's statistics and verdict rule (gtalib.book.analysis.stats), on values whose t quantiles,
intervals and verdicts are known in closed form."""

import math

import numpy as np
import pytest
from scipy import stats

from gtalib.book.analysis import stats as S

# --- Student t ---------------------------------------------------------------------------------

def test_t_critical_matches_closed_forms():
    # dof 1 is Cauchy: F(t) = 1/2 + atan(t)/π  =>  t_0.975 = tan(0.475 π)
    assert S.t_critical(0.95, 1) == pytest.approx(math.tan(0.475 * math.pi), rel=1e-7)
    # dof 2: F(t) = 1/2 + t / (2 sqrt(2 + t²))  =>  t² = 2 p² / (1 − p²) with p = 0.95
    assert S.t_critical(0.95, 2) == pytest.approx(math.sqrt(2 * 0.95**2 / (1 - 0.95**2)), rel=1e-7)
    # large dof -> normal quantile 1.959964
    assert S.t_critical(0.95, 10**6) == pytest.approx(1.959964, abs=1e-4)
    # a textbook table value (dof 4, 90 % two-sided): 2.132
    assert S.t_critical(0.90, 4) == pytest.approx(2.1318, abs=1e-4)


def test_t_cdf_closed_form_and_errors():
    for t in (-3.0, -0.5, 0.0, 1.0, 7.0):
        assert S.t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-9)
    with pytest.raises(ValueError, match="dof"):
        S.t_cdf(1.0, 0)
    with pytest.raises(ValueError, match="confidence"):
        S.t_critical(1.5, 3)


def test_mean_ci_two_values():
    m, lo, hi, n = S.mean_ci([1.0, 3.0], 0.95)
    # s = sqrt(2), n = 2: half width = t_{.975,1} * sqrt(2)/sqrt(2)
    half = math.tan(0.475 * math.pi)
    assert (m, n) == (2.0, 2)
    assert lo == pytest.approx(2 - half) and hi == pytest.approx(2 + half)
    m1, lo1, hi1, n1 = S.mean_ci([5.0])
    assert m1 == 5.0 and n1 == 1 and math.isnan(lo1) and math.isnan(hi1)
    with pytest.raises(ValueError):
        S.mean_ci([math.nan])


def test_delta_stats_hand_computed_example():
    # ΔL = 0.10, 0.30, 0.20: mean 0.2, s = 0.1, n = 3; t_{0.975, 2} = sqrt(2 p² / (1 − p²))
    st = S.delta_stats([0.10, 0.30, 0.20])
    t2 = math.sqrt(2 * 0.95**2 / (1 - 0.95**2))  # 4.3027
    assert (st.n, st.mean, st.sd) == (3, pytest.approx(0.2), pytest.approx(0.1))
    assert st.resolvable == pytest.approx(t2 * 0.1 / math.sqrt(3)) == pytest.approx(0.24841, abs=1e-5)
    assert (st.low, st.high) == (pytest.approx(0.2 - st.resolvable), pytest.approx(0.2 + st.resolvable))
    # n = 2: 12.706·0.1/√2 = 0.898; n = 3: 0.248; n = 4: t_{0.975, 3} = 3.1824 → 0.159 < 0.2
    assert stats.t.ppf(0.975, 3) * 0.1 / 2 == pytest.approx(0.15912, abs=1e-5)
    assert st.pairs_needed == 4 and st.max_pairs == S.MAX_PAIRS == 20


def test_delta_stats_against_scipy_and_edge_cases():
    rng = np.random.default_rng(0)
    for n in (2, 3, 5, 8):
        x = rng.normal(0.02, 0.03, n)
        st = S.delta_stats(x, 0.9)
        half = stats.t.ppf(0.95, n - 1) * np.std(x, ddof=1) / math.sqrt(n)
        assert st.resolvable == pytest.approx(half, rel=1e-12)
        need = [m for m in range(2, 21)
                if stats.t.ppf(0.95, m - 1) * np.std(x, ddof=1) / math.sqrt(m) < abs(x.mean())]
        assert (st.pairs_needed == need[0]) if need else math.isnan(st.pairs_needed)
    # a mean far below the spread: no number of pairs up to the cap resolves it
    tiny = S.delta_stats([0.01, -0.01, 0.005])
    assert math.isnan(tiny.pairs_needed) and S.pairs_text(tiny.n, tiny.pairs_needed) == "—"
    assert S.delta_stats([0.01, -0.01, 0.005], max_pairs=10**4).pairs_needed > 20
    # no spread: the half-width is 0 and two pairs resolve any nonzero mean
    flat = S.delta_stats([0.05, 0.05])
    assert flat.resolvable == 0 and flat.pairs_needed == 2
    # one pair: no interval, no resolution, and the tables say so
    one = S.delta_stats([0.05])
    assert one.n == 1 and all(math.isnan(v) for v in (one.sd, one.low, one.high,
                                                        one.resolvable, one.pairs_needed))
    assert S.pairs_text(1, math.nan) == S.resolvable_text(1, math.nan) == "n/a (1 pair)"
    assert S.verdict_text("undetermined (1 seed)", 1, math.nan, 0.0) == (
        "undetermined (1 seed): one pair, no interval")
    for bad, match in ((dict(values=[]), "finite"), (dict(values=[1, 2], max_pairs=1), "max_pairs"),
                       (dict(values=[1, 2], confidence=1.0), "confidence")):
        with pytest.raises(ValueError, match=match):
            S.delta_stats(**bad)


def test_verdict_text_says_what_could_hide():
    # within noise: the adjusted p-value and the half-width that could hide at this n
    assert S.verdict_text("within noise", 3, 0.031, 0.2134) == (
        "within noise (p = 0.21 adjusted): |ΔL| < 0.031 nats could hide here")
    assert S.verdict_text("within noise", 3, 0.031, 0.2134, mean=-0.02) == (
        "within noise (p = 0.21 adjusted): |ΔL| < 0.031 nats could hide here")
    # a mean beyond the half-width: its own interval excludes zero, only Holm holds it back
    assert S.verdict_text("within noise", 5, 0.020, 0.07, mean=0.0306) == (
        "within noise (p = 0.07 adjusted): its own interval excludes zero, not after the "
        "adjustment")
    assert S.verdict_text("agrees", 3, 0.01, 0.0123) == "agrees (p = 0.012 adjusted)"
    assert S.pairs_text(3, 7.0) == "7" and S.resolvable_text(3, 0.03125) == "0.0312"


def test_delta_stats_p_value_is_the_t_test():
    x = np.array([0.03, 0.05, 0.01, 0.04])
    t = x.mean() / (x.std(ddof=1) / 2)  # the closed form: t = mean / (sd / √n), n = 4
    assert S.delta_stats(x).p == pytest.approx(2 * stats.t.sf(abs(t), 3), rel=1e-12)
    assert S.delta_stats([0.02] * 3).p == 0.0 and S.delta_stats([0.0] * 3).p == 1.0
    assert S.delta_stats([0.02] * 3).low == S.delta_stats([0.02] * 3).high == 0.02
    assert math.isnan(S.delta_stats([0.02]).p)


def test_holm_adjustment_closed_form():
    # m = 4: sorted 0.01, 0.02, 0.03, 0.5 -> 0.04, 0.06, 0.06 (monotone), 0.5; NaN stays out
    adj = S.holm_adjusted([0.03, 0.5, 0.01, math.nan, 0.02])
    assert adj[[2, 4, 0, 1]] == pytest.approx([0.04, 0.06, 0.06, 0.5])
    assert math.isnan(adj[3])
    assert S.holm_adjusted([0.4, 0.9]) == pytest.approx([0.8, 0.9])  # capped and monotone


def test_verdict_rules():
    assert S.verdict(0.01, 0.2, 0.02, 3) == "agrees"
    assert S.verdict(0.01, -0.2, 0.02, 3) == "differs"
    assert S.verdict(0.05, 0.2, 0.02, 3) == "agrees"  # at the level: rejected
    assert S.verdict(0.051, 0.2, 0.02, 3) == "within noise"
    assert S.verdict(math.nan, 0.2, 0.02, 1) == "undetermined (1 seed)"
    # a figure of three variants: only the strongest survives Holm's adjustment
    family = [S.delta_stats(x) for x in ([0.19, 0.2, 0.21], [0.0, 0.02, 0.04], [-0.05, 0.0, 0.05])]
    p, adj, v = S.family_verdicts(family, [0.1, 0.1, 0.1])
    assert adj == pytest.approx(S.holm_adjusted(p)) and v == ["agrees", "within noise", "within noise"]
    assert S.visible_text(0.03, 0.02) == "yes" and S.visible_text(0.01, 0.02) == "no"
    assert S.visible_text(0.01, math.nan) == "n/a"


def _simulated_verdicts(effects, n, sims, rng, sd=1.0, checked=2):
    """Verdicts of ``sims`` simulated figures: one variant per entry of ``effects`` (true mean
    paired ΔL, in units of the paired sd), ``n`` pairs each, the paper's sign positive.

    The figures are decided all at once by Holm's step-down written out here (sorted p times
    m − i, running maximum, capped at 1; statsmodels' Holm collects garbage on every call, a
    quarter second each beside the suite's imports); the first ``checked`` of them are decided
    by :func:`family_verdicts` too, which must agree."""
    x = rng.normal(np.asarray(effects)[None, :, None], sd, (sims, len(effects), n))
    mean, p = x.mean(-1), stats.ttest_1samp(x, 0.0, axis=-1).pvalue  # (sims, variants)
    order = np.argsort(p, axis=1)
    ranked = np.take_along_axis(p, order, axis=1) * (len(effects) - np.arange(len(effects)))
    adj = np.empty_like(p)
    np.put_along_axis(adj, order, np.minimum(np.maximum.accumulate(ranked, axis=1), 1.0), axis=1)
    out = np.where(adj <= 0.05, np.where(mean > 0, "agrees", "differs"), "within noise")
    for row in range(min(checked, sims)):
        family = [S.delta_stats(v) for v in x[row]]
        assert S.family_verdicts(family, [1.0] * len(effects))[2] == out[row].tolist()
    return out  # (sims, variants)


def test_more_pairs_only_sharpen_a_true_effect():
    """A figure of 9 variants, one with a true effect of 0.8 paired sd (the others none): the
    probability that the verdict is *agrees* rises with n, and it is never *differs* more than
    rarely."""
    rng = np.random.default_rng(1)
    effects = [0.8] + [0.0] * 8
    correct = [(_simulated_verdicts(effects, n, 400, rng)[:, 0] == "agrees").mean()
               for n in (3, 5, 10, 20)]
    assert all(a < b for a, b in zip(correct, correct[1:])), correct
    assert correct[-1] > 0.5


def test_the_family_wise_false_positive_rate_stays_at_or_below_5_percent():
    """Nine variants without any effect: the share of figures that call any of them *agrees*
    or *differs* is at most 5 %, at 3 and at 5 pairs. Under independence Holm rejects anything
    iff the smallest p-value is below 0.05/9, so the rate is 1 − (1 − 0.05/9)^9 = 0.0489."""
    rng = np.random.default_rng(2)
    sims = 4000
    exact = 1 - (1 - 0.05 / 9) ** 9
    se = math.sqrt(exact * (1 - exact) / sims)
    for n in (3, 5):
        v = _simulated_verdicts([0.0] * 9, n, sims, rng)
        rate = (v != "within noise").any(axis=1).mean()
        assert rate == pytest.approx(exact, abs=3 * se) and rate <= 0.05 + 3 * se, (n, rate)


def test_near_zero_differences_closed_form():
    """The margin is half the others' mean ΔL per seed, taken as a size: margin ∓ own."""
    own = [0.01, 0.05]
    others = [[0.04, 0.02], [0.06, 0.04]]  # means 0.05, 0.03 -> margins 0.025, 0.015
    below, above = S.near_zero_differences(own, others)
    np.testing.assert_allclose(below, [0.015, -0.035])
    np.testing.assert_allclose(above, [0.035, 0.065])
    # others that lose: the margin is still a size, so the same |own| reads the same
    below_n, above_n = S.near_zero_differences(own, -np.array(others))
    np.testing.assert_allclose(below_n, below) and np.testing.assert_allclose(above_n, above)
    with pytest.raises(ValueError, match="others must be"):
        S.near_zero_differences(own, [[0.1, 0.2, 0.3]])
    with pytest.raises(ValueError, match="others must be"):
        S.near_zero_differences(own, [])


def test_the_near_zero_test_reads_both_intervals():
    agrees = S.near_zero_test([0.02, 0.021, 0.019], [0.03, 0.031, 0.029])
    assert agrees[2] == "agrees" and agrees[0].low > 0 and agrees[1].low > 0
    assert S.near_zero_test([-0.02, -0.021, -0.019], [0.03, 0.031, 0.029])[2] == "differs"
    assert S.near_zero_test([0.02, -0.02, 0.021], [0.03, 0.031, 0.029])[2] == "within noise"
    assert S.near_zero_test([0.02], [0.03])[2] == "undetermined (1 seed)"


def test_pairs_to_resolve_use_holms_threshold_for_the_rank():
    """Three tests: the smallest p is held to 0.05/3, the next to 0.05/2, the largest to 0.05;
    a NaN p (one pair) is out of the family."""
    mean, sd, p = [0.02, 0.02, 0.02, 0.02], [0.02] * 4, [0.01, 0.02, 0.03, math.nan]
    got = S.holm_pairs_needed(mean, sd, p)
    assert got[:3] == [S.pairs_needed_at(0.02, 0.02, 0.05 / k) for k in (3, 2, 1)]
    assert got[0] > got[2] and math.isnan(got[3])
