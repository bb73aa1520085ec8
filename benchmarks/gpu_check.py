"""Prepared GPU check of gtalib's Triton kernels: one command, under 8 minutes on one H200.

Usage::

    python benchmarks/gpu_check.py OUTDIR [--sections tests,attention,decode,train[,tp]] [--quick]
    bash scripts/gpu_check.sh OUTDIR          # the same, unbuffered, under `timeout`

Writes into OUTDIR: ``report.md`` (rewritten after every section, so a kill leaves what finished),
``env.json``, ``tests_<file>.txt``, ``attention.csv``, ``decode.csv``, ``train_<variant>.txt``.

Sections (each in its own try/except; a failure is written into the report and the rest still runs):

* ``tests``: ``pytest tests/kernels`` on CUDA (the same tests as on CPU, plus their bf16 cases).
* ``attention``: fused attention forward and forward+backward TFLOP/s vs every SDPA backend at the
  paper's training shapes (B·T = 4×2048, H = 24, causal). FLOPs: forward ``2·B·H·T²·(Dqk+Dv)/2``,
  backward 2.5× forward (FlashAttention-2's convention).
* ``decode``: one decode step at batch 1 of the paper's Figure-5 per-device shards (GQA TP 8, MLA DP,
  GLA-2 TP 2, MLRA-4 TP 4; gtalib.kernels.decode_model) with the Triton split-KV decode kernels
  (``gqa_decode``, ``latent_decode``) at 128K … 2M tokens, with achieved GB/s = cache bytes / time
  against the 4.8 TB/s peak, the roofline model at H200 and H100 peaks and the paper's H100 value.
  Committed under ``benchmarks/results/<folder>/``, ``decode.csv`` fills the GPU curves and ratio
  column of the decode chapter (``notebooks/decode_speed.ipynb``).
* ``train``: 50 bf16 steps of two variants through ``gtalib train --preset gpu`` (skipped with a
  message when that command is not available).
* ``tp`` (only when named in ``--sections``): tensor-parallel decode of every variant on the GPU
  (``gtalib.decode.tp``; TP 1 over NCCL, TP 2/4 as gloo ranks sharing the GPU) against the
  single-process model, to ``tp.csv``.

Nothing here writes a number that was not measured: a failed point is recorded as an error.
Without the editable install, ``gtalib.kernels`` is mapped onto the top-level ``kernels/`` folder.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("tests", "attention", "decode", "train")
#: Run only when named in --sections (not part of the 8-minute default).
OPTIONAL_SECTIONS = ("tp",)
#: (B, T, H, Hkv, Dqk, Dv): the latent family after up-projection, MHA-like dims, MFA's one 256 head.
ATTENTION_SHAPES = ((4, 2048, 24, 24, 192, 128), (4, 2048, 24, 24, 128, 128), (4, 2048, 24, 1, 256, 256))
DECODE_VARIANTS = ("gqa", "mla", "gla-2", "mlra-4")
CONTEXTS_K = (128, 256, 512, 1024, 2048)
TRAIN_VARIANTS = ("gqa", "mlra-4")


def ensure_gtalib_kernels() -> None:
    """Make ``import gtalib.kernels`` work from a bare checkout (pyproject maps kernels/ there)."""
    sys.path.insert(0, str(ROOT))
    try:
        import gtalib.kernels  # noqa: F401
        return
    except ImportError:
        pass
    import gtalib

    spec = importlib.util.spec_from_file_location(
        "gtalib.kernels", ROOT / "kernels" / "__init__.py", submodule_search_locations=[str(ROOT / "kernels")])
    module = importlib.util.module_from_spec(spec)
    sys.modules["gtalib.kernels"] = module
    gtalib.kernels = module
    spec.loader.exec_module(module)


def parse_args(argv=None) -> argparse.Namespace:
    """Arguments: ``outdir``, ``--sections`` (comma list of SECTIONS), ``--quick``, ``--train-steps``."""
    p = argparse.ArgumentParser(prog="gpu_check", description=__doc__.split("\n\n")[0])
    p.add_argument("outdir", type=Path, help="folder for report.md and the CSV files (created)")
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help=f"comma-separated subset of {', '.join(SECTIONS + OPTIONAL_SECTIONS)} "
                        f"(default: {', '.join(SECTIONS)})")
    p.add_argument("--quick", action="store_true", help="one attention shape, contexts 128K and 1M only")
    p.add_argument("--train-steps", type=int, default=50, help="training steps per variant (default 50)")
    args = p.parse_args(argv)
    chosen = [s.strip() for s in args.sections.split(",") if s.strip()]
    bad = [s for s in chosen if s not in SECTIONS + OPTIONAL_SECTIONS]
    if bad or not chosen:
        p.error(f"--sections: unknown {bad or chosen}; allowed: {', '.join(SECTIONS + OPTIONAL_SECTIONS)}")
    args.sections = chosen
    return args


def environment_info() -> dict:
    """Date (UTC), host, GPU, library versions and git commit, for the report's provenance."""
    info = {"date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "python": platform.python_version()}
    try:
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = torch.version.cuda
        info["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            info["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
            info["sm_count"] = props.multi_processor_count
    except Exception as exc:  # the report must still be written
        info["torch"] = f"unavailable: {exc}"
    try:
        import triton

        info["triton"] = triton.__version__
    except Exception as exc:
        info["triton"] = f"unavailable: {exc}"
    try:
        info["git_commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                                            text=True, timeout=10).stdout.strip() or "unknown"
    except Exception:
        info["git_commit"] = "unknown"
    return info


def _fmt(value) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.4e}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: list[dict], columns: list[str] | None = None) -> str:
    """Rows of dicts as a GitHub markdown table; missing cells are empty, floats to 4 digits."""
    if not rows:
        return "(no rows)\n"
    if columns is None:
        columns = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def write_csv(path: Path, rows: list[dict]) -> None:
    """Rows of dicts to CSV, union of keys as columns."""
    columns = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)


class Report:
    """Markdown report rewritten in full after every section (a kill keeps what finished)."""

    def __init__(self, outdir: Path, info: dict):
        self.path = outdir / "report.md"
        self.parts = ["# gtalib GPU check\n",
                      "Measured by `benchmarks/gpu_check.py`; every number below was measured on the "
                      "hardware named here unless labelled *model* or *paper*.\n",
                      markdown_table([info])]

    def add(self, title: str, body: str) -> None:
        self.parts.append(f"\n## {title}\n\n{body}")
        self.write()

    def write(self) -> None:
        self.path.write_text("\n".join(self.parts))


def section_tests(outdir: Path, timeout: float) -> str:
    """Run the kernel tests on CUDA, one child process per test file, concurrently: most of their
    time is Triton compiling each kernel specialisation on the CPU, which the 16 cores share out.
    Output of each file goes to tests_<file>.txt."""
    files = sorted((ROOT / "tests" / "kernels").glob("test_*.py"))
    t0 = time.time()
    procs = {f: subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--pytest", str(f), "-q", "-rs",
                                  "-p", "no:cacheprovider"], cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True) for f in files}
    rows = []
    for f, proc in procs.items():
        try:
            text, _ = proc.communicate(timeout=max(1.0, timeout - (time.time() - t0)))
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            proc.kill()
            text, rc = (proc.communicate()[0] or "") + f"\nTIMEOUT after {timeout:.0f} s", "timeout"
        (outdir / f"tests_{f.stem}.txt").write_text(text)
        last = [ln for ln in text.strip().splitlines() if ln.strip()][-1:] or [""]
        rows.append(dict(file=f.name, exit=rc, summary=last[0][:200]))
    return (f"`pytest tests/kernels` (bf16 cases run on CUDA only), {time.time() - t0:.0f} s; "
            "full output in tests_<file>.txt\n\n" + markdown_table(rows))


def section_attention(outdir: Path, quick: bool) -> str:
    """Fused attention vs SDPA; rows to attention.csv, a summary table to the report."""
    import torch

    from gtalib.kernels.bench import bench_attention

    rows = []
    for shape in ATTENTION_SHAPES[:1] if quick else ATTENTION_SHAPES:
        rows += bench_attention(*shape, dtype=torch.bfloat16)
    write_csv(outdir / "attention.csv", rows)
    summary = []
    for shape in {(r["dqk"], r["dv"], r["n_kv_head"]) for r in rows}:
        for ps in ("fwd", "fwd+bwd"):
            sel = [r for r in rows if (r["dqk"], r["dv"], r["n_kv_head"]) == shape and r["pass"] == ps]
            ours = [r for r in sel if r["impl"] == "gtalib-triton"]
            sdpa = [r for r in sel if r["impl"].startswith("sdpa")]
            if not ours:
                continue
            best = max(sdpa, key=lambda r: r["tflops"]) if sdpa else None
            summary.append(dict(dqk=shape[0], dv=shape[1], n_kv_head=shape[2], **{"pass": ps},
                                gtalib_tflops=ours[0]["tflops"],
                                best_sdpa=best["impl"] if best else "none worked",
                                sdpa_tflops=best["tflops"] if best else float("nan"),
                                speedup=ours[0]["tflops"] / best["tflops"] if best else float("nan"),
                                rmse_ratio=ours[0]["rmse_ratio"]))
    errors = [r for r in rows if "error" in r]
    note = ("B = 4, T = 2048, H = 24, causal, bf16. TFLOP/s with forward FLOPs 2·B·H·T²·(Dqk+Dv)/2 and "
            "backward 2.5× that. Target: speedup ≥ 1.0 at Dqk 192 / Dv 128.\n\n")
    return note + markdown_table(summary) + ("\nRefused or failed:\n\n" + markdown_table(
        errors, ["impl", "dqk", "dv", "n_kv_head", "error"]) if errors else "") + "\nAll rows: attention.csv\n"


def section_decode(outdir: Path, quick: bool) -> str:
    """Decode latency per paper shard and context; rows to decode.csv."""
    import torch

    from gtalib.kernels.bench import bench_decode
    from gtalib.kernels.decode_model import PAPER_CONTEXTS_K, PAPER_LATENCY_US, roofline_us, shard

    rows = []
    for ck in (128, 1024) if quick else CONTEXTS_K:
        for v in DECODE_VARIANTS:
            base = dict(variant=v, shard=shard(v).name, context_k=ck)
            try:
                r = bench_decode(v, ck * 1024)
                r["model_h200_us"] = roofline_us(shard(v), ck * 1024, "H200", "H200")
                r["model_h100_us"] = roofline_us(shard(v), ck * 1024, "H100", "H100")
                if ck in PAPER_CONTEXTS_K:
                    r["paper_h100_us"] = PAPER_LATENCY_US[v][PAPER_CONTEXTS_K.index(ck)]
                rows.append(r)
            except Exception as exc:  # e.g. out of memory at 2M: record, keep going
                rows.append(dict(base, error=f"{type(exc).__name__}: {str(exc)[:200]}"))
            torch.cuda.empty_cache()
    write_csv(outdir / "decode.csv", rows)
    ok = {(r["variant"], r["context_k"]): r for r in rows if "latency_us" in r}
    ratios = []
    for ck in sorted({r["context_k"] for r in rows}):
        m, g, r4 = ok.get(("mla", ck)), ok.get(("gqa", ck)), ok.get(("mlra-4", ck))
        if r4:
            ratios.append(dict(context_k=ck,
                               mla_over_mlra4=m["latency_us"] / r4["latency_us"] if m else float("nan"),
                               gqa_over_mlra4=g["latency_us"] / r4["latency_us"] if g else float("nan")))
    cols = ["shard", "context_k", "latency_us", "gbps", "peak_fraction", "model_h200_us", "model_h100_us",
            "paper_h100_us",
            "rmse_ratio", "error"]
    return ("Batch 1, bf16 caches, one layer, split-KV decode. gbps = cache bytes read / measured time; "
            "peak_fraction against 4.8 TB/s; model_h200_us / model_h100_us = roofline max(FLOPs / peak, bytes / "
            "bandwidth) at each GPU's datasheet peaks (*model*); paper_h100_us "
            "= the paper's H100 figure (*paper*). Targets: peak_fraction ≥ 0.8 at long context; "
            "MLA/MLRA-4 near the paper's 2.8.\n\n" + markdown_table(rows, cols) + "\nLatency ratios "
            "(measured):\n\n" + markdown_table(ratios))


def section_tp(outdir: Path) -> str:
    """Tensor-parallel decode on the GPU (gtalib.decode.tp): every variant, gate off and on, ci shapes,
    prefill 12 + 8 decode steps, the Triton kernels on; TP 1 over NCCL, TP 2 and 4 as gloo ranks
    sharing the one GPU. Rows (max |logits − single-process CUDA model|, cache elements per token
    and layer against gtalib.model.kvcache, all-reduced bytes per token) to tp.csv."""
    import tempfile

    import torch

    from gtalib.model.config import VARIANTS
    from gtalib.model.kvcache import kv_elems_per_device
    from gtalib.model.gpt import GPT
    from gtalib.model.presets import model_config
    from gtalib.decode.tp import allreduce_bytes_per_token, reference_decode, spawn_decode

    models = {}
    for v in VARIANTS:
        for gate in (False, True):
            torch.manual_seed(0)
            models[f"{v}{'+gate' if gate else ''}"] = GPT(model_config("ci", v, init="normal", gate=gate)).eval()
    tokens = torch.randint(0, 256, (2, 20), generator=torch.Generator().manual_seed(1))
    refs = {n: reference_decode(m.cuda(), tokens.cuda(), 12).cpu() for n, m in models.items()}
    for m in models.values():
        m.cpu()
    rows = []
    for tp, backend in ((1, "nccl"), (2, "gloo"), (4, "gloo")):
        with tempfile.TemporaryDirectory() as tmp:
            ranks = spawn_decode(models, tokens, 12, tp, backend=backend, workdir=tmp, device="cuda")
        for n, m in models.items():
            rows.append(dict(
                tp=tp, backend=backend, model=n,
                max_abs_diff=max((r[n]["logits"] - refs[n]).abs().max().item() for r in ranks),
                cache_equals_kvcache=all(r[n]["kv_elems_per_token"] == [kv_elems_per_device(m.cfg, tp)] * m.cfg.n_layer
                                         for r in ranks),
                allreduce_bytes_per_token=ranks[0][n]["reduced_bytes"] / tokens.numel(),
                formula=allreduce_bytes_per_token(m.cfg, tp)))
    write_csv(outdir / "tp.csv", rows)
    summary = [dict(tp=tp, backend=b, models=len(g), worst_max_abs_diff=max(r["max_abs_diff"] for r in g),
                    caches_equal_kvcache=all(r["cache_equals_kvcache"] for r in g))
               for tp, b in ((1, "nccl"), (2, "gloo"), (4, "gloo"))
               for g in [[r for r in rows if r["tp"] == tp]]]
    return ("fp32, attn_impl auto (Triton on CUDA); target: worst_max_abs_diff ≤ 1e-5 as on the CPU.\n\n"
            + markdown_table(summary) + "\nAll rows: tp.csv\n")


def _train_command(help_text: str, variant: str, steps: int, run_dir: Path) -> list[str]:
    """The ``gtalib train`` call, adapted to the options its --help lists."""
    cmd = [sys.executable, "-m", "gtalib", "train"]
    cmd += ["--variant", variant] if "--variant" in help_text else [variant]
    cmd += ["--preset", "gpu", "--max-steps", str(steps)]
    if "--run-dir" in help_text:
        cmd += ["--run-dir", str(run_dir)]
    return cmd


def section_train(outdir: Path, steps: int, timeout_each: float) -> str:
    """Short bf16 training runs through the CLI (Lightning); skipped when the CLI lacks ``train``."""
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    probe = subprocess.run([sys.executable, "-m", "gtalib", "train", "--help"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0 or "--max-steps" not in probe.stdout or "--preset" not in probe.stdout:
        return ("SKIPPED: `gtalib train --preset gpu --max-steps N` is not available in this checkout "
                f"(exit {probe.returncode}):\n\n```\n{(probe.stdout + probe.stderr)[-1500:]}\n```\n")
    rows = []
    for v in TRAIN_VARIANTS:
        cmd = _train_command(probe.stdout, v, steps, outdir / "runs")
        t0 = time.time()
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_each)
            text, rc = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as exc:
            text, rc = f"{exc.stdout or ''}{exc.stderr or ''}\nTIMEOUT after {timeout_each:.0f} s", "timeout"
        (outdir / f"train_{v}.txt").write_text(str(text))
        rows.append(dict(variant=v, exit=rc, seconds=round(time.time() - t0, 1), command=" ".join(cmd[2:]),
                         last_line=(str(text).strip().splitlines() or [""])[-1][:160]))
    return markdown_table(rows) + "\nLogs: train_<variant>.txt\n"


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--pytest"]:  # child mode used by section_tests: pytest with gtalib.kernels mapped
        ensure_gtalib_kernels()
        import pytest

        return int(pytest.main(argv[1:]))
    args = parse_args(argv)
    args.outdir.mkdir(parents=True, exist_ok=True)
    info = environment_info()
    (args.outdir / "env.json").write_text(json.dumps(info, indent=2))
    report = Report(args.outdir, info)
    report.write()
    runners = {
        "tests": lambda: section_tests(args.outdir, timeout=170),
        "attention": lambda: section_attention(args.outdir, args.quick),
        "decode": lambda: section_decode(args.outdir, args.quick),
        "train": lambda: section_train(args.outdir, args.train_steps, timeout_each=70),
        "tp": lambda: section_tp(args.outdir),
    }
    failed = 0
    for name in args.sections:
        t0 = time.time()
        print(f"[gpu_check] {name} ...", flush=True)
        try:
            if name in ("attention", "decode", "tp"):
                ensure_gtalib_kernels()
                import torch

                if not torch.cuda.is_available():
                    raise RuntimeError("CUDA is not available: nothing to measure")
            body = runners[name]()
        except Exception:
            failed += 1
            body = f"FAILED:\n\n```\n{traceback.format_exc()[-3000:]}\n```\n"
        report.add(f"{name} ({time.time() - t0:.0f} s)", body)
        print(f"[gpu_check] {name} done in {time.time() - t0:.0f} s", flush=True)
    print(f"[gpu_check] report: {report.path}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
