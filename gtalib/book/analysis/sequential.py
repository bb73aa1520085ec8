"""A figure's verdicts when its seeds are read in two declared looks (a group-sequential design).

The ablation figures of the ``cpu`` book were first read at 5 seed pairs and then, for every
variant of every figure whatever its verdict, extended to 10: two looks at the same test. Reading
a test twice at the fixed 5 % level would raise its false-positive rate above 5 %; a
group-sequential design spends the 5 % over the looks instead. This module uses the Lan–DeMets
error-spending function of O'Brien–Fleming type (Lan & DeMets 1983, *Biometrika* 70:659–663;
O'Brien & Fleming 1979, *Biometrics* 35:549–556),

    α*(t) = 2 − 2 Φ(z₁₋α/₂ / √t),   t = the information fraction (pairs read / pairs planned),

which spends almost nothing early: at t = 1/2 and 1 with α = 0.05 the nominal two-sided levels
are 0.0056 and 0.048 (:func:`nominal_levels`, computed here from the bivariate normal law of the
two looks' z statistics, whose correlation is √(t₁/t₂); Jennison & Turnbull 2000, *Group
Sequential Methods with Applications to Clinical Trials*, ch. 7).

Across a figure's variants, each look applies Holm's step-down procedure (Holm 1979) to the
variants not yet decided, the i-th smallest p-value of the m still open compared with the
look's boundary of a design at level α / (m − i) (:func:`nominal_levels` at that level); a
variant decided at the first look keeps its verdict, and its share of α passes to the others
(the sequentially rejective group-sequential procedure of Maurer & Bretz 2013, *Statistics in
Biopharmaceutical Research* 5:311–320, with Holm's weights). Each look's p-value is the paired
t-test's on the pairs read so far (``scipy.stats.ttest_1samp``, as
:func:`gtalib.book.analysis.stats.delta_stats`): the
boundaries are normal-theory ones, and :func:`simulate` checks the whole procedure's family-wise
error rate at these small n (``tests/book/analysis/test_sequential.py``).
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache

import numpy as np
from scipy import optimize, stats

#: What a look says of a variant: decided (the verdict's sign against the paper's) or not yet.
CONTINUE = "continue"


def spent(t: float, alpha: float = 0.05) -> float:
    """α*(t) of the O'Brien–Fleming-type Lan–DeMets spending function (module docstring).

    Raises:
        ValueError: ``t`` not in (0, 1].
    """
    if not 0 < t <= 1:
        raise ValueError(f"information fraction t must be in (0, 1], got {t!r}")
    return float(2 - 2 * stats.norm.cdf(stats.norm.ppf(1 - alpha / 2) / math.sqrt(t)))


@lru_cache(maxsize=None)
def nominal_levels(looks: tuple[int, ...], alpha: float = 0.05) -> tuple[float, ...]:
    """The nominal two-sided level of each look of a two-look design at ``looks`` pairs (e.g.
    ``(5, 10)`` → about ``(0.0056, 0.048)``); one look: ``(alpha,)``.

    Raises:
        ValueError: not one or two increasing positive counts, or ``alpha`` not in (0, 1).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if not (1 <= len(looks) <= 2 and all(isinstance(n, int) and n > 0 for n in looks)
            and list(looks) == sorted(set(looks))):
        raise ValueError(f"looks must be one or two increasing pair counts, got {looks!r}")
    if len(looks) == 1:
        return (alpha,)
    t1 = looks[0] / looks[1]
    a1 = spent(t1, alpha)
    c1 = stats.norm.ppf(1 - a1 / 2)
    rho = math.sqrt(t1)
    law = stats.multivariate_normal(mean=[0, 0], cov=[[1, rho], [rho, 1]])

    def inside(c1_, c2_):  # P(|Z1| < c1, |Z2| < c2)
        return (law.cdf([c1_, c2_]) - law.cdf([-c1_, c2_]) - law.cdf([c1_, -c2_])
                + law.cdf([-c1_, -c2_]))

    # the second look spends the rest: P(|Z1| < c1, |Z2| ≥ c2) = α − α*(t1)
    target = alpha - a1
    inner = 1 - a1  # P(|Z1| < c1)
    c2 = optimize.brentq(lambda c: inner - inside(c1, c) - target, 1.0, 4.0, xtol=1e-10)
    return (a1, float(2 * stats.norm.sf(c2)))


def holm_level(looks: tuple[int, ...], alpha: float, divisor: int, look: int) -> float:
    """The nominal level a Holm step with ``divisor`` open hypotheses uses at ``look`` (an index
    into ``looks``): that look's boundary of the design at ``alpha / divisor``."""
    return nominal_levels(tuple(looks), alpha / divisor)[look]


def holm_rejects(p, level) -> np.ndarray:
    """Which p-values Holm's step-down procedure rejects, along the last axis (one family per
    row; NaN: not in the family): the i-th smallest (from 0) of the m finite ones is rejected
    while every smaller one was and it is at most its threshold, ``level / (m − i)`` for a number
    ``level``, or ``level[m − i]`` for an array indexed by the divisor (``level[0]`` unused)."""
    p = np.asarray(p, dtype=float)
    finite = np.isfinite(p)
    m = finite.sum(axis=-1, keepdims=True)
    order = np.argsort(np.where(finite, p, np.inf), axis=-1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=-1)
    i = np.arange(p.shape[-1])
    divisor = np.maximum(m - i, 1)
    threshold = (level / divisor if np.ndim(level) == 0
                 else np.asarray(level, dtype=float)[np.minimum(divisor, len(level) - 1)])
    ok = np.isfinite(ranked) & (ranked <= threshold)
    ok = np.cumprod(ok, axis=-1).astype(bool)  # step-down: stop at the first failure
    out = np.zeros(p.shape, dtype=bool)
    np.put_along_axis(out, order, ok, axis=-1)
    return out


def _t_p_values(x: np.ndarray) -> np.ndarray:
    """Paired t-test p-values of the last axis' pairs (``scipy.stats.ttest_1samp`` against 0;
    NaN below two pairs or with NaN pairs; with no spread 0 for a nonzero mean and 1 for a zero
    one, as :func:`gtalib.book.analysis.stats.delta_stats`)."""
    if x.shape[-1] < 2:
        return np.full(x.shape[:-1], np.nan)
    mean, sd = x.mean(axis=-1), x.std(axis=-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
        p = stats.ttest_1samp(x, 0.0, axis=-1).pvalue
    return np.where(sd == 0, np.where(mean == 0, 1.0, 0.0), p)


def decide(deltas: np.ndarray, looks: tuple[int, ...], alpha: float = 0.05):
    """The two-look procedure on arrays: ``deltas`` of shape ``(..., m, n)`` (m variants of one
    family, the pairs in seed order, NaN where a variant lacks a pair).

    Returns:
        ``(p, look)``: p-values of shape ``(..., m, len(looks))`` (NaN where a variant has fewer
        pairs than the look) and the deciding look of shape ``(..., m)`` (1-based; 0: none).
    """
    levels = nominal_levels(tuple(looks), alpha)
    deltas = np.asarray(deltas, dtype=float)
    p = np.stack([_t_p_values(deltas[..., :n]) if deltas.shape[-1] >= n
                  else np.full(deltas.shape[:-1], np.nan) for n in looks], axis=-1)
    m = deltas.shape[-2]
    # boundaries of each look for the designs at α/1 … α/m (Holm's divisors)
    by_divisor = np.array([[np.nan] * len(looks)]
                          + [nominal_levels(tuple(looks), alpha / d) for d in range(1, m + 1)])
    look = np.zeros(deltas.shape[:-1], dtype=int)
    for k in range(len(levels)):
        open_p = np.where(look == 0, p[..., k], np.nan)
        look = np.where(holm_rejects(open_p, by_divisor[:, k]), k + 1, look)
    return p, look


def two_look_verdicts(deltas, expected, looks: tuple[int, ...], alpha: float = 0.05) -> list[dict]:
    """The verdicts of one figure's variants read at ``looks`` (one family of tests).

    Args:
        deltas: per variant, its paired ΔL per seed in seed order (the first ``looks[0]`` are
            the first look's pairs).
        expected: per variant, the paper's ΔL (its sign is the claim).
        looks: the pair counts of the looks (:func:`nominal_levels`).
    Returns:
        per variant, in the order given: ``{"p": [p at each look], "level": [nominal levels],
        "look": the look that decided it (1-based) or None, "interim": the first look's verdict
        ("agrees", "differs" or "continue"), "verdict": the final one ("agrees", "differs" or
        "within noise")}``. A variant with fewer pairs than a look has p NaN there.
    Raises:
        ValueError: bad ``looks`` or ``alpha``; ``deltas`` and ``expected`` of unequal length.
    """
    expected = list(expected)
    if len(deltas) != len(expected):
        raise ValueError("deltas and expected must have one entry per variant")
    levels = nominal_levels(tuple(looks), alpha)
    width = max([len(d) for d in deltas] + [1])
    grid = np.full((len(deltas), width), np.nan)
    for row, d in zip(grid, deltas):
        row[:len(d)] = d
    p, look = decide(grid, tuple(looks), alpha)
    out = []
    for row, pk, k, e in zip(grid, p, look, expected):
        verdict = "within noise"
        if k:
            mean = float(np.mean(row[:looks[k - 1]]))
            verdict = "agrees" if math.copysign(1, mean) == math.copysign(1, e) else "differs"
        out.append({"p": [float(x) for x in pk], "level": list(levels),
                    "look": int(k) or None, "verdict": verdict,
                    "interim": verdict if k == 1 else CONTINUE})
    return out


def simulate(effects, sd: float = 1.0, looks=(5, 10), alpha: float = 0.05, reps: int = 4000,
             seed: int = 0) -> dict:
    """The procedure (:func:`decide`) on ``reps`` synthetic figures: each variant's paired ΔL
    per seed drawn from N(effect, sd²), the paper's sign taken as positive.

    Returns:
        ``{"any_false": the rate of figures with at least one false verdict (any decided verdict
        for a null variant, "differs" for a positive effect), "correct": per variant the rate of
        "agrees" where its effect is positive, "fixed_correct": the same for the one-look rule
        at ``looks[0]`` pairs (Holm at ``alpha``)}``.
    """
    rng = np.random.default_rng(seed)
    effects = np.asarray(effects, dtype=float)
    d = rng.normal(effects[None, :, None], sd, size=(reps, len(effects), looks[-1]))

    def verdicts(p_look, n):
        decided = p_look[1] > 0
        # the sign of the mean over the pairs read at the deciding look
        means = np.stack([d[..., :k].mean(axis=-1) for k in n], axis=-1)
        at = np.take_along_axis(means, np.maximum(p_look[1] - 1, 0)[..., None], -1)[..., 0]
        return decided, at > 0

    two = verdicts(decide(d, tuple(looks), alpha), looks)
    one = verdicts(decide(d[..., :looks[0]], (looks[0],), alpha), (looks[0],))
    null = effects == 0
    false = (two[0] & null) | (two[0] & ~two[1] & ~null)
    return {"any_false": float(false.any(axis=-1).mean()),
            "correct": ((two[0] & two[1]) & ~null).mean(axis=0),
            "fixed_correct": ((one[0] & one[1]) & ~null).mean(axis=0)}
