"""Instances discovered from the cluster (`ssh-gateway:discovery`, docs/cluster-instances.md): the decision.

`discover` takes what the program read - a complete listing of the selected objects, this stack's status
ConfigMap (its memory, read by `discovery_status`), the other stacks' selections - with the time and the
settings, and decides (in the records of `discovery_records`):

- each selected object's instance, its keys from the `ssh-gateway.io/<key>` annotations, validated by the same
  instance models as the file's entries (an error names the object, the annotation, the value, what is allowed);
- refusals: an object whose annotations are invalid (it keeps its last accepted spec if it had one), whose name
  is also configured in the file or taken by another object, that another stack selects too, or whose instance
  needs a Service or host-key Secret whose name another owner's object holds in its namespace
  (`discovery_names`);
- the grace period: an instance whose object is gone stays (same name, so the same port, host key and Pangolin
  resource) until `missingSince + gracePeriod`, then goes;
- the guard: more removals in one run than `maxRemovals` are all held back (kept, warned, recorded);
- the status's room: Kubernetes keeps a ConfigMap to 1 MiB, so a new instance the stack's status has no room for
  is refused (every instance it already serves stays), and refusals past the room are counted, not listed.

It never talks to a cluster: a listing that failed never reaches it (the reader raises instead), so a failure to
read can never look like objects that are gone.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Final

from pydantic import TypeAdapter, ValidationError

from .cluster import ClusterObject, Listing, Occupants
from .discovery_names import claimed_name, occupant_problem
from .discovery_records import Found, Outcome, Refusal, Remembered, Selection, State, selection_of
from .discovery_status import REFUSALS_ROOM, STATUS_MAX_BYTES, fixed_room, instance_room, refusal_room
from .names import DISCOVERY_ANNOTATED_KEYS, DISCOVERY_PREFIX, DiscoverFrom, discovery_annotation
from .outputs import Routing
from .settings import (
    ConnectModeInstance,
    ConnectStaticInstance,
    Discovery,
    Instance,
    IstioGatewaySettings,
    Settings,
)
from .settings.derived_names import instance_name_problem
from .targets import cluster_dns_name

__all__ = ["discover"]

POD_NAME_LABEL: Final = "statefulset.kubernetes.io/pod-name"
"""The label a StatefulSet gives each pod, with the pod's name: a selector of that pod alone."""

_NODE_PORT_TYPES: Final = ("NodePort", "LoadBalancer")
_INSTANCE: Final[TypeAdapter[Instance]] = TypeAdapter(Instance)


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
    occupants: Occupants
    own_mark: str
    refusals: list[Refusal] = field(default_factory=list)
    found: dict[str, Found] = field(default_factory=dict)
    sources: dict[str, ClusterObject] = field(default_factory=dict)
    """The object each instance of this run found listed comes from."""

    def refuse(self, obj: ClusterObject, reason: str, key: str | None = None, value: str | None = None) -> None:
        self.refusals.append(Refusal.of(obj, reason, key, value))


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
    occupants: Occupants | None = None,
    own_mark: str = "",
) -> Outcome:
    """The discovered instances of this run, from a complete listing (see the module's docstring). `bound`: the
    org's Pangolin resources by the port they bind (names), `own_prefix` this stack's prefix of them: a pinned
    port another resource binds is refused here, where it stops one object, not in the allocator, where it
    would stop the run. `occupants`: the objects of the names `discovery_names.names_to_check` gave that exist,
    with their stack marks; `own_mark` this stack's (`names.stack_mark`)."""
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
        occupants=occupants or {},
        own_mark=own_mark,
    )
    pins = {i.port: i.name for i in settings.instances if not isinstance(i, ConnectModeInstance) and i.port}
    for name, claimants in sorted(_claims(run, listing).items()):
        owner = _owner(run, name, claimants)
        if owner is not None:
            _accept(run, name, owner, pins)
    removed, held = _gone(run)
    selection = selection_of(section, stack)
    instances, unlisted = _fit(run, fixed_room(selection, held, section.max_removals))
    return Outcome(
        instances=instances,
        refusals=tuple(run.refusals),
        removed=removed,
        held=held,
        selection=selection,
        max_removals=section.max_removals,
        unlisted=unlisted,
    )


def _claims(run: _Run, listing: Listing) -> dict[str, list[ClusterObject]]:
    """The listed objects by the instance name each claims, in order of namespace and name; an object that cannot
    claim one is refused."""
    configured = {i.name for i in run.settings.instances}
    named: dict[str, list[ClusterObject]] = {}
    for obj in sorted(listing.objects, key=lambda o: (o.namespace, o.name)):
        name = _claim(run, obj, configured)
        if name is not None:
            named.setdefault(name, []).append(obj)
    return named


def _claim(run: _Run, obj: ClusterObject, configured: set[str]) -> str | None:
    """The instance name the object claims, or None (refused) when another stack selects it too, it has no name,
    or the file configures its name already."""
    doubled = [s.stack for s in run.others if s.selects(obj)]
    if doubled:
        run.refuse(
            obj,
            f"selected by stacks {run.stack} and {', '.join(sorted(doubled))}: an object may belong to one stack only; "
            "narrow one of their ssh-gateway:discovery selectors",
        )
        return None
    name = _instance_name(run, obj)
    if name is not None and name in configured:
        run.refuse(
            obj,
            f"instance {name!r} is also configured in ssh-gateway:instances, and the file's entry wins: rename "
            "one of the two",
        )
        return None
    return name


def _fit(run: _Run, fixed: int) -> tuple[tuple[Found, ...], int]:
    """What the status ConfigMap has room for: every instance the stack serves already, then new ones by name while
    they fit and leave `REFUSALS_ROOM` (one that does not is refused, the others go on), then the refusals' lines in
    order while they fit. Returns the instances and how many refusals are left unlisted."""
    room = STATUS_MAX_BYTES - fixed - REFUSALS_ROOM
    served = [f for name, f in sorted(run.found.items()) if name in run.memory]
    room -= sum(instance_room(f) for f in served)
    kept = list(served)
    for name, found in sorted(run.found.items()):
        if name in run.memory:
            continue
        size = instance_room(found)
        if size > room:
            run.refuse(
                run.sources[name],
                f"the stack's status ConfigMap has no room for instance {name!r}: Kubernetes holds a ConfigMap to "
                f"{STATUS_MAX_BYTES:,} bytes and the {len(kept)} instances it lists fill it; serve this object "
                "from another stack, a shard whose ssh-gateway:discovery takes it (docs/scaling.md)",
            )
            continue
        room -= size
        kept.append(found)
    room += REFUSALS_ROOM
    listed = 0
    for refusal in run.refusals:
        room -= refusal_room(refusal)
        if room < 0:
            break
        listed += 1
    return tuple(sorted(kept, key=lambda f: f.instance.name)), len(run.refusals) - listed


def _instance_name(run: _Run, obj: ClusterObject) -> str | None:
    """The instance's name: the `nameLabel` value, else the object's name (a Service's without `ssh-`)."""
    name = claimed_name(run.section, obj)
    if name is None:
        label = run.section.name_label
        run.refuse(obj, "required: the label whose value names the instance (discovery.nameLabel)", key=label)
    return name


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
    annotations: Mapping[str, str] = _annotations(obj)
    built = _build(run, name, obj, annotations, pins)
    state = State.PRESENT
    if isinstance(built, Refusal):
        run.refusals.append(built)
        known = run.memory.get(name)
        if known is None or known.namespace != obj.namespace:
            return
        try:
            instance = _INSTANCE.validate_python(dict(known.instance))
        except ValidationError:
            return  # the accepted spec no longer fits the stack's settings: only a new valid one helps
        annotations, config, state = known.annotations, known.instance, State.KEPT
    else:
        instance, config = built
        if not isinstance(instance, ConnectModeInstance) and instance.port is not None:
            pins[instance.port] = name
    run.sources[name] = obj
    run.found[name] = Found(
        instance=instance,
        kind=obj.kind,
        namespace=obj.namespace,
        name=obj.name,
        uid=obj.uid,
        annotations=annotations,
        config=config,
        state=state,
    )


def _build(
    run: _Run, name: str, obj: ClusterObject, annotations: Mapping[str, str], pins: Mapping[int, str]
) -> tuple[Instance, dict[str, Any]] | Refusal:
    """The instance the object and its annotations make, validated by the instance models, and its config."""
    allowed = [discovery_annotation(k) for k in DISCOVERY_ANNOTATED_KEYS]
    for key, value in sorted(annotations.items()):
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            return Refusal.of(obj, f"unknown annotation; {hint}allowed: {', '.join(allowed)}", key, value)
    keys: dict[str, Any] = {k.removeprefix(DISCOVERY_PREFIX): v for k, v in annotations.items()}
    if "sourceCidrs" in keys:
        keys["sourceCidrs"] = [c.strip() for c in str(keys["sourceCidrs"]).split(",") if c.strip()]
    settings = run.settings
    routing = str(keys.pop("routing", settings.routing.value))
    raw: dict[str, Any] = {"name": name, "routing": routing, "namespace": obj.namespace, **keys}
    target = _target(run, obj, raw, routing)
    if isinstance(target, str):
        return Refusal.of(obj, target)
    try:
        instance = _INSTANCE.validate_python(raw)
    except ValidationError as exc:
        return _model_refusal(run, obj, name, exc, annotations)
    problem = _stack_problem(run, instance, pins)
    if problem is not None:
        return Refusal.of(obj, *problem)
    occupied = occupant_problem(settings, instance, obj, run.occupants, run.own_mark)
    if occupied is not None:
        return Refusal.of(obj, occupied)
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
) -> Refusal:
    """The model's first error, named by the annotation it comes from (or the label or object name)."""
    err = exc.errors()[0]
    message = str(err["msg"]).removeprefix("Value error, ")
    fields = [p for p in err["loc"] if isinstance(p, str)]
    for part in fields:
        if part in DISCOVERY_ANNOTATED_KEYS:
            key = discovery_annotation(part)
            return Refusal.of(obj, message, key, annotations.get(key))
    if "name" in fields:
        label = run.section.name_label
        source = f"label {label}" if label else f"the {obj.kind.value.rstrip('s')}'s name"
        return Refusal.of(obj, f"instance name {name!r} (from {source}): {message}")
    if err["type"] == "unknown_instance_kind":
        key = discovery_annotation("routing")
        return Refusal.of(obj, "unknown routing; allowed: port, connect", key, annotations.get(key))
    return Refusal.of(obj, f"{'.'.join(fields) or 'instance'}: {message}")


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
