"""The figure-level test of an ablation claim (gtalib.book.chapters.figure_tests): the pooled
ΔL against a second implementation of the Paule–Mandel random-effects estimate with the
Hartung–Knapp–Sidik–Jonkman interval, and the verdict by the figure's looks."""

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

from gtalib.book.chapters import figure_tests as T


def _paule_mandel_hksj(y, v, confidence=0.95):
    """Written from the formulas: τ² solves Σ w_i (y_i − μ_w)² = k − 1 with w_i = 1/(v_i + τ²)
    (0 when the fixed-effect Q is already below k − 1); HKSJ variance
    Σ w_i (y_i − μ)² / ((k − 1) Σ w_i), floored at 1 / Σ w_i, interval on t_{k−1}."""
    y, v = np.asarray(y, float), np.asarray(v, float)
    k = len(y)

    def q(tau2):
        w = 1 / (v + tau2)
        mu = (w * y).sum() / w.sum()
        return (w * (y - mu) ** 2).sum() - (k - 1)

    tau2 = 0.0 if q(0) <= 0 else optimize.brentq(q, 0, 10 * y.var() + 1)
    w = 1 / (v + tau2)
    mu = (w * y).sum() / w.sum()
    var = max((w * (y - mu) ** 2).sum() / ((k - 1) * w.sum()), 1 / w.sum())  # floored HKSJ
    h = stats.t.ppf(0.5 + confidence / 2, k - 1) * math.sqrt(var)
    return mu, mu - h, mu + h, tau2


@pytest.mark.parametrize("y, v", [
    ([0.02, 0.01, 0.03], [1e-4, 2e-4, 1.5e-4]),  # homogeneous: τ² = 0
    ([0.05, 0.20, 0.04, 0.02, 0.19], [1e-4, 3e-4, 2e-4, 1e-4, 4e-4]),  # heterogeneous
])
def test_the_pooled_estimate_matches_a_second_implementation(y, v):
    got = T.pooled(y, v)
    mu, low, high, tau2 = _paule_mandel_hksj(y, v)
    assert got["mean"] == pytest.approx(mu, rel=1e-4)
    assert (got["low"], got["high"]) == pytest.approx((low, high), rel=1e-3)
    assert got["tau2"] == pytest.approx(tau2, rel=1e-3, abs=1e-9)
    assert 0 <= got["i2"] <= 1 and got["k"] == len(y)
    se = (high - low) / 2 / stats.t.ppf(0.975, len(y) - 1)
    assert got["p"] == pytest.approx(2 * stats.t.sf(abs(mu) / se, len(y) - 1), rel=1e-3)
    with pytest.raises(ValueError, match="at least two"):
        T.pooled(y[:1], v[:1])


def _result(effects, n=10, looks=(5, 10), seed=0):
    rng = np.random.default_rng(seed)
    rows = [(v, s, "val_loss", e + rng.normal(0, 0.01)) for v, e in effects.items()
            for s in range(n)]
    deltas = pd.DataFrame(rows, columns=["variant", "seed", "col", "delta"])
    final = pd.DataFrame({"seeds": n, "paper ΔL (≈)": 0.02, "verdict": "agrees",
                          "one run shows it?": "yes"}, index=list(effects))
    return SimpleNamespace(final=final, looks=looks, final_column="val_loss", deltas=deltas)


def test_the_figure_verdict_reads_the_looks():
    t = T.figure_test(_result({"a": 0.05, "b": 0.05, "c": 0.05}))  # one true effect, no spread
    assert [n for n, _ in t["looks"]] == [5, 10]
    assert t["verdict"] == "agrees" and t["decided at"] == 5  # a clear effect: at the first look
    assert T.figure_test(_result({"a": -0.05, "b": -0.04, "c": -0.06}))["verdict"] == "differs"
    assert T.figure_test(_result({"a": 0.0, "b": 0.0, "c": 0.0}, seed=3))["verdict"] == (
        "within noise")


def test_the_pooled_test_holds_its_level_under_the_null():
    """No effect in any of 3 or 9 variants, 5 or 10 pairs each: the pooled test at 5 % rejects
    at most 5 % of figures (within 3 standard errors), and equal means give no spurious p."""
    rng = np.random.default_rng(5)
    reps = 1500
    for k, n in ((3, 5), (9, 10)):
        hits = 0
        for _ in range(reps):
            d = rng.normal(0, 1, size=(k, n))
            hits += T.pooled(d.mean(axis=1), d.var(axis=1, ddof=1) / n)["p"] <= 0.05
        assert hits / reps <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)
    assert T.pooled([0.01, 0.01, 0.01], [1e-4] * 3)["p"] > 1e-3
