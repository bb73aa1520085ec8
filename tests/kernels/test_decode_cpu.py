"""The CPU decode benchmark's step (benchmarks/decode_cpu.py) against a one-shot softmax, and its model."""

import importlib.util
from pathlib import Path

import pytest
import torch

from gtalib.kernels import decode_model as dm

_spec = importlib.util.spec_from_file_location(
    "decode_cpu", Path(__file__).resolve().parents[2] / "benchmarks" / "decode_cpu.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.mark.parametrize("chunk", [1, 64, 100, 1000, 4096])
def test_split_kv_decode_is_softmax_attention(chunk):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(*s, generator=gen) for s in ((8, 96), (1000, 96), (1000, 64)))
    ref = torch.softmax(q @ k.T * 0.3, -1) @ v
    torch.testing.assert_close(bench.split_kv_decode(q, k, v, 0.3, chunk), ref, atol=1e-5, rtol=1e-5)


def test_latent_shard_reads_values_from_the_key_rows():
    """Absorbed latent step: the value is the latent block, a view of the key rows ``[c_j; k_r]``."""
    gen = torch.Generator().manual_seed(0)
    s = dm.shard("mlra-4")
    q, k, v = bench.shard_tensors(s, 300, gen)
    assert q.shape == (64, 192) and k.shape == (300, 192) and v.shape == (300, 128)
    assert v.data_ptr() == k.data_ptr()
    ref = torch.softmax(q @ k.T * 0.1, -1) @ k[:, :128]
    torch.testing.assert_close(bench.split_kv_decode(q, k, v, 0.1, 128), ref, atol=1e-5, rtol=1e-5)


def test_chunks_fit_one_mebibyte_of_keys():
    for s in dm.PAPER_SHARDS.values():
        L = bench.chunk_tokens(s)
        assert L * s.key_width * 4 <= 2**20 < 2 * L * s.key_width * 4


def test_model_is_gemm_roofline_plus_softmax():
    s = dm.shard("gla-2")
    S = 1 << 17
    got = bench.predicted_us(s, S, 50e9, 20e9, 5e8)
    assert got == pytest.approx((S * 36_864 / 50e9 + 32 * S / 5e8) * 1e6)
    assert bench.predicted_us(s, S, 1e15, 1e9, 1e30) == pytest.approx(S * 320 * 4 / 1e9 * 1e6)  # memory-bound


def test_bad_arguments_are_refused(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--contexts-k", "16,x"])
    assert "--contexts-k" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--repeats", "0"])
