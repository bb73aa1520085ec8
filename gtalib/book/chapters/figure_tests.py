"""Each ablation claim tested as the paper words it, for the whole figure: "does the change help
these variants on average" (claims page).

The per-variant verdicts of an ablation page answer "does it help this variant"; a claim such as
"zero init helps all nine baselines" is about the figure. Its figure-level test pools the
per-variant mean ΔL by a random-effects meta-analysis (the model of DerSimonian & Laird 1986,
*Controlled Clinical Trials* 7:177–188, with τ² estimated by Paule–Mandel iteration, not their
moment estimator; statsmodels' ``statsmodels.stats.meta_analysis.combine_effects``): each variant's mean paired ΔL with its
variance s²/n, the pooled mean with the Hartung–Knapp–Sidik–Jonkman interval on k − 1 degrees
of freedom (IntHout, Ioannidis & Borm 2014, *BMC Medical Research Methodology* 14:25: better
coverage with few studies), its standard error floored at the plain random-effects one (the
modification of Röver, Knapp & Friede 2015, *BMC Medical Research Methodology* 15:99, without
which the test rejects too often when the variants agree closely), τ² (the variance of the true effects between variants) and I² (the
share of the spread that is not sampling noise, floored at 0). The pooled test is one
hypothesis per claim, read at the figure's looks at their nominal levels
(:mod:`gtalib.book.analysis.sequential`). It does not say the change helps every variant: a
pooled ΔL > 0 with large τ² allows some variants to lose.

The methods chapter also sets each variant's verdict beside the one the seed-spread rule would
give (:func:`rule_comparison`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from IPython.display import Markdown, display
from scipy import stats
from statsmodels.stats.meta_analysis import combine_effects

from gtalib.book.analysis.curves import final_values
from gtalib.book.analysis.final_table import ONE_RUN
from gtalib.book.analysis.sequential import holm_level, nominal_levels
from gtalib.book.analysis.stats import pairs_needed_at, spread_rule_verdict
from gtalib.book.analysis.style import plural, table_style
from gtalib.book.chapters.ablation import ablation_results
from gtalib.book.design.figures import ABLATIONS, ablation
from gtalib.book.design.names import display_name
from gtalib.book.design.plan import Plan

COLUMNS = ["figure", "variants", "pairs", "pooled ΔL", "interval", "τ²", "I²", "p by look",
           "verdict", "variants' verdicts", "single run"]
#: Where the page's columns are explained: the methods chapter's statistics (its "One run shows
#: it?" and the figure-level test), from a generated page.
METHODS = "../methods.md#statistics"


def pooled(means, variances, confidence: float = 0.95) -> dict:
    """Random-effects pooled mean of ``means`` (one per variant) with ``variances`` (each mean's
    squared standard error), see the module docstring.

    Returns:
        ``{"mean", "low", "high", "p", "tau2", "i2", "k"}``: the pooled ΔL, its HKSJ interval at
        ``confidence``, the two-sided p-value of "pooled ΔL = 0" (t on k − 1 degrees of freedom),
        τ² (nats²) and I² (0–1).
    Raises:
        ValueError: fewer than two variants, or a variance that is not positive.
    """
    m, v = np.asarray(means, float), np.asarray(variances, float)
    if len(m) < 2 or len(v) != len(m):
        raise ValueError(f"pooling needs at least two variants with a variance each, got {len(m)}")
    if not (np.isfinite(v).all() and (v > 0).all()):
        raise ValueError(f"variances must be positive, got {v.tolist()}")
    with np.errstate(divide="ignore", invalid="ignore"):  # I² of identical means: 0/0, floored
        r = combine_effects(m, v, method_re="iterated", alpha=1 - confidence)
    # the HKSJ standard error (statsmodels' "random effect wls" row), floored at the plain
    # random-effects one: unfloored, it is anti-conservative when the variants' means agree more
    # closely than their standard errors say (Röver, Knapp & Friede 2015, BMC Med. Res.
    # Methodol. 15:99)
    k = len(m)
    mean = float(r.mean_effect_re)
    se = max(float(r.sd_eff_w_re_hksj), float(r.sd_eff_w_re))
    h = float(stats.t.ppf(0.5 + confidence / 2, k - 1)) * se
    p = float(2 * stats.t.sf(abs(mean) / se, k - 1)) if se > 0 else (0.0 if mean else 1.0)
    return {"mean": mean, "low": mean - h, "high": mean + h, "p": p,
            "tau2": max(0.0, float(r.tau2)), "i2": max(0.0, float(r.i2)), "k": k}


def figure_test(result, confidence: float = 0.95) -> dict:
    """The figure-level test of an ablation result (:func:`ablation_result`) at each of its
    looks: pooled over its complete variants, the verdict by the figure's looks (decided at the
    first look whose p is at most its nominal level; *agrees* / *differs* by the sign against
    the paper's mean ΔL over the variants, else *within noise*).

    Returns:
        ``{"looks": [(pairs, pooled dict)], "levels", "verdict", "decided at"}``, or ``{}``
        with fewer than two complete variants.
    """
    final = result.final
    if len(final) < 2 or final["seeds"].min() < 2:
        return {}
    deltas = result.deltas
    looks = tuple(result.looks) or (int(final["seeds"].min()),)
    levels = nominal_levels(looks, 1 - confidence)
    expected = float(np.nanmean(final["paper ΔL (≈)"]))
    out = {"looks": [], "levels": levels, "verdict": "within noise", "decided at": 0}
    for n, level in zip(looks, levels):
        first = deltas[deltas["seed"] < n] if len(looks) > 1 else deltas
        g = first.groupby("variant", sort=False)["delta"]
        pool = pooled(g.mean(), g.var(ddof=1) / g.count(), confidence)
        out["looks"].append((n, pool))
        if not out["decided at"] and pool["p"] <= level:
            out["decided at"] = n
            out["verdict"] = ("agrees" if math.copysign(1, pool["mean"]) ==
                              math.copysign(1, expected) else "differs")
    return out


def figure_tests_table(plan: Plan, run_dir, confidence: float = 0.95,
                       results=None) -> pd.DataFrame:
    """One row per ablation figure: its pooled ΔL at the last look with interval, τ² and I², the
    p-value at each look, the figure-level verdict, the per-variant verdict counts (with the
    first look's beside them) and how many variants a single run shows (|ΔL| above one arm's
    seed sd).

    Args:
        plan: the book's plan (:func:`gtalib.book.design.plan.make_plan`).
        results: ablation key → its result (:func:`ablation_result`), computed here if ``None``.
    """
    results = results or ablation_results(plan, run_dir, confidence)
    rows = []
    for key, r in results.items():
        t = figure_test(r, confidence)
        final = r.final
        if not t:
            rows.append((key, len(final), "—", "—", "—", "—", "—", "—", "not measured", "—", "—"))
            continue
        n, last = t["looks"][-1]
        counts = final["verdict"].value_counts()
        verdicts = ", ".join(f"{v} {c}" for v, c in counts.items())
        if "look 1" in final:
            first = final["look 1"].value_counts()
            verdicts += f" (at {t['looks'][0][0]} pairs: " + ", ".join(
                f"{v} {c}" for v, c in first.items()) + ")"
        shows = int((final[ONE_RUN] == "yes").sum())
        rows.append((
            key, len(final), n, f"{last['mean']:+.4f}",
            f"[{last['low']:+.4f}, {last['high']:+.4f}]", f"{last['tau2']:.2g}",
            f"{last['i2']:.0%}",
            "; ".join(f"{k}: {pool['p']:.2g} (level {lv:.2g})"
                      for (k, pool), lv in zip(t["looks"], t["levels"])),
            t["verdict"] + (f" at {t['decided at']} pairs" if t["decided at"] else ""),
            verdicts, f"{shows} of {len(final)}"))
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["figure"] = [ABLATIONS[k].heading for k in out["figure"]]
    return out.set_index("figure")


def show_figure_tests(table: pd.DataFrame) -> None:
    """Display the figure-level tests (under the claims page's heading "Each ablation claim as a
    whole") and a link to what their columns mean (:data:`METHODS`)."""
    # the figure as a column that may wrap ("Latent-scaling / ablation"): the eleven columns
    # then fit the page's column at 1400 px
    display(table_style(table.reset_index().style.hide(axis="index"),
                        prose=["figure", "p by look", "variants' verdicts"]))
    display(Markdown(f"[What the columns mean]({METHODS})"))


def prediction_table(results: dict, confidence: float = 0.95) -> pd.DataFrame:
    """The first look's prediction checked by the second, per variant of every figure read in
    two looks: the pairs that the first ``looks[0]`` pairs' mean and spread would need to be
    decided at the final look's level (Holm's threshold for the variant's rank among the
    figure's variants at that look, :func:`gtalib.book.analysis.stats.pairs_needed_at`), the
    verdict at the last look, and whether the prediction held (predicted at most the last
    look's pairs ⇔ decided by then; "—": no prediction, the mean at the first look was 0 or
    no count up to the cap would do).

    Returns:
        columns ``figure, variant, predicted at <n1>, verdict at <n2>, held`` (empty without a
        two-look figure).
    """
    rows = []
    for key, r in results.items():
        if len(r.looks) != 2 or r.final.empty or "look 1" not in r.final:
            continue
        n1, n2 = r.looks
        d = r.deltas
        first = d[d["seed"] < n1].groupby("variant", sort=False)["delta"]
        mean, sd = first.mean(), first.std(ddof=1)
        p1 = r.final["p (look 1)"]
        for v in r.final.index:
            rank = int((p1 < p1[v]).sum())
            need = pairs_needed_at(float(mean[v]), float(sd[v]),
                                   holm_level(r.looks, 1 - confidence, len(p1) - rank, -1))
            decided = r.final.loc[v, "decided at"] > 0
            held = "—" if math.isnan(need) else ("yes" if (need <= n2) == decided else "no")
            rows.append((ABLATIONS[key].heading, display_name(v),
                         "—" if math.isnan(need) else int(need), r.final.loc[v, "verdict"], held))
    if not rows:
        return pd.DataFrame()
    n1, n2 = next(r.looks for r in results.values() if len(r.looks) == 2)
    return pd.DataFrame(rows, columns=["figure", "variant", f"predicted at {n1}",
                                       f"verdict at {n2}", "held"])


def rule_comparison(result) -> pd.DataFrame:
    """The variants of an ablation whose verdict under the seed-spread rule
    (:func:`gtalib.book.analysis.stats.spread_rule_verdict`) differs from this book's, and why.

    Returns:
        DataFrame ``[figure, variant, n, ΔL, CI, seed spread, p, p (Holm), spread rule,
        verdict, why]`` (nats; one row per variant whose verdicts differ). ``why``: where
        this book's verdict is *within noise*, the unadjusted p-value → the Holm-adjusted one
        (``"p 0.012 → 0.036 (Holm, 3 variants)"``); otherwise |ΔL| against the seed spread that
        held the spread rule back (``"|ΔL| 0.120 ≤ spread 0.640"``).
    """
    final, rows = result.final, []
    if final.empty:
        return pd.DataFrame(rows)
    finals = final_values(result.runs, result.final_column)
    m = int(final["p"].notna().sum())
    for v, r in final.iterrows():
        f = finals[finals["variant"] == v]
        spread = float(f.groupby("arm")["value"].agg(lambda x: x.max() - x.min()).max())
        old = spread_rule_verdict(r["CI low"], r["CI high"], r["ΔL"], spread, r["paper ΔL (≈)"],
                                  int(r["seeds"]))
        if old == r["verdict"]:
            continue
        why = (f"p {r['p']:.2g} → {r['p (Holm)']:.2g} (Holm, {plural(m, 'variant')})"
               if r["verdict"] == "within noise" else f"|ΔL| {abs(r['ΔL']):.3f} ≤ spread {spread:.3f}")
        rows.append({"figure": ablation(result.key).heading, "variant":
                     display_name(v), "n": int(r["seeds"]), "ΔL": f"{r['ΔL']:+.3f}",
                     "CI": f"[{r['CI low']:+.3f}, {r['CI high']:+.3f}]",
                     "seed spread": f"{spread:.3f}", "p (Holm)": f"{r['p (Holm)']:.2g}",
                     "spread rule": old, "verdict": r["verdict"], "why": why})
    return pd.DataFrame(rows)
