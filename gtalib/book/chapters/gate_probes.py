"""The gate probes of the gating page ("What the gate does inside the model", docs/probes.md):
each finished run's probes per layer (mean gate score, first-token attention share, largest
residual activation), their summary per arm, the verdict words and numbers the page states to
say what they explain against Qiu et al. 2025, and the page's table and figure.

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
from IPython.display import display

from gtalib.book.analysis.collect import STATUS_COLUMNS, Collected
from gtalib.book.analysis.style import plural, range_text, set_style
from gtalib.book.design.names import GATE_COLORS, and_join, display_name
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
            saying why: ``"absent"`` (no ``probes.json``: trained or recorded before probes were
            stored), ``"of <run id>, <n> layers"`` (another run's file), ``"wrong length"`` (not
            one value per layer) or ``"unreadable: <error>"``.
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
        path = (run_dir if r["source"] == "local" else record_dir) / r["run_id"] / PROBES_FILE
        n = int(r["n_layer"])
        values, tokens, why = {k: [math.nan] * n for k in PROBE_KEYS}, math.nan, None
        if not path.is_file():
            why = "absent"
        else:
            try:
                got = json.loads(path.read_text())
                if got["run_id"] != r["run_id"] or got["n_layer"] != n:
                    why = f"of {got['run_id']}, {got['n_layer']} layers"
                elif any(got[k] is not None and len(got[k]) != n for k in PROBE_KEYS):
                    why = "wrong length"
                else:
                    values = {k: [math.nan] * n if got[k] is None else [float(x) for x in got[k]]
                              for k in PROBE_KEYS}
                    tokens = got["batch"]["tokens_per_window"]
            except (ValueError, KeyError, TypeError) as e:  # JSON error, missing key, bad value
                why = f"unreadable: {type(e).__name__}: {e}"
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


def probe_findings(summary: pd.DataFrame) -> dict[str, str]:
    """What the gate probes explain, as the words and numbers the gating page's sentences state,
    from :attr:`Probes.summary` (arms without probes are ignored) and Qiu et al.'s values
    (:data:`gtalib.book.design.paper.QIU_PROBES`). A variant list names the variants where the
    state holds; ``"not measured"`` where the arm has no probed run, ``"—"`` where a value does
    not apply.

    Returns:
        ``probe_sink``: ``"none"`` or ``"in <variants>"``, where without the gate the
        first-token share (mean over layers and seeds) exceeds :data:`SINK_FACTOR` times uniform
        attention's (:func:`uniform_first_token_share`); ``probe_sink_gated``: ``"removed"``
        (the gated share below half of the ungated one in every such variant probed with both
        arms) or ``"kept"``; ``probe_massive``: ``"none"`` or ``"in <variants>"``, where the
        largest ``|h|`` without the gate (mean over seeds of the max over layers) is
        :data:`MASSIVE_ACTIVATION` or more; ``probe_ratio``: the largest ``|h|`` gate / no gate
        over the variants with both arms (a range); ``probe_gate``: ``"near init"`` (the gate's
        mean under a quarter of the way from :data:`GATE_AT_INIT` to Qiu et al.'s 0.116),
        ``"as sparse"`` (all the way) or ``"selective"``; ``probe_gate_way``: that fraction in
        percent (a range); the counts ``probe_runs`` (done runs) and ``probe_probed`` (of them
        with probes), ``probe_tokens`` and ``probe_uniform`` (the probe batch's window and
        uniform attention's share over it), the thresholds ``probe_sink_factor``,
        ``probe_massive_at`` and ``probe_gate_init``, and Qiu et al.'s values ``qiu_gate``,
        ``qiu_share``, ``qiu_share_gate``, ``qiu_resid``, ``qiu_resid_gate``, ``qiu_ratio``,
        ``qiu_scale``.
    """

    def names(df):
        return "in " + and_join(display_name(v) for v in df["variant"])

    probed = summary[summary["with_probes"] > 0]
    alt = probed[probed["arm"] == "alt"].set_index("variant", drop=False)
    rec = probed[probed["arm"] == "rec"].set_index("variant", drop=False)
    q_gate, q_share, q_resid = (QIU_PROBES[k] for k in PROBE_KEYS)  # (no gate, gate) each
    t = int(summary["tokens"].max()) if summary["tokens"].notna().any() else None
    out = {"probe_runs": f"{int(summary['runs'].sum())}",
           "probe_probed": f"{int(summary['with_probes'].sum())}",
           "probe_tokens": "—" if t is None else f"{t}",
           "probe_uniform": "—" if t is None else f"{uniform_first_token_share(t):.3f}",
           "probe_sink_factor": f"{SINK_FACTOR:g}", "probe_massive_at": f"{MASSIVE_ACTIVATION:g}",
           "probe_gate_init": f"{GATE_AT_INIT}", "qiu_gate": f"{q_gate[1]:g}",
           "qiu_share": f"{q_share[0]:g}", "qiu_share_gate": f"{q_share[1]:g}",
           "qiu_resid": f"{q_resid[0]:g}", "qiu_resid_gate": f"{q_resid[1]:g}",
           "qiu_ratio": f"{q_resid[1] / q_resid[0]:.2f}", "qiu_scale": QIU_SCALE,
           "probe_sink": "not measured", "probe_sink_gated": "—",
           "probe_massive": "not measured", "probe_ratio": "—",
           "probe_gate": "not measured", "probe_gate_way": "—"}
    if not alt.empty:
        base = alt["tokens"].map(lambda n: uniform_first_token_share(int(n)))
        sink = alt[alt["first_token_share"] > SINK_FACTOR * base]
        out["probe_sink"] = names(sink) if len(sink) else "none"
        both = sink[sink.index.isin(rec.index)]
        if len(both):
            gated = rec.loc[both.index, "first_token_share"]
            removed = (gated < both["first_token_share"] / 2).all()
            out["probe_sink_gated"] = "removed" if removed else "kept"
        resid = alt["max_abs_residual_max"]
        massive = alt[resid >= MASSIVE_ACTIVATION]
        out["probe_massive"] = names(massive) if len(massive) else "none"
        both = alt[alt.index.isin(rec.index)]
        if len(both):
            ratio = rec.loc[both.index, "max_abs_residual_max"] / both["max_abs_residual_max"]
            out["probe_ratio"] = range_text(ratio, ".2f")
    if not rec.empty:
        way = (GATE_AT_INIT - rec["gate_mean"]) / (GATE_AT_INIT - q_gate[1])
        out["probe_gate"] = ("near init" if (way < 0.25).all() else
                             "as sparse" if (way >= 1).all() else "selective")
        out["probe_gate_way"] = f"{range_text(100 * way, '.0f')} %"
    return out


#: The names this page's sentences state (the keys of :func:`probe_findings`).
FACT_NAMES = ("probe_runs", "probe_probed", "probe_tokens", "probe_uniform", "probe_sink_factor",
              "probe_massive_at", "probe_gate_init", "qiu_gate", "qiu_share", "qiu_share_gate",
              "qiu_resid", "qiu_resid_gate", "qiu_ratio", "qiu_scale", "probe_sink",
              "probe_sink_gated", "probe_massive", "probe_ratio", "probe_gate", "probe_gate_way")


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
    """The gate-probe table of the gating page from :attr:`Probes.summary`, strings, indexed by
    variant: ``probed (no gate)``, ``probed (gate)`` (``"k of n"`` runs with probes; ``"—"``
    without the arm), ``gate mean`` (gated arm), ``share (no gate)``, ``share (gate)``
    (first-token share) and ``|h| (no gate)``, ``|h| (gate)`` (largest residual activation),
    then a row ``Qiu et al.`` of :data:`gtalib.book.design.paper.QIU_PROBES`. Gate and share:
    mean over layers and seeds; largest ``|h|``: max over layers, mean over seeds."""
    arms = summary.set_index(["variant", "arm"])
    nan = pd.Series(math.nan, index=arms.columns)

    def row(name, runs, gate, share, resid, fmt=_probe_value):
        return {"variant": name, "probed (no gate)": runs[0], "probed (gate)": runs[1],
                "gate mean": fmt(gate[1]), "share (no gate)": fmt(share[0]),
                "share (gate)": fmt(share[1]), "|h| (no gate)": fmt(resid[0]),
                "|h| (gate)": fmt(resid[1])}

    rows = []
    for v in dict.fromkeys(summary["variant"]):
        a, r = (arms.loc[(v, arm)] if (v, arm) in arms.index else nan for arm in ("alt", "rec"))
        runs = ["—" if math.isnan(x["runs"]) else f"{x['with_probes']:.0f} of {x['runs']:.0f}"
                for x in (a, r)]
        rows.append(row(display_name(v), runs, (a["gate_mean"], r["gate_mean"]),
                        (a["first_token_share"], r["first_token_share"]),
                        (a["max_abs_residual_max"], r["max_abs_residual_max"])))
    q = QIU_PROBES
    rows.append(row("Qiu et al.", ("", ""), q["gate_mean"], q["first_token_share"],
                    q["max_abs_residual"], "{:g}".format))  # as printed
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
                   label=f"uniform, {t} tokens")
        ax.set_title(display_name(v), fontsize=10)
        ax.set_xlabel("layer (0 = first block)")
        ax.set_ylim(0, 1.6 * top)  # headroom: the legend covers no line
        ax.legend(fontsize=7, loc="upper left")
    for ax in axes[:, 0]:
        ax.set_ylabel("first-token share")
    for ax in list(axes.flat)[len(variants):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def probes_of(result) -> Probes:
    """The probes of an ablation result's complete variants (:func:`read_probes` of its runs,
    kept to :attr:`~gtalib.book.chapters.ablation.AblationResult.complete`): what the gating
    page's sentences state (:func:`probe_findings` of their summary) and shows
    (:func:`show_probes`)."""
    probes = read_probes(result.collected)
    keep = {k: getattr(probes, k) for k in ("per_layer", "summary", "missing")}
    return Probes(**{k: df[df["variant"].isin(result.complete)] for k, df in keep.items()})


def show_probes(probes: Probes) -> None:
    """The gating page's "What the gate does inside the model" (``probes``: :func:`probes_of`):
    display the runs without probes (``label, seed, run_id, source, detail``; where any), the
    table of :func:`format_probe_table` and, where any run has probes, the first-token share per
    layer (:func:`plot_first_token_share`)."""
    if len(probes.missing):
        display(probes.missing[["label", "seed", "run_id", "source", "detail"]]
                .style.hide(axis="index"))
    if probes.summary.empty:
        return
    display(format_probe_table(probes.summary))
    if probes.summary["with_probes"].sum():
        plot_first_token_share(probes.per_layer)
        plt.show()
