"""Instances discovered from the cluster (`ssh-gateway:discovery`, docs/cluster-instances.md): pure logic.

`discover` takes what the program read - a complete listing of the selected objects, this stack's status
ConfigMap (its memory), the other stacks' selections - with the time and the settings, and decides:

- each selected object's instance, its keys from the `ssh-gateway.io/<key>` annotations, validated by the same
  instance models as the file's entries (an error names the object, the annotation, the value, what is allowed);
- refusals: an object whose annotations are invalid (it keeps its last accepted spec if it had one), whose name
  is also configured in the file or taken by another object, or that another stack selects too;
- the grace period: an instance whose object is gone stays (same name, so the same port, host key and Pangolin
  resource) until `missingSince + gracePeriod`, then goes;
- the guard: more removals in one run than `maxRemovals` are all held back (kept, warned, recorded);
- the next status (`next_status`), once the program knows the instances' endpoints.

It never talks to a cluster: a listing that failed never reaches it (the reader raises instead), so a failure to
read can never look like objects that are gone.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from pydantic import TypeAdapter, ValidationError

from .cluster import ClusterObject, Listing, StatusMap
from .derived_names import instance_name_problem
from .names import (
    DISCOVERY_ANNOTATED_KEYS,
    DISCOVERY_PREFIX,
    STATUS_HELD_KEY,
    STATUS_SELECTION_KEY,
    DiscoverFrom,
    discovery_annotation,
    status_instance_key,
    status_refused_key,
)
from .outputs import Routing
from .settings import (
    ConnectModeInstance,
    ConnectStaticInstance,
    Discovery,
    Instance,
    IstioGatewaySettings,
    Settings,
)
from .targets import cluster_dns_name

__all__ = [
    "Found",
    "Outcome",
    "Refusal",
    "Remembered",
    "Selection",
    "State",
    "StatusError",
    "discover",
    "next_expiry",
    "next_status",
    "read_memory",
    "read_selections",
]

POD_NAME_LABEL: Final = "statefulset.kubernetes.io/pod-name"
"""The label a StatefulSet gives each pod, with the pod's name: a selector of that pod alone."""

_NODE_PORT_TYPES: Final = ("NodePort", "LoadBalancer")
_SHOWN_MAX: Final = 80
"""The characters of a refused value a refusal line shows."""
_INSTANCE: Final[TypeAdapter[Instance]] = TypeAdapter(Instance)


class StatusError(ValueError):
    """This stack's status ConfigMap holds what this program never wrote: the memory cannot be trusted."""


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
    namespace: str
    name: str
    reason: str
    """What is wrong and what is allowed."""
    key: str | None = None
    """The annotation (or label) at fault, e.g. `ssh-gateway.io/user`."""
    value: str | None = None
    """Its value, as the object has it."""

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

    def record(self) -> dict[str, Any]:
        """Its status entry, without the endpoint (the program adds that once the instance's resources exist)."""
        return {
            "object": {"kind": self.kind.value, "namespace": self.namespace, "name": self.name},
            "uid": self.uid,
            "state": self.state.value,
            "annotations": dict(sorted(self.annotations.items())),
            "instance": dict(self.config),
            "missingSince": rfc3339(self.missing_since) if self.missing_since is not None else None,
        }


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

    def warnings(self) -> list[str]:
        """One line per refusal, and one for the guard."""
        lines = [f"discovery refused {r.line}" for r in self.refusals]
        if self.held:
            lines.append(
                f"discovery holds back {len(self.held)} removals ({', '.join(self.held)}), over "
                f"ssh-gateway:discovery.maxRemovals {self.max_removals}: a selector that matches nothing now, or "
                "the wrong cluster? If they are meant to go, raise maxRemovals for one run"
            )
        return lines


def rfc3339(moment: datetime) -> str:
    """`2026-12-03T10:00:00Z`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: object, key: str) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise StatusError(
            f"{key}: missingSince {text!r} is not an RFC 3339 time such as 2026-12-03T10:00:00Z"
        ) from None


def selection_of(settings: Discovery, stack: str) -> Selection:
    """The stack's own selection."""
    return Selection(stack=stack, kind=settings.from_, namespaces=settings.namespaces, selector=dict(settings.selector))


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


@dataclass
class _Run:
    """The work of one `discover` call."""

    settings: Settings
    section: Discovery
    memory: Mapping[str, Remembered]
    others: Sequence[Selection]
    stack: str
    now: datetime
    bound: Mapping[int, Sequence[str]]
    own_prefix: str
    refusals: list[Refusal] = field(default_factory=list)
    found: dict[str, Found] = field(default_factory=dict)

    def refuse(self, obj: ClusterObject, reason: str, key: str | None = None, value: str | None = None) -> None:
        self.refusals.append(
            Refusal(ref=obj.ref, namespace=obj.namespace, name=obj.name, reason=reason, key=key, value=value)
        )


def discover(
    *,
    listing: Listing,
    memory: Mapping[str, Remembered],
    others: Sequence[Selection],
    settings: Settings,
    stack: str,
    now: datetime,
    bound: Mapping[int, Sequence[str]] | None = None,
    own_prefix: str = "",
) -> Outcome:
    """The discovered instances of this run, from a complete listing (see the module's docstring). `bound`: the
    org's Pangolin resources by the port they bind (names), `own_prefix` this stack's prefix of them: a pinned
    port another resource binds is refused here, where it stops one object, not in the allocator, where it
    would stop the run."""
    section = settings.discovery
    if section is None:
        raise ValueError("the stack has no ssh-gateway:discovery")
    run = _Run(
        settings=settings,
        section=section,
        memory=memory,
        others=others,
        stack=stack,
        now=now,
        bound=bound or {},
        own_prefix=own_prefix,
    )
    configured = {i.name for i in settings.instances}
    objects = sorted(listing.objects, key=lambda o: (o.namespace, o.name))
    named: dict[str, list[ClusterObject]] = {}
    for obj in objects:
        doubled = [s.stack for s in others if s.selects(obj)]
        if doubled:
            run.refuse(
                obj,
                f"selected by stacks {stack} and {', '.join(sorted(doubled))}: an object may belong to one stack only; "
                "narrow one of their ssh-gateway:discovery selectors",
            )
            continue
        name = _instance_name(run, obj)
        if name is None:
            continue
        if name in configured:
            run.refuse(
                obj,
                f"instance {name!r} is also configured in ssh-gateway:instances, and the file's entry wins: rename "
                "one of the two",
            )
            continue
        named.setdefault(name, []).append(obj)
    pins = {i.port: i.name for i in settings.instances if not isinstance(i, ConnectModeInstance) and i.port}
    for name, claimants in sorted(named.items()):
        owner = _owner(run, name, claimants)
        if owner is not None:
            _accept(run, name, owner, pins)
    removed, held = _gone(run)
    return Outcome(
        instances=tuple(run.found[n] for n in sorted(run.found)),
        refusals=tuple(run.refusals),
        removed=removed,
        held=held,
        selection=selection_of(section, stack),
        max_removals=section.max_removals,
    )


def _instance_name(run: _Run, obj: ClusterObject) -> str | None:
    """The instance's name: the `nameLabel` value, else the object's name (a Service's without `ssh-`)."""
    label = run.section.name_label
    if label is not None:
        value = obj.labels.get(label)
        if not value:
            run.refuse(obj, "required: the label whose value names the instance (discovery.nameLabel)", key=label)
            return None
        return value
    if obj.kind is DiscoverFrom.SERVICES:
        return obj.name.removeprefix("ssh-")
    return obj.name


def _owner(run: _Run, name: str, claimants: list[ClusterObject]) -> ClusterObject | None:
    """The one object an instance name belongs to; the others are refused. A name the stack already serves stays
    in its object's namespace: the same object, else the one other object there (a Deployment's new pod);
    an object of another namespace never takes it, its port and its host key, even while the instance's own
    object is gone within its grace period. A new name: its only claimant, or none when several claim it."""
    known = run.memory.get(name)
    owner = None
    if known is None:
        owner = claimants[0] if len(claimants) == 1 else None
    else:
        exact = [o for o in claimants if (o.namespace, o.name) == (known.namespace, known.object_name)]
        same = [o for o in claimants if o.namespace == known.namespace]
        owner = exact[0] if exact else (same[0] if len(same) == 1 else None)
    for obj in claimants:
        if obj is owner:
            continue
        others = [o.ref for o in claimants if o is not obj]
        if known is not None and not others:
            kind = known.kind.value.rstrip("s")
            reason = (
                f"instance name {name!r} belongs to {kind} {known.namespace}/{known.object_name}, whose instance is "
                "kept for its grace period: the name is free once that instance is removed"
            )
        else:
            reason = f"instance name {name!r} is also that of {', '.join(others)}: give each object a name of its own"
        run.refuse(obj, reason)
    return owner


def _annotations(obj: ClusterObject) -> dict[str, str]:
    """The object's `ssh-gateway.io/*` annotations."""
    return {k: v for k, v in obj.annotations.items() if k.startswith(DISCOVERY_PREFIX)}


def _accept(run: _Run, name: str, obj: ClusterObject, pins: dict[int, str]) -> None:
    """The object's instance from its annotations; invalid ones keep the remembered spec, if any."""
    annotations = _annotations(obj)
    built = _build(run, name, obj, annotations, pins)
    if isinstance(built, Refusal):
        run.refusals.append(built)
        known = run.memory.get(name)
        if known is None or known.namespace != obj.namespace:
            return
        try:
            instance = _INSTANCE.validate_python(dict(known.instance))
        except ValidationError:
            return  # the accepted spec no longer fits the stack's settings: only a new valid one helps
        run.found[name] = Found(
            instance=instance,
            kind=obj.kind,
            namespace=obj.namespace,
            name=obj.name,
            uid=obj.uid,
            annotations=known.annotations,
            config=known.instance,
            state=State.KEPT,
        )
        return
    instance, config = built
    if not isinstance(instance, ConnectModeInstance) and instance.port is not None:
        pins[instance.port] = name
    run.found[name] = Found(
        instance=instance,
        kind=obj.kind,
        namespace=obj.namespace,
        name=obj.name,
        uid=obj.uid,
        annotations=annotations,
        config=config,
        state=State.PRESENT,
    )


def _build(
    run: _Run, name: str, obj: ClusterObject, annotations: Mapping[str, str], pins: Mapping[int, str]
) -> tuple[Instance, dict[str, Any]] | Refusal:
    """The instance the object and its annotations make, validated by the instance models, and its config."""

    def refusal(reason: str, key: str | None = None, value: str | None = None) -> Refusal:
        return Refusal(ref=obj.ref, namespace=obj.namespace, name=obj.name, reason=reason, key=key, value=value)

    allowed = [discovery_annotation(k) for k in DISCOVERY_ANNOTATED_KEYS]
    for key, value in sorted(annotations.items()):
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            return refusal(f"unknown annotation; {hint}allowed: {', '.join(allowed)}", key, value)
    keys: dict[str, Any] = {k.removeprefix(DISCOVERY_PREFIX): v for k, v in annotations.items()}
    if "sourceCidrs" in keys:
        keys["sourceCidrs"] = [c.strip() for c in str(keys["sourceCidrs"]).split(",") if c.strip()]
    settings = run.settings
    routing = str(keys.pop("routing", settings.routing.value))
    raw: dict[str, Any] = {"name": name, "routing": routing, "namespace": obj.namespace, **keys}
    target = _target(run, obj, raw, routing)
    if isinstance(target, str):
        return refusal(target)
    try:
        instance = _INSTANCE.validate_python(raw)
    except ValidationError as exc:
        return _model_refusal(run, obj, name, exc, annotations, refusal)
    problem = _stack_problem(run, instance, pins)
    if problem is not None:
        return refusal(*problem)
    return instance, raw


def _target(run: _Run, obj: ClusterObject, raw: dict[str, Any], routing: str) -> str | None:
    """Fill in where the instance is reached, from the object; or why it cannot be."""
    kube = run.settings.kubernetes
    if obj.kind is DiscoverFrom.PODS:
        label = run.section.name_label
        if label is not None:
            raw["selector"] = {**run.section.selector, label: obj.labels[label]}
        elif obj.labels.get(POD_NAME_LABEL) == obj.name:
            raw["selector"] = {POD_NAME_LABEL: obj.name}
        else:
            return (
                "no label selects this pod alone for its Service: set ssh-gateway:discovery.nameLabel (a label whose "
                f"value is the instance's name), or run it in a StatefulSet (label {POD_NAME_LABEL})"
            )
        if routing == Routing.PORT:
            raw["target"] = "nodePort" if kube.node_ip is not None else "clusterIp"
        return None
    if "podPort" in raw:
        return f"annotation {discovery_annotation('podPort')} is only for from: pods; a Service's own port is used"
    ports = obj.ports
    port = next((p for p in ports if p.name == "ssh"), None) or (ports[0] if len(ports) == 1 else None)
    if port is None:
        return f"has {len(ports)} ports and none named ssh: name the sshd's port ssh"
    if obj.service_type in _NODE_PORT_TYPES:
        if kube.node_ip is None or port.node_port is None:
            return f"is a {obj.service_type} Service, so set ssh-gateway:kubernetes.nodeIp (the node it is reached at)"
        raw.update(target="static", staticHost=kube.node_ip, staticPort=port.node_port)
    elif obj.service_type == "ClusterIP":
        host = cluster_dns_name(obj.name, obj.namespace, kube.cluster_domain)
        raw.update(target="static", staticHost=host, staticPort=port.port)
    else:
        return f"is a Service of type {obj.service_type}; allowed: NodePort, LoadBalancer, ClusterIP"
    return None


def _model_refusal(
    run: _Run,
    obj: ClusterObject,
    name: str,
    exc: ValidationError,
    annotations: Mapping[str, str],
    refusal: Callable[..., Refusal],
) -> Refusal:
    """The model's first error, named by the annotation it comes from (or the label or object name)."""
    err = exc.errors()[0]
    message = str(err["msg"]).removeprefix("Value error, ")
    fields = [p for p in err["loc"] if isinstance(p, str)]
    for part in fields:
        if part in DISCOVERY_ANNOTATED_KEYS:
            key = discovery_annotation(part)
            return refusal(message, key, annotations.get(key))
    if "name" in fields:
        label = run.section.name_label
        source = f"label {label}" if label else f"the {obj.kind.value.rstrip('s')}'s name"
        return refusal(f"instance name {name!r} (from {source}): {message}")
    if err["type"] == "unknown_instance_kind":
        key = discovery_annotation("routing")
        return refusal("unknown routing; allowed: port, connect", key, annotations.get(key))
    return refusal(f"{'.'.join(fields) or 'instance'}: {message}")


def _stack_problem(run: _Run, inst: Instance, pins: Mapping[int, str]) -> tuple[str, str | None, str | None] | None:
    """What the stack's other sections say against the instance (the rules `Settings` checks for the file's)."""
    settings = run.settings
    routing_key = discovery_annotation("routing")
    if isinstance(inst, ConnectModeInstance):
        if settings.connect is None:
            return ("routing connect needs ssh-gateway:connect, which this stack has not", routing_key, inst.routing)
        if isinstance(inst, ConnectStaticInstance) and isinstance(settings.connect.gateway, IstioGatewaySettings):
            return (
                "a discovered Service is reached behind connect.gateway.kind envoy only (Istio routes CONNECT to "
                "the stack's own Services); use routing port, or discover from: pods",
                routing_key,
                inst.routing,
            )
    else:
        port_range = settings.ports.range
        if port_range is None:
            return ("routing port needs ssh-gateway:ports.range, which this stack has not", routing_key, inst.routing)
        if inst.port is not None:
            key, value = discovery_annotation("port"), str(inst.port)
            if inst.port not in port_range:
                return (f"is outside ssh-gateway:ports.range {port_range}", key, value)
            if inst.port in settings.ports.reserved:
                return ("is in ssh-gateway:ports.reserved", key, value)
            if inst.port in pins:
                return (f"is pinned by instance {pins[inst.port]!r} already", key, value)
            holders = [n for n in run.bound.get(inst.port, ()) if n != f"{run.own_prefix}{inst.name}"]
            if holders:
                return (f"is bound by Pangolin resource {holders[0]!r} already: pin a free port", key, value)
    if inst.host_key is not None and "host_key_generation" in inst.model_fields_set:
        return (
            "a pinned hostKey is issued no host key to rotate: drop one of the two",
            discovery_annotation("hostKeyGeneration"),
            str(inst.host_key_generation),
        )
    problem = instance_name_problem(settings, inst)
    return (problem, None, None) if problem is not None else None


def _gone(run: _Run) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Remembered instances this run did not find: kept in their grace period; after it removed, unless more
    would go at once than the guard allows. Returns (removed, held)."""
    grace = timedelta(seconds=run.section.grace_period)
    expired: list[tuple[str, Found]] = []
    configured = {i.name for i in run.settings.instances}
    for name, known in sorted(run.memory.items()):
        if name in run.found or name in configured:
            continue
        try:
            instance = _INSTANCE.validate_python(dict(known.instance))
        except ValidationError:
            continue  # the settings changed under it: nothing valid to keep
        since = known.missing_since or run.now
        found = Found(
            instance=instance,
            kind=known.kind,
            namespace=known.namespace,
            name=known.object_name,
            uid=known.uid,
            annotations=known.annotations,
            config=known.instance,
            state=State.MISSING,
            missing_since=since,
        )
        if run.now - since >= grace:
            expired.append((name, found))
        else:
            run.found[name] = found
    if len(expired) > run.section.max_removals:
        for name, found in expired:
            run.found[name] = replace(found, state=State.HELD)
        return (), tuple(name for name, _ in expired)
    return tuple(name for name, _ in expired), ()


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
        record = found.record()
        record["endpoint"] = dict(endpoints.get(found.instance.name, {}))
        data[status_instance_key(found.instance.name)] = json.dumps(record, sort_keys=True)
    for refusal in outcome.refusals:
        entry = {"object": refusal.ref, "key": refusal.key, "error": refusal.line}
        data[status_refused_key(refusal.namespace, refusal.name)] = json.dumps(entry, sort_keys=True)
    if outcome.held:
        held = {"held": list(outcome.held), "maxRemovals": outcome.max_removals}
        data[STATUS_HELD_KEY] = json.dumps(held, sort_keys=True)
    return data
