"""The book's statistics and its verdict rule: Student-t critical values, the paired interval of
a mean ΔL and what its pairs could resolve, the verdict against the paper's claim, and how the
tables print them. The one place to change the verdict rule of the ablations and the scale ladder
(and the words that state it); the claims chapter's claims that are computed rather than
measured over seeds (the tables, the variance ratio, the decode ranking) state their own rules in
:mod:`gtalib.book.chapters.claims`.

Reads no other book module (scipy for the t-tests and quantiles, statsmodels for Holm's
adjustment). Units: ΔL values in nats, one per seed
pair; ``confidence`` a two-sided level in (0, 1).

Conventions (stated in every caption the book prints):

- Band: mean over seeds ± the two-sided Student-t confidence interval, ``t_{c, n−1} · s / √n``
  with ``s`` the sample standard deviation over the ``n`` seeds (none for one seed; the figures
  draw it from :data:`gtalib.book.analysis.style.MIN_BAND_SEEDS` seeds).
- Final ΔL: validation loss on the fixed held-out windows, unsmoothed, at the last step all
  seeds of the variant logged, with what its ``n`` pairs could resolve (:func:`delta_stats`):
  the interval's half-width (the smallest |mean ΔL| that would exclude zero at the measured
  spread) and the number of pairs that would resolve the measured mean at that spread.
- Verdict against the paper's claim (sign of the paper's ΔL), one figure at a time: each
  variant's paired t-test of "mean ΔL = 0" (two-sided, ``n − 1`` degrees of freedom), its
  p-values adjusted across the figure's variants by Holm's step-down procedure (Holm 1979,
  "A simple sequentially rejective multiple test procedure", Scand. J. Statist. 6:65–70), so the
  chance that a figure shows any effect where none exists stays at or below ``1 − confidence``
  (5 %). "agrees" / "differs" when the adjusted p-value is at or below that level and the mean's
  sign matches / opposes the paper's, else "within noise"; "undetermined (1 seed)" with a single
  seed. More pairs can only sharpen such a verdict: the test's power rises with ``n``.
  :func:`verdict_text` says, for "within noise", how large an |ΔL| could hide.
- A variant the paper calls "≈ 0" (latent scaling "barely" helps MLRA-2: avg PPL 13.808 vs
  13.804, against MLA's 13.779 vs 13.727 and GLA-2's 13.827 vs 13.779; MLRA paper, latent-scaling
  ablation) makes a claim about size that its row's sign test cannot check. The claims page tests
  it as an equivalence (two one-sided tests, Schuirmann 1987, J. Pharmacokin. Biopharm.
  15:657–680) against a margin of half the other variants' mean ΔL, paired by seed
  (:func:`near_zero_differences`, :func:`near_zero_test`).
- Visible in one run: whether |ΔL| exceeds the seed-to-seed standard deviation of one arm's
  final loss (the larger of the two arms, ``ddof=1``), i.e. whether a single-seed comparison such
  as the paper's could have told the effect from the seed's own variation. Reported beside the
  verdict, not part of it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests

VERDICTS = ("agrees", "differs", "within noise", "undetermined (1 seed)")


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------

def t_cdf(t: float, dof: int) -> float:
    """Student-t cumulative distribution function with ``dof`` degrees of freedom
    (``scipy.stats.t.cdf``).

    Raises:
        ValueError: ``dof`` < 1.
    """
    if not dof >= 1:
        raise ValueError(f"dof must be >= 1, got {dof!r}")
    return float(stats.t.cdf(t, dof))


def t_critical(confidence: float, dof: int) -> float:
    """Two-sided Student-t critical value: ``t`` with ``P(|T| ≤ t) = confidence`` for ``dof``
    degrees of freedom (e.g. 12.706 for 95 % and dof 1; 1.960 as dof → ∞), from
    ``scipy.stats.t.ppf``.

    Raises:
        ValueError: ``confidence`` not in (0, 1) or ``dof`` < 1.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if not dof >= 1:
        raise ValueError(f"dof must be >= 1, got {dof!r}")
    return float(stats.t.ppf(0.5 + confidence / 2, dof))


#: Largest number of pairs :func:`delta_stats` tries when it asks how many pairs would resolve
#: the measured mean ΔL (beyond it the tables print "—").
MAX_PAIRS = 20


@dataclass(frozen=True)
class DeltaStats:
    """What ``n`` paired ΔL values (one per seed) can say, in nats. Built by :func:`delta_stats`.

    Attributes:
        n: number of finite values (pairs). mean: their mean. sd: sample standard deviation
            (``ddof=1``; NaN for one value).
        low, high: the two-sided Student-t interval ``mean ∓ t_{c, n−1} · sd / √n`` (NaN for
            one value: no interval).
        resolvable: its half-width ``t_{c, n−1} · sd / √n``, the smallest |mean ΔL| whose
            interval excludes zero at this ``n`` and this spread (NaN for one value).
        pairs_needed: the smallest ``n'`` in ``2..max_pairs`` with ``t_{c, n'−1} · sd / √n' <
            |mean|``, i.e. how many pairs would resolve the measured mean if the spread stayed
            the measured one; NaN when none up to ``max_pairs`` does, or for one value.
        max_pairs: the cap used for ``pairs_needed``.
        p: two-sided p-value of the paired t-test of "mean ΔL = 0" (``n − 1`` degrees of
            freedom); NaN for one value; with ``sd`` = 0, 0 for a nonzero mean (every pair
            agrees exactly) and 1 for a zero mean.
    """

    n: int
    mean: float
    sd: float
    low: float
    high: float
    resolvable: float
    pairs_needed: float
    max_pairs: int
    p: float = math.nan


def delta_stats(values, confidence: float = 0.95, max_pairs: int = MAX_PAIRS) -> DeltaStats:
    """Mean, Student-t interval, p-value and resolution of paired ΔL ``values`` (see
    :class:`DeltaStats`): the test and its interval are ``scipy.stats.ttest_1samp`` against 0
    and its ``confidence_interval``; only the zero-spread case (where scipy's statistic is
    undefined) and the pairs needed are computed here.

    Raises:
        ValueError: no finite value, ``confidence`` outside (0, 1), or ``max_pairs`` < 2.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if not max_pairs >= 2:
        raise ValueError(f"max_pairs must be at least 2, got {max_pairs!r}")
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        raise ValueError("delta_stats needs at least one finite value")
    m = float(x.mean())
    if x.size < 2:
        return DeltaStats(1, m, math.nan, math.nan, math.nan, math.nan, math.nan, max_pairs)
    sd = float(x.std(ddof=1))
    if sd == 0:  # every pair alike: scipy's t is undefined, the interval is the mean itself
        low = high = m
        p = 1.0 if m == 0 else 0.0
    else:
        with warnings.catch_warnings():  # nearly equal pairs: the same t, computed as before
            warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
            test = stats.ttest_1samp(x, 0.0)
        ci = test.confidence_interval(confidence)
        low, high, p = float(ci.low), float(ci.high), float(test.pvalue)
    ns = np.arange(2, max_pairs + 1)
    resolves = stats.t.ppf(0.5 + confidence / 2, ns - 1) * sd / np.sqrt(ns) < abs(m)
    needed = float(ns[resolves][0]) if resolves.any() else math.nan
    return DeltaStats(int(x.size), m, sd, low, high, (high - low) / 2, needed, max_pairs, p)


def pairs_needed_at(mean: float, sd: float, level: float, max_pairs: int = MAX_PAIRS) -> float:
    """The smallest n in ``2..max_pairs`` at which a paired t-test of a mean ΔL ``mean`` with
    spread ``sd`` would reach p ≤ ``level`` (the level a verdict uses: after Holm's adjustment,
    at its look), i.e. the pairs that would resolve the measured mean if mean and spread stayed
    as measured; NaN when none does or either is not finite."""
    if not (math.isfinite(mean) and math.isfinite(sd)) or mean == 0:
        return math.nan
    if sd == 0:
        return 2.0
    ns = np.arange(2, max_pairs + 1)
    p = 2 * stats.t.sf(abs(mean) / (sd / np.sqrt(ns)), ns - 1)
    ok = p <= level
    return float(ns[ok][0]) if ok.any() else math.nan


def mean_ci(values, confidence: float = 0.95) -> tuple[float, float, float, int]:
    """Mean of ``values`` (one per seed) with its two-sided Student-t confidence interval
    (:func:`delta_stats`).

    Returns:
        ``(mean, low, high, n)``; ``low``/``high`` are NaN when fewer than two finite values.
    Raises:
        ValueError: no finite value, or ``confidence`` outside (0, 1).
    """
    s = delta_stats(values, confidence)
    return s.mean, s.low, s.high, s.n


@dataclass(frozen=True)
class DataOrderStats:
    """A mean ΔL over initialisation seeds at one data order, with the data order's variance
    added (:func:`data_order_stats`), in nats.

    Attributes:
        n, mean: the pairs over initialisation seeds (all at data order 0) and their mean ΔL.
        sd_init: sample standard deviation of ΔL over those seeds (``ddof=1``).
        k, sd_data: the data orders of the repeated pair (its data order 0 among them) and the
            sample standard deviation of its ΔL over them.
        se: the standard error of ``mean`` for any data order, ``√(sd_init²/n + sd_data²)``.
        dof: its Welch–Satterthwaite degrees of freedom. low, high: ``mean ∓ t_{c, dof} · se``.
        p: two-sided p-value of "mean ΔL = 0" at ``dof``.
    """

    n: int
    mean: float
    sd_init: float
    k: int
    sd_data: float
    se: float
    dof: float
    low: float
    high: float
    p: float


def data_order_stats(seed_deltas, order_deltas, confidence: float = 0.95) -> DataOrderStats:
    """The interval of a mean ΔL that holds for any data order, not only the one its pairs share.

    Model (a two-way random-effects model of seeds and data orders; Searle, Casella &
    McCulloch 1992, *Variance Components*, ch. 4): ``ΔL_{s,d} = μ + a_s + b_d + e_{s,d}``, with
    initialisation effects ``a`` (variance σ_a²), data-order effects ``b`` (σ_b²) and a residual
    (σ_e²). The ``n`` pairs of ``seed_deltas`` all read data order 0, so their mean carries
    ``b_0`` whole: ``Var(mean) = (σ_a² + σ_e²)/n + σ_b²``. The seeds' sample variance estimates
    ``σ_a² + σ_e²``; ``order_deltas``, one pair at ``k`` data orders (0 among them), estimate
    ``σ_b² + σ_e²``; their sum counts σ_e² once more than the model needs, so the interval errs
    wide (one crossing cannot separate σ_e²). Degrees of freedom by Satterthwaite (1946,
    "An approximate distribution of estimates of variance components", Biometrics Bulletin
    2:110–114).

    Raises:
        ValueError: fewer than two finite values in either sequence, or ``confidence`` outside
            (0, 1).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    x = np.asarray(seed_deltas, dtype=float)
    y = np.asarray(order_deltas, dtype=float)
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if x.size < 2 or y.size < 2:
        raise ValueError(f"data_order_stats needs at least two seeds and two data orders, got "
                         f"{x.size} and {y.size}")
    vi, vd = float(x.var(ddof=1)), float(y.var(ddof=1))
    a, b = vi / x.size, vd
    se = math.sqrt(a + b)
    dof = (a + b) ** 2 / (a ** 2 / (x.size - 1) + b ** 2 / (y.size - 1)) if a + b > 0 else math.inf
    m = float(x.mean())
    h = float(stats.t.ppf(0.5 + confidence / 2, dof)) * se
    if se == 0:
        p = 1.0 if m == 0 else 0.0
    else:
        p = float(2 * stats.t.sf(abs(m) / se, dof))
    return DataOrderStats(int(x.size), m, math.sqrt(vi), int(y.size), math.sqrt(vd), se, dof,
                          m - h, m + h, p)


#: The sources of a ΔL's variance that :func:`variance_components` separates, in its order.
VARIANCE_SOURCES = ("initialisation", "data order", "residual")


@dataclass(frozen=True)
class VarianceComponents:
    """The variance of a pair's ΔL split by source (:func:`variance_components`), in nats².

    Attributes:
        estimate: source (:data:`VARIANCE_SOURCES`) → its method-of-moments estimate, truncated
            at 0 (a negative estimate means the source is too small to see).
        low, high: source → the percentile interval of the estimate (parametric bootstrap).
        share, share_low, share_high: source → its fraction of the summed estimates, and that
            fraction's interval from the same draws.
        sd_seeds, sd_orders, sd_joint: the sample standard deviations (nats) of ΔL over the
            seeds at data order 0, over the data orders at seed 0, and over the joint pairs.
        n_seeds, n_orders, n_joint: the pairs in each of those three sets.
    """

    estimate: dict
    low: dict
    high: dict
    share: dict
    share_low: dict
    share_high: dict
    sd_seeds: float
    sd_orders: float
    sd_joint: float
    n_seeds: int
    n_orders: int
    n_joint: int


def _moments(v_seeds: np.ndarray, v_orders: np.ndarray, v_joint: np.ndarray) -> np.ndarray:
    """σ_a², σ_b², σ_e² from the three sample variances (:func:`variance_components`), untruncated;
    each argument may be an array of draws."""
    return np.stack([v_joint - v_orders, v_joint - v_seeds, v_seeds + v_orders - v_joint])


def variance_components(seed: np.ndarray, order: np.ndarray, delta: np.ndarray,
                        confidence: float = 0.95, draws: int = 4000,
                        rng_seed: int = 0) -> VarianceComponents:
    """How much of a pair's ΔL variance comes from the initialisation seed, from the data order
    and from neither, from the three designs a figure has read.

    Model (two-way crossed random effects; Searle, Casella & McCulloch 1992, *Variance
    Components*, ch. 4): ``ΔL_{s,d} = μ + a_s + b_d + e_{s,d}`` with variances σ_a², σ_b², σ_e²
    (σ_e² holds the seed × order interaction: one pair per cell cannot separate them). The
    pairs at data order 0 over seeds have variance ``σ_a² + σ_e²``; those at seed 0 over data
    orders ``σ_b² + σ_e²``; the joint pairs (seed ``k``, order ``k``) ``σ_a² + σ_b² + σ_e²``.
    Equating each with its sample variance (method of moments) gives
    ``σ_a² = v_joint − v_orders``, ``σ_b² = v_joint − v_seeds``,
    ``σ_e² = v_seeds + v_orders − v_joint``. The interval of each estimate and share is the
    percentile interval of a parametric bootstrap (Efron & Tibshirani 1993, ch. 6 and 13): the
    observed cells are drawn ``draws`` times from the model at the (truncated) estimates and
    re-estimated, so the cells the three sets share (the pair at seed 0, order 0) are shared in
    every draw too.

    Args:
        seed, order, delta: one entry per pair, shape ``(n,)``: its initialisation seed, its
            data order and its ΔL (nats). The pairs at data order 0, at seed 0 and at seed =
            order must each number at least two.
        confidence: interval level, in (0, 1). rng_seed: the bootstrap's seed (reproducible).

    Raises:
        ValueError: fewer than two pairs in one of the three sets, a non-finite ΔL, lengths
            that differ, or ``confidence`` outside (0, 1).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    seed, order = np.asarray(seed, dtype=int), np.asarray(order, dtype=int)
    delta = np.asarray(delta, dtype=float)
    if not seed.shape == order.shape == delta.shape or seed.ndim != 1:
        raise ValueError(f"seed, order and delta must be 1-d of one length, got shapes "
                         f"{seed.shape}, {order.shape}, {delta.shape}")
    if not np.isfinite(delta).all():
        raise ValueError("delta must be finite")
    cells = sorted(set(zip(seed.tolist(), order.tolist())))
    if len(cells) != len(seed):
        raise ValueError("each (seed, order) cell must appear once")
    sets = {"seeds": order == 0, "orders": seed == 0, "joint": seed == order}
    small = {k: int(m.sum()) for k, m in sets.items() if m.sum() < 2}
    if small:
        raise ValueError(f"variance_components needs at least two pairs at data order 0, at "
                         f"seed 0 and at seed = order; got {small}")

    def variances(d):  # d: (..., n) → three arrays of sample variances over the sets
        return [d[..., m].var(axis=-1, ddof=1) for m in sets.values()]

    v = variances(delta)
    est = np.maximum(_moments(*v), 0.0)
    # the bootstrap: every cell drawn from the model at the estimates (one draw per row)
    rng = np.random.default_rng(rng_seed)
    seeds_u, s_idx = np.unique(seed, return_inverse=True)
    orders_u, o_idx = np.unique(order, return_inverse=True)
    a = rng.normal(0, math.sqrt(est[0]), (draws, seeds_u.size))
    b = rng.normal(0, math.sqrt(est[1]), (draws, orders_u.size))
    e = rng.normal(0, math.sqrt(est[2]), (draws, seed.size))
    sim = a[:, s_idx] + b[:, o_idx] + e  # (draws, n)
    boot = np.maximum(_moments(*variances(sim)), 0.0)  # (3, draws)
    total = boot.sum(axis=0)
    shares = np.divide(boot, total, out=np.full_like(boot, np.nan), where=total > 0)
    lo_q, hi_q = 50 * (1 - confidence), 50 * (1 + confidence)

    def by_source(x):
        return dict(zip(VARIANCE_SOURCES, map(float, x)))

    share = est / est.sum() if est.sum() > 0 else np.full(3, math.nan)
    return VarianceComponents(
        by_source(est), by_source(np.percentile(boot, lo_q, axis=1)),
        by_source(np.percentile(boot, hi_q, axis=1)), by_source(share),
        by_source(np.nanpercentile(shares, lo_q, axis=1)),
        by_source(np.nanpercentile(shares, hi_q, axis=1)),
        *(math.sqrt(float(x)) for x in v), *(int(m.sum()) for m in sets.values()))


# ---------------------------------------------------------------------------------------------
# Verdicts
# ---------------------------------------------------------------------------------------------

def near_zero_differences(own, others) -> tuple[np.ndarray, np.ndarray]:
    """Per seed, the two differences whose signs say whether a "≈ 0" claim holds (module
    docstring): with ``m`` the other variants' mean ΔL at that seed, signed so that their mean
    over seeds is positive (the margin is a size), ``m/2 − own`` and ``m/2 + own``. Both are
    positive exactly when ``|own| < m/2``: the named variant's ΔL lies nearer zero than the
    others' effect.

    Args:
        own: the named variant's paired ΔL per seed, shape ``(n,)`` (nats).
        others: the other variants' paired ΔL at the same seeds, shape ``(k, n)``, ``k ≥ 1``.
    Returns:
        ``(below, above)``, each shape ``(n,)`` (nats).
    Raises:
        ValueError: no other variant, or ``others`` not ``(k, n)``.
    """
    own, others = np.asarray(own, dtype=float), np.atleast_2d(np.asarray(others, dtype=float))
    if others.size == 0 or others.shape[1] != own.shape[0]:
        raise ValueError(f"others must be (k >= 1, {own.shape[0]}) ΔL per seed, got "
                         f"{others.shape}")
    m = others.mean(axis=0)
    half = m / 2 if m.mean() >= 0 else -m / 2
    return half - own, half + own


def near_zero_test(below, above, confidence: float = 0.95) -> tuple[DeltaStats, DeltaStats, str]:
    """The verdict of a "≈ 0" claim from :func:`near_zero_differences`: each difference's paired
    two-sided interval at ``confidence`` (:func:`delta_stats`). *agrees* when both lie above
    zero (the two one-sided tests of an equivalence, each at (1 − ``confidence``)/2, so at most
    that chance of calling an effect as large as the margin ≈ 0); *differs* when either lies
    below zero (the ΔL is beyond the margin on one side; at most 1 − ``confidence`` of calling
    an effect at the margin so, by Bonferroni over the two); else *within noise*;
    *undetermined (1 seed)* with one pair.

    Returns:
        ``(below stats, above stats, verdict)``.
    """
    lo, hi = delta_stats(below, confidence), delta_stats(above, confidence)
    if lo.n < 2:
        return lo, hi, "undetermined (1 seed)"
    if lo.low > 0 and hi.low > 0:
        return lo, hi, "agrees"
    return lo, hi, "differs" if min(lo.high, hi.high) < 0 else "within noise"


def holm_adjusted(p_values) -> np.ndarray:
    """Holm's step-down adjusted p-values of one family of tests (Holm 1979;
    ``statsmodels.stats.multitest.multipletests(method="holm")``): rejecting every test whose
    adjusted p-value is at most ``α`` holds the family-wise error rate at ``α`` under any
    dependence between the tests. NaN entries (a variant with one pair) are left out of the
    family and stay NaN."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method="holm")[1]
    return out


def verdict(p_holm: float, mean: float, expected: float, n: int, confidence: float = 0.95) -> str:
    """Verdict of a measured ΔL against the paper's (see module docstring for the rule).

    Args:
        p_holm: the variant's Holm-adjusted p-value within its figure (:func:`holm_adjusted`);
        mean: mean ΔL over seeds; expected: the paper's ΔL (its sign is the claim); n: number of
        pairs; confidence: 1 − the family-wise error rate.
    """
    if n < 2:
        return "undetermined (1 seed)"
    if not p_holm <= 1 - confidence:
        return "within noise"
    return "agrees" if math.copysign(1, mean) == math.copysign(1, expected) else "differs"


def family_verdicts(stats_, expected, confidence: float = 0.95) -> tuple:
    """The verdicts of one figure's variants (one family of tests): per variant the paired
    p-value, its Holm adjustment across the family and the verdict.

    Args:
        stats_: per variant, its :class:`DeltaStats` (:func:`delta_stats`); expected: per
            variant, the paper's ΔL (same length).
    Returns:
        ``(p, p_holm, verdicts)``: two arrays and a list, in the order given.
    """
    p = np.array([st.p for st in stats_], dtype=float)
    adj = holm_adjusted(p)
    return p, adj, [verdict(a, st.mean, e, st.n, confidence)
                    for a, st, e in zip(adj, stats_, expected)]


def spread_rule_verdict(low: float, high: float, mean: float, spread: float, expected: float,
                        n: int) -> str:
    """The verdict under a rule this book does not use, for the methods chapter's comparison:
    *within noise* when the unadjusted interval ``[low, high]`` covers zero or |``mean``| is not
    above ``spread`` (max − min of one arm's final loss over seeds, the larger arm), else by the
    sign of ``expected``. Its second test grows with n (the expected range of n normal draws is
    about 1.13 σ for 2, 1.69 σ for 3, 2.33 σ for 5), ignores the pairing that the paired interval
    uses, and, like the unadjusted interval, makes no allowance for testing several variants."""
    if n < 2:
        return "undetermined (1 seed)"
    if (low <= 0 <= high) or abs(mean) <= spread:
        return "within noise"
    return "agrees" if math.copysign(1, mean) == math.copysign(1, expected) else "differs"


def ranking_test(differences, confidence: float = 0.95) -> tuple[DeltaStats, str]:
    """A ranking claim ("A has the largest ΔL", "A has the lowest perplexity") as one paired
    test: ``differences`` holds, per seed, A's value minus its closest rival's, signed so that a
    positive difference is the claim. *agrees* when the two-sided interval lies above zero,
    *differs* when below, else *within noise*; *undetermined (1 seed)* with one pair.

    Returns:
        ``(stats, verdict)`` (:func:`delta_stats`).
    """
    st = delta_stats(differences, confidence)
    if st.n < 2:
        return st, "undetermined (1 seed)"
    if st.low > 0:
        return st, "agrees"
    return st, "differs" if st.high < 0 else "within noise"


def visible_text(mean: float, seed_sd: float) -> str:
    """Whether a single run could have shown the effect: ``"yes"`` when |mean ΔL| exceeds the
    seed-to-seed standard deviation of one arm's final loss, ``"no"`` otherwise, ``"n/a"``
    without one (fewer than two seeds)."""
    if not math.isfinite(seed_sd):
        return "n/a"
    return "yes" if abs(mean) > seed_sd else "no"


def verdict_text(verdict_: str, n: int, resolvable: float, p_holm: float,
                 mean: float = math.nan) -> str:
    """A verdict as the tables print it, saying how much the design could see: *within noise*
    gives the Holm-adjusted p-value and the interval's half-width ``resolvable`` (a smaller
    |ΔL| could hide at this n), e.g. ``"within noise (p = 0.21 adjusted): |ΔL| < 0.054 nats
    could hide here"``. When the mean ΔL ``mean`` is larger than that half-width, its own
    (unadjusted) interval excludes zero and only the adjustment for the figure's other
    variants holds it back; the text says so instead of naming a size the mean already
    exceeds (the adjustment across the table's rows: a figure's variants, the ladder's
    points). With one pair (``n`` < 2) it says there is no interval; any other verdict is
    returned with its adjusted p-value."""
    if n < 2:
        return f"{verdict_}: one pair, no interval"
    if verdict_ == "within noise":
        head = f"within noise (p = {p_holm:.2g} adjusted)"
        if abs(mean) > resolvable:
            return f"{head}: its own interval excludes zero, not after the adjustment"
        return f"{head}: |ΔL| < {resolvable:.3f} nats could hide here"
    return f"{verdict_} (p = {p_holm:.2g} adjusted)"


def holm_pairs_needed(mean, sd, p_values, confidence: float = 0.95) -> list[float]:
    """Per test of one family (one look), the pairs that would resolve its mean at the level its
    verdict uses: Holm's threshold for its rank, (1 − ``confidence``) / (m − rank), with rank the
    number of smaller p-values among the m finite ones (:func:`pairs_needed_at`); NaN where its
    p-value is NaN (one pair)."""
    p = np.asarray(p_values, dtype=float)
    family = p[np.isfinite(p)]
    return [pairs_needed_at(m, s, (1 - confidence) / max(1, len(family) - int((family < q).sum())))
            if math.isfinite(q) else math.nan for m, s, q in zip(mean, sd, p)]


def resolvable_text(n: int, resolvable: float) -> str:
    """The smallest resolvable |ΔL| as printed (nats, 4 decimals), ``"n/a (1 pair)"`` for one."""
    return "n/a (1 pair)" if n < 2 else f"{resolvable:.4f}"


def pairs_text(n: int, pairs_needed: float) -> str:
    """:attr:`DeltaStats.pairs_needed` as printed: the count, ``"—"`` when no number of pairs up
    to :data:`MAX_PAIRS` resolves the mean, ``"n/a (1 pair)"`` with one pair."""
    if n < 2:
        return "n/a (1 pair)"
    return "—" if math.isnan(pairs_needed) else f"{int(pairs_needed)}"


# ---------------------------------------------------------------------------------------------
# The columns and words of a final-ΔL table (ablation pages and the ladder)
# ---------------------------------------------------------------------------------------------

def interval_columns(n, mean, low, high, resolvable, pairs_needed, confidence: float) -> dict:
    """The columns a final-ΔL table and the ladder's table share, as printed: mean ΔL, its
    interval, the smallest resolvable |ΔL| and the pairs to resolve
    (:func:`resolvable_text`, :func:`pairs_text`)."""
    return {
        "ΔL (mean)": [f"{m:+.4f}" for m in mean],
        f"{confidence:.0%} CI": ["n/a (1 pair)" if math.isnan(lo) else f"[{lo:+.4f}, {hi:+.4f}]"
                                 for lo, hi in zip(low, high)],
        "resolvable |ΔL|": [resolvable_text(k, x) for k, x in zip(n, resolvable)],
        "pairs to resolve": [pairs_text(k, x) for k, x in zip(n, pairs_needed)],
    }


def final_table_words(confidence: float = 0.95, looks: tuple = ()) -> str:
    """The sentence above a final-ΔL table (ablation pages and the ladder): what each column is;
    with two ``looks`` (pair counts), how the group-sequential verdict reads them."""
    if len(looks) == 2:
        from_looks = (
            f" The pairs were read in two looks declared beforehand, at {looks[0]} and "
            f"{looks[1]} pairs (methods chapter): a row is decided at the first look when its "
            f"Holm-ordered p-value at {looks[0]} pairs passes the O'Brien–Fleming-type level "
            f"(about 0.0056 overall, split by Holm's procedure), else read again at {looks[1]} "
            f"(about 0.048, in place of the 0.05 above); *at {looks[0]} pairs* gives the first look's verdict (*continue*: "
            f"read again) and its unadjusted p. *Pairs to resolve* uses the level the verdict "
            f"actually uses, Holm's threshold for the row's rank at its look.")
    else:
        from_looks = (" *Pairs to resolve* uses the level the verdict actually uses, Holm's "
                      "threshold for the row's rank.")
    return (
        f"Final ΔL: validation loss at the last step (unsmoothed), mean over the n seed pairs "
        f"with its {confidence:.0%} Student-t interval. *Resolvable |ΔL|*: the interval's "
        f"half-width t·s/√n, from the measured spread s of the paired ΔL; a mean at least that "
        f"large would exclude zero at this n. *Pairs to resolve*: the smallest n at which "
        f"the same mean and spread would be decided (— : none up to {MAX_PAIRS}). "
        f"Verdict: each row's paired t-test of ΔL = 0, its p-value adjusted across the "
        f"table's rows (Holm's step-down procedure, so that the chance of any false effect "
        f"in the table stays at or below {1 - confidence:.0%}); *agrees* / *differs* by the sign "
        f"of the paper's ΔL when the adjusted p-value is at most {1 - confidence:.2g}, else "
        f"*within noise*, naming the |ΔL| that could hide at this n (or, where its own interval "
        f"excludes zero, that only the adjustment holds it back). *Paper ΔL (≈)*: ln of the "
        f"ratio of the paper's average validation perplexities of the two arms where its tables "
        f"give them, else the last point of its curve read by eye; its curves, read off its "
        f"figures, can end above or below that ratio. *Seed sd*: the standard "
        f"deviation of one arm's final validation loss over seeds (the larger of the two arms); "
        f"*one run shows it?*: whether |ΔL| exceeds it, i.e. whether a single-seed comparison "
        f"like the paper's could have told the effect from seed noise. *Pair source*, under the "
        f"table: where both arms of each pair come from; MIXED marks a pair whose arms differ in "
        f"source or machine." + from_looks)


def aggregate_verdicts(verdicts) -> str:
    """The verdict of a claim that covers several variants, from their own verdicts: the common
    verdict when every variant has the same one, else ``"mixed: "`` with the count of each
    (most frequent first), e.g. ``"mixed: within noise 4/5, differs 1/5"``. The one rule for
    every claim of the claims chapter and every figure page's verdict.

    Raises:
        ValueError: no verdict, or one outside :data:`VERDICTS`.
    """
    verdicts = list(verdicts)
    unknown = sorted(set(verdicts) - set(VERDICTS))
    if not verdicts or unknown:
        raise ValueError(f"verdicts must be a non-empty list of {VERDICTS}; got {verdicts!r}")
    counts = sorted(((verdicts.count(v), v) for v in VERDICTS if v in verdicts),
                    key=lambda cv: -cv[0])  # stable: ties keep the order of VERDICTS
    if len(counts) == 1:
        return verdicts[0]
    return "mixed: " + ", ".join(f"{v} {n}/{len(verdicts)}" for n, v in counts)
