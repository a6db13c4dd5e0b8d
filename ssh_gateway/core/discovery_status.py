"""The status ConfigMap as the stack's memory of discovery (docs/cluster-instances.md): read and written here.

Reading: `read_memory` (the instances this stack discovered before, with when each went missing),
`read_selections` (what the other stacks select, so an object is never served twice) and `next_expiry` (when
the first grace period ends). An entry this program never wrote is a `StatusError`, never an empty memory.
Writing: `next_status`, the ConfigMap's data after a run. Both sides of each key's format live here only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from .cluster import StatusMap
from .discovery_records import Found, Outcome, Remembered, Selection
from .names import STATUS_HELD_KEY, STATUS_SELECTION_KEY, DiscoverFrom, status_instance_key, status_refused_key

__all__ = ["StatusError", "next_expiry", "next_status", "read_memory", "read_selections"]

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
    when none is gone: the time a trigger such as `ssh-gateway reconcile` wakes up at."""
    gone = [r.missing_since for r in memory.values() if r.missing_since is not None]
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


def next_status(outcome: Outcome, endpoints: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The status ConfigMap's data after this run: the selection, each instance with its endpoint, each refused
    object's line, and the guard's held removals."""
    selection = outcome.selection
    data = {
        STATUS_SELECTION_KEY: json.dumps(
            {
                "stack": selection.stack,
                "from": selection.kind.value,
                "namespaces": list(selection.namespaces),
                "selector": dict(sorted(selection.selector.items())),
            },
            sort_keys=True,
        )
    }
    for found in outcome.instances:
        record = _entry(found)
        record["endpoint"] = dict(endpoints.get(found.instance.name, {}))
        data[status_instance_key(found.instance.name)] = json.dumps(record, sort_keys=True)
    for refusal in outcome.refusals:
        entry = {"object": refusal.ref, "key": refusal.key, "error": refusal.line}
        data[status_refused_key(refusal.namespace, refusal.name)] = json.dumps(entry, sort_keys=True)
    if outcome.held:
        held = {"held": list(outcome.held), "maxRemovals": outcome.max_removals}
        data[STATUS_HELD_KEY] = json.dumps(held, sort_keys=True)
    return data


def _entry(found: Found) -> dict[str, Any]:
    """The instance's status entry, without the endpoint (`next_status` adds that): what `read_memory` reads."""
    return {
        "object": {"kind": found.kind.value, "namespace": found.namespace, "name": found.name},
        "uid": found.uid,
        "state": found.state.value,
        "annotations": dict(sorted(found.annotations.items())),
        "instance": dict(found.config),
        "missingSince": _rfc3339(found.missing_since) if found.missing_since is not None else None,
    }
