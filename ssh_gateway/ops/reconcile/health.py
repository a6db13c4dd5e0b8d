"""The reconciler's health rule (/healthz) and readiness (/readyz), as plain state on a monotonic clock.

Live, unless one of these holds for a stack (docs/reconciler.md#metrics-and-health):
- a namespace's watch has delivered nothing (a listing, an event, a bookmark, a stream the server ended on time)
  for `WATCH_STALE_SECONDS`;
- its worker has been in one pass (`recover` and `up`) for `UP_STUCK_SECONDS`.
Ready once every namespace's watch has listed completely, and every stack's Lease has answered once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from .watch import WATCH_SECONDS

__all__ = ["Health", "StackHealth"]

WATCH_STALE_SECONDS: Final = WATCH_SECONDS + 60.0
"""A healthy watch delivers something at least once per stream (`WATCH_SECONDS`, 240 s: the API server ends it
then, and sends a bookmark about every minute before); a silent stream fails at its client-side read timeout (30 s
more) and lists again within the backoff (at most 21 s more). A minute over the stream's length covers both."""
UP_STUCK_SECONDS: Final = 1200.0
"""Twice the longest wait of a healthy `up`: the kubernetes provider's await of a Service (its default 10 minutes),
which an `up` waits on for its instances at once. A pass that takes longer is wedged (a hung plugin, a lost
socket), and a restart heals it: the next start runs `recover` first."""

Clock = Callable[[], float]


@dataclass
class StackHealth:
    """One stack's signs of life; the watch and the worker report to it."""

    stack: str
    clock: Clock
    lease_known: Callable[[], bool]
    """Whether the stack's Lease has answered once (held by someone, free, or absent)."""
    heard: dict[str, float] = field(default_factory=dict)
    """Each watched namespace and when its watch last delivered (at first: when it was made)."""
    listed: set[str] = field(default_factory=set)
    up_since: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def delivered(self, namespace: str, *, listing: bool = False) -> None:
        """The namespace's watch delivered a listing, an event or a bookmark, or its stream ended on time."""
        with self.lock:
            self.heard[namespace] = self.clock()
            if listing:
                self.listed.add(namespace)

    def pass_began(self) -> None:
        self.up_since = self.clock()

    def pass_ended(self) -> None:
        self.up_since = None

    def problem(self, watch_stale: float, up_stuck: float) -> str | None:
        """Why the stack is not live, in one line; None when it is."""
        now = self.clock()
        with self.lock:
            stale = [(ns, now - at) for ns, at in sorted(self.heard.items()) if now - at > watch_stale]
        if stale:
            ns, quiet = stale[0]
            return (
                f"stack {self.stack}: the watch of namespace {ns} has delivered nothing for {quiet:.0f} s "
                f"(bound {watch_stale:.0f} s)"
            )
        since = self.up_since
        if since is not None and now - since > up_stuck:
            return f"stack {self.stack}: one pass has run for {now - since:.0f} s (bound {up_stuck:.0f} s)"
        return None

    def not_ready(self) -> str | None:
        with self.lock:
            unlisted = sorted(set(self.heard) - self.listed)
        if unlisted:
            return f"stack {self.stack}: namespace {unlisted[0]} not listed yet"
        return None if self.lease_known() else f"stack {self.stack}: its Lease has not answered yet"


class Health:
    """Every stack's `StackHealth`; `problem()` is /healthz, `not_ready()` /readyz."""

    def __init__(
        self,
        clock: Clock = time.monotonic,
        *,
        watch_stale: float = WATCH_STALE_SECONDS,
        up_stuck: float = UP_STUCK_SECONDS,
    ) -> None:
        self._clock = clock
        self._watch_stale = watch_stale
        self._up_stuck = up_stuck
        self._stacks: list[StackHealth] = []

    def stack(self, stack: str, namespaces: Sequence[str], lease_known: Callable[[], bool]) -> StackHealth:
        """A stack's record; its watch's `namespaces` (none with `--once`) are watched from now."""
        made = StackHealth(stack=stack, clock=self._clock, lease_known=lease_known)
        made.heard.update(dict.fromkeys(namespaces, self._clock()))
        self._stacks.append(made)
        return made

    def problem(self) -> str | None:
        found = (s.problem(self._watch_stale, self._up_stuck) for s in self._stacks)
        return next((p for p in found if p is not None), None)

    def not_ready(self) -> str | None:
        found = (s.not_ready() for s in self._stacks)
        return next((p for p in found if p is not None), None)
