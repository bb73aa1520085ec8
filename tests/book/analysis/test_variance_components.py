"""stats.variance_components: the method-of-moments split of a pair's ΔL variance into the
initialisation seed, the data order and the rest, from the three sets of pairs a joint-design
figure has (seeds at order 0, orders at seed 0, seed = order)."""

import math

import numpy as np
import pytest

from gtalib.book.analysis.stats import VARIANCE_SOURCES, variance_components


def _design(n_seeds=10, n_orders=5, n_joint=10):
    cells = sorted({(s, 0) for s in range(n_seeds)} | {(0, d) for d in range(n_orders)}
                   | {(k, k) for k in range(n_joint)})
    return np.array([c[0] for c in cells]), np.array([c[1] for c in cells])


def test_the_estimates_are_the_moment_equations_of_the_three_sample_variances():
    seed, order = _design()
    rng = np.random.default_rng(3)
    delta = rng.normal(0.02, 0.01, seed.size)
    vc = variance_components(seed, order, delta)
    v_s = np.var(delta[order == 0], ddof=1)
    v_o = np.var(delta[seed == 0], ddof=1)
    v_j = np.var(delta[seed == order], ddof=1)
    expected = {"initialisation": v_j - v_o, "data order": v_j - v_s,
                "residual": v_s + v_o - v_j}
    for src in VARIANCE_SOURCES:
        assert vc.estimate[src] == pytest.approx(max(expected[src], 0.0), abs=1e-15)
    assert (vc.sd_seeds, vc.sd_orders, vc.sd_joint) == pytest.approx(
        tuple(map(math.sqrt, (v_s, v_o, v_j))))
    assert (vc.n_seeds, vc.n_orders, vc.n_joint) == (10, 5, 10)
    assert sum(vc.share.values()) == pytest.approx(1.0)


def test_a_pure_seed_effect_is_found_as_one():
    # ΔL depends on the initialisation seed alone: the pairs at seed 0 do not vary at all, and
    # the joint pairs see the same ten seeds as the pairs at order 0, so every bit of the
    # variance is the seed's
    seed, order = _design()
    a = np.linspace(-0.03, 0.03, 10)
    vc = variance_components(seed, order, 0.01 + a[seed])
    assert vc.estimate["data order"] == pytest.approx(0, abs=1e-15)
    assert vc.estimate["residual"] == pytest.approx(0, abs=1e-15)
    assert vc.estimate["initialisation"] == pytest.approx(np.var(a, ddof=1))
    assert vc.share["initialisation"] == pytest.approx(1.0)
    assert vc.sd_orders == 0


def test_with_many_pairs_the_estimates_find_the_true_components():
    seed, order = _design(400, 400, 400)
    rng = np.random.default_rng(0)
    sd = {"initialisation": 0.010, "data order": 0.020, "residual": 0.005}
    a = rng.normal(0, sd["initialisation"], 400)
    b = rng.normal(0, sd["data order"], 400)
    delta = a[seed] + b[order] + rng.normal(0, sd["residual"], seed.size)
    vc = variance_components(seed, order, delta, draws=500)
    total = sum(s ** 2 for s in sd.values())
    for src in ("initialisation", "data order"):
        assert vc.estimate[src] == pytest.approx(sd[src] ** 2, rel=0.3)
        assert vc.low[src] <= sd[src] ** 2 <= vc.high[src]
        assert vc.share_low[src] <= sd[src] ** 2 / total <= vc.share_high[src]


def test_the_interval_is_reproducible_and_covers_the_estimate():
    seed, order = _design()
    delta = np.random.default_rng(5).normal(0, 0.01, seed.size)
    one, two = (variance_components(seed, order, delta) for _ in range(2))
    assert one == two
    for src in VARIANCE_SOURCES:
        assert one.low[src] <= one.high[src]
        assert one.share_low[src] <= one.share_high[src]


@pytest.mark.parametrize("seed, order, delta, match", [
    ([0, 1, 0], [0, 0, 1], [0.1, 0.2, 0.3], "at least two"),  # one joint pair only
    ([0, 1, 0, 1], [0, 0, 1, 1], [0.1, 0.2, 0.3, math.nan], "finite"),
    ([0, 0, 1, 0, 1], [0, 0, 0, 1, 1], [0.1, 0.1, 0.2, 0.3, 0.4], "once"),
    ([0, 1], [0, 0, 1], [0.1, 0.2], "one length"),
])
def test_bad_input_is_refused(seed, order, delta, match):
    with pytest.raises(ValueError, match=match):
        variance_components(seed, order, delta)
    with pytest.raises(ValueError, match="confidence"):
        variance_components([0, 1, 0, 1], [0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4], confidence=1.5)
