"""The book's statistics and its verdict rule: Student-t critical values, the paired interval of
a mean ΔL and what its pairs could resolve, the verdict against the paper's claim, and how the
tables print them. The one place to change the verdict rule (and the words that state it).

Reads no other book module (scipy for the t quantiles). Units: ΔL values in nats, one per seed
pair; ``confidence`` a two-sided level in (0, 1).

Conventions (stated in every caption the book prints):

- Band: mean over seeds ± the two-sided Student-t confidence interval, ``t_{c, n−1} · s / √n``
  with ``s`` the sample standard deviation over the ``n`` seeds (none for one seed; the figures
  draw it from :data:`gtalib.book.style.MIN_BAND_SEEDS` seeds).
- Final ΔL: validation loss on the fixed held-out windows, unsmoothed, at the last step all
  seeds of the variant logged, with what its ``n`` pairs could resolve (:func:`delta_stats`):
  the interval's half-width (the smallest |mean ΔL| that would exclude zero at the measured
  spread) and the number of pairs that would resolve the measured mean at that spread.
- Verdict against the paper's claim (sign of the paper's ΔL): "within noise" when the CI covers 0
  or |ΔL| is not larger than the same-configuration seed spread (max − min of the final
  validation loss over seeds, the larger of the two arms; docs/cpu_regime.md), else "agrees" when
  the sign matches the paper's, "differs" when it does not; "undetermined (1 seed)" with a single
  seed. :func:`verdict_text` says, for "within noise", how large an |ΔL| could hide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

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
    """

    n: int
    mean: float
    sd: float
    low: float
    high: float
    resolvable: float
    pairs_needed: float
    max_pairs: int


def delta_stats(values, confidence: float = 0.95, max_pairs: int = MAX_PAIRS) -> DeltaStats:
    """Mean, Student-t interval and resolution of paired ΔL ``values`` (see :class:`DeltaStats`;
    t quantiles from :func:`t_critical`, i.e. ``scipy.stats.t.ppf``).

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
    h = t_critical(confidence, x.size - 1) * sd / math.sqrt(x.size)
    ns = np.arange(2, max_pairs + 1)
    resolves = stats.t.ppf(0.5 + confidence / 2, ns - 1) * sd / np.sqrt(ns) < abs(m)
    needed = float(ns[resolves][0]) if resolves.any() else math.nan
    return DeltaStats(int(x.size), m, sd, m - h, m + h, h, needed, max_pairs)


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


# ---------------------------------------------------------------------------------------------
# Verdicts
# ---------------------------------------------------------------------------------------------

def verdict(low: float, high: float, mean: float, spread: float, expected: float, n: int) -> str:
    """Verdict of a measured ΔL against the paper's (see module docstring for the rule).

    Args:
        low, high: CI of the mean ΔL; mean: mean ΔL over seeds; spread: same-configuration seed
        spread of the final loss (nats); expected: the paper's ΔL (its sign is the claim);
        n: number of seeds.
    """
    if n < 2:
        return "undetermined (1 seed)"
    if (low <= 0 <= high) or abs(mean) <= spread:
        return "within noise"
    return "agrees" if math.copysign(1, mean) == math.copysign(1, expected) else "differs"


def verdict_text(verdict_: str, n: int, resolvable: float, spread: float) -> str:
    """A verdict as the tables print it, saying how much the design could see: *within noise*
    names the largest |ΔL| that could hide (the larger of the interval's half-width
    ``resolvable`` and the seed ``spread``, the two bars of :func:`verdict`), e.g. ``"within
    noise: |ΔL| < 0.054 nats could hide here"``; with one pair (``n`` < 2) it says there is no
    interval; any other verdict is returned as it is."""
    if n < 2:
        return f"{verdict_}: one pair, no interval"
    if verdict_ == "within noise":
        return f"within noise: |ΔL| < {max(resolvable, spread):.3f} nats could hide here"
    return verdict_


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

def _interval_columns(n, mean, low, high, resolvable, pairs_needed, confidence: float) -> dict:
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


def final_table_words(confidence: float = 0.95) -> str:
    """The sentence above a final-ΔL table (ablation pages and the ladder): what each column is."""
    return (
        f"Final ΔL: validation loss at the last step (unsmoothed), mean over the n seed pairs "
        f"with its {confidence:.0%} Student-t interval. *Resolvable |ΔL|*: the interval's "
        f"half-width t·s/√n, from the measured spread s of the paired ΔL; a mean at least that "
        f"large would exclude zero at this n. *Pairs to resolve*: the smallest n whose "
        f"half-width at the same s is below the measured |ΔL| (— : none up to {MAX_PAIRS}). "
        f"*Seed spread*: max − min of the final validation loss over seeds of one configuration "
        f"(the larger of the two arms). Verdict: *within noise* if the interval covers 0 or "
        f"|ΔL| ≤ seed spread, naming the largest |ΔL| that could hide there (the larger of the "
        f"two bars; more pairs narrow the interval, not the seed spread), else *agrees* / "
        f"*differs* by the sign of the paper's ΔL. *Pair source*, under the table: where both arms "
        f"of each pair come from; MIXED marks a pair whose arms differ in source or machine.")
