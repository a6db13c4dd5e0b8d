"""A Kubernetes Lease per stack (coordination.k8s.io/v1): held by one reconciler while it runs that stack's `up`.

Why a Lease and not only the backend's stack lock: the lock refuses at once (`the stack is currently locked`), so a
second replica's `up` would fail and have to be retried by hand; a Lease queues it instead (the replica that cannot
get it waits, a standby), it expires by itself when its holder dies (no stale lock to clear), and it tells the next
holder when the last `up` started and how it ended, so a replica that waited does not run a second `up` for
changes the first one already saw. The stack lock stays as the backstop (an `up` run by hand, a lease lost).

Why not the kubernetes client's `leaderelection`: its `LeaderElection.run()` leads for the life of the process
(it never releases the lease, its `acquire()` cannot be stopped, and its `Config` calls `sys.exit` on a bad
value), while a stack's lease is held for one `up` and released after, so the other replica can take the next.
What it does is small: a read, then a create or a `replace` guarded by the read's resourceVersion (a 409 means
another replica moved first), with expiry judged as client-go judges it: by how long this replica has seen the
same record unchanged on its own monotonic clock, never by comparing two machines' clocks.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

import urllib3
from kubernetes.client import ApiClient, CoordinationV1Api, V1Lease, V1LeaseSpec, V1ObjectMeta
from kubernetes.client.exceptions import ApiException

from ssh_gateway.core.names import (
    DEAD_HOLDERS_ANNOTATION,
    LAST_UP_ANNOTATION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    STACK_LABEL,
)
from ssh_gateway.kube import LEASE_REQUEST_TIMEOUT

__all__ = ["LastUp", "LeaseLost", "StackLease"]

LEASE_SECONDS: Final = 30
"""How long a lease lasts unrenewed: a dead holder's stack waits at most this long for the standby."""
RETRY_SECONDS: Final = 2.0
"""How often a waiting replica asks again (at most; a shorter lease asks more often)."""

_NOT_FOUND: Final = 404
_CONFLICT: Final = 409


class LeaseLost(RuntimeError):
    """The lease could not be kept (another replica took it after it expired, or the API server is gone)."""


@dataclass(frozen=True, kw_only=True)
class LastUp:
    """The last `up` a holder of this lease ran, as it recorded it on release."""

    started: float
    """When it started (seconds since the epoch, the holder's clock)."""
    code: int
    """Its exit code."""
    holder: str


@dataclass
class _Seen:
    """The record this replica last read and when (its monotonic clock): expiry is judged from it."""

    version: str
    holder: str | None
    since: float


class StackLease:
    """The lease `namespace/name`, taken by `identity` with `acquire`, renewed by `hold`, given back by `release`."""

    def __init__(
        self,
        api: ApiClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        stack_label: str,
        seconds: int = LEASE_SECONDS,
    ) -> None:
        self._api = CoordinationV1Api(api)
        self.seconds = seconds
        """How long the lease lasts unrenewed; renewed every third of it (two renewals may fail in a row)."""
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self._stack_label = stack_label
        self._lease: V1Lease | None = None
        self._seen: _Seen | None = None
        self.answered = False
        """Whether a read of the lease has answered once (held, free or absent): its state is known (/readyz)."""
        self.taken_from: str | None = None
        """The holder this replica last took the lease from once it expired (it stopped renewing mid-`up`: dead,
        or cut off), None when the lease was free; set by `acquire`."""

    # --- taking it ---------------------------------------------------------------------------------------------

    def acquire(self, stop: threading.Event, on_wait: Callable[[str], None] | None = None) -> LastUp | None:
        """Waits until this replica holds the lease (or `stop` is set: `LeaseLost`); the last `up` recorded on it."""
        told = False
        while not stop.is_set():
            try:
                if self._try_acquire():
                    return self.last_up()
            except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
                holder = f"the API server: {_problem(exc)}"
            else:
                holder = (self._seen.holder if self._seen else None) or "another replica"
            if on_wait is not None and not told:
                on_wait(holder)
                told = True
            stop.wait(min(RETRY_SECONDS, self.seconds / 3))
        raise LeaseLost(f"stopped while waiting for the lease {self.namespace}/{self.name}")

    def _try_acquire(self) -> bool:
        now = _now()
        try:
            current = self._api.read_namespaced_lease(self.name, self.namespace, _request_timeout=LEASE_REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status != _NOT_FOUND:
                raise
            self.answered = True
            self.taken_from = None
            return self._create(now)
        self.answered = True
        spec = current.spec or V1LeaseSpec()
        version = str(current.metadata.resource_version if current.metadata else "")
        if self._seen is None or self._seen.version != version:
            self._seen = _Seen(version=version, holder=spec.holder_identity, since=time.monotonic())
        held_by_other = spec.holder_identity not in (None, "", self.identity)
        duration = spec.lease_duration_seconds or self.seconds
        if held_by_other and time.monotonic() - self._seen.since < duration:
            return False
        self.taken_from = spec.holder_identity if held_by_other else None
        # Free (released), ours, or expired: its holder stopped renewing (gone, or cut off from the API server).
        if self.taken_from is not None:
            # Named on the lease in the same guarded write: if this replica dies in turn before its `up` heals
            # the stack, the next holder still knows whose lock may be left.
            meta = current.metadata or V1ObjectMeta()
            dead = sorted({*_dead_holders(meta), self.taken_from})
            meta.annotations = {**(meta.annotations or {}), DEAD_HOLDERS_ANNOTATION: json.dumps(dead)}
            current.metadata = meta
        if spec.holder_identity != self.identity:
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
        spec.holder_identity = self.identity
        spec.lease_duration_seconds = self.seconds
        spec.acquire_time = now
        spec.renew_time = now
        current.spec = spec
        return self._replace(current)

    def _create(self, now: datetime) -> bool:
        body = V1Lease(
            metadata=V1ObjectMeta(
                name=self.name,
                namespace=self.namespace,
                labels={MANAGED_BY_LABEL: MANAGED_BY, STACK_LABEL: self._stack_label},
            ),
            spec=V1LeaseSpec(
                holder_identity=self.identity,
                lease_duration_seconds=self.seconds,
                acquire_time=now,
                renew_time=now,
                lease_transitions=0,
            ),
        )
        try:
            self._lease = self._api.create_namespaced_lease(
                self.namespace, body, _request_timeout=LEASE_REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if exc.status == _CONFLICT:  # another replica created it first
                return False
            raise
        return True

    def _replace(self, lease: V1Lease) -> bool:
        """A write guarded by `lease`'s resourceVersion: False when another replica wrote first."""
        try:
            self._lease = self._api.replace_namespaced_lease(
                self.name, self.namespace, lease, _request_timeout=LEASE_REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if exc.status == _CONFLICT:
                return False
            raise
        return True

    # --- holding it ----------------------------------------------------------------------------------------------

    def renew(self) -> None:
        """Moves renewTime to now; `LeaseLost` when another replica holds it or it cannot be written."""
        lease, spec = self._held()
        spec.renew_time = _now()
        try:
            if not self._replace(lease):
                raise LeaseLost(f"the lease {self.namespace}/{self.name} was written by another replica")
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise LeaseLost(f"cannot renew the lease {self.namespace}/{self.name}: {_problem(exc)}") from None

    def hold(self, stop: threading.Event, on_lost: Callable[[str], None]) -> threading.Thread:
        """A thread renewing the lease every third of `seconds` until `stop` is set; `on_lost(why)` once if it
        cannot for longer than the lease lasts (the `up` goes on: killing it would need a recovery; the backend's
        stack lock keeps another replica's `up` out)."""

        def renew_until_stopped() -> None:
            failing_since: float | None = None
            every = self.seconds / 3
            while not stop.wait(every):
                try:
                    self.renew()
                    failing_since = None
                except LeaseLost as exc:
                    failing_since = failing_since or time.monotonic()
                    # Held on while renewals fail for less than a lease: the API server may be back in time.
                    if time.monotonic() - failing_since >= self.seconds - every:
                        on_lost(str(exc))
                        return

        thread = threading.Thread(target=renew_until_stopped, name=f"lease-{self.name}", daemon=True)
        thread.start()
        return thread

    def release(self, last: LastUp | None) -> None:
        """Gives the lease back (holder cleared: the other replica takes it at once), recording the `up` it ran.
        A failure is swallowed: the lease then expires by itself after `seconds`."""
        try:
            lease, spec = self._held()
        except LeaseLost:
            return
        if last is not None:
            meta = lease.metadata or V1ObjectMeta()
            meta.annotations = {**(meta.annotations or {}), LAST_UP_ANNOTATION: _last_up_text(last)}
            if last.code == 0:  # the stack is healed: no dead holder's lock is left
                meta.annotations.pop(DEAD_HOLDERS_ANNOTATION, None)
            lease.metadata = meta
        spec.holder_identity = None
        spec.renew_time = _now()
        try:
            self._replace(lease)
        except (ApiException, urllib3.exceptions.HTTPError, OSError):
            pass
        self._lease = None

    def last_up(self) -> LastUp | None:
        """The last `up` recorded on the lease as this replica holds it, if any (None when unreadable)."""
        meta = self._lease.metadata if self._lease else None
        text = (meta.annotations or {}).get(LAST_UP_ANNOTATION) if meta else None
        try:
            data = json.loads(text) if text else None
            return None if data is None else LastUp(**data)
        except (ValueError, TypeError):
            return None

    @property
    def dead_holders(self) -> tuple[str, ...]:
        """The holders this lease was taken over from since the last `up` that succeeded, as this replica holds it:
        the one `taken_from` names, and any before it whose taker died too before its `up` healed the stack."""
        meta = self._lease.metadata if self._lease else None
        return _dead_holders(meta) if meta else ()

    def _held(self) -> tuple[V1Lease, V1LeaseSpec]:
        spec = self._lease.spec if self._lease else None
        if self._lease is None or spec is None or spec.holder_identity != self.identity:
            raise LeaseLost(f"the lease {self.namespace}/{self.name} is not held by {self.identity}")
        return self._lease, spec


def _last_up_text(last: LastUp) -> str:
    return json.dumps({"started": round(last.started, 3), "code": last.code, "holder": last.holder})


def _dead_holders(meta: V1ObjectMeta) -> tuple[str, ...]:
    try:
        found = json.loads((meta.annotations or {}).get(DEAD_HOLDERS_ANNOTATION) or "[]")
    except ValueError:
        return ()
    return tuple(str(h) for h in found) if isinstance(found, list) else ()


def _now() -> datetime:
    return datetime.now(UTC)


def _problem(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"{exc.status} {exc.reason or ''}".rstrip()
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
