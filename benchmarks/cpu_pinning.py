#!/usr/bin/env python
"""Can identical CPU kernels be forced cheaply? Step time and numerics of a training step under the
settings that pin PyTorch's CPU kernels.

Usage (from the repo root; about 4 minutes on 2 cores):

    .venv/bin/python benchmarks/cpu_pinning.py          # writes cpu_pinning.{json,md}

Settings (environment of a child process, set before torch is imported):
``ATEN_CPU_CAPABILITY`` (ATen's kernel build: softmax, fused CPU attention, vector maths),
``MKL_CBWR`` (oneMKL's conditional numerical reproducibility; ``COMPATIBLE`` = its SSE2 branch,
the one documented to give the same results on Intel and AMD CPUs) with ``MKL_DYNAMIC=FALSE``,
and both together. Each child times ``--steps`` forward + backward + AdamW steps of an 8-layer
``cpu``-preset model (MHA and MLRA-4, batch 16 × 128 tokens, one thread) after 3 warm-up steps,
and hashes the parameters after the steps (the numerics it computed). Rounds alternate the
settings, so drift of a shared machine's load hits all of them alike; the ratio to the default
setting is the median over rounds of that round's ratio.

What one machine can show: the cost of each setting, and whether it changes this machine's
numbers (it then runs other kernels). Whether two CPU kinds then agree needs both kinds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

SETTINGS = {
    "default": {},
    "ATEN_CPU_CAPABILITY=avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "ATEN_CPU_CAPABILITY=default": {"ATEN_CPU_CAPABILITY": "default"},
    "MKL_CBWR=COMPATIBLE": {"MKL_CBWR": "COMPATIBLE", "MKL_DYNAMIC": "FALSE"},
    "ATEN default + MKL COMPATIBLE": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE",
                                      "MKL_DYNAMIC": "FALSE"},
}
VARIANTS = ("mha", "mlra-4")

_CHILD = r"""
import hashlib, json, sys, time, torch
from gtalib.model.gpt import GPT
from gtalib.model.presets import model_config
variant, steps = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(1)
torch.manual_seed(0)
cfg = model_config("cpu", variant)
model = GPT(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
idx = torch.randint(0, cfg.vocab_size, (16, 129), generator=torch.Generator().manual_seed(1))
def step():
    _, loss = model(idx[:, :-1], targets=idx[:, 1:])
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
for _ in range(3):
    step()
t0 = time.perf_counter()
for _ in range(steps):
    step()
dt = (time.perf_counter() - t0) / steps
h = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
print(json.dumps({"step_s": dt, "params_sha256": h[:16],
                  "capability": torch.backends.cpu.get_cpu_capability()}))
"""


def child(variant: str, steps: int, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, variant, str(steps)],
                         env={**os.environ, "OMP_NUM_THREADS": "1", **env},
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(rounds: int, steps: int) -> dict:
    from gtalib.training import records, runs

    res = {"date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "machine": records.machine(), "versions": records.versions(),
           "git_commit": runs.git_commit(), "rounds": rounds, "steps": steps,
           "load_average_before": [round(x, 2) for x in os.getloadavg()], "results": {}}
    for variant in VARIANTS:
        per = {name: [] for name in SETTINGS}
        hashes = {}
        for _ in range(rounds):
            for name, env in SETTINGS.items():
                r = child(variant, steps, env)
                per[name].append(r["step_s"])
                hashes[name] = (r["params_sha256"], r["capability"])
        base = per["default"]
        res["results"][variant] = {
            name: {"step_ms_median": 1e3 * statistics.median(ts),
                   "ratio_to_default": statistics.median(t / b for t, b in zip(ts, base)),
                   "params_sha256": hashes[name][0], "aten_capability": hashes[name][1],
                   "same_numbers_as_default": hashes[name][0] == hashes["default"][0]}
            for name, ts in per.items()}
    res["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return res


def markdown(res: dict) -> str:
    m = res["machine"]
    lines = [
        "# Pinning PyTorch's CPU kernels: cost and effect", "",
        f"Measured {res['date_utc']} on {m['cpu']} ({m['logical_cpus']} logical CPUs), commit "
        f"`{(res['git_commit'] or 'unknown')[:12]}`, torch {res['versions']['torch']}, load average "
        f"{res['load_average_before']} before, {res['load_average_after']} after "
        "(other training ran beside it: the ratios, measured in alternating rounds, are what to "
        "read). Regenerate: `.venv/bin/python benchmarks/cpu_pinning.py`.", "",
        f"One 8-layer `cpu`-preset training step (batch 16 × 128 tokens, AdamW, one thread), "
        f"median of {res['rounds']} rounds of {res['steps']} steps; 'same numbers' compares "
        "the parameters after the steps with the default setting's, bit for bit.", "",
        "| variant | setting | ATen kernels | step (ms) | × default | same numbers as default |",
        "|---|---|---|---|---|---|",
    ]
    for variant, rows in res["results"].items():
        for name, r in rows.items():
            lines.append(f"| {variant} | {name} | {r['aten_capability']} | "
                         f"{r['step_ms_median']:.0f} | {r['ratio_to_default']:.2f} | "
                         f"{'yes' if r['same_numbers_as_default'] else 'no'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    args = p.parse_args(argv)
    res = measure(args.rounds, args.steps)
    (HERE / "cpu_pinning.json").write_text(json.dumps(res, indent=2) + "\n")
    (HERE / "cpu_pinning.md").write_text(markdown(res))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
