"""Processes the demo leaves running (`--keep`) are found again, and stopped, through their pid files."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

__all__ = ["PidFile", "process_alive"]


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, but someone else's
    # A daemon's parent is init, which in a container may never reap it: a zombie has exited.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _cmdline(pid: int) -> str | None:
    """The process's command line where /proc exists (Linux), else None (unknown)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


class PidFile:
    """A pid file whose process is ours only while its command line still contains `marker` (a path)."""

    def __init__(self, path: Path, marker: str) -> None:
        self.path = path
        self.marker = marker

    def running_pid(self) -> int | None:
        try:
            pid = int(self.path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        if not process_alive(pid):
            return None
        cmdline = _cmdline(pid)
        # A stale pid file whose pid now belongs to another program must not be mistaken for (or killed as) ours.
        if cmdline is not None and self.marker not in cmdline:
            return None
        return pid

    def write(self, pid: int) -> None:
        self.path.write_text(f"{pid}\n")

    def terminate(self, timeout: float = 10.0) -> bool:
        """SIGTERM the process (SIGKILL after `timeout`) and drop the file; True if it was running."""
        pid = self.running_pid()
        self.path.unlink(missing_ok=True)
        if pid is None:
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)
        return True
