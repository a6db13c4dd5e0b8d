"""Kubernetes Events (events.k8s.io/v1) on the selected objects, so that `kubectl describe pod` says what the
reconciler did with it: a refusal, an endpoint written, a removal the guard holds back.

Aggregated as client-go's event recorder does (k8s.io/client-go/tools/events): the first occurrence of an
(object uid, reason, note) is one Event; each later one in a pass patches its `series` (count, lastObservedTime)
instead of adding an Event. The note is part of the key because events.k8s.io/v1 makes it immutable: a pod refused
for another value gets an Event of its own. An occurrence missing from a pass is forgotten (it is over); one seen
again later starts a new Event, as does one whose Event the API server expired (its `--event-ttl`, 1 h).

An Event is a side note: a failure to write one is logged (once until a write succeeds again) and never fails a
pass. Needs `events` create and patch (events.k8s.io) in the selected namespaces.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

import urllib3
from kubernetes.client import ApiClient, EventsV1Api, EventsV1Event, V1ObjectMeta, V1ObjectReference
from kubernetes.client.exceptions import ApiException

from ssh_gateway.core.addresses import DNS_NAME_MAX
from ssh_gateway.core.discovery_records import ObjectRef
from ssh_gateway.core.log_events import Log, LogEvent
from ssh_gateway.core.names import DISCOVERY_PREFIX, DiscoverFrom
from ssh_gateway.kube import REQUEST_TIMEOUT
from ssh_gateway.kube.errors import api_problem

__all__ = ["ENDPOINT_WRITTEN", "REFUSED", "REMOVAL_HELD", "REPORTING_CONTROLLER", "EventRecorder", "Occurrence"]

REPORTING_CONTROLLER: Final = f"{DISCOVERY_PREFIX}reconciler"
"""The Events' `reportingController`, in the project's own annotation domain."""
NOTE_MAX: Final = 1024
"""events.k8s.io/v1's limit on a note, in bytes."""
_NAME_MAX: Final = 128
"""The limit on `reportingInstance`, `action` and `reason`."""
_NOT_FOUND: Final = 404
_KIND: Final = {DiscoverFrom.PODS: "Pod", DiscoverFrom.SERVICES: "Service"}


@dataclass(frozen=True, kw_only=True)
class Happening:
    """What an Event says happened: its reason, action and type."""

    reason: str
    action: str
    type: str


REFUSED: Final = Happening(reason="Refused", action="Refuse", type="Warning")
ENDPOINT_WRITTEN: Final = Happening(reason="EndpointWritten", action="WriteEndpoint", type="Normal")
REMOVAL_HELD: Final = Happening(reason="RemovalHeld", action="HoldRemoval", type="Warning")


@dataclass(frozen=True, kw_only=True)
class Occurrence:
    """One thing to say about one object in a pass."""

    obj: ObjectRef
    what: Happening
    note: str


@dataclass
class _Series:
    """An Event this recorder made, and how many times it has seen its occurrence."""

    namespace: str
    name: str
    count: int


_Key = tuple[str, str, str]


class EventRecorder:
    """The Events of one stack's passes, written as `instance` (the replica) of `REPORTING_CONTROLLER`."""

    def __init__(self, api: ApiClient, *, stack: str, instance: str, log: Log) -> None:
        self._api = EventsV1Api(api)
        self._stack = stack
        self._instance = instance[:_NAME_MAX]
        self._log = log
        self._series: dict[_Key, _Series] = {}
        self._failing = False
        self.calls = 0
        """API calls made so far (what the docs' figure counts)."""

    def record(self, occurrences: Sequence[Occurrence]) -> None:
        """Each occurrence of this pass: a new Event, or one more in its Event's series; the rest forgotten."""
        kept: dict[_Key, _Series] = {}
        for occurrence in occurrences:
            key = (occurrence.obj.uid, occurrence.what.reason, occurrence.note)
            if key in kept:
                continue
            series = self._one(occurrence, self._series.get(key))
            if series is not None:
                kept[key] = series
        self._series = kept

    def _one(self, occurrence: Occurrence, series: _Series | None) -> _Series | None:
        try:
            if series is not None:
                try:
                    return self._bump(series)
                except ApiException as exc:
                    if exc.status != _NOT_FOUND:
                        raise
            return self._create(occurrence)  # the first, or its Event expired
        except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            self._failed(exc)
            return series

    def _create(self, occurrence: Occurrence) -> _Series:
        obj = occurrence.obj
        body = EventsV1Event(
            metadata=V1ObjectMeta(name=_event_name(obj.name), namespace=obj.namespace),
            event_time=_now(),
            reporting_controller=REPORTING_CONTROLLER,
            reporting_instance=self._instance,
            action=occurrence.what.action,
            reason=occurrence.what.reason,
            type=occurrence.what.type,
            note=_note(occurrence.note),
            regarding=V1ObjectReference(
                api_version="v1", kind=_KIND[obj.kind], namespace=obj.namespace, name=obj.name, uid=obj.uid
            ),
        )
        self.calls += 1
        made = self._api.create_namespaced_event(obj.namespace, body, _request_timeout=REQUEST_TIMEOUT)
        self._succeeded()
        name = made.metadata.name if made.metadata is not None else None
        if not name:
            raise ValueError("the API server answered the Event's create without a name")
        return _Series(namespace=obj.namespace, name=name, count=1)

    def _bump(self, series: _Series) -> _Series:
        count = series.count + 1
        patch = {"series": {"count": count, "lastObservedTime": _micro_time(_now())}}
        self.calls += 1
        self._api.patch_namespaced_event(
            series.name,
            series.namespace,
            patch,
            _content_type="application/merge-patch+json",
            _request_timeout=REQUEST_TIMEOUT,
        )
        self._succeeded()
        return _Series(namespace=series.namespace, name=series.name, count=count)

    def _failed(self, exc: Exception) -> None:
        if self._failing:
            return
        self._failing = True
        problem = api_problem(exc) if isinstance(exc, ApiException) else f"{type(exc).__name__}: {exc}"
        self._log(LogEvent.EVENT_ERROR, stack=self._stack, error=" ".join(problem.split())[:300])

    def _succeeded(self) -> None:
        self._failing = False


def _event_name(name: str) -> str:
    """client-go's: the object's name and the time in hex nanoseconds (`generateName` would end in '.', which
    the API server refuses), within a name's 253 characters."""
    suffix = f".{time.time_ns():x}"
    return name[: DNS_NAME_MAX - len(suffix)] + suffix


def _now() -> datetime:
    now = datetime.now(UTC)
    # A MicroTime is parsed with exactly six fractional digits, and `isoformat` drops them at microsecond 0.
    return now.replace(microsecond=now.microsecond or 1)


def _micro_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _note(text: str) -> str:
    """One line, within `NOTE_MAX` bytes."""
    line = " ".join(text.split())
    encoded = line.encode()
    if len(encoded) <= NOTE_MAX:
        return line
    return encoded[: NOTE_MAX - 4].decode(errors="ignore") + " ..."
