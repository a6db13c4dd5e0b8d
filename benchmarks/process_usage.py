"""A process tree's memory and CPU, read from /proc while it runs: what the reconciler and the `up`s it starts use.

`usage(pid)` is one process's own (resident now, its peak, its CPU so far); `tree_rss(root)` adds every process
below `root`; `CpuByRole` samples the tree and sums each process's CPU by what it is (pulumi's engine, the program,
a provider), so a figure can say where its seconds went. `sampled` runs a look in a thread meanwhile.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

__all__ = ["CpuByRole", "Usage", "sampled", "tree_rss", "usage"]

T = TypeVar("T")

ROLES: Final = (
    ("pulumi-language-python-exec", "the program"),
    ("langhost.py", "pulumi's language host"),
    ("pulumi-language-python", "pulumi's language host"),
    ("pulumi-resource-kubernetes", "the kubernetes provider"),
    ("pulumi.dynamic", "the dynamic providers (Pangolin, ports, host keys)"),
    ("ssh_gateway.ops reconcile", "the reconciler"),
    ("ssh_gateway.ops up", "ssh-gateway up"),
    ("ssh_gateway.ops recover", "ssh-gateway recover"),
    ("pulumi ", "the pulumi CLI (the engine)"),
)
"""A process's role, by a text in its command line (the first that matches)."""


@dataclass(frozen=True)
class Usage:
    """A process's own resources (its children's are not in them)."""

    rss: int
    """Resident bytes now."""
    peak: int
    """The most resident bytes it has had (VmHWM)."""
    cpu: float
    """User and system seconds so far."""


def _cpu(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()  # from field 3 (state) on
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def usage(pid: int) -> Usage:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    kib = {key: int(status[key].split()[0]) * 1024 for key in ("VmRSS", "VmHWM")}
    return Usage(rss=kib["VmRSS"], peak=kib["VmHWM"], cpu=_cpu(pid))


def descendants(root: int) -> list[int]:
    """`root` and every process below it, now."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
        children.setdefault(parent, []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def tree_rss(root: int) -> int:
    """Resident bytes of `root` and every process below it."""
    total = 0
    for pid in descendants(root):
        try:
            total += usage(pid).rss
        except (OSError, KeyError):
            continue  # ended meanwhile
    return total


def _role(pid: int) -> str:
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    unknown = " ".join(word.rsplit("/", 1)[-1] for word in cmdline.split()[:3])
    return next((role for needle, role in ROLES if needle in cmdline), unknown)


@dataclass
class CpuByRole:
    """The CPU of a process tree since the first `sample`, by role. A process that ends between two samples loses
    what it used after the last one (at most the sampling interval)."""

    root: int
    _seen: dict[int, tuple[str, float, float]] = field(default_factory=dict)
    """Each process's role, its CPU when first seen (0 for one started since), its CPU when last seen."""
    _sampled: bool = False

    def sample(self) -> None:
        for pid in descendants(self.root):
            try:
                cpu = _cpu(pid)
                role, first, _ = self._seen.get(pid) or (_role(pid), cpu if not self._sampled else 0.0, 0.0)
            except (OSError, IndexError, ValueError):
                continue  # ended meanwhile
            self._seen[pid] = (role, first, cpu)
        self._sampled = True

    def seconds(self) -> dict[str, float]:
        """CPU seconds by role, most first."""
        totals: dict[str, float] = {}
        for role, first, last in self._seen.values():
            totals[role] = totals.get(role, 0.0) + last - first
        return dict(sorted(totals.items(), key=lambda item: -item[1]))


@contextmanager
def sampled(look: Callable[[], T], every: float) -> Iterator[list[T]]:
    """`look()` every `every` seconds meanwhile (once more at the end), each answer appended to the list."""
    found: list[T] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(every):
            found.append(look())

    thread = threading.Thread(target=sample, name="sampler", daemon=True)
    thread.start()
    try:
        yield found
    finally:
        stop.set()
        thread.join()
        found.append(look())
