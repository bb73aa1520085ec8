"""The two-look group-sequential verdicts (gtalib.book.analysis.sequential): the spending
function's closed form, the nominal levels of the O'Brien–Fleming-type design, Holm's step-down,
and the whole procedure simulated on synthetic figures."""

import math

import numpy as np
import pytest
from scipy import stats

from gtalib.book.analysis import sequential as S
from gtalib.book.analysis.stats import delta_stats, holm_adjusted


def test_the_spending_function_and_the_nominal_levels():
    # α*(1/2) = 2 − 2Φ(1.95996/√0.5) = 2 − 2Φ(2.7718) (Lan & DeMets 1983)
    assert S.spent(0.5) == pytest.approx(2 * stats.norm.sf(1.959964 / math.sqrt(0.5)), rel=1e-6)
    assert S.spent(1.0) == pytest.approx(0.05)
    a1, a2 = S.nominal_levels((5, 10))
    assert a1 == pytest.approx(0.00557, abs=5e-5) and a2 == pytest.approx(0.0478, abs=2e-4)
    # the two looks together spend exactly α under the normal law (a Monte Carlo check)
    rng = np.random.default_rng(1)
    z1 = rng.standard_normal(400_000)
    z2 = math.sqrt(0.5) * z1 + math.sqrt(0.5) * rng.standard_normal(400_000)
    c1, c2 = stats.norm.isf(a1 / 2), stats.norm.isf(a2 / 2)
    assert np.mean((abs(z1) >= c1) | (abs(z2) >= c2)) == pytest.approx(0.05, abs=1.5e-3)
    assert S.nominal_levels((10,)) == (0.05,)
    for bad in ((10, 5), (0, 5), (5, 5), (1, 2, 3)):
        with pytest.raises(ValueError, match="looks"):
            S.nominal_levels(bad)


def test_holm_rejects_what_its_adjusted_p_values_say():
    rng = np.random.default_rng(2)
    for _ in range(8):  # holm_adjusted is statsmodels', which collects garbage on every call
        p = rng.uniform(0, 0.08, size=6)
        p[rng.integers(6)] = np.nan
        assert (S.holm_rejects(p, 0.05) == (np.nan_to_num(holm_adjusted(p), nan=2) <= 0.05)).all()


def test_a_variant_decided_at_the_first_look_keeps_its_verdict():
    strong = [1.0, 1.1, 0.9, 1.2, 1.0, -3.0, -3.0, -3.0, -3.0, -3.0]  # its later pairs reverse
    null = [0.1, -0.1, 0.2, -0.2, 0.0, 0.1, 0.0, 0.05, -0.1, 0.0]
    late = [0.2, -0.1, 0.4, 0.1, 0.3, 0.3, 0.2, 0.5, 0.1, 0.2]
    out = S.two_look_verdicts([strong, null, late], [1, 1, 1], (5, 10))
    assert [o["look"] for o in out] == [1, None, 2]
    assert [o["interim"] for o in out] == ["agrees", "continue", "continue"]
    assert [o["verdict"] for o in out] == ["agrees", "within noise", "agrees"]
    x = np.array(late)
    assert out[2]["p"] == pytest.approx([delta_stats(x[:5]).p, delta_stats(x).p])
    # the sign against the paper's: a decided negative mean differs
    assert S.two_look_verdicts([strong], [-1], (5, 10))[0]["verdict"] == "differs"


def test_the_two_look_procedure_holds_the_family_wise_rate_and_gains_power():
    """No effect among 9 variants: at most one figure in 20 has any false verdict (within 3
    standard errors of the estimate); one true effect of one sd: a correct verdict at 10
    pairs is more likely than with the fixed 5-pair rule."""
    reps = 20_000
    null = S.simulate([0.0] * 9, reps=reps, seed=3)
    assert null["any_false"] <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)
    one = S.simulate([1.0] + [0.0] * 8, reps=reps, seed=4)
    assert one["correct"][0] > one["fixed_correct"][0] + 0.1
    assert one["any_false"] <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)
