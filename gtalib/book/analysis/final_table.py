"""The final-ΔL table of an ablation figure: per variant, the paired ΔL at the last step with
its interval, what the pairs could resolve, and a verdict, the variants read as one family
(Holm's procedure at one look, or the declared two-look design of
:mod:`gtalib.book.analysis.sequential`). ΔL in nats (:mod:`gtalib.book.analysis.curves`).
"""

from __future__ import annotations

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
    rows, paired = [], {}
    for variant, at in final_deltas(runs, column).groupby("variant", sort=False):
        paired[variant] = at.sort_values("seed")["delta"].to_numpy()
        last = at["step"].iloc[0]
        st = delta_stats(at["delta"], confidence)
        f = finals[finals["variant"] == variant]
        seed_sd = float(f.groupby("arm")["value"].std(ddof=1).max())
        expected = paper_final.get(variant, float("nan"))
        rows.append((
            variant, st.n, int(last), int(at["tokens"].iloc[0]), st.mean, st.sd, st.low, st.high,
            st.resolvable, st.pairs_needed, seed_sd, expected,
        ))
    cols = ["variant", "seeds", "step", "tokens", "ΔL", "ΔL sd", "CI low", "CI high",
            "resolvable |ΔL|", "pairs to resolve", "seed sd", "paper ΔL (≈)"]
    table = pd.DataFrame(rows, columns=cols).set_index("variant")
    table["p"], table["p (Holm)"], one_look = family_verdicts(
        table["ΔL"], table["ΔL sd"], table["seeds"], table["paper ΔL (≈)"], confidence)
    alpha = 1 - confidence
    looks = tuple(looks) or (int(table["seeds"].max()),)
    if len(looks) == 1 or (table["seeds"] < looks[-1]).any():
        # one look at the pairs there are (a figure not yet complete at its last look included)
        table["verdict"] = one_look
        looks, seq = (int(table["seeds"].max()),), None
    else:
        seq = two_look_verdicts(list(paired.values()), list(table["paper ΔL (≈)"]), looks,
                                1 - confidence)
        table["verdict"] = [o["verdict"] for o in seq]
        levels = seq[0]["level"]
        table["p (look 1)"] = [o["p"][0] for o in seq]
        table["level (look 1)"] = levels[0]
        table["look 1"] = [o["interim"] for o in seq]
        table["first pairs"] = looks[0]
        table["decided at"] = [looks[o["look"] - 1] if o["look"] else 0 for o in seq]
    # the level each row's verdict uses: Holm's threshold for its rank among the rows still
    # open at the last look (a row decided at the first look: at that look)
    last = table["p"].to_numpy(float)
    open_ = np.ones(len(table), bool) if seq is None else np.array([o["look"] != 1 for o in seq])
    need = []
    for i, (m, s) in enumerate(zip(table["ΔL"], table["ΔL sd"])):
        if seq is not None and not open_[i]:
            p1 = np.array([o["p"][0] for o in seq])
            rank = int((p1 < p1[i]).sum())
            need.append(pairs_needed_at(m, s, holm_level(looks, alpha, len(seq) - rank, 0)))
            continue
        fam = last[open_]
        rank = int((fam < last[i]).sum())
        need.append(pairs_needed_at(m, s, holm_level(looks, alpha, max(1, len(fam) - rank), -1)))
    table["pairs to resolve"] = need
    table["one run shows it?"] = [visible_text(m, s) for m, s in
                                  zip(table["ΔL"], table["seed sd"])]
    return table
