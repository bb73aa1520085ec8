"""Curve arithmetic of the book: paired ΔL per logged step, trailing-mean smoothing, per-seed ΔL
curves and their band over seeds, each run's final value, and the plateau escape step against the
corpus's unigram entropy (docs/cpu_regime.md).

Reads :mod:`gtalib.book.analysis.stats` (the interval of the band) and, for the entropy, the corpus
manifest (:mod:`gtalib.data`, through :mod:`gtalib.book.design.figures`). Input: a *runs frame*
(:mod:`gtalib.book.analysis.collect`); losses and ΔL in nats, steps and tokens as logged.

Conventions (stated in every caption the book prints):

- ΔL = L(alt) − L(rec) per seed, from paired runs (same data order, same seed) on the steps both
  runs logged; positive ⇒ the paper's recommended choice is better (docs/paper_values.md, "The
  ablation figures").
- Curves: the training loss by default (paired runs see the same batch at every step, so the
  per-step ΔL is dense and the batch difficulty cancels), each seed's ΔL smoothed by a trailing
  mean over ``smoothing`` logged points before averaging over seeds (``smoothing=1``: none;
  default 5 % of the run's steps, :func:`auto_smoothing`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gtalib import data as gdata
from gtalib.book.analysis.stats import mean_ci
from gtalib.model.presets import preset_tokenizer


def paired_delta(alt: pd.DataFrame, rec: pd.DataFrame, column: str = "val_loss") -> pd.DataFrame:
    """ΔL = alt[column] − rec[column] on the steps where both runs logged ``column``.

    Args:
        alt, rec: metrics frames of two paired runs (columns ``step, tokens, <column>``).
    Returns:
        DataFrame ``[step, tokens, delta]`` sorted by step (nats).
    Raises:
        KeyError: ``column`` missing from a frame.
        ValueError: no common logged step, or the runs disagree on tokens at a common step
            (then they are not paired: different batch sizes or data).
    """
    for name, df in (("alt", alt), ("rec", rec)):
        missing = {"step", "tokens", column} - set(df.columns)
        if missing:
            raise KeyError(f"{name} metrics lack column(s) {sorted(missing)}")
    a = alt[["step", "tokens", column]].dropna(subset=[column])
    r = rec[["step", "tokens", column]].dropna(subset=[column])
    m = a.merge(r, on="step", suffixes=("_alt", "_rec"), how="inner").sort_values("step")
    if m.empty:
        raise ValueError(f"paired runs share no step with a logged {column!r}")
    bad = m["tokens_alt"] != m["tokens_rec"]
    if bad.any():
        s = int(m.loc[bad, "step"].iloc[0])
        raise ValueError(f"runs are not paired: different token counts at step {s}")
    return pd.DataFrame({
        "step": m["step"].to_numpy(),
        "tokens": m["tokens_alt"].to_numpy(),
        "delta": (m[f"{column}_alt"] - m[f"{column}_rec"]).to_numpy(),
    })


def smooth(values: pd.Series, window: int) -> pd.Series:
    """Trailing mean over ``window`` consecutive points (the first points average what exists).

    Raises:
        ValueError: ``window`` < 1.
    """
    if not isinstance(window, (int, np.integer)) or window < 1:
        raise ValueError(f"smoothing window must be a positive integer, got {window!r}")
    return values.rolling(window, min_periods=1).mean()


def auto_smoothing(n_points: int) -> int:
    """Default smoothing window: 5 % of a curve's logged points, at least 1 (no smoothing)."""
    return max(1, round(0.05 * n_points))


def delta_curves(runs: pd.DataFrame, column: str = "val_loss", smoothing: int = 1) -> pd.DataFrame:
    """Per-seed ΔL curves of every variant that has both arms for a seed.

    Returns:
        DataFrame ``[variant, seed, step, tokens, delta]``; ``delta`` smoothed per seed.
    """
    out = []
    for (variant, seed), g in runs[runs["arm"].isin(["alt", "rec"])].groupby(
        ["variant", "seed"], sort=False
    ):
        arms = dict(tuple(g.groupby("arm")))
        if set(arms) != {"alt", "rec"}:
            continue
        d = paired_delta(arms["alt"], arms["rec"], column)
        d["delta"] = smooth(d["delta"], smoothing).to_numpy()
        d.insert(0, "seed", seed)
        d.insert(0, "variant", variant)
        out.append(d)
    if not out:
        return pd.DataFrame(columns=["variant", "seed", "step", "tokens", "delta"])
    return pd.concat(out, ignore_index=True)


def seed_band(curves: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Mean over seeds and its Student-t band at every step.

    Args:
        curves: output of :func:`delta_curves`.
    Returns:
        DataFrame ``[variant, step, tokens, mean, lo, hi, n]`` (``lo``/``hi`` NaN when n < 2).
    """
    rows = []
    for (variant, step), g in curves.groupby(["variant", "step"], sort=False):
        m, lo, hi, n = mean_ci(g["delta"], confidence)
        rows.append((variant, step, g["tokens"].iloc[0], m, lo, hi, n))
    return pd.DataFrame(rows, columns=["variant", "step", "tokens", "mean", "lo", "hi", "n"])


def final_deltas(runs: pd.DataFrame, column: str = "val_loss") -> pd.DataFrame:
    """Each pair's unsmoothed ΔL of ``column`` at the last step that every seed of its variant
    logged (the final ΔL of the tables).

    Returns:
        DataFrame ``[variant, seed, step, tokens, delta]`` (nats), variants in frame order.
    """
    curves = delta_curves(runs, column, smoothing=1)
    parts = [g[g["step"] == g.groupby("seed")["step"].max().min()]
             for _, g in curves.groupby("variant", sort=False)]
    cols = ["variant", "seed", "step", "tokens", "delta"]
    return pd.concat(parts)[cols] if parts else pd.DataFrame(columns=cols)


def final_values(runs: pd.DataFrame, column: str = "val_loss") -> pd.DataFrame:
    """Each run's ``column`` at the last step every seed of its (variant, arm) logged.

    Returns:
        DataFrame ``[variant, arm, label, seed, step, tokens, value]``.
    """
    rows = []
    for (variant, arm), g in runs.groupby(["variant", "arm"], sort=False):
        logged = g.dropna(subset=[column])
        if logged.empty:
            continue
        last = logged.groupby("seed")["step"].max().min()
        at = logged[logged["step"] == last]
        for _, r in at.iterrows():
            rows.append((variant, arm, r["label"], r["seed"], last, r["tokens"], r[column]))
    return pd.DataFrame(rows, columns=["variant", "arm", "label", "seed", "step", "tokens", "value"])


# ---------------------------------------------------------------------------------------------
# Plateau escape and the unigram entropy (docs/cpu_regime.md)
# ---------------------------------------------------------------------------------------------

def plateau_escape(runs: pd.DataFrame, entropy: float, margin: float = 0.1, window: int = 10
                   ) -> pd.DataFrame:
    """Step at which each run leaves the unigram plateau (docs/cpu_regime.md: zero-initialised output
    projections start every block at a saddle where the loss sits near the unigram entropy).

    Escape step = first step at which the training loss, smoothed by a trailing mean over
    ``window`` steps, falls below ``entropy − margin`` (nats). NaN if it never does.

    Returns:
        DataFrame ``[variant, arm, label, seed, escape_step, escape_tokens]``.
    """
    rows = []
    for (variant, arm, label, seed), g in runs.groupby(
        ["variant", "arm", "label", "seed"], sort=False
    ):
        g = g.dropna(subset=["train_loss"]).sort_values("step")
        s = smooth(g["train_loss"].reset_index(drop=True), window)
        below = np.flatnonzero((s < entropy - margin).to_numpy())
        if below.size:
            i = int(below[0])
            rows.append((variant, arm, label, seed, int(g["step"].iloc[i]), int(g["tokens"].iloc[i])))
        else:
            rows.append((variant, arm, label, seed, math.nan, math.nan))
    return pd.DataFrame(rows, columns=["variant", "arm", "label", "seed", "escape_step",
                                       "escape_tokens"])


def corpus_entropy(preset: str) -> float:
    """Unigram entropy (nats/token) of the training split of the preset's corpus, from its
    manifest (``train_unigram_entropy_nats``, :mod:`gtalib.data.build`).

    Raises:
        FileNotFoundError: the corpus is not built (message says how to build it).
    """

    manifest = gdata.load_manifest(gdata.corpus_dir("default", preset_tokenizer(preset)))
    return float(manifest["train_unigram_entropy_nats"])
