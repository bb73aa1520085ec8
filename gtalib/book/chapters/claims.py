"""The claims chapter: every claim of :func:`gtalib.book.design.figures.claims` with the paper's value,
ours and a verdict, by one aggregation rule over an ablation's per-variant verdicts, the ranking
test of the main table, exact table claims (1, 2), the key-variance measurement on fresh
paper-width layers (claim 3) and the decode claim (the last); and the page's claims and resolution
tables. The numbers are the registry's (one claim per ablation figure between the fresh layers'
and the main table's).

Reads :mod:`gtalib.book.design.figures` (the claims), :mod:`gtalib.book.chapters.ablation` and
:mod:`gtalib.book.chapters.main_results` (the chapters it summarises), :mod:`gtalib.book.analysis.stats` (the verdicts
and the resolution's columns), :mod:`gtalib.book.chapters.kv_cache` and :mod:`gtalib.book.analysis.style`; :mod:`gtalib.model` for claim 3 and
:mod:`gtalib.kernels.decode_model` for the decode claim. ΔL in nats, perplexities as the paper prints them.
"""

from __future__ import annotations

import pandas as pd
import torch
from IPython.display import display

from gtalib.book.analysis.stats import (
    aggregate_verdicts,
    interval_columns,
    ranking_test,
)
from gtalib.book.analysis.style import plural, table_style
from gtalib.book.chapters import kv_cache
from gtalib.book.chapters.ablation import ablation_result, near_zero_claim
from gtalib.book.chapters.shared import shared_file, shared_value
from gtalib.book.chapters.main_results import MainResult, main_result
from gtalib.book.design.figures import ABLATIONS, rankings
from gtalib.book.design.figures import claims as paper_claims
from gtalib.book.design.names import display_name
from gtalib.book.design.paper import PAPER_MATCHED_PARAMS_B
from gtalib.book.design.plan import Plan
from gtalib.kernels import decode_model as dm
from gtalib.model.attention import build_attention
from gtalib.model.config import LATENT_VARIANTS, ModelConfig, canonical_variant


#: The "ours" and "measured" cells of a claim whose runs are all missing.
NO_RUNS = "no complete runs"


def _claim_from_final(final: pd.DataFrame, paper_largest: str | None) -> tuple[str, str]:
    """(ours, verdict) of an ablation claim from its final ΔL table: each variant's mean ΔL (and
    which variant gains most beside the paper's, ``paper_largest``) and the variants' verdicts
    aggregated (:func:`aggregate_verdicts`); :func:`resolution_table` gives what their seeds
    could see."""
    if final.empty:
        return NO_RUNS, "not measured"
    ours = ", ".join(f"{display_name(v)} {r['ΔL']:+.3f}" for v, r in final.iterrows())
    if paper_largest is not None and len(final) > 1:
        top = final["ΔL"].idxmax()
        ours += f"; largest ΔL: {display_name(top)} (paper: {display_name(paper_largest)})"
    return ours, aggregate_verdicts(final["verdict"])


def ranking_claim(values: pd.DataFrame, named: str, lower: bool, confidence: float = 0.95,
                  name=str) -> tuple[str, str]:
    """(ours, verdict) of "``named`` ranks first" as a difference paired by seed
    (:func:`gtalib.book.analysis.stats.ranking_test`): per seed, ``named``'s value against that of the
    closest rival (the best other mean), signed so that a positive difference is the claim;
    ours: ``"<named> − <rival>: <mean> [<interval>], n <pairs>"`` (:func:`_paired`).

    Args:
        values: frame ``[key, seed, value]`` (one row per configuration and seed).
        lower: the claim is the lowest value (perplexity), else the largest (a gain ΔL).
        name: display name of a key.
    """
    means = values.groupby("key")["value"].mean()
    if named not in means.index or len(means) < 2:
        return "not measured", "not measured"
    others = means.drop(named)
    rival = others.idxmin() if lower else others.idxmax()
    own = values[values["key"] == named].set_index("seed")["value"]
    riv = values[values["key"] == rival].set_index("seed")["value"]
    seeds = own.index.intersection(riv.index)
    diff = (riv[seeds] - own[seeds]) if lower else (own[seeds] - riv[seeds])
    st, verdict_ = ranking_test(diff, confidence)
    sign = f"{name(rival)} − {name(named)}" if lower else f"{name(named)} − {name(rival)}"
    return f"{sign}: {_paired(st)}", verdict_


def _paired(st) -> str:
    """A difference paired by seed as a claims cell: ``"+0.050 [+0.020, +0.080], n 3"`` (its
    mean, its interval, ``"—"`` with one pair, and the pairs)."""
    interval = "—" if st.n < 2 else f"[{st.low:+.3f}, {st.high:+.3f}]"
    return f"{st.mean:+.3f} {interval}, n {st.n}"


def main_claim_verdict(values: pd.DataFrame, confidence: float = 0.95) -> tuple[str, str]:
    """Verdict and resolution of the main table's claim (MLRA-4 has the lowest average perplexity of the
    eleven; the gate lowers it further), each half one test of a difference paired by seed
    (:func:`gtalib.book.analysis.stats.ranking_test`): MLRA-4 against its closest rival among the plain
    configurations (:func:`ranking_claim`), and MLRA-4 against gated MLRA-4. *agrees*: both
    halves agree; *differs*: either differs; else *within noise*. The resolution reads
    ``"lowest: <ours>, <verdict>; gate: <ours>, <verdict>"`` (ours as in :func:`ranking_claim`).

    Args:
        values: frame ``[key, seed, value]``, the average perplexity of each main-table
            configuration (label) and seed, gated MLRA-4 (``"MLRA-4 + gate"``) included.
    """
    keys = set(values["key"])
    if "MLRA-4" not in keys:
        return "not measured (no MLRA-4 run)", ""
    plain = values[values["key"] != "MLRA-4 + gate"]
    lowest, v_low = ranking_claim(plain, "MLRA-4", lower=True, confidence=confidence)
    halves = [(v_low, f"lowest: {lowest}, {v_low}")]
    if "MLRA-4 + gate" in keys:
        wide = values.pivot(index="seed", columns="key", values="value")  # seed × config
        st, v_gate = ranking_test((wide["MLRA-4"] - wide["MLRA-4 + gate"]).dropna(), confidence)
        halves.append((v_gate, f"gate: MLRA-4 − MLRA-4 + gate: {_paired(st)}, {v_gate}"))
    verdicts = [v for v, _ in halves]
    seen = "; ".join(t for _, t in halves)
    if all(v == "agrees" for v in verdicts):
        return "agrees", seen
    return ("differs" if "differs" in verdicts else "within noise"), seen


def key_variance_ratio(variant: str, latent_scale: bool, d_model: int = 3072, n_head: int = 24,
                       head_dim: int = 128, tokens: int = 512, seed: int = 0) -> tuple[float, float]:
    """Var(RoPE key) / Var(NoPE key) of a freshly initialised latent-family layer (paper claim 3).

    The layer sees ``tokens`` unit-RMS random inputs (what the pre-attention RMSNorm hands it);
    the RoPE key is a direct projection of the d_model-wide input (variance ``d σ²``), each NoPE
    key an up-projection of a unit-RMS latent block of width w (``w σ²``) unless the latent scale
    ``α_kv = sqrt(d / w)`` lifts it (docs/variants.md, "Scale constants ... Why").

    Returns:
        ``(measured, expected)`` with expected ``d_model / w`` without the scale and 1 with it.
        At paper width the measured ratio's sampling spread is a few per cent.

    Raises:
        ValueError: ``variant`` not in the latent family (MLA, GLA-2/4, MLRA-2/4).
    """


    if canonical_variant(variant) not in LATENT_VARIANTS:
        raise ValueError(f"variant must be one of {LATENT_VARIANTS}, got {variant!r}")
    gen = torch.manual_seed(seed)
    layer = build_attention(ModelConfig(variant=variant, n_layer=1, d_model=d_model, n_head=n_head,
                                        head_dim=head_dim, block_size=tokens,
                                        latent_scale=latent_scale))
    x = torch.randn(1, tokens, d_model, generator=gen)
    x = x * x.pow(2).mean(-1, keepdim=True).rsqrt()  # unit RMS per token
    with torch.no_grad():
        c, k_r = layer.latents(x, 0)  # (1, T, nb, w), (1, T, 1, d_r)
        w_uk, _ = layer.up_weights()  # (nb, Hg, d_n, w)
        k_n = torch.einsum("btkw,kinw->btkin", c, w_uk)  # (1, T, nb, Hg, d_n)
    measured = (k_r.pow(2).mean() / k_n.pow(2).mean()).item()
    return measured, 1.0 if latent_scale else d_model / layer.block_width


def _variance_claim() -> tuple[str, str, str]:
    """Claim 3 measured on fresh paper-width MLA, GLA-2 and MLRA-4 layers (512 tokens,
    :func:`key_variance_ratio`), scale off and on: (ours, verdict, in short)."""
    parts, short, ok = [], [], True
    for v in ("mla", "gla-2", "mlra-4"):
        (off, e_off), (on, e_on) = (key_variance_ratio(v, False), key_variance_ratio(v, True))
        ok &= abs(off / e_off - 1) < 0.15 and abs(on / e_on - 1) < 0.15
        parts.append(f"{v.upper()} {off:.1f} (d/w = {e_off:.0f}) → {on:.2f} scaled")
        short.append(f"{v.upper()} {off:.1f}→{on:.2f}")
    return "; ".join(parts), "agrees" if ok else "differs", ", ".join(short)


def _table_claim(number: int) -> tuple[str, str, str]:
    """(ours, verdict, in short) of claims 1 (per-device KV under TP: MLRA-4's and MLA's at TP
    1/2/4/8; agrees where MLA's is 4.5 dₕ at every TP, MLRA-4's 4.5 at TP 1 and 1.5 at TP 4 and
    8, the lowest there) and 2 (parameter matching: the eleven's range and spread), computed by
    :mod:`gtalib.book.chapters.kv_cache` at the paper's sizes (exact, no training)."""

    if number == 1:
        kv = kv_cache.kv_table(with_units=True).pivot(index="variant", columns="tp",
                                                    values="kv_dh_units")
        mlra4, mla = kv.loc["mlra-4"], kv.loc["mla"]
        lowest = all(kv[tp].min() == mlra4[tp] for tp in (4, 8))
        ok = (mlra4[1] == mla[1] == 4.5 and set(mla) == {4.5} and mlra4[4] == mlra4[8] == 1.5
              and lowest)
        ours = (f"MLRA-4 {mlra4[1]:g} / {mlra4[2]:g} / {mlra4[4]:g} / {mlra4[8]:g} dₕ, MLA "
                f"{mla[1]:g} / {mla[2]:g} / {mla[4]:g} / {mla[8]:g} dₕ (TP 1/2/4/8)")
        short = f"MLRA-4 {mlra4[4]:g}/{mlra4[8]:g} dₕ at TP 4/8, MLA {mla[4]:g}/{mla[8]:g}"
        return ours, "agrees" if ok else "differs", short
    p = kv_cache.params_table("paper").set_index("variant")["total_params"]
    plain = p[[v for v in p.index if "+" not in v]]
    spread = (plain.max() - plain.min()) / plain["mha"]
    ours = f"{plain.min() / 1e9:.4f}–{plain.max() / 1e9:.4f} B (spread {spread:.3%} of MHA)"
    matched = abs(plain["mha"] / (PAPER_MATCHED_PARAMS_B * 1e9) - 1) < 0.01
    short = f"{plain.min() / 1e9:.3f}–{plain.max() / 1e9:.3f} B (spread {spread:.2%})"
    return ours, "agrees" if spread < 1e-3 and matched else "differs", short


def _decode_claim() -> tuple[str, str, str]:
    """The decode claim ("ours", verdict, in short): the ranking and MLA / MLRA-4 ratio measured on this CPU at the
    longest recorded context (``benchmarks/decode_cpu.json``) and predicted for the H100 by the
    roofline model; no GPU measurement, so never "agrees" ("not measured": the CPU ranks the
    shards by FLOPs, not by the bytes a GPU's decode is bound by; the claims page says so)."""

    h = dm.model_table(gpus=("H100",), contexts_k=(2048,)).sort_values("latency_us")
    r_h = dm.latency_ratios(h)["MLA / MLRA-4"].iloc[0]
    ours = f"H100 roofline model: {' < '.join(h.shard)}, MLA / MLRA-4 {r_h:.2f}×"
    short = f"H100 model: MLA/MLRA-4 {r_h:.2f}×"
    try:
        rows = pd.DataFrame(dm.load_cpu_results()["rows"])
    except FileNotFoundError:
        return ours + "; CPU: —", "not measured (model only)", short
    big = rows[rows.context_k == rows.context_k.max()].sort_values("measured_us")
    r_c = dm.latency_ratios(big, "measured_us")["MLA / MLRA-4"].iloc[0]
    ours = (f"CPU, 1 core, {int(big.context_k.iloc[0])}K: {' < '.join(big.shard)}, "
            f"MLA / MLRA-4 {r_c:.2f}×; " + ours)
    return ours, "not measured (no GPU)", short


def claims_table(plan: Plan, run_dir, confidence: float = 0.95, results=None,
                 source: str = "build", trained_only: bool = False) -> pd.DataFrame:
    """Every claim of :func:`gtalib.book.design.figures.claims` with the paper's value, ours and a
    verdict, under ``plan`` (:func:`gtalib.book.design.plan.make_plan`); ``results``: ablation key
    → its result (:func:`gtalib.book.chapters.ablation.ablation_results`), computed here if
    ``None``. ``source``: where a run both the store and the records hold is read from
    (:func:`gtalib.book.analysis.collect.collect_runs`); ``trained_only``: only the claims
    that training runs decide (the ablation and main-table claims).

    Ablation claims aggregate the per-variant verdicts of their figure by
    :func:`aggregate_verdicts` (the common verdict, else "mixed" with counts). Claims 1–2 are
    computed exactly from :mod:`gtalib.book.chapters.kv_cache` at the paper's sizes; claim 3 is measured on
    freshly initialised paper-width layers (:func:`key_variance_ratio`); the decode claim from the recorded CPU
    decode measurement and the roofline model at H100 peaks (:func:`_decode_claim`; no GPU
    measurement). The ``resolution`` column notes how a claim that is not an ablation's was
    decided (``"exact (no training)"``, ``"fresh layers (no training)"``, the main table's two paired
    tests, ``"equivalence test"``, ``"paired test"``; ``""`` for an ablation claim, whose
    variants' resolution :func:`resolution_table` gives); ``measured``, what this build
    measured in one short line (the introduction's headline,
    :mod:`gtalib.book.chapters.headline`).

    Within a book build (:data:`gtalib.book.chapters.shared.ENV_SHARED_RESULTS` set) the table
    is computed once, by the first page or snippet that asks for it, and loaded by the others:
    ``results`` must then be this build's (:func:`~gtalib.book.chapters.ablation.ablation_results`
    at the same ``source``), as every caller in the book passes.
    """

    shared = shared_file("claims-only" if trained_only else "claims", plan, run_dir, confidence,
                         source)
    return shared_value(shared, lambda: _claims_table(plan, run_dir, confidence, results, source,
                                                      trained_only))


def _claims_table(plan: Plan, run_dir, confidence, results, source, trained_only) -> pd.DataFrame:
    """:func:`claims_table`, computed."""
    ranked = rankings()
    largest = {key: named for key, (named, _, _) in ranked.items() if key in ABLATIONS}
    rows = []
    for c in paper_claims():
        if trained_only and c.source not in (*ABLATIONS, "main"):
            continue
        seen = {"tables": "exact (no training)",
                "fresh-layers": "fresh layers (no training)"}.get(c.source, "")
        if c.source in ABLATIONS:
            r = (results[c.source] if results else
                 ablation_result(c.source, plan, run_dir, confidence=confidence, source=source))
            ours, v = _claim_from_final(r.final, largest.get(c.source))
            short = _measured_deltas(r.final)
            if r.incomplete:
                ours += f" (incomplete: {', '.join(display_name(x) for x in r.incomplete)})"
                short += f"; {len(r.incomplete)} incomplete"
        elif c.source == "main":
            m = main_result(plan, run_dir, confidence=confidence, source=source)
            if m.ppl.empty:
                ours, v = short = NO_RUNS, "not measured"
            else:
                order = m.ppl["avg"].sort_values()
                ours = "avg PPL: " + ", ".join(
                    f"{k} {x:.3f} ± {m.ppl_ci.loc[k, 'avg']:.3f}" for k, x in order.head(3).items())
                v, seen = main_claim_verdict(_main_values(m), confidence)
                short = f"{order.index[0]} lowest ({order.iloc[0]:.3f})"
                if "MLRA-4" in order.index and order.index[0] != "MLRA-4":
                    rank = list(order.index).index("MLRA-4") + 1
                    short += f"; MLRA-4 {rank} of {len(order)} ({order['MLRA-4']:.3f})"
        elif c.source == "tables":
            ours, v, short = _table_claim(c.number)
        elif c.source == "fresh-layers":
            ours, v, short = _variance_claim()
        else:  # decode
            ours, v, short = _decode_claim()
        rows.append((c.number, c.text, c.paper_value, ours, v, seen, short))
        for named in (ABLATIONS[c.source].near_zero if c.source in ABLATIONS else ()):
            ours_z, v_z = near_zero_claim(r, named)
            rows.append((f"{c.number} (≈ 0)", f"{display_name(named)}: |ΔL| < ½ · others' mean ΔL",
                         c.paper_value, ours_z, v_z, "equivalence test", ours_z))
        if c.source in ranked:
            named, lower, says = ranked[c.source]
            values, name = _ranking_values(r if c.source in ABLATIONS else m)
            ours_r, v_r = ((NO_RUNS, "not measured") if values.empty else
                           ranking_claim(values, named, lower, confidence, name))
            rows.append((f"{c.number} (ranking)", says, c.paper_value, ours_r, v_r,
                         "paired test", ours_r))
    return pd.DataFrame(rows, columns=["claim", "paper says", "paper value", "ours", "verdict",
                                       "resolution", "measured"]).set_index("claim")


def _measured_deltas(final: pd.DataFrame) -> str:
    """What an ablation measured, in short: the range of its variants' mean final ΔL."""
    if final.empty:
        return NO_RUNS
    lo, hi, n = final["ΔL"].min(), final["ΔL"].max(), len(final)
    pairs = int(final["seeds"].max())
    if n == 1:
        return f"ΔL {lo:+.3f} ({display_name(final.index[0])}, {plural(pairs, 'pair')})"
    return f"ΔL {lo:+.3f} … {hi:+.3f} ({n} variants × {pairs} pairs)"


def _main_values(main: MainResult) -> pd.DataFrame:
    """``[key, seed, value]``: each main-table configuration's average perplexity per seed, for
    the configurations whose runs are all complete (as in the page's table)."""
    if main.per_seed.empty:
        return pd.DataFrame(columns=["key", "seed", "value"])
    return main.per_seed.rename(columns={"label": "key", "avg": "value"})[["key", "seed", "value"]]


def _ranking_values(result) -> tuple[pd.DataFrame, object]:
    """``([key, seed, value], display name)`` of a ranking claim: per seed, each variant's final
    ΔL of an ablation result, or each plain main-table configuration's average perplexity (only
    the variants or configurations whose runs are all complete, as in their tables)."""
    if isinstance(result, MainResult):
        values = _main_values(result)
        return (values if values.empty else values[values["key"] != "MLRA-4 + gate"]), str
    values = result.deltas[["variant", "seed", "delta"]]
    return (pd.DataFrame() if values.empty else
            values.rename(columns={"variant": "key", "delta": "value"})), display_name


# ---------------------------------------------------------------------------------------------
# The claims page
# ---------------------------------------------------------------------------------------------

def resolution_table(claims: pd.DataFrame, results: dict,
                     confidence: float = 0.95) -> pd.DataFrame:
    """What each claim's seeds could see, as a table under the claims table: one row per
    variant of an ablation claim (``results``: ablation key → its result,
    :func:`gtalib.book.chapters.ablation.ablation_results`), with ``n`` (seed pairs), the mean
    ΔL, its interval, the smallest resolvable |ΔL| and the pairs that would resolve the mean
    (:func:`gtalib.book.analysis.stats.interval_columns`), ``p (Holm)`` and a ``note``
    (``"MIXED pairs"`` where some pair mixes sources or machines, see its page); one row for any other
    claim, variant ``"—"``, its numbers blank and its ``resolution`` as the note. The verdict
    is not repeated: the claims table above states it once per claim."""
    source = {c.number: c.source for c in paper_claims()}
    rows = []
    for k, r in claims.iterrows():
        final = (results[source[k]].final if source.get(k) in ABLATIONS and source[k] in results
                 else pd.DataFrame())
        if final.empty:
            rows.append(pd.DataFrame({"claim": [k], "variant": ["—"], "note": [r["resolution"] or "—"]}))
            continue
        cols = interval_columns(final["seeds"], final["ΔL"], final["CI low"], final["CI high"],
                                final["resolvable |ΔL|"], final["pairs to resolve"], confidence)
        mixed = final.get("pair source", pd.Series("", index=final.index)).astype(str)
        rows.append(pd.DataFrame({
            "claim": k, "variant": [display_name(v) for v in final.index],
            "n": final["seeds"].astype(int).astype(str).to_numpy(), **cols,
            "p (Holm)": [f"{x:.2g}" for x in final["p (Holm)"]],
            "note": ["MIXED pairs" if "MIXED" in m else "" for m in mixed]}))
    table = pd.concat(rows, ignore_index=True).fillna("")
    return table[[c for c in table.columns if c != "note"] + ["note"]]


#: The verdicts the claims table colours (bold), by colour.
_COLORS = {"agrees": "darkgreen", "differs": "crimson"}


def show_claims(claims: pd.DataFrame) -> None:
    """Display the claims table, one row per claim: its number, what the paper says and its
    value, ours and the verdict, coloured (agrees green, differs red); sentences read left to
    right (:func:`~gtalib.book.analysis.style.table_style`)."""

    def color(v):
        return (f"color: {_COLORS[v]}; font-weight: 700" if v in _COLORS else
                "color: dimgray")

    # the claim number as a column: one header row, "claim" beside what the paper says
    table = claims.drop(columns=["resolution", "measured"], errors="ignore").reset_index()
    display(table_style(table.style.map(color, subset=["verdict"]).hide(axis="index"),
                        prose=["claim", "paper says", "paper value", "ours"]))


def show_resolution(claims: pd.DataFrame, results: dict, confidence: float = 0.95) -> None:
    """Display each claim's resolution (:func:`resolution_table`), a variant's row under its
    claim."""
    display(table_style(resolution_table(claims, results, confidence)
                        .set_index(["claim", "variant"]).style, prose=["note"]))
