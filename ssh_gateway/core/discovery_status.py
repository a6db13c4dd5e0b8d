"""The status ConfigMap as the stack's memory of discovery (docs/cluster-instances.md): read and written here.

Reading: `read_memory` (the instances this stack discovered before, with when each went missing),
`read_selections` (what the other stacks select, so an object is never served twice), `next_expiry` (when
the first grace period ends) and `read_report` (what the last run left: states, refusals, held removals, free
ports, which the reconciler turns into gauges and Kubernetes Events). An entry this program never wrote is a
`StatusError`, never an empty memory.
Writing: `next_status`, the ConfigMap's data after a run, and the room each entry takes in it (`instance_room`,
`refusal_room`, `fixed_room`), by which `discover` keeps the ConfigMap under Kubernetes' 1 MiB. Both sides of each
key's format live here only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from .cluster import StatusMap
from .discovery_records import (
    Found,
    ObjectRef,
    Outcome,
    Refusal,
    Remembered,
    ReportedInstance,
    ReportedRefusal,
    Selection,
    State,
    StatusReport,
)
from .names import (
    STATUS_HELD_KEY,
    STATUS_PORTS_KEY,
    STATUS_SELECTION_KEY,
    STATUS_UNLISTED_KEY,
    DiscoverFrom,
    status_instance_key,
    status_refused_key,
)

__all__ = [
    "ENDPOINT_ROOM",
    "REFUSALS_ROOM",
    "STATUS_MAX_BYTES",
    "StatusError",
    "fixed_room",
    "instance_room",
    "next_expiry",
    "next_status",
    "read_memory",
    "read_report",
    "read_selections",
    "refusal_room",
]

STATUS_MAX_BYTES: Final = 1024 * 1024
"""Kubernetes' limit on a ConfigMap: its keys and values together (MaxConfigMapSize, 1 MiB)."""

ENDPOINT_ROOM: Final = 1024
"""The bytes an instance's entry keeps for its endpoint, which is written only once the instance's resources exist,
after `discover` decided what fits. A port-mode endpoint with a 253-character host takes about 700; a connect-mode
one, whose ssh command repeats the gateway's host and the authority, fits while those are up to about 120 each
(`tests/unit/test_discovery.py` checks both)."""

REFUSALS_ROOM: Final = 128 * 1024
"""The bytes new instances leave for refused objects' lines (about 400 lines), so the objects refused for want of
room are listed too."""

_UNLISTED_ROOM: Final = 256
"""The bytes kept for `STATUS_UNLISTED_KEY`, whose count and line are short."""

_PORTS_ROOM: Final = 64
"""The bytes kept for `STATUS_PORTS_KEY`: `{"free": 65535, "range": "1-65535"}` and its key take 53."""

_RFC3339: Final = "%Y-%m-%dT%H:%M:%SZ"
"""The one time format of the status: `2026-12-03T10:00:00Z`."""


class StatusError(ValueError):
    """This stack's status ConfigMap holds what this program never wrote: the memory cannot be trusted."""


def _rfc3339(moment: datetime) -> str:
    """`2026-12-03T10:00:00Z`."""
    return moment.astimezone(UTC).strftime(_RFC3339)


def _parse_time(text: object, key: str) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.strptime(str(text), _RFC3339).replace(tzinfo=UTC)
    except ValueError:
        raise StatusError(
            f"{key}: missingSince {text!r} is not an RFC 3339 time such as 2026-12-03T10:00:00Z"
        ) from None


def read_memory(status: StatusMap | None) -> dict[str, Remembered]:
    """The discovered instances this stack's status recorded, by instance name; none without a status."""
    if status is None:
        return {}
    found: dict[str, Remembered] = {}
    for key, text in status.data.items():
        if not (key.startswith("instance.") and key.endswith(".json")):
            continue
        where = f"status ConfigMap {status.namespace}/{status.name} key {key}"
        try:
            entry = json.loads(text)
            obj = entry["object"]
            name = key.removeprefix("instance.").removesuffix(".json")
            found[name] = Remembered(
                name=name,
                kind=DiscoverFrom(obj["kind"]),
                namespace=str(obj["namespace"]),
                object_name=str(obj["name"]),
                uid=str(entry["uid"]),
                annotations={str(k): str(v) for k, v in dict(entry.get("annotations") or {}).items()},
                instance=dict(entry["instance"]),
                missing_since=_parse_time(entry.get("missingSince"), where),
                held=State(entry.get("state", State.PRESENT)) is State.HELD,
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, StatusError):
                raise
            raise StatusError(
                f"{where} is not an instance entry this program writes ({type(exc).__name__}): fix or delete the key"
            ) from None
    return found


def next_expiry(memory: Mapping[str, Remembered], grace_period: int) -> datetime | None:
    """When the first gone instance's grace period ends (the next run after it removes the instance), or None
    when none is gone: the time a trigger such as `ssh-gateway reconcile` wakes up at. An instance whose removal
    the guard held back is left out: its end is past, and only a person or its object changes that, so waking for
    it changes nothing (issue 36: a reconciler woke every 10 s for one)."""
    gone = [r.missing_since for r in memory.values() if r.missing_since is not None and not r.held]
    return min(gone) + timedelta(seconds=grace_period) if gone else None


def read_selections(statuses: Sequence[StatusMap], own_stack: str) -> list[Selection]:
    """Every other stack's selection, from their status ConfigMaps (one unreadable is skipped: it can only
    make this stack refuse fewer objects, never remove any)."""
    found = []
    for status in statuses:
        if status.stack == own_stack or STATUS_SELECTION_KEY not in status.data:
            continue
        try:
            data = json.loads(status.data[STATUS_SELECTION_KEY])
            found.append(
                Selection(
                    stack=status.stack,
                    kind=DiscoverFrom(data["from"]),
                    namespaces=tuple(str(n) for n in data["namespaces"]),
                    selector={str(k): str(v) for k, v in dict(data["selector"]).items()},
                )
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
    return found


def next_status(
    outcome: Outcome, endpoints: Mapping[str, Mapping[str, Any]], free_ports: tuple[str, int] | None = None
) -> dict[str, str]:
    """The status ConfigMap's data after this run: the selection, each instance with its endpoint, each refused
    object's line the room allows (and how many it does not), the guard's held removals, and `free_ports`
    (the port range and how many of its ports are free) when the stack has a range."""
    data = {STATUS_SELECTION_KEY: _selection_text(outcome.selection)}
    if free_ports is not None:
        data[STATUS_PORTS_KEY] = json.dumps({"range": free_ports[0], "free": free_ports[1]}, sort_keys=True)
    for found in outcome.instances:
        data[status_instance_key(found.instance.name)] = _instance_text(found, endpoints.get(found.instance.name, {}))
    listed = len(outcome.refusals) - outcome.unlisted
    for refusal in outcome.refusals[:listed]:
        data[status_refused_key(refusal.namespace, refusal.name)] = _refusal_text(refusal)
    if outcome.unlisted:
        unlisted = {
            "count": outcome.unlisted,
            "error": "more objects were refused than the ConfigMap holds: the run's warnings name each",
        }
        data[STATUS_UNLISTED_KEY] = json.dumps(unlisted, sort_keys=True)
    held = _held_text(outcome.held, outcome.max_removals)
    if held is not None:
        data[STATUS_HELD_KEY] = held
    return data


def instance_room(found: Found) -> int:
    """The bytes the instance takes in the status: its key and its entry, with `ENDPOINT_ROOM` for its endpoint."""
    return len(status_instance_key(found.instance.name)) + len(_instance_text(found, {})) + ENDPOINT_ROOM


def refusal_room(refusal: Refusal) -> int:
    """The bytes a refused object's line takes in the status, key and entry."""
    return len(status_refused_key(refusal.namespace, refusal.name)) + len(_refusal_text(refusal))


def fixed_room(selection: Selection, held: Sequence[str], max_removals: int) -> int:
    """The bytes the status takes whatever it lists: the selection, the guard's held removals and the count of
    refusals it could not list."""
    held_text = _held_text(held, max_removals) or ""
    room = len(STATUS_SELECTION_KEY) + len(_selection_text(selection)) + len(STATUS_HELD_KEY) + len(held_text)
    return room + _UNLISTED_ROOM + _PORTS_ROOM


def _selection_text(selection: Selection) -> str:
    return json.dumps(
        {
            "stack": selection.stack,
            "from": selection.kind.value,
            "namespaces": list(selection.namespaces),
            "selector": dict(sorted(selection.selector.items())),
        },
        sort_keys=True,
    )


def _instance_text(found: Found, endpoint: Mapping[str, Any]) -> str:
    return json.dumps({**_entry(found), "endpoint": dict(endpoint)}, sort_keys=True)


def _refusal_text(refusal: Refusal) -> str:
    entry = {
        "object": _object(refusal.kind, refusal.namespace, refusal.name),
        "uid": refusal.uid,
        "key": refusal.key,
        "error": refusal.line,
    }
    return json.dumps(entry, sort_keys=True)


def _object(kind: DiscoverFrom, namespace: str, name: str) -> dict[str, str]:
    return {"kind": kind.value, "namespace": namespace, "name": name}


def _held_text(held: Sequence[str], max_removals: int) -> str | None:
    return json.dumps({"held": list(held), "maxRemovals": max_removals}, sort_keys=True) if held else None


def _entry(found: Found) -> dict[str, Any]:
    """The instance's status entry, without the endpoint (`next_status` adds that): what `read_memory` reads."""
    return {
        "object": _object(found.kind, found.namespace, found.name),
        "uid": found.uid,
        "state": found.state.value,
        "annotations": dict(sorted(found.annotations.items())),
        "instance": dict(found.config),
        "missingSince": _rfc3339(found.missing_since) if found.missing_since is not None else None,
    }


def read_report(status: StatusMap) -> StatusReport:
    """What the stack's last run left in its status: a `StatusError` for an entry this program never wrote."""
    where = f"status ConfigMap {status.namespace}/{status.name}"
    instances: list[ReportedInstance] = []
    refusals: list[ReportedRefusal] = []
    try:
        for key, text in sorted(status.data.items()):
            if key.startswith("instance.") and key.endswith(".json"):
                entry = json.loads(text)
                name = key.removeprefix("instance.").removesuffix(".json")
                endpoint = dict(entry.get("endpoint") or {})
                ref = _ref(entry)
                instances.append(ReportedInstance(name=name, obj=ref, state=State(entry["state"]), endpoint=endpoint))
            elif key.startswith("refused.") and key.endswith(".json"):
                entry = json.loads(text)
                refusals.append(ReportedRefusal(obj=_ref(entry), key=entry.get("key"), line=str(entry["error"])))
        held = json.loads(status.data.get(STATUS_HELD_KEY) or '{"held": [], "maxRemovals": 0}')
        unlisted = json.loads(status.data.get(STATUS_UNLISTED_KEY) or '{"count": 0}')
        ports = json.loads(status.data[STATUS_PORTS_KEY]) if STATUS_PORTS_KEY in status.data else None
        return StatusReport(
            instances=tuple(instances),
            refusals=tuple(refusals),
            unlisted=int(unlisted["count"]),
            held=tuple(str(n) for n in held["held"]),
            max_removals=int(held["maxRemovals"]),
            free_ports=None if ports is None else int(ports["free"]),
        )
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise StatusError(
            f"{where} holds an entry this program does not write ({type(exc).__name__}: {exc}); the next run "
            "rewrites it"
        ) from None


def _ref(entry: Mapping[str, Any]) -> ObjectRef:
    obj = entry["object"]
    return ObjectRef(
        kind=DiscoverFrom(obj["kind"]), namespace=str(obj["namespace"]), name=str(obj["name"]), uid=str(entry["uid"])
    )
