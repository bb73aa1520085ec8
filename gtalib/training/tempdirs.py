"""A command's own temporary folder.

Everything a ``gtalib`` command and the processes it starts put in the temporary folder (Dask's
``dask-scratch-space``, torch's ``torchinductor_<user>``, the calibration's and the workers'
scratch stores, the notebook kernels' sockets) goes under one folder of the command's own,
``<system temporary folder>/gtalib-<random>``, removed when the command ends, however it ends
(an error, Ctrl-C, SIGTERM: :mod:`gtalib.cli.signals`). Child processes find it as their
``TMPDIR`` (Python's :func:`tempfile.gettempdir`, Dask, torch and Jupyter all read it), and the
system's folder as :data:`SYSTEM_TMPDIR`, so that a command started inside another makes its
own beside it, not inside it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

#: Environment variable holding the system's temporary folder while a command's own is ``TMPDIR``.
SYSTEM_TMPDIR = "GTALIB_SYSTEM_TMPDIR"


def system_tmp() -> Path:
    """The system's temporary folder, not a command's own (:func:`own_tmp`)."""
    return Path(os.environ.get(SYSTEM_TMPDIR) or tempfile.gettempdir())


@contextlib.contextmanager
def own_tmp(prefix: str = "gtalib-"):
    """A new folder under :func:`system_tmp`, made the temporary folder of this process
    (``tempfile.tempdir``) and of every process it starts (``TMPDIR``) while the context lasts;
    removed with what it holds on the way out, and the previous settings restored. Yields its
    path."""
    base = system_tmp()
    folder = tempfile.mkdtemp(prefix=prefix, dir=base)
    saved = {k: os.environ.get(k) for k in ("TMPDIR", SYSTEM_TMPDIR)}
    saved_tempdir = tempfile.tempdir
    os.environ.update({"TMPDIR": folder, SYSTEM_TMPDIR: str(base)})
    tempfile.tempdir = folder
    try:
        yield Path(folder)
    finally:
        tempfile.tempdir = saved_tempdir
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(folder, ignore_errors=True)
