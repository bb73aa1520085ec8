"""A synthetic run store for book tests: finished runs with known metrics, no training.

Each run's loss is ``L(step) = base + 2.5 * exp(-step / 8) + effect + seed_noise`` with
``effect`` a fixed offset per configuration, so the ΔL of every pair is known in closed form.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from gtalib.book.design import run_specs as specs
from gtalib.book.design.names import canonical_options
from gtalib.book.design.plan import make_plan

SOURCES = ("news", "bible")
#: ΔL offsets of the alternative arm per option: positive = the paper's recommendation wins.
EFFECT = {"init": 0.05, "gate": -0.04, "latent_scale": 0.0, "head_multiplier": 0.02}


def synthetic_identity(preset: str, max_steps=None) -> dict:
    return {"synthetic": True, "preset": preset}


def effect_of(options) -> float:
    d = dict(canonical_options(options))
    return sum(EFFECT[k] for k in d if k in EFFECT)


def write_store(run_dir, preset: str, seeds: int, max_steps: int = 20, eval_every: int = 5,
                tokens_per_step: int = 128, variants=()) -> list:
    """Write a finished synthetic run for every run the book needs (with the user's own
    ``variants`` beside the paper's); returns the RunRefs."""
    run_dir = Path(run_dir)
    data = synthetic_identity(preset)
    refs = make_plan(preset, seeds, variants=variants).runs
    for ref in refs:
        spec = specs.run_spec(ref, preset, max_steps, data)
        path = run_dir / spec.run_id
        path.mkdir(parents=True, exist_ok=True)
        steps = np.arange(1, max_steps + 1)
        noise = 0.01 * (ref.seed + 1) * (1 if ref.variant < "m" else -1)
        loss = 2.0 + 2.5 * np.exp(-steps / 8) + effect_of(ref.options) + noise
        df = pd.DataFrame({"step": steps, "tokens": steps * tokens_per_step, "train_loss": loss})
        on_eval = (steps % eval_every == 0) | (steps == max_steps)
        df["val_loss"] = np.where(on_eval, loss + 0.1, np.nan)
        df["lr"] = 1e-3  # the store's column order: step, tokens, train_loss, val_loss, lr, val_loss/*
        for i, s in enumerate(SOURCES):
            df[f"val_loss/{s}"] = np.where(on_eval, loss + 0.05 * (i + 1), np.nan)
        df.to_csv(path / "metrics.csv", index=False)
        (path / "spec.json").write_text(json.dumps(spec.to_dict()))
        (path / "card.json").write_text(json.dumps({
            "device": "cpu (synthetic)", "threads": 1, "wall_time_s": 0.0, "tokens_per_s": math.nan,
            "git_commit": None}))
        (path / "DONE").write_text("synthetic\n")
    return refs


def metrics(steps, losses, tokens_per_step=100, **extra):
    return pd.DataFrame({"step": steps, "tokens": np.asarray(steps) * tokens_per_step,
                         "train_loss": losses, "val_loss": losses, **extra})


def runs_frame(spec):
    """spec: {(variant, arm, seed): metrics frame} -> runs frame."""
    out = []
    for (v, arm, seed), df in spec.items():
        df = df.copy()
        df.insert(0, "seed", seed)
        df.insert(0, "label", f"{v} {arm}")
        df.insert(0, "arm", arm)
        df.insert(0, "variant", v)
        out.append(df)
    return pd.concat(out, ignore_index=True)


STARTUP = '''
# IPython startup for synthetic book tests: a fixed data identity and entropy, no corpus needed.
import gtalib.book.design.run_specs, gtalib.book.analysis.curves
gtalib.book.design.run_specs.data_spec = lambda preset, max_steps=None: {"synthetic": True, "preset": preset}
gtalib.book.analysis.curves.corpus_entropy = lambda preset: 3.0
'''


def ipython_dir(path) -> Path:
    """An IPYTHONDIR whose startup script installs the synthetic identity in notebook kernels."""
    d = Path(path) / "profile_default" / "startup"
    d.mkdir(parents=True, exist_ok=True)
    (d / "00-synthetic.py").write_text(STARTUP)
    return Path(path)


def write_finished_run(run_dir, spec, df) -> Path:
    """A finished run folder ``<run_dir>/<run_id>`` holding ``df`` as its metrics (spec, a
    one-thread card, ``DONE``)."""
    path = Path(run_dir) / spec.run_id
    path.mkdir(parents=True)
    df.to_csv(path / "metrics.csv", index=False)
    (path / "spec.json").write_text(json.dumps(spec.to_dict()))
    (path / "card.json").write_text(json.dumps({"threads": 1}))
    (path / "DONE").write_text("synthetic\n")
    return path
