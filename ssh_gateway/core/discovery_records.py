"""The records of a discovery run (docs/cluster-instances.md): what `discover` decides and what it decides from.

`Found` is an instance of this run, `Refusal` an object that gives none (in one line), `Remembered` an instance
as this stack's status recorded it, `Selection` what a stack selects, `Outcome` the whole run. Plain frozen
records: reading and writing them to the status ConfigMap is `discovery_status`'s job, deciding them is
`discovery`'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from .cluster import ClusterObject
from .names import DiscoverFrom
from .settings import Discovery, Instance

__all__ = [
    "Found",
    "ObjectRef",
    "Outcome",
    "Refusal",
    "Remembered",
    "ReportedInstance",
    "ReportedRefusal",
    "Selection",
    "State",
    "StatusReport",
    "held_line",
    "selection_of",
]

_SHOWN_MAX: Final = 80
"""The characters of a refused value a refusal line shows."""


class State(StrEnum):
    """Why a discovered instance is in this run."""

    PRESENT = "present"
    """Its object is listed and its annotations are valid."""
    KEPT = "kept"
    """Its object is listed but its annotations are not valid now: it keeps its last accepted spec."""
    MISSING = "missing"
    """Its object is gone (or no longer selected), within the grace period."""
    HELD = "held"
    """Its grace period is over, but the guard holds its removal back (too many at once)."""


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """An object that gives no instance (or keeps its last accepted one), and why, in one line."""

    ref: str
    """The object, e.g. `pod gpu-users/alice-0`."""
    kind: DiscoverFrom
    namespace: str
    name: str
    uid: str
    """The object's uid: what a Kubernetes Event on it names (`kubectl describe` matches it)."""
    reason: str
    """What is wrong and what is allowed."""
    key: str | None = None
    """The annotation (or label) at fault, e.g. `ssh-gateway.io/user`."""
    value: str | None = None
    """Its value, as the object has it."""

    @classmethod
    def of(cls, obj: ClusterObject, reason: str, key: str | None = None, value: str | None = None) -> Refusal:
        """The object's refusal, for the reason (and the annotation or label at fault, with its value)."""
        return cls(
            ref=obj.ref,
            kind=obj.kind,
            namespace=obj.namespace,
            name=obj.name,
            uid=obj.uid,
            reason=reason,
            key=key,
            value=value,
        )

    @property
    def line(self) -> str:
        """`pod gpu-users/alice-0: ssh-gateway.io/user = "ro ot": <reason>`; a long value is cut (an annotation
        may hold 256 KiB, and the line goes into a warning and the status ConfigMap)."""
        if self.key is None:
            return f"{self.ref}: {self.reason}"
        value = self.value
        if value is not None and len(value) > _SHOWN_MAX:
            value = f"{value[:_SHOWN_MAX]}... ({len(value)} characters)"
        shown = f" = {json.dumps(value)}" if value is not None else ""
        return f"{self.ref}: {self.key}{shown}: {self.reason}"


@dataclass(frozen=True, kw_only=True)
class Found:
    """A discovered instance of this run, with the object it comes from."""

    instance: Instance
    """The instance as the file's entries are (`namespace` set to the object's)."""
    kind: DiscoverFrom
    namespace: str
    name: str
    """The object's name (not the instance's)."""
    uid: str
    annotations: Mapping[str, str]
    """The accepted `ssh-gateway.io/*` annotations (the spec it keeps while newer ones are invalid)."""
    config: Mapping[str, Any]
    """The instance as config (what was validated), which the next run validates again if it must keep it."""
    state: State
    missing_since: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class Remembered:
    """A discovered instance as this stack's status recorded it."""

    name: str
    kind: DiscoverFrom
    namespace: str
    object_name: str
    uid: str
    annotations: Mapping[str, str]
    instance: Mapping[str, Any]
    """The accepted instance, as config (by alias)."""
    missing_since: datetime | None
    held: bool = False
    """Whether the guard held its removal back in that run (its entry's `state`)."""


@dataclass(frozen=True, kw_only=True)
class Selection:
    """What a stack selects: from its status's `selection.json`."""

    stack: str
    kind: DiscoverFrom
    namespaces: tuple[str, ...]
    selector: Mapping[str, str]

    def selects(self, obj: ClusterObject) -> bool:
        """Whether the object is among this selection's."""
        return (
            obj.kind is self.kind
            and obj.namespace in self.namespaces
            and all(obj.labels.get(k) == v for k, v in self.selector.items())
        )


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What a run does with the discovered instances."""

    instances: tuple[Found, ...]
    """Every discovered instance the run registers: present, kept, missing in grace, held by the guard."""
    refusals: tuple[Refusal, ...]
    removed: tuple[str, ...]
    """Instances whose grace period is over and whose removal the guard let through."""
    held: tuple[str, ...]
    """Instances whose removal the guard holds back (more than `maxRemovals` at once)."""
    selection: Selection
    max_removals: int
    unlisted: int = 0
    """How many of the last refusals the status ConfigMap has no room to list (the warnings name each)."""

    def warnings(self) -> list[str]:
        """One line per refusal, and one for the guard."""
        lines = [f"discovery refused {r.line}" for r in self.refusals]
        if self.held:
            lines.append(held_line(self.held, self.max_removals))
        return lines


def held_line(held: Sequence[str], max_removals: int) -> str:
    """The guard's one line: the run's warning, and the Event on each held instance's object (the reconciler)."""
    return (
        f"discovery holds back {len(held)} removals ({', '.join(held)}), over "
        f"ssh-gateway:discovery.maxRemovals {max_removals}: a selector that matches nothing now, or "
        "the wrong cluster? If they are meant to go, raise maxRemovals for one run"
    )


@dataclass(frozen=True, kw_only=True)
class ObjectRef:
    """A selected object as the status names it: what a Kubernetes Event on it points at."""

    kind: DiscoverFrom
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True, kw_only=True)
class ReportedInstance:
    """A discovered instance as the status ConfigMap reports it after a run."""

    name: str
    obj: ObjectRef
    state: State
    endpoint: Mapping[str, Any]
    """The stack's `endpoints` entry (empty until the instance's resources exist)."""


@dataclass(frozen=True, kw_only=True)
class ReportedRefusal:
    """A refused object as the status ConfigMap lists it."""

    obj: ObjectRef
    key: str | None
    line: str
    """`Refusal.line`: the annotation (or label), its value and what is allowed."""


@dataclass(frozen=True, kw_only=True)
class StatusReport:
    """What a stack's status ConfigMap says of its last run: the reconciler's gauges and Events read it."""

    instances: tuple[ReportedInstance, ...]
    refusals: tuple[ReportedRefusal, ...]
    """The refused objects the ConfigMap lists."""
    unlisted: int
    """Refused objects it had no room to list."""
    held: tuple[str, ...]
    max_removals: int
    free_ports: int | None
    """Ports of `ports.range` neither reserved, allocated nor bound in Pangolin (None: no range)."""


def selection_of(settings: Discovery, stack: str) -> Selection:
    """The stack's own selection."""
    return Selection(stack=stack, kind=settings.from_, namespaces=settings.namespaces, selector=dict(settings.selector))
