#!/usr/bin/env python
"""How far a recorded run's curve moves when it is re-trained on another CPU kind: the data
behind the cross-machine envelope of ``gtalib record check`` (``gtalib.training.records``).

Usage (from the repo root; the corpus must be built):

    .venv/bin/python benchmarks/cross_cpu.py --kind aten-avx2 [RUN_ID ...]   # default: the sample
    .venv/bin/python benchmarks/cross_cpu.py --summary                      # cross_cpu.md only

Another CPU kind is emulated on this machine by environment variables that change which kernels
PyTorch runs, set before torch is imported in a child process (``KINDS``):
``ATEN_CPU_CAPABILITY`` selects ATen's kernel build (softmax, the fused CPU attention, vector
maths: AVX-512 / AVX2 / scalar), ``MKL_CBWR=COMPATIBLE`` makes oneMKL's fp32 GEMM take its SSE2
branch. Each record is re-trained from scratch with its card's thread count; per step, the
re-trained ``train_loss`` and ``val_loss`` minus the recorded ones are written to
``cross_cpu/<kind>.csv`` (appended, one run at a time, so an interrupted measurement keeps what it
finished and a rerun skips it), with date, machine, commit and versions in ``cross_cpu/<kind>.json``.
``cross_cpu.md`` summarises every kind measured: |Δ| against step, the final |Δ val_loss|, and
the seed-to-seed spread of the same configurations' final validation loss.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: pandas is imported where it is used
    import pandas as pd

HERE = Path(__file__).resolve().parent
OUT = HERE / "cross_cpu"

#: Emulated CPU kinds: name -> environment of the re-training process.
KINDS = {
    "aten-avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "aten-default-mkl-compatible": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"},
}

#: The sample: every variant family (dense MHA/GQA, latent MLA/MLRA, factored TPA), 1-8 layers,
#: 10-1000 steps. ``ci`` records are all taken (they cost seconds); of the ``cpu`` ones one seed.
CPU_SAMPLE = (
    ("mha", 2, 250, {}), ("mla", 2, 250, {}), ("tpa", 2, 250, {}),
    ("mla", 4, 250, {"init": "normal"}), ("tpa", 4, 250, {}),
    ("mha", 8, 250, {}), ("tpa", 8, 250, {"init": "normal"}), ("mlra-4", 8, 250, {"gate": True}),
    ("gqa", 2, 1000, {"gate": True}), ("gqa", 8, 1000, {}),
)

_CHILD = r"""
import json, sys, torch
from gtalib.training import runs
from gtalib.training.train import ensure_run
spec_file, out_dir, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(threads)
spec = runs.RunSpec.from_dict(json.load(open(spec_file)))
path = ensure_run(spec, out_dir, accelerator="cpu")
print(path)
"""


def sample_ids() -> list[str]:
    """Run ids of the sample among the repository's records (``ci`` ones: all; ``cpu``: seed 0
    of each :data:`CPU_SAMPLE` configuration)."""
    from gtalib.training import records, runs

    out = []
    for folder in records.list_records():
        spec = runs.load_spec(folder)
        m, t = spec.model, spec.train
        if t.max_steps <= 30:
            out.append(folder.name)
            continue
        for variant, n_layer, steps, opts in CPU_SAMPLE:
            if (m.variant, m.n_layer, t.max_steps, spec.seed) != (variant, n_layer, steps, 0):
                continue
            if m.init == opts.get("init", "zero") and m.gate == opts.get("gate", False):
                out.append(folder.name)
    # cheapest first, so an interrupted measurement has the most runs
    return sorted(out, key=lambda rid: _cost(runs.load_spec(records.default_record_dir() / rid)))


def _cost(spec) -> int:
    return spec.train.max_steps * spec.model.n_layer


def retrain(folder: Path, env: dict) -> "pd.DataFrame":
    """Re-train the bundle ``folder`` in a child process with ``env``; its metrics frame."""
    from gtalib.training import runs

    threads = int(runs.load_card(folder).get("threads") or 1)
    with tempfile.TemporaryDirectory(prefix="gtalib-xcpu-") as tmp:
        child_env = {**os.environ, **env, "OMP_NUM_THREADS": str(threads)}
        out = subprocess.run([sys.executable, "-c", _CHILD, str(folder / "spec.json"), tmp,
                              str(threads)], env=child_env, check=True, capture_output=True,
                             text=True)
        return runs.load_metrics(Path(out.stdout.strip().splitlines()[-1]))


def deltas(run_id: str, recorded, retrained) -> "pd.DataFrame":
    """Per step: re-trained − recorded train_loss and val_loss (NaN where not evaluated)."""
    import pandas as pd

    return pd.DataFrame({
        "run_id": run_id, "step": recorded["step"].astype(int),
        "max_steps": int(recorded["step"].max()),
        "train_delta": retrained["train_loss"].to_numpy() - recorded["train_loss"].to_numpy(),
        "val_delta": retrained["val_loss"].to_numpy() - recorded["val_loss"].to_numpy(),
    })


def measure(kind: str, run_ids: list[str]) -> None:
    import pandas as pd

    from gtalib.training import records, runs

    OUT.mkdir(exist_ok=True)
    csv = OUT / f"{kind}.csv"
    done = set(pd.read_csv(csv)["run_id"]) if csv.is_file() else set()
    meta_file = OUT / f"{kind}.json"
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {
        "kind": kind, "env": KINDS[kind], "runs": {}}
    meta.update({"date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                 "machine": records.machine(), "versions": records.versions(),
                 "git_commit": runs.git_commit()})
    for rid in run_ids:
        if rid in done:
            continue
        folder = records.default_record_dir() / rid
        d = deltas(rid, records.load_record_metrics(folder), retrain(folder, KINDS[kind]))
        d.to_csv(csv, mode="a", header=not csv.is_file(), index=False)
        meta["runs"][rid] = runs.load_spec(folder).describe() + \
            f" n_layer={runs.load_spec(folder).model.n_layer}"
        tmp = meta_file.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, meta_file)
        print(f"{rid} {meta['runs'][rid]}: max |Δ train| {d['train_delta'].abs().max():.3g}, "
              f"final |Δ val| {abs(d['val_delta'].dropna().iloc[-1]):.3g}", flush=True)


#: Real changes, each re-trained from a ``cpu`` 2-layer record on this machine's own kernels:
#: record run id -> (name, spec edit). Recorded pairs that differ in one option (init, gate, seed)
#: are compared directly from their bundles (:func:`recorded_changes`).
CHANGES = {
    "7eb62ab435f29ff7": (("lr x2", {"train": {"lr": 2e-3}}),
                         ("lr x1.1", {"train": {"lr": 1.1e-3}}),
                         ("data order (data_seed 1)", {"train": {"data_seed": 1}})),
    "8d3190ed25c66205": (("formula: latent scaling off", {"model": {"latent_scale": False}}),),
}


def _edited(spec, edit: dict):
    from dataclasses import replace

    from gtalib.training import runs

    train = replace(spec.train, **edit.get("train", {}))
    # the data identity names the sampling (data_seed): re-derived for the edited training
    data = runs.data_spec(train, spec.data["corpus"], spec.data["tokenizer"])
    return replace(spec, model=replace(spec.model, **edit.get("model", {})), train=train,
                   data=data)


def measure_changes() -> None:
    """Re-train each :data:`CHANGES` edit of its record (this machine, default kernels) and
    append its per-step deltas against the record to ``cross_cpu/changes.csv``."""
    import pandas as pd

    from gtalib.training import records, runs

    OUT.mkdir(exist_ok=True)
    csv = OUT / "changes.csv"
    done = set(pd.read_csv(csv)["change"]) if csv.is_file() else set()
    for rid, edits in CHANGES.items():
        folder = records.default_record_dir() / rid
        spec = runs.load_spec(folder)
        for name, edit in edits:
            if name in done:
                continue
            with tempfile.TemporaryDirectory(prefix="gtalib-xchange-") as tmp:
                changed = _edited(spec, edit)
                (Path(tmp) / "spec.json").write_text(json.dumps(changed.to_dict()))
                out = subprocess.run([sys.executable, "-c", _CHILD, str(Path(tmp) / "spec.json"),
                                      tmp, "1"], check=True, capture_output=True, text=True)
                got = runs.load_metrics(Path(out.stdout.strip().splitlines()[-1]))
            d = deltas(rid, records.load_record_metrics(folder), got).assign(change=name)
            d.to_csv(csv, mode="a", header=not csv.is_file(), index=False)
            print(f"{name}: |Δ train| at steps 1-5 "
                  f"{[float(f'{x:.2g}') for x in d['train_delta'].abs().head(5)]}", flush=True)


#: How the envelope is derived from the measurements (docs/cross_cpu.md): the early window and
#: the margins over the largest |Δ| measured in it and after it.
EARLY_STEPS = 10
EARLY_MARGIN = 10.0
LATE_MARGIN = 1.5


def _round_up(x: float) -> float:
    """``x`` rounded up to one significant digit (0.0368 -> 0.04)."""
    import math

    if x <= 0:
        return 0.0
    e = math.floor(math.log10(x))
    return float(f"{math.ceil(x / 10 ** e)}e{e}")  # decimal, not 10 × 1e-6 = 9.999e-06


def load_kinds() -> "pd.DataFrame":
    """Every measured kind's deltas, one frame with a ``kind`` column."""
    import pandas as pd

    frames = [pd.read_csv(f).assign(kind=f.stem) for f in sorted(OUT.glob("*.csv"))
              if f.stem in KINDS]
    return pd.concat(frames, ignore_index=True)


def derive_envelope(d) -> dict:
    """The envelope's numbers from the measured deltas ``d`` (:func:`load_kinds`): early window
    :data:`EARLY_STEPS`; ``early_tol`` = :data:`EARLY_MARGIN` × the largest |Δ| of any loss in it;
    ``train_tol`` / ``val_tol`` = :data:`LATE_MARGIN` × the largest |Δ train_loss| / |Δ val_loss|
    after it; each rounded up to one significant digit."""
    early = d[d["step"] <= EARLY_STEPS]
    late = d[d["step"] > EARLY_STEPS]
    early_max = max(early["train_delta"].abs().max(), early["val_delta"].abs().max(skipna=True)
                    if early["val_delta"].notna().any() else 0.0)
    return {"early_steps": EARLY_STEPS,
            "early_tol": _round_up(EARLY_MARGIN * max(early_max, 1e-7)),
            "train_tol": _round_up(LATE_MARGIN * late["train_delta"].abs().max()),
            "val_tol": _round_up(LATE_MARGIN * late["val_delta"].abs().max())}


def _seed_spread(spec, finals: dict) -> tuple[float, int]:
    """Standard deviation over seeds of the final validation loss of ``spec``'s configuration
    among the records (same spec but the seed), and how many seeds that is. ``finals``: every
    record's ``(spec, final val_loss)`` (:func:`_record_finals`)."""
    import statistics

    same = [v for other, v in finals.values()
            if other.model == spec.model and other.train == spec.train]
    return (statistics.stdev(same) if len(same) > 1 else float("nan")), len(same)


def _record_finals() -> dict:
    """run id -> (spec, final validation loss) of every record, read once."""
    from gtalib.training import records, runs

    return {f.name: (runs.load_spec(f),
                     float(records.load_record_metrics(f)["val_loss"].dropna().iloc[-1]))
            for f in records.list_records()}


def recorded_changes() -> "pd.DataFrame":
    """Real changes already in the records: pairs of bundles whose specs differ in one thing
    (init, gate, seed), compared step by step like a re-training (this is what a check of a
    changed spec against the record would see on any machine)."""
    from dataclasses import replace

    import pandas as pd

    from gtalib.training import records, runs

    want = {"init normal vs zero": ("init", "normal", "zero"), "gate on vs off": ("gate", True, False),
            "init scaled vs normal": ("init", "scaled", "normal")}
    specs = {f.name: runs.load_spec(f) for f in records.list_records()}
    rows = []
    for name, (field, a, b) in want.items():
        for rid, s in specs.items():
            if getattr(s.model, field) != a or s.seed != 0:
                continue
            for rid2, s2 in specs.items():
                # the gate's parameters come out of the FFN (parameter matching): F differs too
                if s2.seed == 0 and s2.train == s.train and s2.model == replace(
                        s.model, **{field: b, "intermediate_size": s2.model.intermediate_size}):
                    rows.append((name, rid, rid2, s))
    for rid, s in specs.items():  # another seed: other initial weights, same data order
        if s.seed == 1 and s.model.init == "zero" and not s.model.gate:
            for rid2, s2 in specs.items():
                if s2.seed == 0 and s2.model == s.model and s2.train == s.train:
                    rows.append(("seed 1 vs 0", rid, rid2, s))
    frames = []
    for name, rid, rid2, s in rows:
        d = deltas(rid2, records.load_record_metrics(records.default_record_dir() / rid2),
                   records.load_record_metrics(records.default_record_dir() / rid))
        frames.append(d.assign(change=name, n_layer=s.model.n_layer, variant=s.model.variant))
    return pd.concat(frames, ignore_index=True)


def _fmt(x: float) -> str:
    return "—" if x != x else f"{x:.2g}"


def summary() -> str:
    """``cross_cpu.md``: the measurements of every kind, the real changes, the derived bound."""
    import pandas as pd

    from gtalib.training import records, runs

    d = load_kinds()
    env = derive_envelope(d)
    finals = _record_finals()
    meta = {k: json.loads((OUT / f"{k}.json").read_text()) for k in d["kind"].unique()}
    m0 = next(iter(meta.values()))
    lines = [
        "# Re-training recorded runs on another CPU kind", "",
        f"Measured {m0['date_utc'][:10]} on {m0['machine']['cpu']} "
        f"({m0['machine']['logical_cpus']} logical CPUs), torch {m0['versions']['torch']}, "
        f"commit `{(m0['git_commit'] or 'unknown')[:12]}`; the records were trained on the machine "
        "their `record.json` names. Regenerate: `.venv/bin/python benchmarks/cross_cpu.py --kind "
        "KIND` (per kind), `--changes`, then `--summary`.", "",
        "Emulated kinds (environment of the re-training process): " + "; ".join(
            f"`{k}` = " + " ".join(f"{a}={b}" for a, b in KINDS[k].items()) for k in meta) + ".",
        "",
        "## |Δ| = |re-trained − recorded| per run", "",
        "| kind | run | variant | layers | steps | first step Δ≠0 | max \\|Δ train\\| steps 1–10 "
        "| max \\|Δ train\\| after | max \\|Δ val\\| | final \\|Δ val\\| | seed s.d. of final val "
        "(n) | final \\|Δ val\\| / s.d. |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (kind, rid), g in d.groupby(["kind", "run_id"], sort=False):
        spec = runs.load_spec(records.default_record_dir() / rid)
        nz = g[(g["train_delta"] != 0) | (g["val_delta"].fillna(0) != 0)]
        first = int(nz["step"].min()) if len(nz) else None
        final = abs(g["val_delta"].dropna().iloc[-1])
        sd, n = _seed_spread(spec, finals)
        lines.append(
            f"| {kind} | `{rid}` | {spec.model.variant}{' + gate' if spec.model.gate else ''}"
            f"{'' if spec.model.init == 'zero' else ' ' + spec.model.init + ' init'} | "
            f"{spec.model.n_layer} | {spec.train.max_steps} | {first or '—'} | "
            f"{_fmt(g[g['step'] <= EARLY_STEPS]['train_delta'].abs().max())} | "
            f"{_fmt(g[g['step'] > EARLY_STEPS]['train_delta'].abs().max())} | "
            f"{_fmt(g['val_delta'].abs().max())} | {_fmt(final)} | {_fmt(sd)} ({n}) | "
            f"{_fmt(final / sd) if sd == sd and sd > 0 else '—'} |")
    # |Δ| against step: the largest over runs in step bands
    bands = [(1, 10), (11, 25), (26, 50), (51, 100), (101, 250), (251, 500), (501, 1000)]
    lines += ["", "## Largest |Δ| over all runs and kinds, by step", "",
              "| steps | runs | max \\|Δ train_loss\\| | max \\|Δ val_loss\\| |", "|---|---|---|---|"]
    for lo, hi in bands:
        g = d[(d["step"] >= lo) & (d["step"] <= hi)]
        if len(g):
            lines.append(f"| {lo}–{hi} | {g['run_id'].nunique()} | "
                         f"{_fmt(g['train_delta'].abs().max())} | {_fmt(g['val_delta'].abs().max())} |")
    ch = [recorded_changes()]
    if (OUT / "changes.csv").is_file():
        ch.append(pd.read_csv(OUT / "changes.csv"))
    ch = pd.concat(ch, ignore_index=True)
    lines += ["", "## Real changes in the early window", "",
              "Pairs of runs that differ in one thing, compared step by step as a check would "
              "(recorded pairs from the bundles; learning rate, data order and formula re-trained "
              "on this machine from a 2-layer record).", "",
              "| change | pairs | smallest \\|Δ train\\| at step 1 | smallest max over steps 1–10 | "
              f"latest first step above early_tol = {env['early_tol']:g} |", "|---|---|---|---|---|"]
    for name, grp in ch.groupby("change", sort=False):
        firsts, step1, maxes = [], [], []
        for _, g in grp.groupby("run_id"):
            a = g.set_index("step")["train_delta"].abs()
            above = a[a > env["early_tol"]]
            firsts.append(int(above.index.min()) if len(above) else None)
            step1.append(a.get(1, float("nan")))
            maxes.append(a[a.index <= EARLY_STEPS].max())
        latest = "never" if None in firsts else max(firsts)
        lines.append(f"| {name} | {len(firsts)} | {_fmt(min(step1))} | {_fmt(min(maxes))} | "
                     f"{latest} |")
    lines += ["", "## The envelope these data give", "",
              f"early window steps 1–{env['early_steps']}: every loss within "
              f"{EARLY_MARGIN:g} × the largest |Δ| measured there → **early_tol = "
              f"{env['early_tol']:g}** nats; after it, {LATE_MARGIN:g} × the largest measured → "
              f"**train_tol = {env['train_tol']:g}**, **val_tol = {env['val_tol']:g}** nats "
              "(each rounded up to one significant digit). `gtalib.training.records.CROSS_MACHINE_ENVELOPE` "
              "holds these numbers (a test re-derives them from `cross_cpu/*.csv`)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_ids", nargs="*", help="record run ids (default: the sample)")
    p.add_argument("--kind", choices=sorted(KINDS), help="emulated CPU kind to re-train under")
    p.add_argument("--summary", action="store_true", help="only rewrite cross_cpu.md")
    p.add_argument("--changes", action="store_true",
                   help="re-train real changes (learning rate, data order, formula) instead")
    args = p.parse_args(argv)
    if args.changes:
        measure_changes()
    elif not args.summary:
        if args.kind is None:
            p.error("--kind is required unless --summary or --changes; allowed: "
                    + ", ".join(sorted(KINDS)))
        measure(args.kind, args.run_ids or sample_ids())
    (HERE / "cross_cpu.md").write_text(summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
