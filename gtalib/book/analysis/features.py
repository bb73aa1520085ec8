"""The features of a figure's ΔL curves as tests over seeds: each curve's course across a window,
the top curve, the slowest fall, the lowest end, the convergence of the curves and the order of
their ends (the methods chapter, "The curves read feature by feature").

Every statistic is computed from the seed pairs of one figure, the same seed index pairing each
variant's curve with every other's (the pairs of one seed index share the data order), and comes
with a two-sided interval and a p-value of "no such feature":

- a variant's own course: the paired Student-t interval of its per-seed change
  (:func:`gtalib.book.analysis.stats.delta_stats`);
- the convergence: the paired Student-t interval of each seed pair's log ratio of spreads
  (:func:`convergence`);
- the order: ``scipy.stats.kendalltau``'s test across the variants (:func:`order`), with a
  bootstrap interval over seeds;
- a feature that compares variants (top, slowest, lowest): the percentile
  bootstrap over seed indices (``scipy.stats.bootstrap``; Efron & Tibshirani 1993, *An
  Introduction to the Bootstrap*, ch. 13), resampling all the figure's variants together. Its
  p-value is the dual of the percentile interval: twice the smaller share of the bootstrap
  replicates on either side of zero, each count plus one over the replicates plus one (Davison &
  Hinkley 1997, *Bootstrap Methods and their Application*, §4.4).

A figure's features form one family: :func:`feature_verdicts` adjusts their p-values by Holm's
procedure (:func:`gtalib.book.analysis.stats.holm_adjusted`) and names each verdict in the
book's words. Reads :mod:`gtalib.book.analysis.stats` only. ΔL in nats; steps as logged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from gtalib.book.analysis.stats import delta_stats, holm_adjusted

#: Bootstrap resamples per feature; the replicates come from a generator seeded with
#: :data:`BOOTSTRAP_SEED`, so a feature's interval is the same in every build.
BOOTSTRAP_RESAMPLES = 9999
BOOTSTRAP_SEED = 0

#: The fewest seed pairs a bootstrap feature is decided from. n seed indices have only
#: C(2n − 1, n) distinct resamples (3 at n = 2, 10 at 3, 35 at 4, 126 at 5): below 5 the
#: percentile interval and its p-value are too coarse to hold their level (a bootstrap of the
#: spread of mean curves with no convergence present rejected in 43 % of simulated figures at
#: 2 pairs and 19 % at 3), so such a feature is reported without an interval and left
#: undetermined.
MIN_BOOTSTRAP_PAIRS = 5

#: The verdict of a feature that has too few pairs to be decided.
FEW_PAIRS = f"undetermined (fewer than {MIN_BOOTSTRAP_PAIRS} pairs)"


@dataclass(frozen=True)
class Feature:
    """One feature of a figure, measured over ``n`` seeds.

    Attributes:
        kind: ``"course"``, ``"top"``, ``"slowest"``, ``"lowest"``, ``"convergence"`` or
            ``"order"``. variant: the variant the feature names (``None`` for a figure-wide one).
        estimate, low, high: the statistic and its two-sided interval (units per kind: ΔL
            change in nats, a margin in nats, a ratio of spreads, Kendall's τ).
        p: two-sided p-value of the null value (:attr:`null`).
        null: the statistic's value when the feature is absent (0, or 1 for a ratio).
        expected: +1 when the paper's feature is a statistic above :attr:`null`, −1 below.
        n: seed pairs used.
    """

    kind: str
    variant: str | None
    estimate: float
    low: float
    high: float
    p: float
    null: float
    expected: int
    n: int


def curve_array(curves: pd.DataFrame, variants, start_step: int) -> tuple[np.ndarray, np.ndarray, list]:
    """The drawn ΔL curves of ``variants`` from ``start_step`` on, as one array.

    Args:
        curves: per-seed ΔL curves ``[variant, seed, step, delta]``
            (:func:`gtalib.book.analysis.curves.delta_curves`).
        variants: the variants, in the order of the array's second axis.
        start_step: the window's first step.
    Returns:
        ``(C, steps, seeds)``: ``C[s, v, t]`` the ΔL of seed ``seeds[s]`` of variant ``v`` at
        ``steps[t]`` (seeds every variant has, steps every curve logged in the window).
    Raises:
        ValueError: no seed or no step common to every variant in the window.
    """
    part = curves[curves["variant"].isin(variants) & (curves["step"] >= start_step)]
    seeds = sorted(set.intersection(*[set(part.loc[part["variant"] == v, "seed"])
                                      for v in variants]))
    part = part[part["seed"].isin(seeds)]
    # the steps every (variant, seed) curve logged
    counts = part.groupby("step").size()
    steps = np.sort(counts.index[counts == len(variants) * len(seeds)].to_numpy())
    if not seeds or not steps.size:
        raise ValueError(f"no seed and step common to every variant of {list(variants)} "
                         f"from step {start_step}")
    cube = (part[part["step"].isin(steps)]
            .pivot_table(index=["seed", "variant"], columns="step", values="delta"))
    # (seed, variant) rows × steps → seeds × variants × steps
    C = cube.reindex(pd.MultiIndex.from_product([seeds, list(variants)]))[steps].to_numpy()
    return C.reshape(len(seeds), len(variants), len(steps)), steps, seeds


def bootstrap(statistic, n: int, confidence: float = 0.95, null: float = 0.0
              ) -> tuple[float, float, float, float]:
    """Percentile bootstrap over ``n`` seed indices of ``statistic(indices) -> float``.

    Returns:
        ``(estimate, low, high, p)``: the statistic on all seeds, its two-sided percentile
        interval at ``confidence`` and the p-value of ``null`` (module docstring); NaN interval
        and p with fewer than :data:`MIN_BOOTSTRAP_PAIRS` seeds or a statistic undefined on the
        data.
    """
    estimate = float(statistic(np.arange(n)))
    if n < MIN_BOOTSTRAP_PAIRS or not math.isfinite(estimate):
        return estimate, math.nan, math.nan, math.nan
    res = sps.bootstrap((np.arange(n),), lambda idx: statistic(idx.astype(int)),
                        vectorized=False, n_resamples=BOOTSTRAP_RESAMPLES,
                        confidence_level=confidence, method="percentile",
                        rng=np.random.default_rng(BOOTSTRAP_SEED))
    dist = res.bootstrap_distribution
    dist = dist[np.isfinite(dist)]
    below, above = (dist <= null).sum(), (dist >= null).sum()
    p = min(1.0, 2 * (min(below, above) + 1) / (dist.size + 1))
    return estimate, float(res.confidence_interval.low), float(res.confidence_interval.high), p


def course(C: np.ndarray, variants, expected: dict, confidence: float = 0.95) -> list[Feature]:
    """Each variant's change of ΔL across the window (its last step minus its first), per seed,
    with its paired Student-t interval; ``expected``: variant → sign of the paper's change."""
    out = []
    for v, name in enumerate(variants):
        change = C[:, v, -1] - C[:, v, 0]
        st = delta_stats(change, confidence)
        out.append(Feature("course", name, st.mean, st.low, st.high,
                           st.p, 0.0, expected[name], st.n))
    return out


def _others(variants, name) -> list[int]:
    return [i for i, v in enumerate(variants) if v != name]


def top_margin(C: np.ndarray, variants, top: str, confidence: float = 0.95) -> Feature:
    """Whether ``top``'s mean curve lies above every other variant's across the window: the
    smallest, over the window's steps, of its mean ΔL minus the largest other mean ΔL
    (> 0: above throughout)."""
    i, rest = list(variants).index(top), _others(variants, top)

    def stat(idx):
        mean = C[idx].mean(axis=0)  # variants × steps
        return float((mean[i] - mean[rest].max(axis=0)).min())

    return Feature("top", top, *bootstrap(stat, C.shape[0], confidence), 0.0, +1, C.shape[0])


def slowest_margin(C: np.ndarray, variants, slowest: str, expected: int = -1,
                   confidence: float = 0.95) -> Feature:
    """Whether ``slowest``'s ΔL changes least across the window: the smallest, over the other
    variants, of its mean change minus theirs, signed so that > 0 means it falls (``expected``
    −1: the curves fall) or rises (+1) least."""
    i, rest = list(variants).index(slowest), _others(variants, slowest)

    def stat(idx):
        change = (C[idx, :, -1] - C[idx, :, 0]).mean(axis=0) * expected  # fall as positive
        return float((change[rest] - change[i]).min())

    return Feature("slowest", slowest, *bootstrap(stat, C.shape[0], confidence), 0.0, +1,
                   C.shape[0])


def lowest_margin(F: np.ndarray, variants, lowest: str, confidence: float = 0.95) -> Feature:
    """Whether ``lowest`` ends lowest: the smallest, over the other variants, of their mean final
    ΔL minus its own (> 0: lowest). ``F[s, v]``: the final ΔL of seed ``s`` of variant ``v``."""
    i, rest = list(variants).index(lowest), _others(variants, lowest)

    def stat(idx):
        mean = F[idx].mean(axis=0)
        return float((mean[rest] - mean[i]).min())

    return Feature("lowest", lowest, *bootstrap(stat, F.shape[0], confidence), 0.0, +1,
                   F.shape[0])


def convergence(C: np.ndarray, expected: int = -1, confidence: float = 0.95) -> Feature:
    """Whether the curves close up: per seed pair, the logarithm of the spread of the variants'
    ΔL (standard deviation across variants) at the window's end over its spread at the window's
    start; their mean with its paired Student-t interval, reported back as a ratio (the
    geometric mean over pairs; < 1: the curves converge). ``expected``: −1 when the paper's
    curves converge, +1 when they spread out. A paired test of each pair's own spread, rather
    than a bootstrap of the spread of the mean curves, which rejected a true null in 8–10 % of
    simulated figures at 5 and 10 pairs instead of 5 %."""
    start, end = C[:, :, 0].std(axis=1, ddof=1), C[:, :, -1].std(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(end / start)
    logs = logs[np.isfinite(logs)]
    if not logs.size:
        return Feature("convergence", None, math.nan, math.nan, math.nan, math.nan, 1.0,
                       expected, 0)
    st = delta_stats(logs, confidence)
    return Feature("convergence", None, math.exp(st.mean), math.exp(st.low), math.exp(st.high),
                   st.p, 1.0, expected, st.n)


def order(F: np.ndarray, paper, confidence: float = 0.95) -> Feature:
    """Kendall's τ (τ-b, which allows the paper's ties) between the variants' mean final ΔL and
    the paper's final ΔL ``paper`` (one per variant, in ``F``'s column order); > 0: the same
    order. Its p-value is ``scipy.stats.kendalltau``'s test of no association across the
    variants (a bootstrap over seeds rejected a true null in 14 % of simulated figures at 5
    pairs); its interval is the percentile bootstrap over seeds (:func:`bootstrap`), which
    shows how far the seeds move τ."""
    paper = np.asarray(paper, dtype=float)

    def stat(idx):
        return float(sps.kendalltau(F[idx].mean(axis=0), paper).statistic)

    est, lo, hi, _ = bootstrap(stat, F.shape[0], confidence)
    p = float(sps.kendalltau(F.mean(axis=0), paper).pvalue)
    return Feature("order", None, est, lo, hi, p if math.isfinite(est) else math.nan, 0.0, +1,
                   F.shape[0])


def feature_verdicts(features: list[Feature], confidence: float = 0.95) -> tuple[np.ndarray, list]:
    """The verdicts of one figure's features, one family: Holm-adjusted p-values and, per
    feature, *agrees* / *differs* when the adjusted p-value is at most ``1 − confidence`` and
    the estimate lies on the paper's / the other side of the null value, else *within noise*;
    *undetermined (1 seed)* with one seed, and :data:`FEW_PAIRS` for a feature without a
    p-value from fewer than :data:`MIN_BOOTSTRAP_PAIRS` pairs (left out of the family).

    Returns:
        ``(p_holm, verdicts)`` in the order given.
    """
    adj = holm_adjusted([f.p for f in features])
    out = []
    for f, a in zip(features, adj):
        if f.n < 2:
            out.append("undetermined (1 seed)")
        elif math.isnan(f.p) and f.n < MIN_BOOTSTRAP_PAIRS:
            out.append(FEW_PAIRS)
        elif not math.isfinite(f.estimate):
            out.append("within noise")
        elif not a <= 1 - confidence:
            out.append("within noise")
        else:
            out.append("agrees" if np.sign(f.estimate - f.null) == f.expected else "differs")
    return adj, out
