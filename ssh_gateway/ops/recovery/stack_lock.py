"""A self-managed backend's stack lock: what its file says, and whether the process that took it still runs.

The diy backends (file, Azure Blob, S3; pulumi backend/diy/lock.go) lock a stack by writing
`.pulumi/locks/organization/<project>/<stack>/<uuid>.json` before an update and deleting it after:

    {"pid": 4242, "username": "ci", "hostname": "runner-7", "timestamp": "2026-12-01T07:46:19.733441656Z"}

A process killed with SIGKILL (or a CI runner that vanished) leaves it behind, and every later `up` fails with
`the stack is currently locked by 1 lock(s)`. Only a lock of this host can be checked: its pid either runs or not.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

__all__ = ["Lock", "holder_state", "read_lock"]

HolderState = Literal["alive", "gone", "unknown"]


@dataclass(frozen=True)
class Lock:
    """One lock of a stack, as the pulumi CLI wrote it when it began an update."""

    key: str
    """Where it is in its backend: a file's path, or a blob's name in its container."""
    pid: int
    hostname: str
    taken_at: float | None
    """When it was taken (seconds since the epoch), or None if the timestamp cannot be read."""


def read_lock(key: str, content: bytes) -> Lock:
    """The lock stored at `key` with this content (unreadable fields read as pid 0, no host, no time)."""
    try:
        data = json.loads(content)
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    return Lock(
        key=key,
        pid=int(data.get("pid") or 0),
        hostname=str(data.get("hostname") or ""),
        taken_at=_timestamp(str(data.get("timestamp") or "")),
    )


def holder_state(lock: Lock, hostname: str | None = None) -> HolderState:
    """`"alive"`, `"gone"`, or `"unknown"` (another host's lock: its process cannot be checked from here).

    A pid alone can be reused: a process that started after the lock was taken is not its holder. A zombie
    (killed, not yet reaped by its parent) holds nothing either.
    """
    if lock.hostname != (hostname or os.uname().nodename):
        return "unknown"
    try:
        os.kill(lock.pid, 0)
    except ProcessLookupError:
        return "gone"
    except PermissionError:
        pass  # it exists, under another user
    status = _process_status(lock.pid)
    if status is None:
        return "alive"  # no /proc to ask: a live pid is taken at its word
    state, started = status
    if state == "Z" or (lock.taken_at is not None and started > lock.taken_at + 1.0):
        return "gone"
    return "alive"


def _timestamp(text: str) -> float | None:
    # Go writes RFC 3339 with nanoseconds ("2026-12-01T07:46:19.733441656Z"); Python reads microseconds.
    head, dot, tail = text.removesuffix("Z").partition(".")
    try:
        moment = datetime.fromisoformat(f"{head}.{tail[:6].ljust(6, '0')}+00:00" if dot else f"{head}+00:00")
    except ValueError:
        return None
    return moment.timestamp()


def _process_status(pid: int) -> tuple[str, float] | None:
    """`pid`'s state letter (`Z` for a zombie) and when it started (seconds since the epoch), from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(line for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime "))
    except (OSError, StopIteration):
        return None
    # Fields 3 (state) and 22 (starttime, clock ticks after boot), counted after the parenthesised command,
    # which may hold spaces.
    fields = stat.rpartition(")")[2].split()
    return fields[0], float(boot.split()[1]) + int(fields[19]) / os.sysconf("SC_CLK_TCK")
