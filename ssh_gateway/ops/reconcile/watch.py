"""Watching a stack's selected objects: one thread per selected namespace, which tells the stack's worker when
something that matters changed. It is only a trigger: the `up` it leads to lists the cluster again, completely,
so a missed or doubled event costs nothing (a resync covers the first, the `up` finds nothing to do for the second).

Per namespace: a complete listing (`ssh_gateway.kube.list_selected`, the program's own reader), then the
kubernetes client's `Watch` from the listing's resourceVersion, resumed from the last version seen each time the
stream ends (the server closes it after `WATCH_SECONDS`). A 410 (the version was compacted away) lists again and
compares. Any other failure (the API server down, a 5xx, a timeout) is retried by the client's own client-go
retry (`kubernetes.utils.on_error`) with `BACKOFF`, each retry listing again: a listing that answers is the sign the
server is back, and it finds what changed meanwhile. Nothing here ever deletes or decides: a watch that is down
only delays.

Why not the client's `SharedInformer` (kubernetes 37): it reconnects at once after an error, with a traceback
logged each time, so an API server that is down for a minute is a tight loop; its watch has no client-side timeout
(a silent network partition hangs it); it lists unpaged; and its resync fires a change for every object.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import urllib3
from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException
from kubernetes.utils import Backoff, on_error
from kubernetes.watch import Watch

from ssh_gateway.core.cluster import ClusterObject, selector_text
from ssh_gateway.core.log_events import LogEvent
from ssh_gateway.core.names import DISCOVERY_PREFIX, DiscoverFrom
from ssh_gateway.kube import KubeError, ended, list_selected

__all__ = ["StackWatch", "WatchSignals"]

WATCH_SECONDS: Final = 240
"""How long the API server keeps one watch stream open; it is then resumed from the last version seen."""

_GONE: Final = 410
_TRANSIENT: Final = (ApiException, KubeError, urllib3.exceptions.HTTPError, OSError)
"""What a retry may cure: the API server's answers (5xx, 429, 403 while RBAC is fixed), the reader's, the network's."""


BACKOFF: Final = Backoff(steps=5, duration=0.5, factor=2.0, jitter=0.5)
"""client-go's `wait.Backoff`: 5 tries, 0.5 s apart doubling with jitter (8 to 11 s in all); then `PAUSE`."""
PAUSE: Final = 10.0
"""Between two rounds of `BACKOFF` while the API server stays gone: it is back at most this long before the watch
is (a round of 5 requests every 20 s is nothing to an API server coming back)."""

Fingerprint = tuple[Any, ...]


def object_fingerprint(kind: DiscoverFrom, obj: Mapping[str, Any]) -> Fingerprint:
    """What of an object can change an `up`: its uid (a pod made again under its name is new), labels, the
    `ssh-gateway.io/*` annotations and, for a Service, its type and ports. Not a pod's status, nor its IP (the
    stack's Service selects it by label), so pod churn does not trigger `up`s."""
    meta = obj.get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(DISCOVERY_PREFIX)}
    shape: tuple[Any, ...] = ()
    if kind is DiscoverFrom.SERVICES:
        spec = obj.get("spec") or {}
        ports = [(p.get("name"), p.get("port"), p.get("nodePort")) for p in spec.get("ports") or ()]
        shape = (spec.get("type"), tuple(sorted(ports, key=str)))
    return (
        meta.get("uid"),
        tuple(sorted((meta.get("labels") or {}).items())),
        tuple(sorted(annotations.items())),
        shape,
    )


Notify = Callable[[str], None]
"""Called with a short reason (`added pod gpu-users/alice-0`) when something that matters changed."""
Report = Callable[[LogEvent, Mapping[str, Any]], None]
"""Called with an event name and its fields, for the log (`watch-down`, `watch-resumed`)."""


class WatchSignals(Protocol):
    """What the watch tells the health rule and the metrics (signals.py's `StackSignals`)."""

    def delivered(self, namespace: str, *, listing: bool = False) -> None:
        """A listing, an event or a bookmark came, or the server ended a stream on time."""

    def watch_restarted(self) -> None:
        """A listing again, after a failure or a version compacted away."""


class _Silent:
    def delivered(self, namespace: str, *, listing: bool = False) -> None:
        pass

    def watch_restarted(self) -> None:
        pass


class StackWatch:
    """The watches of one stack's selection; `start` them, `stop` them."""

    def __init__(
        self,
        api: ApiClient,
        *,
        kind: DiscoverFrom,
        namespaces: tuple[str, ...],
        selector: Mapping[str, str],
        notify: Notify,
        report: Report,
        signals: WatchSignals | None = None,
    ) -> None:
        self._api = api
        self._signals = signals or _Silent()
        self._core = CoreV1Api(api)
        self._kind = kind
        self._namespaces = namespaces
        self._selector = dict(selector)
        self._notify = notify
        self._report = report
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watches: dict[str, Watch] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        for namespace in self._namespaces:
            thread = threading.Thread(target=self._run, args=(namespace,), name=f"watch-{namespace}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        with self._lock:
            for watch in self._watches.values():
                watch.stop()  # type: ignore[no-untyped-call] # shuts the stream's socket: the blocked read returns at once
        for thread in self._threads:
            thread.join(timeout)

    def _run(self, namespace: str) -> None:
        state = _Namespace(name=namespace)
        while not self._stop.is_set():
            try:
                on_error(BACKOFF, lambda exc: self._retriable(state, exc), lambda: self._step(state), self._pause)
            except Exception as exc:  # the backoff ran out, or a surprise: log, pause, go on
                if self._stop.is_set():
                    return
                if state.down is None:
                    self._report(LogEvent.WATCH_DOWN, {"namespace": namespace, "error": _problem(exc)})
                    state.down = _problem(exc)
                self._stop.wait(PAUSE)

    def _pause(self, seconds: float) -> None:
        """The backoff's sleep: cut short by `stop`."""
        self._stop.wait(seconds)

    def _step(self, state: _Namespace) -> None:
        """Lists when there is no version to resume from, then watches until the stream ends."""
        if state.version is None:
            state.version = self._relist(state.name, state.known, compare=state.listed)
            self._signals.delivered(state.name, listing=True)
            if state.listed:
                self._signals.watch_restarted()
            state.listed = True
            if state.down is not None:
                self._report(LogEvent.WATCH_RESUMED, {"namespace": state.name, "after": state.down})
                state.down = None
        try:
            state.version = self._stream(state.name, state.version, state.known)
        except ApiException as exc:
            if exc.status != _GONE:
                raise
            state.version = None  # compacted away: list again and compare

    def _retriable(self, state: _Namespace, exc: Exception) -> bool:
        """Whether to retry after `exc` (after a failure, with a listing first); reports the first of a run."""
        if self._stop.is_set() or not isinstance(
            exc, ApiException | KubeError | urllib3.exceptions.HTTPError | OSError
        ):
            return False
        state.version = None
        if state.down is None:
            state.down = _problem(exc)
            self._report(LogEvent.WATCH_DOWN, {"namespace": state.name, "error": state.down})
        return True

    def _relist(self, namespace: str, known: dict[str, Fingerprint], *, compare: bool) -> str:
        """Lists the namespace into `known`, telling the worker what changed since the last listing (the first
        one is the worker's own first pass); the listing's resourceVersion."""
        listing = list_selected(self._api, self._kind, (namespace,), self._selector)
        now = {f"{o.namespace}/{o.name}": _listed_fingerprint(self._kind, o) for o in listing.objects}
        if compare and now != known:
            changed = sorted(set(now) ^ set(known) | {k for k in now if k in known and now[k] != known[k]})
            self._notify(f"relisted {namespace}: {len(changed)} changed ({', '.join(changed[:3])})")
        known.clear()
        known.update(now)
        return listing.resource_versions[namespace]

    def _stream(self, namespace: str, version: str, known: dict[str, Fingerprint]) -> str:
        """One watch stream from `version` until the server ends it; the last version seen."""
        method = (
            self._core.list_namespaced_service
            if self._kind is DiscoverFrom.SERVICES
            else self._core.list_namespaced_pod
        )
        watch = Watch()  # type: ignore[no-untyped-call]
        with self._lock:
            if self._stop.is_set():
                return version
            self._watches[namespace] = watch
        try:
            for event in watch.stream(  # type: ignore[no-untyped-call]
                method,
                namespace,
                label_selector=selector_text(self._selector),
                resource_version=version,
                timeout_seconds=WATCH_SECONDS,
                allow_watch_bookmarks=True,
                _request_timeout=(5.0, WATCH_SECONDS + 30.0),
            ):
                self._signals.delivered(namespace)
                self._event(namespace, event, known)
        finally:
            with self._lock:
                self._watches.pop(namespace, None)
        self._signals.delivered(namespace)  # the server ended the stream on time (a failure raised instead)
        return str(watch.resource_version or version)

    def _event(self, namespace: str, event: Mapping[str, Any], known: dict[str, Fingerprint]) -> None:
        kind, raw = event.get("type"), event.get("raw_object") or {}
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return  # BOOKMARK: only a newer version to resume from, which `Watch` keeps
        key = f"{namespace}/{(raw.get('metadata') or {}).get('name')}"
        what = "pod" if self._kind is DiscoverFrom.PODS else "service"
        if kind == "DELETED" or ended(raw):  # an evicted pod stays Terminating: gone for discovery (the reader's rule)
            if known.pop(key, None) is not None:
                self._notify(f"deleted {what} {key}")
            return
        now = object_fingerprint(self._kind, raw)
        before = known.get(key)
        if before != now:
            known[key] = now
            self._notify(f"{'added' if before is None else 'changed'} {what} {key}")


@dataclass
class _Namespace:
    """One namespace's watch: what it has seen, and where it resumes."""

    name: str
    known: dict[str, Fingerprint] = field(default_factory=dict)
    """Each selected object (`namespace/name`) and its fingerprint, as last seen."""
    version: str | None = None
    """Where the watch resumes; None: list first."""
    listed: bool = False
    down: str | None = None
    """The error that took the watch down, while it is down."""


def _problem(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"{exc.status} {exc.reason or ''}".rstrip()
    if isinstance(exc, KubeError):
        return str(exc)
    return type(exc).__name__


def _listed_fingerprint(kind: DiscoverFrom, obj: ClusterObject) -> Fingerprint:
    """`object_fingerprint` of a listed `ClusterObject` (the reader's record), equal to the watched object's."""
    raw: dict[str, Any] = {
        "metadata": {"uid": obj.uid, "labels": dict(obj.labels), "annotations": dict(obj.annotations)},
    }
    if kind is DiscoverFrom.SERVICES:
        raw["spec"] = {
            "type": obj.service_type,
            "ports": [{"name": p.name, "port": p.port, "nodePort": p.node_port} for p in obj.ports],
        }
    return object_fingerprint(kind, raw)
