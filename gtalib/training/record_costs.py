"""What the recorded runs cost: one row per recorded configuration, in core-seconds and on which
CPU, and the Markdown page ``docs/recorded_runs.md`` (``gtalib record costs``). The budget of
``gtalib book`` takes from them the rest of the job's scale and the throughput of a preset too
large to time (:mod:`gtalib.book.pipeline.calibration`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from gtalib.training import runs as store
from gtalib.training.records import list_records, load_record_info, record_machine_kind

def cpu_kind_label(model_name, family, model) -> str:
    """A CPU kind as the cost table names it: ``"AMD EPYC (family 26, model 2)"``."""
    return f"{model_name} (family {family}, model {model})"


def _cpu_of(folder: Path) -> str:
    """``"AMD EPYC (family 26, model 2)"`` from the bundle's machine kind, else the recording
    machine's CPU name with ``", kind unknown"``."""
    kind = record_machine_kind(folder)
    if kind:
        return cpu_kind_label(kind["cpu_model_name"], kind["cpu_family"], kind["cpu_model"])
    return f"{load_record_info(folder)['machine']['cpu']}, kind unknown"


def _result_bytes(folder: Path) -> int:
    """The bytes a run like the recorded one in ``folder`` keeps in a run store: its bundle's
    result files, ``metrics.csv`` twice (Lightning's log holds the same rows), and ``DONE``."""
    sizes = {f.name: f.stat().st_size for f in Path(folder).iterdir() if f.name != "record.json"}
    return sum(sizes.values()) + sizes.get("metrics.csv", 0) + 64


def config_key(spec) -> str:
    """A run's configuration as far as its cost goes: the canonical JSON of every field of its
    spec but the seed and the data order (``train.data_seed``: which windows a step reads, not
    how many), the key of :func:`cost_table`, so a run's expected cost is looked up by its spec
    and the runs of one configuration at other data orders count as its own."""
    d = spec.to_dict()
    d["seed"], d["train"]["data_seed"] = None, None
    identity = d.get("data", {}).get("identity")
    if isinstance(identity, dict):  # the data's identity names the order too, and hashes it
        identity.pop("hash", None)
        identity.get("sampling", {}).pop("data_seed", None)
    return json.dumps(d, sort_keys=True)


def cost_table(record_dir=None):
    """One row per recorded configuration (:func:`config_key`, column ``key``): ``run``
    (:meth:`gtalib.training.runs.RunSpec.describe` less the seed), ``n_layer``, ``steps``, ``tokens`` per
    run, ``d_model``, ``seeds`` (sorted), ``runs``, core-seconds per run (``core_s_median``, ``core_s_min``,
    ``core_s_max``; a run's wall time in seconds × its torch threads, from its card, so a run
    slowed by other work on its machine counts as measured), ``resumed`` (runs resumed from a
    checkpoint, whose card times only the last process: left out of the per-run figures and
    counted at the median in the total; in a configuration with no other run, at their own
    last-process time, a lower bound, flagged by ``lower_bound``), ``core_s_total``,
    ``train_s_median`` (the optimizer steps' own seconds per run, the card's ``train_wall_s``,
    median over the runs not resumed), ``cpu``
    (the machine kind that trained it, :func:`record_machine_kind`) and ``result_bytes`` (what
    such a run keeps in a run store, the largest of its bundles: :func:`_result_bytes`). Sorted by
    ``core_s_total``, largest first.
    Returns a :class:`pandas.DataFrame`.
    """
    import pandas as pd

    rows = []
    for folder in list_records(record_dir):
        spec, card = store.load_spec(folder), store.load_card(folder)
        key = config_key(spec)
        order = f" data_seed={spec.train.data_seed}" if spec.train.data_seed else ""
        run = spec.describe().replace(f" seed={spec.seed}", "").replace(order, "")
        rows.append({"key": key, "run": run,
                     "n_layer": spec.model.n_layer, "d_model": spec.model.d_model,
                     "steps": spec.train.max_steps,
                     "tokens": spec.train.max_steps * spec.train.tokens_per_step,
                     "seed": spec.seed, "resumed": bool(card.get("resumed")),
                     "core_s": (math.nan if card.get("resumed")
                                else card["wall_time_s"] * card["threads"]),
                     "train_s": math.nan if card.get("resumed") else card.get("train_wall_s", math.nan),
                     "last_start_core_s": card["wall_time_s"] * card["threads"],
                     "cpu": _cpu_of(folder), "result_bytes": _result_bytes(folder)})
    cols = ["key", "run", "n_layer", "d_model", "steps", "tokens", "seeds", "runs", "core_s_median",
            "core_s_min", "core_s_max", "resumed", "core_s_total", "lower_bound", "train_s_median",
            "cpu", "result_bytes"]
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows)
    out = df.groupby("key", sort=False).agg(
        run=("run", "first"), n_layer=("n_layer", "first"), d_model=("d_model", "first"),
        steps=("steps", "first"),
        tokens=("tokens", "first"), seeds=("seed", lambda s: tuple(sorted(set(s)))),
        runs=("seed", "size"), core_s_median=("core_s", "median"), core_s_min=("core_s", "min"),
        core_s_max=("core_s", "max"), resumed=("resumed", "sum"),
        train_s_median=("train_s", "median"),
        cpu=("cpu", lambda c: "; ".join(sorted(set(c)))), result_bytes=("result_bytes", "max"))
    measured = df.groupby("key", sort=False)["core_s"].sum()
    out["lower_bound"] = out["core_s_median"].isna()  # every run of it resumed
    last_start = df.groupby("key", sort=False)["last_start_core_s"].sum()
    out["core_s_total"] = (measured + out["resumed"] * out["core_s_median"]).where(
        ~out["lower_bound"], last_start)
    out = out.reset_index()
    return out.sort_values(["core_s_total", "run"], ascending=[False, True]).reset_index(
        drop=True)[cols]


def costs_markdown(record_dir=None) -> str:
    """The Markdown page ``docs/recorded_runs.md``: :func:`cost_table` with its totals (what
    ``gtalib book --train-recorded`` re-trains, in core-seconds and hours on one core each)."""
    t = cost_table(record_dir)
    total = float(t["core_s_total"].sum())
    lines = [
        "# Recorded runs and what they cost",
        "",
        "Generated by `gtalib record costs > docs/recorded_runs.md` from the bundles in "
        "`book/recorded/`; a test fails when it is out of date.",
        "",
        f"{int(t['runs'].sum())} recorded runs in {len(t)} "
        f"configuration{'' if len(t) == 1 else 's'}, "
        f"**{'at least ' if t['lower_bound'].any() else ''}{total:,.0f} core-seconds** "
        f"({total / 3600:.1f} core-hours) as measured: "
        f"re-training all of them (`gtalib record check` without a run id) costs about {total / 7200:.1f} hours on two cores with two "
        "one-thread processes. Core-seconds are each run's wall time × its torch threads (one "
        "for every record here), from its `card.json`; runs trained while other work shared the "
        "machine took longer than they would alone, so the spread per configuration "
        "(min–max) is part of the measurement. A run resumed from a checkpoint (column "
        "*resumed*) is timed only from its last start, so it is left out of the per-run "
        "figures and counted at its configuration's median in the total (where every run of a "
        "configuration was resumed, at its last-start time, a lower bound marked ≥). The CPU is "
        "the machine kind that trained the "
        "run (`gtalib/training/machine.py`; \"kind unknown\" for bundles recorded before kinds were "
        "kept, named by the recording machine's CPU).",
        "",
        "| run (all seeds) | layers | d_model | steps | tokens/run | seeds | core-s per run, "
        "median (min–max) | resumed | core-s total | CPU |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in t.itertuples():
        lines.append(
            f"| {r.run} | {r.n_layer} | {r.d_model} | {r.steps:,} | {r.tokens:,} | "
            f"{', '.join(map(str, r.seeds))} | "
            + ("— (all resumed)" if r.lower_bound else
               f"{r.core_s_median:,.0f} ({r.core_s_min:,.0f}–{r.core_s_max:,.0f})")
            + f" | {r.resumed} | {'≥ ' if r.lower_bound else ''}{r.core_s_total:,.0f} | {r.cpu} |")
    return "\n".join(lines) + "\n"
