"""Faults injected, for the tests, where the run store's files are written: the ``os.write`` calls on a file
whose path contains a given text (every file of the store, checkpoints included, is written by
``gtalib.training.disk.write_file`` through ``os.write``; the file's path is read back from
``/proc/self/fd``). No root and no small file system needed.

``WriteFaults(match, at, kill=False)``: from the ``at``-th write to a matching file on, every
such write raises ``OSError(ENOSPC)`` as a full disk does (it stays full until :meth:`clear`);
with ``kill``, the ``at``-th write puts half its bytes on the disk and the process is killed
with SIGKILL. :meth:`install` puts it in place of ``os.write`` (a test uses
``monkeypatch.setattr(os, "write", faults.write)`` instead, undone after the test).
"""

import errno
import os
import signal


class WriteFaults:
    def __init__(self, match: str, at: int, kill: bool = False):
        self.match, self.at, self.kill = match, at, kill
        self.real = os.write
        self.count = 0  # writes to matching files so far
        self.active = True

    def write(self, fd, data):
        try:
            name = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            name = ""
        if self.active and self.match in name:
            self.count += 1
            if self.count >= self.at:
                if self.kill:
                    self.real(fd, memoryview(data)[:len(data) // 2])
                    os.kill(os.getpid(), signal.SIGKILL)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)
        return self.real(fd, data)

    def clear(self) -> None:
        """Space again: writes go through."""
        self.active = False

    def install(self) -> "WriteFaults":
        os.write = self.write
        return self
