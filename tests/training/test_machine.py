"""The machine kind (gtalib.training.machine): what it reads and when two kinds are the same."""

from __future__ import annotations

import pytest

from gtalib.training import machine

XEON = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu avx512f

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: not the first processor
"""

ARM = """processor\t: 0
BogoMIPS\t: 243.75
CPU implementer\t: 0x41
CPU part\t: 0xd0c
"""


def test_cpu_info_reads_the_first_processor(tmp_path):
    (tmp_path / "xeon").write_text(XEON)
    assert machine.cpu_info(tmp_path / "xeon") == {
        "vendor_id": "GenuineIntel", "model_name": "Intel(R) Xeon(R) Platinum 8480+",
        "family": "6", "model": "143"}
    (tmp_path / "arm").write_text(ARM)  # no vendor or model lines: None, the name from platform
    arm = machine.cpu_info(tmp_path / "arm")
    assert arm["vendor_id"] is arm["family"] is arm["model"] is None and arm["model_name"]
    assert machine.cpu_info(tmp_path / "absent")["model_name"] == arm["model_name"]


def test_blas_is_the_mkl_version_else_blas_info(monkeypatch):
    import torch

    mkl = ("  - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605 for "
           "Intel(R) 64 architecture applications\n  - Build settings: BLAS_INFO=mkl, ")
    monkeypatch.setattr(torch.__config__, "show", lambda: mkl)
    assert machine.blas() == "oneMKL 2024.2"
    monkeypatch.setattr(torch.__config__, "show", lambda: "  - Build settings: BLAS_INFO=open, X=1")
    assert machine.blas() == "open"
    monkeypatch.setattr(torch.__config__, "show", lambda: "PyTorch built with:\n")
    assert machine.blas() == "unknown"


def test_machine_kind_holds_what_decides_bit_identity(monkeypatch):
    import lightning
    import torch

    for name in machine.KERNEL_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    kind = machine.machine_kind(3)
    assert kind["threads"] == 3 and kind["gpu"] is None
    assert kind["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert kind["torch"] == torch.__version__ and kind["lightning"] == lightning.__version__
    assert kind["cpu_model_name"] == machine.cpu_info()["model_name"]
    assert kind["env"] == dict.fromkeys(machine.KERNEL_ENV_VARS)
    assert machine.same_kind(kind, machine.machine_kind(3))
    assert not machine.same_kind(kind, machine.machine_kind(2))  # another reduction order
    assert machine.kind_differences(kind, machine.machine_kind(2)) == ["threads: 3 -> 2"]
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")
    other = machine.machine_kind(3, gpu="NVIDIA H200")
    assert machine.kind_differences(kind, other) == ["env.MKL_CBWR: None -> COMPATIBLE",
                                                     "gpu: None -> NVIDIA H200"]
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        machine.machine_kind(0)
    with pytest.raises(ValueError, match="gpu must be a GPU name"):
        machine.machine_kind(1, gpu=0)


def test_an_unknown_kind_is_never_the_same():
    kind = {"threads": 1}
    assert not machine.same_kind(None, None)
    assert not machine.same_kind(kind, None) and not machine.same_kind(None, kind)
    assert not machine.same_kind({}, {"threads": 1})
    assert machine.kind_differences({"a": 1}, {"b": 1}) == ["a: 1 -> <absent>", "b: <absent> -> 1"]
