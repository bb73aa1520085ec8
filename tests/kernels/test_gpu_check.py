"""The CPU-runnable parts of benchmarks/gpu_check.py: arguments, formulas, report writing, degradation."""

import importlib.util
from pathlib import Path

import pytest

from gtalib.kernels.bench import attention_flops

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_check)


def test_parse_args(tmp_path):
    a = gpu_check.parse_args([str(tmp_path), "--sections", "decode,tests", "--quick"])
    assert a.outdir == tmp_path and a.sections == ["decode", "tests"] and a.quick
    assert gpu_check.parse_args([str(tmp_path)]).sections == list(gpu_check.SECTIONS)
    with pytest.raises(SystemExit):
        gpu_check.parse_args([str(tmp_path), "--sections", "bogus"])
    # the tensor-parallel section runs only when named
    assert "tp" not in gpu_check.SECTIONS
    assert gpu_check.parse_args([str(tmp_path), "--sections", "tp"]).sections == ["tp"]


def test_attention_flops_formula():
    # causal forward: 2·B·H·T²·(Dqk+Dv)/2; B=2, H=3, T=4, Dqk=5, Dv=7 → 2·2·3·16·12/2 = 1152
    f = attention_flops(2, 4, 3, 5, 7)
    assert f["fwd"] == 1152 and f["bwd"] == 2880 and f["fwd+bwd"] == 4032
    assert attention_flops(2, 4, 3, 5, 7, causal=False)["fwd"] == 2304


def test_markdown_table():
    md = gpu_check.markdown_table([{"a": 1, "b": 0.123456}, {"a": "x|y"}])
    assert md == "| a | b |\n|---|---|\n| 1 | 0.1235 |\n| x\\|y |  |\n"
    assert gpu_check.markdown_table([]) == "(no rows)\n"


def test_train_command_follows_the_cli_help(tmp_path):
    cmd = gpu_check._train_command("usage: --variant V --preset P --max-steps N --run-dir D", "mla", 50, tmp_path)
    assert cmd[2:] == ["gtalib", "train", "--variant", "mla", "--preset", "gpu", "--max-steps", "50",
                       "--run-dir", str(tmp_path)]
    assert gpu_check._train_command("usage: VARIANT --preset --max-steps", "gqa", 5, tmp_path)[-5:] == \
        ["gqa", "--preset", "gpu", "--max-steps", "5"]


def test_failed_section_is_reported_and_the_rest_continues(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rc = gpu_check.main([str(tmp_path), "--sections", "attention,decode"])
    report = (tmp_path / "report.md").read_text()
    assert rc == 1
    assert report.count("FAILED") == 2 and "CUDA is not available" in report
    assert "## attention" in report and "## decode" in report and "date_utc" in report
    assert (tmp_path / "env.json").exists()


def test_recorded_results_picks_the_newest_folder(tmp_path):
    from gtalib.kernels.bench import recorded_results

    assert recorded_results("decode", tmp_path) is None
    for folder, date, lat in (("a", "2026-01-02T00:00:00+00:00", 50.0), ("b", "2025-12-31T00:00:00+00:00", 99.0)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "decode.csv").write_text(f"variant,context_k,latency_us\nmla,128,{lat}\n")
        (tmp_path / folder / "env.json").write_text(f'{{"date_utc": "{date}", "gpu": "NVIDIA H200"}}')
    df, env = recorded_results("decode", tmp_path)
    assert df.latency_us.tolist() == [50.0] and env["gpu"] == "NVIDIA H200" and env["folder"].endswith("a")
    with pytest.raises(ValueError, match="allowed"):
        recorded_results("train", tmp_path)


def test_bench_functions_run_end_to_end_with_a_stub_timer(monkeypatch, device):
    """The GPU benchmark code paths (inputs, correctness column, byte and FLOP arithmetic) on the
    test device, with the timer replaced by a fixed 1 ms so that the derived columns are exact."""
    import torch

    from gtalib.kernels import bench

    calls = []
    monkeypatch.setattr(bench, "_do_bench", lambda fn, grad_to_none=None: (calls.append(fn()), 1.0)[1])
    r = bench.bench_decode("mlra-4", 40, dtype=torch.float32, device=device, num_splits=2)
    assert r["kv_bytes"] == 40 * 192 * 4 and r["latency_us"] == 1000.0
    assert r["gbps"] == pytest.approx(40 * 192 * 4 / 1e-3 / 1e9) and r["rmse_ratio"] < 1e-5
    rows = bench.bench_attention(1, 16, 2, 1, 16, 16, dtype=torch.float32, device=device)
    ours = [x for x in rows if x["impl"] == "gtalib-triton"]
    assert [x["pass"] for x in ours] == ["fwd", "fwd+bwd"] and ours[0]["rmse_ratio"] < 1e-5
    assert ours[0]["tflops"] == pytest.approx(attention_flops(1, 16, 2, 16, 16)["fwd"] / 1e-3 / 1e12)
    assert {x["impl"] for x in rows} == {"gtalib-triton", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn"}
