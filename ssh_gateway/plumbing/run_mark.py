"""The processes of one `ssh-gateway up`, found again by a mark in their environment, so none outlives it.

Why: the engine starts each plugin (the language host, every `pulumi.dynamic` provider, the kubernetes provider)
in a process group of its own and ends them when it closes; a `pulumi` that dies first (SIGKILL, a lost runner, a
Ctrl-C on `ssh-gateway up`, whose subprocess.run kills its child 0.25 s later) leaves them running, and they never
notice: a provider waits for RPCs forever (issue 36: a language host and dynamic providers 24 minutes later).
Killing the `up`'s process group or session does not reach them either. What does reach them is the environment:
pulumi passes its own to every plugin, which passes it to what it starts. So `ssh-gateway up` puts `RUN_MARK_ENV`
into pulumi's environment, naming itself (pid and start time), the stack and the work tree; after pulumi ends it
ends every process still marked with its mark (`end_leftovers`), and `ssh-gateway recover` ends those of a stack's
`up` that is gone, unless a marked `pulumi` still runs (`end_orphans`).

Linux only, as the project is: processes are read from /proc, and only the caller's own (another user's
environment cannot be read, nor would their processes carry the mark).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["RUN_MARK_ENV", "RunMark", "end_leftovers", "end_orphans", "marked_processes"]

RUN_MARK_ENV: Final = "SSH_GATEWAY_RUN"
"""The environment variable that carries a run's mark, `<pid>:<start time>:<stack>:<work tree>`."""
GRACE_SECONDS: Final = 5.0
"""How long a leftover has to end after SIGTERM before SIGKILL: the engine gives its plugins as long."""

_PROC: Final = Path("/proc")


def _start_time(pid: int) -> int | None:
    """The process's start time (clock ticks after boot, /proc/<pid>/stat field 22), None when it is gone: with
    the pid, it names one process, never a later one that reuses the pid."""
    try:
        fields = (_PROC / str(pid) / "stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return int(fields[19]) if fields[0] != "Z" else None  # a zombie is dead


@dataclass(frozen=True)
class RunMark:
    """One `ssh-gateway up`: the process that runs it, and its stack and work tree."""

    owner: int
    started: int
    stack: str
    work_dir: str

    @classmethod
    def of_this_process(cls, stack: str, work_dir: Path) -> RunMark:
        started = _start_time(os.getpid())
        return cls(owner=os.getpid(), started=started or 0, stack=stack, work_dir=str(work_dir.resolve()))

    @property
    def value(self) -> str:
        return f"{self.owner}:{self.started}:{self.stack}:{self.work_dir}"

    @classmethod
    def parse(cls, value: str) -> RunMark | None:
        owner, _, rest = value.partition(":")
        started, _, rest = rest.partition(":")
        stack, _, work_dir = rest.partition(":")
        if not (owner.isdigit() and started.isdigit() and stack and work_dir):
            return None
        return cls(owner=int(owner), started=int(started), stack=stack, work_dir=work_dir)

    def owner_alive(self) -> bool:
        return _start_time(self.owner) == self.started


def marked_processes() -> Iterator[tuple[int, RunMark]]:
    """Every process of this user that carries a run's mark, and the mark."""
    prefix = f"{RUN_MARK_ENV}=".encode()
    for entry in _PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone, or another user's
        for item in environ.split(b"\0"):
            if item.startswith(prefix):
                mark = RunMark.parse(item[len(prefix) :].decode(errors="replace"))
                if mark is not None:
                    yield int(entry.name), mark
                break


def _is_pulumi(pid: int) -> bool:
    """Whether the process is the pulumi CLI itself (an update that still runs), not one of its plugins."""
    try:
        return Path(os.readlink(_PROC / str(pid) / "exe")).name == "pulumi"
    except OSError:
        return False


def _end(pids: list[int], wait: Callable[[float], None] = time.sleep) -> int:
    """SIGTERM to each, SIGKILL to those still there after `GRACE_SECONDS`; how many there were."""
    started = {pid: at for pid in pids if (at := _start_time(pid)) is not None}

    def signal_all(signum: int) -> None:
        for pid, at in started.items():
            if _start_time(pid) == at:  # the same process still, never one that reuses its pid
                try:
                    os.kill(pid, signum)
                except ProcessLookupError:
                    pass

    signal_all(signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    while time.monotonic() < deadline and any(_start_time(pid) == at for pid, at in started.items()):
        wait(0.05)
    signal_all(signal.SIGKILL)
    return len(started)


def end_leftovers(mark: RunMark) -> int:
    """Ends the processes still carrying `mark` once its pulumi has ended (none after a clean end); how many."""
    return _end([pid for pid, found in marked_processes() if found == mark])


def end_orphans(stack: str, work_dir: Path) -> int:
    """Ends the processes of the stack's `up`s (in this work tree) whose `ssh-gateway up` is gone and whose pulumi
    is gone too (a pulumi that still runs is an update: left alone); how many."""
    where = str(work_dir.resolve())
    found = [(pid, m) for pid, m in marked_processes() if m.stack == stack and m.work_dir == where]
    running = {m for pid, m in found if _is_pulumi(pid)}
    return _end([pid for pid, m in found if m not in running and not m.owner_alive()])
