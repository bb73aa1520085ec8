"""The final-ΔL table of an ablation figure: per variant, the paired ΔL at the last step with
its interval, what the pairs could resolve, and a verdict, the variants read as one family
(Holm's procedure at one look, or the declared two-look design of
:mod:`gtalib.book.analysis.sequential`). ΔL in nats (:mod:`gtalib.book.analysis.curves`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gtalib.book.analysis.curves import final_deltas, final_values
from gtalib.book.analysis.sequential import holm_level, two_look_verdicts
from gtalib.book.analysis.stats import (
    delta_stats,
    family_verdicts,
    pairs_needed_at,
    visible_text,
)

#: The final table's column: whether |ΔL| exceeds one arm's seed sd ("yes"/"no"/"n/a").
ONE_RUN = "one run shows it?"


def pair_verdicts(pairs: pd.DataFrame, paper: dict, looks: tuple = (),
                  confidence: float = 0.95) -> pd.DataFrame:
    """The verdicts of a figure from its pairs (:func:`gtalib.book.chapters.ablation.pair_table`): its variants are one family
    of paired t-tests of the paper's sign, read at ``looks`` (one look: Holm's procedure at
    1 − ``confidence``, :func:`gtalib.book.analysis.stats.family_verdicts`; two looks, every
    variant having the last look's pairs: the group-sequential rule of
    :func:`gtalib.book.analysis.sequential.two_look_verdicts`; default one look at the pairs
    there are).

    Args:
        pairs: ``[variant, seed, ΔL]`` rows (nats), one per pair.
        paper: variant → the paper's final ΔL (nats); its sign is the claim.
    Returns:
        DataFrame indexed by variant (in ``pairs`` order): ``pairs, ΔL`` (mean), ``p``, ``p
        (Holm)``, ``verdict`` (*agrees*, *differs* or *within noise*); with two looks also ``p
        (look 1)``, ``level (look 1)``, ``look 1`` (*agrees*, *differs* or *continue*), ``first
        pairs`` and ``decided at`` (pairs; 0: not decided).
    """
    paired = {v: g.sort_values("seed")["ΔL"].to_numpy(float)
              for v, g in pairs.groupby("variant", sort=False)}
    stats = [delta_stats(d, confidence) for d in paired.values()]
    expected = [paper.get(v, math.nan) for v in paired]
    out = pd.DataFrame({"pairs": [st.n for st in stats], "ΔL": [st.mean for st in stats]},
                       index=pd.Index(list(paired), name="variant"))
    out["p"], out["p (Holm)"], one_look = family_verdicts(stats, expected, confidence)
    looks = tuple(looks) or (int(out["pairs"].max()) if len(out) else 0,)
    if len(looks) == 1 or (out["pairs"] < looks[-1]).any():
        out["verdict"] = one_look  # a figure not yet complete at its last look included
        return out
    seq = two_look_verdicts(list(paired.values()), expected, looks, 1 - confidence)
    out["verdict"] = [o["verdict"] for o in seq]
    out["p (look 1)"] = [o["p"][0] for o in seq]
    out["level (look 1)"] = seq[0]["level"][0]
    out["look 1"] = [o["interim"] for o in seq]
    out["first pairs"] = looks[0]
    out["decided at"] = [looks[o["look"] - 1] if o["look"] else 0 for o in seq]
    return out


def final_delta_table(
    runs: pd.DataFrame, paper_final: dict, confidence: float = 0.95, column: str = "val_loss",
    looks: tuple = (),
) -> pd.DataFrame:
    """The table under each ablation figure: final ΔL per variant with CI, what the seeds could
    resolve (:func:`delta_stats`), the seed sd of one arm, the paper's ΔL and a verdict (the
    figure's variants are one family, read at ``looks``: one look, Holm's procedure at
    1 − ``confidence``; two, the group-sequential rule of
    :func:`gtalib.book.analysis.sequential.two_look_verdicts`; default one look at the pairs
    there are).

    Args:
        runs: runs frame with ``alt`` and ``rec`` arms.
        paper_final: variant → the paper's final ΔL (nats); its sign is the paper's claim.
    Returns:
        DataFrame indexed by variant with columns ``seeds, step, tokens, ΔL, ΔL sd, CI low, CI
        high, resolvable |ΔL|, pairs to resolve, seed sd, paper ΔL (≈), p, p (Holm), verdict,
        one run shows it?`` (nats; ``seeds`` = number of pairs n; ``ΔL sd`` = the sample
        standard deviation of the paired ΔL; ``resolvable |ΔL|`` = the interval's half-width,
        ``pairs to resolve`` = the pairs whose t-test would reach the level this variant's
        verdict uses, Holm's threshold for its rank at the last look
        (:func:`gtalib.book.analysis.stats.pairs_needed_at`); ``seed sd`` = the larger of the
        two arms' standard deviations of the final loss over seeds). With two looks also
        ``p (look 1)``, ``level (look 1)``, ``look 1`` (the first look's verdict: *agrees*,
        *differs* or *continue*) and ``decided at`` (pairs; 0: not decided).
    """
    finals = final_values(runs, column)
    deltas = final_deltas(runs, column)
    rows = []
    for variant, at in deltas.groupby("variant", sort=False):
        st = delta_stats(at["delta"], confidence)
        f = finals[finals["variant"] == variant]
        seed_sd = float(f.groupby("arm")["value"].std(ddof=1).max())
        rows.append((
            variant, st.n, int(at["step"].iloc[0]), int(at["tokens"].iloc[0]), st.mean, st.sd,
            st.low, st.high, st.resolvable, st.pairs_needed, seed_sd,
            paper_final.get(variant, math.nan),
        ))
    cols = ["variant", "seeds", "step", "tokens", "ΔL", "ΔL sd", "CI low", "CI high",
            "resolvable |ΔL|", "pairs to resolve", "seed sd", "paper ΔL (≈)"]
    table = pd.DataFrame(rows, columns=cols).set_index("variant")
    pairs = deltas.rename(columns={"delta": "ΔL"})
    judged = pair_verdicts(pairs, paper_final, looks, confidence)
    table = table.join(judged.drop(columns=["pairs", "ΔL"]))
    alpha = 1 - confidence
    two_looks = "decided at" in table
    looks = (tuple(looks) if two_looks else ()) or (int(table["seeds"].max()),)
    # the level each row's verdict uses: Holm's threshold for its rank among the rows still
    # open at the last look (a row decided at the first look: at that look)
    last = table["p"].to_numpy(float)
    open_ = (table["decided at"] != looks[0]).to_numpy() if two_looks else np.ones(len(table), bool)
    need = []
    for i, (m, s) in enumerate(zip(table["ΔL"], table["ΔL sd"])):
        if not open_[i]:
            p1 = table["p (look 1)"].to_numpy(float)
            rank = int((p1 < p1[i]).sum())
            need.append(pairs_needed_at(m, s, holm_level(looks, alpha, len(table) - rank, 0)))
            continue
        fam = last[open_]
        rank = int((fam < last[i]).sum())
        need.append(pairs_needed_at(m, s, holm_level(looks, alpha, max(1, len(fam) - rank), -1)))
    table["pairs to resolve"] = need
    table[ONE_RUN] = [visible_text(m, s) for m, s in zip(table["ΔL"], table["seed sd"])]
    return table
