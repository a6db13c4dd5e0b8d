"""One worker per stack: it runs the stack's `up` when its watch says something changed, at most one at a time.

Changes are marked, not queued: a burst of 50 new pods is one mark with 50 reasons, and the marks that arrive while
an `up` runs are the next `up` (which lists the cluster again, so it sees them all). A short debounce lets a burst
land before the `up` starts, bounded so a steady trickle cannot postpone it. Besides changes, a pass runs at a
periodic resync (level-based: a missed event costs at most one period) and when the earliest grace period in the
stack's status ConfigMap runs out (the object stayed gone: its instance is removed by that run).

A pass that changes nothing wakes nothing: a grace expiry wakes the worker only when it ends after the last pass
began (the guard's held removals end before it: they wait for a person or their objects). A failed `up` is tried
again after `RETRY`'s delay (2 s doubling to 5 min), a change or the resync; a refused one (exit 3: nothing
written, the same until a person acts) is logged once and waits for a change, the resync or a grace expiry.

Around each `up`: the stack's Lease (lease.py), so that two replicas never run one stack's `up` at once; a
replica that waited for it skips its `up` when the other's started after its latest change and succeeded (never
when it took the lease over from a holder that stopped renewing: that one died in an `up` it never recorded).
Before the first `up` of a process, and after one that failed, `ssh-gateway recover` runs first: a run killed with
-9 (a replica, a node) leaves a stale lock or pending operations, which recover's own rules settle.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from ssh_gateway.core.log_events import Log, LogEvent
from ssh_gateway.ops.exit_codes import ExitCode

from .lease import LastUp, LeaseLost, StackLease
from .signals import StackSignals

__all__ = [
    "Action",
    "AfterPass",
    "RunStep",
    "StackWorker",
]

DEBOUNCE_SECONDS: Final = 0.25
"""Quiet time after the last change before an `up` starts: a burst lands in one `up`. A platform that makes a burst
in a loop makes its objects milliseconds apart (the benchmark's 50 come within half a second, 8 ms apart), so a
quarter of a second gathers them, and a lone pod does not wait a whole second for company that is not coming."""
MAX_DELAY_SECONDS: Final = 5.0
"""The longest a change waits for quiet before its `up` starts anyway."""
RESYNC_SECONDS: Final = 600.0
"""A pass at least this often with no change at all (level-based: a missed event costs at most one period)."""
CLOCK_MARGIN: Final = 2.0
"""Seconds by which another replica's `up` must have started after a change to cover it: two pods' clocks,
kept by NTP, differ by far less."""


@dataclass(frozen=True)
class RetryPolicy:
    """When a failed `up` is tried again. Not client-go's `OnError` (`kubernetes.utils.on_error`, the watch's):
    it sleeps in place, while a failed pass's retry is one more deadline of the worker's wait, which a change
    cuts short (it may be what heals the failure)."""

    first: float = 2.0
    """Seconds after the first failure."""
    factor: float = 2.0
    cap: float = 300.0
    """At most this long apart, however many failures in a row: not left to the 600 s resync."""

    def delay(self, failures: int) -> float:
        """Seconds before the next try after `failures` failed `up`s in a row (at least one)."""
        return float(min(self.cap, self.first * self.factor ** min(failures - 1, 32)))


RETRY: Final = RetryPolicy()

Action = Literal["recover", "up"]
RunStep = Callable[[Action, str, Sequence[str]], int]
"""Runs `ssh-gateway <action> --stack <stack> [arguments]` and returns its exit code (a test counts the calls)."""
AfterPass = Callable[[bool], float | None]
"""Called after each pass with whether this replica ran its `up` (False: another's covered it): the stack's status
read once, for the gauges and Events; returns the next grace expiry (seconds since the epoch), None for none."""


@dataclass
class _Pending:
    """Changes not yet handed to an `up`."""

    reasons: list[str] = field(default_factory=list)
    last_wall: float | None = None
    """When the latest of them was marked (seconds since the epoch): what another replica's `up` must postdate to
    have seen them all (one that started between two of them saw only the first)."""
    first: float = 0.0
    last: float = 0.0
    """When the first and the latest were marked (monotonic)."""


class StackWorker:
    """Runs one stack's passes: `mark` from the watch, `run` in a thread of its own, or `run_once`."""

    def __init__(
        self,
        stack: str,
        *,
        run_step: RunStep,
        lease: StackLease | None,
        log: Log,
        after_pass: AfterPass = lambda _ran: None,
        host_gone: Callable[[str], bool] = lambda _host: False,
        signals: StackSignals | None = None,
        debounce: float = DEBOUNCE_SECONDS,
        max_delay: float = MAX_DELAY_SECONDS,
        resync: float = RESYNC_SECONDS,
        retry: float = RETRY.first,
        retry_cap: float = RETRY.cap,
    ) -> None:
        self.stack = stack
        self._run_step = run_step
        self._lease = lease
        self._log = log
        self._after_pass = after_pass
        self._next_at: float | None = None
        self._host_gone = host_gone
        self.signals = signals or StackSignals(stack)
        self._debounce = debounce
        self._max_delay = max_delay
        self._resync = resync
        self._retry = RetryPolicy(first=retry, factor=RETRY.factor, cap=retry_cap)
        self._failures = 0
        """Failed `up`s in a row."""
        self._refused = False
        """Whether the last `up` was refused (its `up-refused` logged)."""
        self._cond = threading.Condition()
        self._pending = _Pending()
        self._needs_heal = True  # a killed run of an earlier process may have left a lock or pending operations
        self.codes: list[int] = []
        """The exit code of each `up` this worker ran, in order."""

    def mark(self, reason: str) -> None:
        """Something that matters changed: an `up` follows (after the debounce, or after the running one)."""
        self._log(LogEvent.CHANGE, stack=self.stack, reason=reason)
        self._add(reason)

    def _add(self, reason: str) -> None:
        with self._cond:
            now = time.monotonic()
            if not self._pending.reasons:
                self._pending.first = now
            self._pending.reasons.append(reason)
            self._pending.last, self._pending.last_wall = now, time.time()
            self.signals.waiting(len(self._pending.reasons))
            self._cond.notify_all()

    def run(self, stop: threading.Event) -> None:
        """Passes until `stop` is set: a first one at once, then on changes, resyncs and grace expiries."""
        self._add("start")
        resync_at = time.monotonic() + self._resync
        expiry_at: float | None = None
        retry_at: float | None = None
        while not stop.is_set():
            reasons, since = self._wait(stop, resync_at, expiry_at, retry_at)
            if not reasons:
                continue
            began = time.time()
            code = self.run_once(reasons, since, stop)
            resync_at = time.monotonic() + self._resync
            expiry_at = self._expiry(began)
            retry_at = self._retry_at(code)

    def run_once(self, reasons: list[str], since: float, stop: threading.Event) -> int | None:
        """One pass under the stack's lease, then `after_pass`; the `up`'s exit code, or None when none ran
        (covered, stopped)."""
        lease = self._lease
        if lease is not None:
            try:
                last = lease.acquire(stop, self._waiting)
            except LeaseLost:
                return None
            self.signals.lease(held=True)
            # A lease taken over from a holder that stopped renewing covers nothing: the `up` it recorded is an
            # earlier one, and the one it died in left a stack lock and pending operations for `recover`.
            if last is not None and last.code == 0 and last.started > since + CLOCK_MARGIN and not lease.taken_from:
                lease.release(None)
                self.signals.lease(held=False)
                self._needs_heal = False
                self._log(LogEvent.UP_COVERED, stack=self.stack, reason=_shown(reasons), by=last.holder)
                self.signals.covered()
                self._next_at = self._after_pass(False)
                return None
        code = self._held_pass(reasons, lease)
        self._next_at = self._after_pass(True)
        return code

    def _held_pass(self, reasons: list[str], lease: StackLease | None) -> int:
        """`recover` when needed and the `up`, the lease (if any) renewed meanwhile and released after."""
        gone: list[str] = []
        if lease is not None and lease.dead_holders:
            # Holders stopped renewing mid-`up` (the one taken over from, and any whose taker died in turn before
            # its `up` healed the stack): what they left needs recover, which may remove a stack lock only of a
            # host whose pod is gone (a lock of another host is otherwise refused: it may still run).
            self._needs_heal = True
            gone = [holder for holder in lease.dead_holders if self._host_gone(holder)]
        if lease is not None and lease.taken_from is not None:
            gone_now = lease.taken_from in gone
            self._log(LogEvent.LEASE_TAKEN_OVER, stack=self.stack, holder=lease.taken_from, holder_gone=gone_now)
        renewing = threading.Event()
        if lease is not None:
            lease.hold(renewing, self._lost)
        started = time.time()
        code: int = ExitCode.CANNOT_RUN  # what the lease records if the step raised
        self.signals.pass_began()
        try:
            code = self._heal_and_up(reasons, gone)
        finally:
            self.signals.pass_ended()
            renewing.set()
            if lease is not None:
                lease.release(LastUp(started=started, code=code, holder=lease.identity))
                self.signals.lease(held=False)
        self.codes.append(code)
        return code

    def _waiting(self, holder: str) -> None:
        self._log(LogEvent.LEASE_WAIT, stack=self.stack, holder=holder)

    def _lost(self, why: str) -> None:
        self.signals.lease(held=False)
        self._log(LogEvent.LEASE_LOST, stack=self.stack, error=why)

    def _heal_and_up(self, reasons: list[str], gone_hosts: Sequence[str]) -> int:
        if self._needs_heal:
            began = time.monotonic()
            code = self._step("recover", [a for host in gone_hosts for a in ("--gone-host", host)])
            self._log(LogEvent.RECOVER, stack=self.stack, seconds=round(time.monotonic() - began, 2), code=code)
        self._log(LogEvent.UP_START, stack=self.stack, reason=_shown(reasons))
        began = time.monotonic()
        code = self._step("up", ())
        self._needs_heal = code not in (ExitCode.OK, ExitCode.REFUSED)  # a refused `up` wrote nothing
        seconds = time.monotonic() - began
        self.signals.up_ended(code, seconds)
        self._log(LogEvent.UP, stack=self.stack, reason=_shown(reasons), seconds=round(seconds, 2), code=code)
        return code

    def _step(self, action: Action, arguments: Sequence[str]) -> int:
        try:
            return self._run_step(action, self.stack, arguments)
        except OSError as exc:  # it could not even start (no python, no pulumi): a failure, healed next time
            self._log(LogEvent.STEP_ERROR, stack=self.stack, action=action, error=f"{type(exc).__name__}: {exc}")
            return ExitCode.CANNOT_RUN

    def _retry_at(self, code: int | None) -> float | None:
        """When to try a failed `up` again (monotonic), None after any other pass; logs a retry, and a refusal once."""
        if code is None or code == ExitCode.OK:  # None: another replica's `up` covered it (or stopped)
            self._failures, self._refused = 0, False
            return None
        if code == ExitCode.REFUSED:
            if not self._refused:
                self._log(LogEvent.UP_REFUSED, stack=self.stack, waits_for="a change, the resync or a grace expiry")
            self._failures, self._refused = 0, True
            return None
        self._failures, self._refused = self._failures + 1, False
        delay = self._retry.delay(self._failures)
        self._log(LogEvent.UP_RETRY, stack=self.stack, code=code, failures=self._failures, seconds=delay)
        return time.monotonic() + delay

    def _wait(
        self, stop: threading.Event, resync_at: float, expiry_at: float | None, retry_at: float | None = None
    ) -> tuple[list[str], float]:
        """Blocks until a pass is due; its reasons, and when the latest of them came (seconds since the epoch)."""
        with self._cond:
            while not stop.is_set():
                now = time.monotonic()
                pending = self._pending
                due = [resync_at] + [at for at in (expiry_at, retry_at) if at is not None]
                if pending.reasons:
                    due.append(min(pending.last + self._debounce, pending.first + self._max_delay))
                when = min(due)
                if when <= now:
                    break
                self._cond.wait(min(when - now, 1.0))  # `stop` is an Event of its own: look at it every second
            else:
                return [], 0.0
            if self._pending.reasons:
                reasons, since = self._pending.reasons, self._pending.last_wall or time.time()
            elif now >= resync_at:
                # A resync asks for an `up` within the last period: another replica's, started since, covers it.
                reasons, since = ["resync"], time.time() - self._resync
            elif retry_at is not None and now >= retry_at:
                reasons, since = [f"retry {self._failures}"], time.time()
            else:
                reasons, since = ["grace expiry"], time.time()
            self._pending = _Pending()
            self.signals.waiting(0)
            return reasons, since

    def _expiry(self, began: float) -> float | None:
        """The earliest grace expiry of the stack's gone instances, as the last pass's `after_pass` found it, on
        the monotonic clock; None when none, unknown, or not after the pass `began` (seconds since the epoch): the
        status is written by a run that succeeded, which left no expiry before its own start, so an earlier one means
        the pass failed (its retry is due) or was refused (nothing to act on until a change)."""
        at = self._next_at
        if at is None or at <= began:
            return None
        return time.monotonic() + max(0.0, at - time.time()) + 1.0

    def notify(self) -> None:
        """Wakes the worker (after `stop` was set)."""
        with self._cond:
            self._cond.notify_all()


def _shown(reasons: list[str]) -> str:
    """The reasons of a pass as one short text: the first three, and how many more."""
    unique = list(dict.fromkeys(reasons))
    more = f" (+{len(unique) - 3} more)" if len(unique) > 3 else ""
    return "; ".join(unique[:3]) + more
