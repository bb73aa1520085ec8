"""The gate probes of the gating page ("What the gate does inside the model", docs/probes.md):
each finished run's probes per layer (mean gate score, first-token attention share, largest
residual activation), their summary per arm, the sentences that say what they explain against
Qiu et al. 2025, and the page's table and figure.

Reads :mod:`gtalib.book.analysis.collect` (the page's runs and where they lie), :mod:`gtalib.book.design.figures`
(Qiu et al.'s values, names, colours) and :mod:`gtalib.book.analysis.style`; ``probes.json`` of each run
(:mod:`gtalib.training.probes`). Gate scores in (0, 1), shares in [0, 1], ``|h|`` in the units of
the residual stream, tokens per window of the probe batch.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from gtalib.book.analysis.collect import STATUS_COLUMNS, Collected
from gtalib.book.analysis.style import plural, range_text, set_style
from gtalib.book.design.names import GATE_COLORS, display_name
from gtalib.book.design.paper import QIU_PROBES, QIU_SCALE
from gtalib.training import records
from gtalib.training.probes import PROBES_FILE
from gtalib.training.runs import resolve_run_dir

# ---------------------------------------------------------------------------------------------
# Gate probes: what the gate does inside the model (docs/probes.md)
# ---------------------------------------------------------------------------------------------

#: The three probes of :func:`gtalib.training.probes.measure`, as ``probes.json`` names them.
PROBE_KEYS = ("gate_mean", "first_token_share", "max_abs_residual")
#: Columns of :attr:`Probes.per_layer`.
PROBE_COLUMNS = ["variant", "arm", "seed", "run_id", "layer", "tokens", *PROBE_KEYS]
#: Columns of :attr:`Probes.summary`.
PROBE_SUMMARY_COLUMNS = ["variant", "arm", "runs", "with_probes", "tokens",
                         *(f"{k}{s}" for k in PROBE_KEYS for s in ("", "_last", "_max"))]


@dataclass
class Probes:
    """The gate probes (:mod:`gtalib.training.probes`) of a page's finished runs. Built by
    :func:`read_probes`.

    Attributes:
        per_layer: one row per layer of every ``done`` run: ``variant, arm, seed, run_id,
            layer`` (0 = first block), ``tokens`` (tokens per window of the probe batch) and
            the three probes: ``gate_mean`` (mean gate score ``σ(x̃ W_g)``, in (0, 1); NaN for an
            ungated run), ``first_token_share`` (attention probability on key position 0, in
            [0, 1]) and ``max_abs_residual`` (largest ``|h|`` of the block's output, in the units
            of the residual stream). A run without probes has NaN in all of these, one row per
            layer of its spec.
        summary: one row per (variant, arm), in the page's order: ``runs`` (done runs),
            ``with_probes`` (of them, those with probes), ``tokens``, and per probe its mean over
            seeds and layers (``gate_mean``, ...), over seeds of the last layer
            (``gate_mean_last``, ...) and over seeds of each run's largest value over layers
            (``gate_mean_max``, ...; ``max_abs_residual_max`` is the run's largest ``|h|``). NaN
            where no run of the arm has probes.
        missing: the :attr:`Collected.status` rows of the done runs without probes, ``detail``
            saying why (e.g. ``"recorded before probes were stored"``).
    """

    per_layer: pd.DataFrame
    summary: pd.DataFrame
    missing: pd.DataFrame


def read_probes(collected: Collected) -> Probes:
    """Read ``probes.json`` of every ``done`` run of ``collected``: from its folder in the local
    run store (``source`` ``"local"``), else from its recorded bundle (:attr:`Collected.run_dir`,
    :attr:`Collected.record_dir`). A run whose file is absent, unreadable or of another run
    (run id, layer count, values per layer) gets NaN probes and is listed in :attr:`Probes.missing`; nothing is
    raised, so the page can name it. See :class:`Probes` for the frames and their units.
    """


    run_dir = resolve_run_dir(collected.run_dir)
    record_dir = (Path(collected.record_dir) if collected.record_dir is not None
                  else records.default_record_dir())
    done = collected.status[collected.status["state"] == "done"]
    rows, missing = [], []
    for _, r in done.iterrows():
        local = r["source"] == "local"
        path = (run_dir if local else record_dir) / r["run_id"] / PROBES_FILE
        n = int(r["n_layer"])
        values, tokens, why = {k: [math.nan] * n for k in PROBE_KEYS}, math.nan, None
        if not path.is_file():
            when = "trained" if local else "recorded"
            why = f"no {PROBES_FILE}: {when} before probes were stored"
        else:
            try:
                got = json.loads(path.read_text())
                if got["run_id"] != r["run_id"] or got["n_layer"] != n:
                    why = (f"{PROBES_FILE} is of run {got['run_id']} with {got['n_layer']} "
                           f"layers, not of this run")
                elif any(got[k] is not None and len(got[k]) != n for k in PROBE_KEYS):
                    why = f"{PROBES_FILE} does not hold one value per layer"
                else:
                    values = {k: [math.nan] * n if got[k] is None else [float(x) for x in got[k]]
                              for k in PROBE_KEYS}
                    tokens = got["batch"]["tokens_per_window"]
            except (ValueError, KeyError, TypeError) as e:  # JSON error, missing key, bad value
                why = f"unreadable {PROBES_FILE}: {type(e).__name__}: {e}"
        if why is not None:
            missing.append(r.copy())
            missing[-1]["detail"] = why
        rows += [(r["variant"], r["arm"], r["seed"], r["run_id"], i, tokens,
                  *(values[k][i] for k in PROBE_KEYS)) for i in range(n)]
    per_layer = pd.DataFrame(rows, columns=PROBE_COLUMNS)
    summary = []
    for (variant, arm), g in per_layer.groupby(["variant", "arm"], sort=False):
        by_run = g.groupby("run_id", sort=False)
        last = by_run.tail(1)
        row = {"variant": variant, "arm": arm, "runs": by_run.ngroups,
               "with_probes": int((by_run["first_token_share"].count() > 0).sum()),
               "tokens": g["tokens"].max()}
        for k in PROBE_KEYS:  # NaN-skipping means
            row[k], row[f"{k}_last"], row[f"{k}_max"] = (g[k].mean(), last[k].mean(),
                                                        by_run[k].max().mean())
        summary.append(row)
    return Probes(per_layer, pd.DataFrame(summary, columns=PROBE_SUMMARY_COLUMNS),
                  pd.DataFrame(missing, columns=STATUS_COLUMNS))


def uniform_first_token_share(tokens: int) -> float:
    """First-token share of uniform causal attention over ``tokens`` positions, averaged as
    :func:`gtalib.training.probes.measure` averages it (queries at positions 1 .. T−1, query ``i``
    giving key 0 the probability ``1/(i+1)``): ``mean_{i=1}^{T-1} 1/(i+1)``, e.g. 0.0349 at
    128. A share near it means no attention sink.

    Raises:
        ValueError: ``tokens`` < 2 (no query after the first).
    """
    if not tokens >= 2:
        raise ValueError(f"tokens must be at least 2, got {tokens!r}")
    return float(np.mean(1.0 / np.arange(2, tokens + 1)))


#: The gate score at initialisation: ``W_g`` ~ N(0, 0.02) makes ``σ(x̃ W_g)`` ≈ 0.5
#: (docs/probes.md, "Caveats").
GATE_AT_INIT = 0.5
#: :func:`probe_findings` calls a first-token share an attention sink above this multiple of
#: :func:`uniform_first_token_share` at the probe batch's length.
SINK_FACTOR = 2.0
#: :func:`probe_findings` calls residual activations massive from this magnitude on. Sun et al.
#: 2024, "Massive Activations in Large Language Models" (arXiv 2402.17762), Section 2, define
#: massive activations, as "a rough but informative criterion", by two conditions: a magnitude
#: above 100, and about 1,000 times the median magnitude of the hidden state. Only the first is
#: applied here: the probes record the largest |h| per layer, not the median (docs/probes.md).
MASSIVE_ACTIVATION = 100.0


def probe_findings(summary: pd.DataFrame) -> str:
    """What the gate probes explain, in sentences computed from :attr:`Probes.summary` (arms
    without probes are ignored) and Qiu et al.'s values (:data:`gtalib.book.design.paper.QIU_PROBES`):

    * **sink**: without the gate, a variant has an attention sink when its first-token share
      (mean over layers and seeds; its largest layer is named too) exceeds :data:`SINK_FACTOR` times uniform attention's
      (:func:`uniform_first_token_share`); with a sink and a probed gated arm, the gate removes
      it when its share is below half of the ungated one;
    * **gate**: its mean against :data:`GATE_AT_INIT` and Qiu et al.'s 0.116, as the fraction of
      the way from one to the other: under a quarter "stays near its initial value", from a
      quarter on "selective, less sparse than in Qiu et al.", all the way "as sparse";
    * **massive activations**: the largest ``|h|`` without the gate (mean over seeds of the max
      over layers) from :data:`MASSIVE_ACTIVATION` on; where both arms are probed, the ratio
      gate / no gate against Qiu et al.'s 94 / 1053.

    Where neither a sink nor massive activations form without the gate, it says that the gate
    can act only through Qiu et al.'s two other explanations: the non-linearity it adds and its
    query-dependent scores.
    """

    def names(df):
        return ", ".join(display_name(v) for v in df["variant"])

    probed = summary[summary["with_probes"] > 0]
    alt = probed[probed["arm"] == "alt"].set_index("variant", drop=False)
    rec = probed[probed["arm"] == "rec"].set_index("variant", drop=False)
    if alt.empty and rec.empty:
        return "No run of this page has gate probes: nothing to explain."
    out = []
    q_gate, q_share, q_resid = (QIU_PROBES[k] for k in PROBE_KEYS)  # (no gate, gate) each
    sink = no_massive = None
    if alt.empty:
        out.append("No run without the gate has probes here, so whether an attention sink or "
                   "massive activations form without it is not measured.")
    else:
        base = alt["tokens"].map(lambda t: uniform_first_token_share(int(t)))
        is_sink = alt["first_token_share"] > SINK_FACTOR * base
        t = int(alt["tokens"].max())
        uniform = f"{uniform_first_token_share(t):.3f} of uniform attention over {t} tokens"
        sink = bool(is_sink.any())
        if not sink:
            out.append(f"No attention sink forms at this scale: without the gate the "
                       f"first-token share is {range_text(alt['first_token_share'])} "
                       f"({names(alt)}; mean over layers, at most {SINK_FACTOR:g}× the "
                       f"{uniform}; {range_text(alt['first_token_share_max'])} in the largest "
                       f"layer), against {q_share[0]} in Qiu et al., so the gate's effect here "
                       f"cannot come from removing one.")
        else:
            s = alt[is_sink]
            text = (f"An attention sink forms without the gate in {names(s)}: first-token share "
                    f"{range_text(s['first_token_share'])}, against the {uniform} "
                    f"(Qiu et al.: {q_share[0]})")
            both = s[s.index.isin(rec.index)]
            if len(both):
                gated = rec.loc[both.index, "first_token_share"]
                removed = (gated < both["first_token_share"] / 2).all()
                text += (f"; with the gate it is {range_text(gated)} ({names(both)}; Qiu et al.: "
                         f"{q_share[1]}), so the gate {'removes' if removed else 'does not remove'}"
                         f" it")
            if (~is_sink).any():
                text += f"; none forms in {names(alt[~is_sink])}"
            out.append(text + ".")
        resid = alt["max_abs_residual_max"]
        no_massive = bool((resid < MASSIVE_ACTIVATION).all())
        text = ("No massive activations form without the gate" if no_massive else
                f"Massive activations form without the gate in "
                f"{names(alt[resid >= MASSIVE_ACTIVATION])}")
        text += (f": the largest residual activation is {range_text(resid, '.2f')}, against "
                 f"{q_resid[0]:g} in Qiu et al. (massive: {MASSIVE_ACTIVATION:g} or more, Sun et "
                 f"al. 2024)")
        both = alt[alt.index.isin(rec.index)]
        if len(both):
            ratio = rec.loc[both.index, "max_abs_residual_max"] / both["max_abs_residual_max"]
            text += (f"; the gate scales it by {range_text(ratio, '.2f')} ({names(both)}; Qiu et "
                     f"al.: {q_resid[1]:g} / {q_resid[0]:g} = {q_resid[1] / q_resid[0]:.2f})")
        out.append(text + ".")
    if rec.empty:
        out.append("No gated run has probes here, so the gate's values are not measured.")
    else:
        gate = rec["gate_mean"]
        way = (GATE_AT_INIT - gate) / (GATE_AT_INIT - q_gate[1])
        state = ("stays near its initial value" if (way < 0.25).all() else
                 "is as sparse as in Qiu et al." if (way >= 1).all() else
                 "is selective, but less sparse than in Qiu et al.")
        out.append(f"The gate {state}: its mean is {range_text(gate)} ({names(rec)}) after "
                   f"training, from {GATE_AT_INIT} at initialisation, "
                   f"{range_text(100 * way, '.0f')} % of the way to Qiu et al.'s {q_gate[1]}.")
    if sink is False and no_massive:
        out.append("With neither a sink nor massive activations to remove, the gate can act "
                   "here only through Qiu et al.'s two other explanations of its gain: the "
                   "non-linearity it adds between the value and output projections, and its "
                   "query-dependent scores.")
    return " ".join(out)


# ---------------------------------------------------------------------------------------------
# The gate probes on the page: table and figure
# ---------------------------------------------------------------------------------------------

def _probe_value(x: float) -> str:
    """A probe value as the table prints it: 3 decimals below 10, 2 below 100, else whole
    numbers (Qiu et al.'s 1053); ``"—"`` for NaN (not measured)."""
    if math.isnan(x):
        return "—"
    return f"{x:.3f}" if abs(x) < 10 else f"{x:.2f}" if abs(x) < 100 else f"{x:.0f}"


def format_probe_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The gate-probe table of the gating page from :attr:`gtalib.book.chapters.gate_probes.Probes.summary`:
    one row per variant with the probed runs of each arm, the gate's mean (gated arm), the
    first-token share and the largest residual activation without and with the gate, then a
    row of Qiu et al.'s values (:data:`gtalib.book.design.paper.QIU_PROBES`). Gate and share: mean
    over layers and seeds; largest ``|h|``: max over layers, mean over seeds. Strings."""
    arms = summary.set_index(["variant", "arm"])
    nan = pd.Series(math.nan, index=arms.columns)

    def row(name, runs, gate, share, resid, fmt=_probe_value):
        return {"variant": name, "runs with probes (no gate; gate)": runs,
                "gate mean (gate)": fmt(gate[1]),
                "first-token share, no gate": fmt(share[0]),
                "first-token share, gate": fmt(share[1]),
                "largest |h|, no gate": fmt(resid[0]), "largest |h|, gate": fmt(resid[1])}

    rows = []
    for v in dict.fromkeys(summary["variant"]):
        a, r = (arms.loc[(v, arm)] if (v, arm) in arms.index else nan for arm in ("alt", "rec"))
        runs = "; ".join("—" if math.isnan(x["runs"]) else f"{x['with_probes']:.0f} of "
                         f"{x['runs']:.0f}" for x in (a, r))
        rows.append(row(display_name(v), runs, (a["gate_mean"], r["gate_mean"]),
                        (a["first_token_share"], r["first_token_share"]),
                        (a["max_abs_residual_max"], r["max_abs_residual_max"])))
    q = QIU_PROBES
    rows.append(row(f"Qiu et al. 2025 ({QIU_SCALE})", "", q["gate_mean"],
                    q["first_token_share"], q["max_abs_residual"], "{:g}".format))  # as printed
    return pd.DataFrame(rows).set_index("variant")


def plot_first_token_share(per_layer: pd.DataFrame) -> plt.Figure:
    """First-token share against layer, one panel per variant (the variants of ``per_layer``
    with any probes, :attr:`gtalib.book.chapters.gate_probes.Probes.per_layer`): each probed run a thin
    line, the mean over seeds bold, without the gate black and dashed, with it in the variant's
    colour; a grey dotted line at uniform attention's share
    (:func:`gtalib.book.chapters.gate_probes.uniform_first_token_share`)."""
    set_style()
    probed = per_layer.dropna(subset=["first_token_share"])
    variants = list(dict.fromkeys(probed["variant"]))
    cols = min(len(variants), 3)
    rows = -(-len(variants) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.9 * rows), squeeze=False,
                             sharey=True)
    top = probed["first_token_share"].max()
    for ax, v in zip(axes.flat, variants):
        g = probed[probed["variant"] == v]
        for arm, color, ls, name in (("alt", "black", "--", "no gate"),
                                     ("rec", GATE_COLORS.get(v, "tab:blue"), "-", "gate")):
            a = g[g["arm"] == arm]
            for _, run in a.groupby("run_id"):
                ax.plot(run["layer"], run["first_token_share"], color=color, ls=ls, lw=0.7,
                        alpha=0.5)
            if len(a):
                mean = a.groupby("layer")["first_token_share"].mean()
                ax.plot(mean.index, mean.to_numpy(), color=color, ls=ls, lw=2, marker="o",
                        ms=3, label=f"{name} ({plural(a['run_id'].nunique(), 'run')})")
        t = int(g["tokens"].max())
        ax.axhline(uniform_first_token_share(t), color="0.55", lw=1.2, ls=":",
                   label=f"uniform attention, {t} tokens")
        ax.set_title(display_name(v), fontsize=10)
        ax.set_xlabel("layer (0 = first block)")
        ax.set_ylim(0, 1.6 * top)  # headroom: the legend covers no line
        ax.legend(fontsize=7, loc="upper left")
    for ax in axes[:, 0]:
        ax.set_ylabel("attention on the first token")
    for ax in list(axes.flat)[len(variants):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def show_probes(result) -> None:
    """Display the gating page's "What the gate does inside the model" for the complete
    variants of an ablation result: the runs without probes, the table of
    :func:`format_probe_table`, the first-token share per layer
    (:func:`plot_first_token_share`) and what the numbers explain
    (:func:`gtalib.book.chapters.gate_probes.probe_findings`); where no run has probes, only which runs
    lack them."""

    probes = read_probes(result.collected)
    summary = probes.summary[probes.summary["variant"].isin(result.complete)]
    missing = probes.missing[probes.missing["variant"].isin(result.complete)]
    if summary.empty:
        display(Markdown("No complete runs: nothing to probe."))
        return
    lacking = "\n".join(f"- {r['label']}, seed {r['seed']} (`{r['run_id']}`): {r['detail']}"
                         for _, r in missing.iterrows())
    if summary["with_probes"].sum() == 0:
        display(Markdown(f"**No run of this page has gate probes** (`probes.json`), so there is "
                         f"nothing to show here:\n\n{lacking}"))
        return
    if len(missing):
        display(Markdown(f"**{len(missing)} of {int(summary['runs'].sum())} runs have no gate "
                         f"probes**: an arm's values below are the mean over its probed runs, "
                         f"and — where it has none:\n\n{lacking}"))
    t = int(summary["tokens"].max())
    display(Markdown(
        f"Gate probes of the final weights, on the same held-out windows of {t} tokens for "
        f"both arms. *Gate mean*: the gate score σ(x̃ W_g), {GATE_AT_INIT} at initialisation. "
        f"*First-token share*: attention probability on the first position, averaged over "
        f"heads and the queries after the first (uniform attention over {t} tokens gives "
        f"{uniform_first_token_share(t):.3f}). Both: mean over layers and seeds. *Largest |h|*: "
        f"the largest activation of the residual stream, max over layers, batch, positions and "
        f"channels, mean over seeds; its level depends on the model's width and "
        f"initialisation, so only the ratio of the two arms compares with Qiu et al.'s. "
        f"Qiu et al. 2025 (arXiv 2505.06708, Table 4): {QIU_SCALE}."))
    display(format_probe_table(summary))
    plot_first_token_share(probes.per_layer[probes.per_layer["variant"].isin(result.complete)])
    plt.show()
    display(Markdown(probe_findings(summary)))
