"""The claims chapter (gtalib.book.chapters.claims): one aggregation rule for every claim, what each
claim's seeds could resolve, the ranking claim, and claim 3 measured on fresh layers."""

import math

import pandas as pd
import pytest

from gtalib.book.chapters import claims as C
from gtalib.book.chapters import shared


@pytest.mark.parametrize("variant,blocks", [("mla", 1), ("gla-2", 2), ("mlra-4", 4)])
def test_key_variance_ratio_matches_d_over_w(variant, blocks):
    """Claim 3's statistic: d/w without the latent scale (w = 4·head_dim / blocks), 1 with it.
    d_model 1024, head_dim 64: d/w = 4, 8, 16; ±15 % covers the sampling spread (a few %)."""
    from gtalib.book.chapters.claims import key_variance_ratio

    off, expected = key_variance_ratio(variant, False, d_model=1024, n_head=8, head_dim=64,
                                       tokens=256)
    assert expected == 1024 / (256 / blocks)
    assert off == pytest.approx(expected, rel=0.15)
    on, one = key_variance_ratio(variant, True, d_model=1024, n_head=8, head_dim=64, tokens=256)
    assert one == 1.0 and on == pytest.approx(1.0, rel=0.15)


def test_key_variance_ratio_rejects_non_latent_variant():
    from gtalib.book.chapters.claims import key_variance_ratio

    with pytest.raises(ValueError, match="variant"):
        key_variance_ratio("gqa", True)


# --- one aggregation rule for every claim ------------------------------------------------------

def _final(verdicts: dict) -> pd.DataFrame:
    """A final-ΔL table with the given per-variant verdicts (numbers are placeholders)."""
    k = len(verdicts)
    return pd.DataFrame({"seeds": 3, "ΔL": [0.01 * (i + 1) for i in range(k)], "CI low": -0.1,
                         "CI high": 0.1, "resolvable |ΔL|": 0.1, "pairs to resolve": math.nan,
                         "seed sd": 0.02, "p (Holm)": 0.3, "verdict": list(verdicts.values())},
                        index=pd.Index(list(verdicts), name="variant"))


@pytest.mark.parametrize("verdicts, expected", [
    # the gate claim of the issue: only GQA differs, four of five within noise
    ({"gqa": "differs", "mla": "within noise", "gla-2": "within noise", "mlra-2": "within noise",
      "mlra-4": "within noise"}, "mixed: within noise 4/5, differs 1/5"),
    # the init claim with a similar mix
    ({"mha": "within noise", "mqa": "differs", "gqa": "within noise", "mla": "agrees"},
     "mixed: within noise 2/4, agrees 1/4, differs 1/4"),
    ({"gqa": "agrees", "mla": "within noise"}, "mixed: agrees 1/2, within noise 1/2"),
    ({"gqa": "differs", "mla": "differs", "gla-2": "agrees"}, "mixed: differs 2/3, agrees 1/3"),
    ({"gqa": "within noise", "mla": "undetermined (1 seed)"},
     "mixed: within noise 1/2, undetermined (1 seed) 1/2"),
    ({"gqa": "differs", "mla": "differs"}, "differs"),
    ({"gqa": "agrees", "mla": "agrees", "gla-2": "agrees"}, "agrees"),
    ({"gqa": "within noise"}, "within noise"),
])
def test_claims_aggregate_verdicts_by_one_rule(verdicts, expected):
    assert C.aggregate_verdicts(verdicts.values()) == expected
    for largest in (None, "gqa"):  # every ablation claim goes through the same rule
        assert C._claim_from_final(_final(verdicts), largest)[1] == expected


def _claims(resolution_of_4: str = "") -> pd.DataFrame:
    """A claims table with claim 1 (exact) and an ablation claim of the initialisation figure."""
    from gtalib.book.design.figures import claims as all_claims

    init = next(c.number for c in all_claims() if c.source == "init")
    return pd.DataFrame({"paper says": ["a", "b", "c"], "paper value": ["1", "2", "2"],
                         "ours": ["x", "y", "z"], "verdict": ["agrees", "within noise", "agrees"],
                         "resolution": ["exact (no training)", resolution_of_4, "paired test"]},
                        index=pd.Index([1, init, f"{init} (ranking)"], name="claim")), init


def test_claims_resolution_is_a_table_one_row_per_variant_of_an_ablation_claim():
    """Each variant's n, mean ΔL, interval, resolvable |ΔL|, pairs to resolve and Holm p from
    its figure's final table; a MIXED pair source noted; any other claim one row with its note."""
    from types import SimpleNamespace

    final = _final({"mha": "within noise", "tpa": "agrees"})
    final["pair source"] = ["both local on X", "seed 0: both local on X; seed 1: MIXED: ..."]
    final.loc["tpa", ["ΔL", "CI low", "CI high", "pairs to resolve", "p (Holm)"]] = [
        0.2, 0.15, 0.25, 3, 0.004]
    claims, init = _claims()
    table = C.resolution_table(claims, {"init": SimpleNamespace(final=final)})
    assert list(table["claim"]) == [1, init, init, f"{init} (ranking)"]
    assert list(table["variant"]) == ["—", "MHA", "TPA", "—"]
    assert "verdict" not in table  # stated once per claim, in the claims table above
    assert list(table["note"]) == ["exact (no training)", "", "MIXED pairs", "paired test"]
    mha, tpa = table.iloc[1], table.iloc[2]
    assert (mha["n"], mha["ΔL (mean)"], mha["95% CI"], mha["pairs to resolve"], mha["p (Holm)"]) == (
        "3", "+0.0100", "[-0.1000, +0.1000]", "—", "0.3")
    assert (tpa["ΔL (mean)"], tpa["95% CI"], tpa["pairs to resolve"], tpa["p (Holm)"]) == (
        "+0.2000", "[+0.1500, +0.2500]", "3", "0.004")
    assert table.iloc[0]["n"] == "" and table.iloc[0]["95% CI"] == ""
    one = _final({"gqa": "undetermined (1 seed)"}).assign(seeds=1, **{"CI low": math.nan})
    row = C.resolution_table(claims.iloc[[1]], {"init": SimpleNamespace(final=one)}).iloc[0]
    assert (row["n"], row["95% CI"], row["pairs to resolve"]) == ("1", "n/a (1 pair)",
                                                                  "n/a (1 pair)")
    # without the figure's result (or runs) the claim keeps one row with its note
    assert list(C.resolution_table(claims, {})["variant"]) == ["—"] * 3


def test_aggregate_verdicts_refuses_unknown_or_empty():
    with pytest.raises(ValueError, match="non-empty"):
        C.aggregate_verdicts([])
    with pytest.raises(ValueError, match="'maybe'"):
        C.aggregate_verdicts(["agrees", "maybe"])


def test_main_claim_verdict_tests_both_halves_as_paired_differences():
    """Claim 8 from per-seed perplexities with known paired differences: MHA − MLRA-4 is
    1.0 + 0.01·s and MLRA-4 − gated is 0.5 ± 0.01 per seed (tight: agrees); a gate that
    costs 0.3 in every seed is resolved against the claim (differs); differences whose sign
    changes by seed are within noise, however far apart the means' own intervals would be."""
    import pandas as pd

    from gtalib.book.analysis.stats import delta_stats
    from gtalib.book.chapters.claims import main_claim_verdict

    def frame(mha, mlra4, gated=None):
        rows = [("MHA", s, v) for s, v in enumerate(mha)]
        rows += [("MLRA-4", s, v) for s, v in enumerate(mlra4)]
        rows += [("MLRA-4 + gate", s, v) for s, v in enumerate(gated or [])]
        return pd.DataFrame(rows, columns=["key", "seed", "value"])

    mlra4 = [9.0, 9.2, 8.9]
    mha = [m + 1.0 + 0.01 * s for s, m in enumerate(mlra4)]
    gated = [m - 0.5 + d for m, d in zip(mlra4, (0.01, -0.01, 0.0))]
    v, seen = main_claim_verdict(frame(mha, mlra4, gated))
    assert v == "agrees"
    st = delta_stats(pd.Series([0.5 - d for d in (0.01, -0.01, 0.0)]))
    assert seen.endswith(f"; gate: MLRA-4 − MLRA-4 + gate: {st.mean:+.3f} "
                         f"[{st.low:+.3f}, {st.high:+.3f}], n 3, agrees")
    assert seen.startswith("lowest: MHA − MLRA-4: +1.010 [")
    worse = [m + 0.3 + d for m, d in zip(mlra4, (0.01, -0.01, 0.0))]
    assert main_claim_verdict(frame(mha, mlra4, worse))[0] == "differs"
    noisy = [m + d for m, d in zip(mlra4, (0.4, -0.5, 0.3))]
    v, seen = main_claim_verdict(frame(mha, mlra4, noisy))
    assert v == "within noise" and seen.endswith("within noise")
    # MLRA-4 behind MHA in every seed: the first half differs whatever the gate does
    assert main_claim_verdict(frame([m - 0.2 for m in mlra4], mlra4, gated))[0] == "differs"
    assert main_claim_verdict(frame(mha, [])[lambda f: f["key"] == "MHA"])[0].startswith(
        "not measured")


def test_a_ranking_claim_is_one_paired_test_of_the_difference_to_the_closest_rival():
    import pandas as pd

    from gtalib.book.chapters.claims import ranking_claim

    # TPA ahead of MFA by 0.05, 0.06, 0.04 per seed although MFA's seeds scatter more
    rows = [("tpa", s, v) for s, v in enumerate([0.30, 0.20, 0.25])]
    rows += [("mfa", s, v) for s, v in enumerate([0.25, 0.14, 0.21])]
    rows += [("mha", s, v) for s, v in enumerate([0.03, 0.02, 0.04])]
    values = pd.DataFrame(rows, columns=["key", "seed", "value"])
    ours, verdict = ranking_claim(values, "tpa", lower=False)
    assert verdict == "agrees" and ours.startswith("tpa − mfa: +0.050 [")
    assert ours.endswith("], n 3")
    # the claim fails when another variant leads on every seed
    ours, verdict = ranking_claim(values, "mfa", lower=False)
    assert verdict == "differs" and ours.startswith("mfa − tpa: -0.050")
    # lowest perplexity: the rival's minus the named one's, so positive is the claim
    ppl = pd.DataFrame([("A", 0, 13.0), ("A", 1, 13.5), ("B", 0, 13.1), ("B", 1, 13.3)],
                       columns=["key", "seed", "value"])
    ours, verdict = ranking_claim(ppl, "A", lower=True)
    assert verdict == "within noise" and ours.startswith("B − A: -0.050")
    assert ranking_claim(ppl, "C", lower=True) == ("not measured", "not measured")


def test_a_build_computes_the_claims_table_once_and_the_headline_reads_that_one(tmp_path,
                                                                              monkeypatch):
    """Within a build (its shared folder set) the first caller computes the table and the next
    one (the introduction's headline, after the claims page) loads it; outside a build each call
    computes its own."""
    from gtalib.book.design.figures import claims as all_claims
    from gtalib.book.design.plan import make_plan

    monkeypatch.setattr(C, "paper_claims", lambda: [c for c in all_claims() if c.number == 2])
    monkeypatch.setattr(C, "rankings", dict)
    plan = make_plan("ci", 2)
    monkeypatch.setenv(shared.ENV_SHARED_RESULTS, str(tmp_path))
    first = C.claims_table(plan, tmp_path / "store", results={})
    assert first.loc[2, "verdict"] == "agrees" and first.loc[2, "measured"].endswith("B (spread 0.04%)")

    def again(number):
        raise AssertionError("computed twice")

    monkeypatch.setattr(C, "_table_claim", again)
    assert C.claims_table(plan, tmp_path / "store", results={}).equals(first)
    monkeypatch.delenv(shared.ENV_SHARED_RESULTS)
    with pytest.raises(AssertionError, match="computed twice"):
        C.claims_table(plan, tmp_path / "store", results={})
