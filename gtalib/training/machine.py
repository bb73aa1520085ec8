"""The machine kind: everything that decides whether two fp32 training runs of the same spec give
bit-identical numbers.

A run's arithmetic is fixed by its spec only up to the order and width of its floating-point
operations, and those depend on the machine that runs it:

* oneMKL chooses its GEMM kernels by CPU vendor and instruction set (and by its own version), so
  the same matrix product can round differently on an AMD EPYC and an Intel Xeon;
* ATen dispatches its vectorised kernels (softmax, attention, reductions) by CPU capability
  (``DEFAULT``, ``AVX2``, ``AVX512``), which ``$ATEN_CPU_CAPABILITY`` can lower;
* the thread count changes how reductions are split, hence their summation order;
* torch and Lightning versions change kernels and the training loop; some environment variables
  change kernels or their choice (:data:`KERNEL_ENV_VARS`);
* a GPU run depends on the GPU model instead of (as well as) the CPU.

Two runs on machines of the same kind (:func:`same_kind`) are expected to agree bit for bit;
runs on machines of different kinds agree only to rounding, growing with the steps
(:mod:`gtalib.training.records` turns that into its cross-machine envelope).

What does not change the numbers but the speed lives here too: the allocator setting that a
Dask nanny gives its workers, undone by :func:`untrim_malloc`.

This is gtalib's lowest layer: it imports nothing from gtalib, and torch and Lightning only when
:func:`machine_kind` is called.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
from pathlib import Path

#: Environment variables that change which CPU kernels run (or how they reduce), recorded in the
#: machine kind with their value (``None`` when unset): ATen's dispatch level, oneMKL's
#: conditional-numerical-reproducibility branch, instruction set and dynamic threading, oneDNN's
#: highest instruction set.
KERNEL_ENV_VARS = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS",
                   "ONEDNN_MAX_CPU_ISA", "MKL_DYNAMIC")

#: ``/proc/cpuinfo`` fields of the first processor that :func:`cpu_info` reads, and their keys.
_CPUINFO_FIELDS = {"vendor_id": "vendor_id", "model name": "model_name",
                   "cpu family": "family", "model": "model"}


def cpu_info(cpuinfo="/proc/cpuinfo") -> dict:
    """The CPU of this machine, from the first processor of ``cpuinfo`` (a path; the default is
    Linux's ``/proc/cpuinfo``).

    Returns:
        ``{"vendor_id", "model_name", "family", "model"}`` as strings (e.g. ``"AuthenticAMD"``,
        ``"AMD EPYC"``, ``"26"``, ``"2"``); a field the file lacks (no such file, or a CPU that
        does not report it, e.g. on ARM) is ``None``, except ``model_name``, which falls
        back to :func:`platform.processor` or :func:`platform.machine`.
    """
    found = dict.fromkeys(_CPUINFO_FIELDS.values())
    with contextlib.suppress(OSError):
        for line in Path(cpuinfo).read_text().splitlines():
            if not line.strip():  # end of the first processor's block
                break
            name, _, value = line.partition(":")
            key = _CPUINFO_FIELDS.get(name.strip())
            if key is not None:
                found[key] = value.strip()
    if not found["model_name"]:
        found["model_name"] = platform.processor() or platform.machine()
    return found


def machine_label(cpuinfo="/proc/cpuinfo", cpus: bool = True) -> str:
    """This machine in words, as pages and logs name it: ``"<model name>, family F, model M (N
    logical CPUs)"`` (:func:`cpu_info`; ``?`` for a field the CPU does not report), without the
    count of logical CPUs when ``cpus`` is false."""
    cpu = cpu_info(cpuinfo)
    label = f"{cpu['model_name']}, family {cpu['family'] or '?'}, model {cpu['model'] or '?'}"
    return label + (f" ({os.cpu_count()} logical CPUs)" if cpus else "")


def blas() -> str:
    """The BLAS torch was built with: ``"oneMKL <version>"`` (e.g. ``"oneMKL 2024.2"``, from the
    "Math Kernel Library Version" line of ``torch.__config__.show()``), else the build's
    ``BLAS_INFO`` (e.g. ``"openblas"``), else ``"unknown"``."""
    import torch

    config = torch.__config__.show()
    mkl = re.search(r"Math Kernel Library Version (\d+(?:\.\d+)*)", config)
    if mkl:
        return f"oneMKL {mkl.group(1)}"
    info = re.search(r"BLAS_INFO=([^,\s]+)", config)
    return info.group(1) if info else "unknown"


def machine_kind(threads: int, gpu: str | None = None) -> dict:
    """Everything about this machine that decides fp32 bit-identity of a run (module docstring).

    Args:
        threads: the torch thread count the run uses (``torch.get_num_threads()`` while training).
        gpu: the GPU's name for a GPU run (``torch.cuda.get_device_name``), ``None`` for a CPU run.

    Returns:
        A JSON-serialisable dict: ``cpu_vendor``, ``cpu_model_name``, ``cpu_family``,
        ``cpu_model`` (:func:`cpu_info`), ``arch`` (:func:`platform.machine`), ``cpu_capability``
        (``torch.backends.cpu.get_cpu_capability()``, e.g. ``"AVX512"``), ``torch`` and
        ``lightning`` (versions), ``blas`` (:func:`blas`), ``threads``, ``env`` (each of
        :data:`KERNEL_ENV_VARS` with its value, ``None`` when unset) and ``gpu``.

    Raises:
        ValueError: ``threads`` not a positive integer, or ``gpu`` neither ``None`` nor a string.
    """
    import lightning
    import torch

    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be a positive integer (torch threads), got {threads!r}")
    if gpu is not None and not isinstance(gpu, str):
        raise ValueError(f"gpu must be a GPU name (str) or None for a CPU run, got {gpu!r}")
    cpu = cpu_info()
    return {
        "cpu_vendor": cpu["vendor_id"], "cpu_model_name": cpu["model_name"],
        "cpu_family": cpu["family"], "cpu_model": cpu["model"], "arch": platform.machine(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__, "lightning": lightning.__version__, "blas": blas(),
        "threads": threads, "env": {name: os.environ.get(name) for name in KERNEL_ENV_VARS},
        "gpu": gpu,
    }


def same_kind(a: dict | None, b: dict | None) -> bool:
    """Whether two machine kinds (:func:`machine_kind`) are the same: both known (a dict) and
    equal in every key. An unknown kind (``None``, as in a record made before kinds were kept)
    is never the same as any kind, itself included."""
    return isinstance(a, dict) and isinstance(b, dict) and a == b


def kind_differences(a: dict, b: dict) -> list[str]:
    """The keys in which two known machine kinds differ, as ``"key: A -> B"`` (``env`` entries as
    ``"env.NAME: A -> B"``; a key only one of them has shows ``<absent>`` on the other side), in
    key order; empty when they are the same."""
    def flat(kind: dict) -> dict:
        out = {}
        for key, value in kind.items():
            if isinstance(value, dict):
                out.update({f"{key}.{k}": v for k, v in value.items()})
            else:
                out[key] = value
        return out

    fa, fb = flat(a), flat(b)
    absent = "<absent>"
    return [f"{k}: {fa.get(k, absent)} -> {fb.get(k, absent)}" for k in sorted(set(fa) | set(fb))
            if fa.get(k, absent) != fb.get(k, absent)]


# ---------------------------------------------------------------------------------------------
# The allocator of a training process

#: glibc's trim threshold variable, which a Dask nanny sets to 64 KiB in the workers it spawns
#: (``distributed.nanny.pre-spawn-environ``) to give freed memory back to the OS at once.
MALLOC_TRIM = "MALLOC_TRIM_THRESHOLD_"
#: glibc ``mallopt`` parameters (malloc.h) and the values :func:`_untrim_malloc` sets: requests
#: up to 32 MiB (the largest threshold glibc's dynamic rule reaches on 64-bit) from the heap,
#: whose free top is given back beyond 64 MiB.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD_BYTES, TRIM_THRESHOLD_BYTES = 32 * 2**20, 64 * 2**20


def untrim_malloc() -> bool:
    """Undo, in this process, what ``MALLOC_TRIM_THRESHOLD_`` does to training, if it is set.

    Setting it turns off glibc's dynamic mmap threshold (mallopt(3)), so every allocation above
    128 KiB (a cpu-preset activation is about 1 MiB) is a fresh ``mmap`` whose pages fault in on
    every step: measured on a cpu-preset GLA-2 step, 0.94 s with the variable at Dask's 65536
    against 0.51 s without it and 0.49 s after this call, most of the difference system time
    (docs/cluster.md). A book task on a Dask worker started by ``dask worker`` or dask-jobqueue
    (whose nanny sets the variable) calls it first (:mod:`gtalib.book.pipeline.schedule`); the embedded
    cluster does not set the variable. Returns whether it changed anything (``False`` without the variable, or off glibc).
    """
    import ctypes
    import ctypes.util

    if MALLOC_TRIM not in os.environ:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
                    and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to undo
        return False


def usable_cores() -> int:
    """The cores this process may use (``os.sched_getaffinity``, else ``os.cpu_count``)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, cores or 1)


def available_memory() -> int | None:
    """Bytes of memory available to new processes (``MemAvailable`` of ``/proc/meminfo``, Linux
    3.14+), or ``None`` where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f
                        if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None
