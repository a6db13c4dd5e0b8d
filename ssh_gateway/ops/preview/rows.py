"""One row per instance a preview touches (and one for the stack's CONNECT entry): what happens to its port, target,
routing and NSG rules, read from the preview's steps (ssh_gateway/ops/preview/steps.py) with the stack's config
and outputs (ssh_gateway/ops/preview/context.py). summary.py sorts them and adds the warnings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ssh_gateway.core.firewall import ports_of
from ssh_gateway.core.names import (
    COMPONENT_TYPE,
    CONNECT_ENTRY_TYPE,
    CONNECT_INSTANCE_TYPE,
    ENVOY_FILTER_TYPE,
    FIREWALL_TYPE,
    NSG_RULE_TYPE,
    PANGOLIN_TYPE,
    SERVICE_TYPE,
    entry_of,
    instance_of,
    type_chain,
    urn_name,
    urn_type,
)
from ssh_gateway.core.outputs import Routing

from .context import ENTRY_ROW, Allocation, Endpoints, as_int
from .steps import Preview, Step

__all__ = ["InstanceChange", "instance_rows"]


_TARGET_KEYS: Final = ("siteId", "targetIp", "targetPort")
# The ops a step can have, reduced to what happened to the resource. A replacement shows up as up to three
# steps (`delete-replaced`, `replace`, `create-replacement`); `same`, `read` and `refresh` change nothing.
_OPS: Final = {
    "create": "create",
    "import": "create",
    "delete": "delete",
    "discard": "delete",
    "update": "update",
    "replace": "replace",
    "create-replacement": "replace",
    "delete-replaced": "replace",
    "discard-replaced": "replace",
    "import-replacement": "replace",
}


@dataclass(frozen=True)
class InstanceChange:
    """One instance's row."""

    instance: str
    change: str
    """added, removed, port changed, target changed, port and target changed, or touched."""
    endpoint: str
    """`ssh -p PORT user@host` after the change (before it, for a removed instance)."""
    old_port: int | None
    new_port: int | None
    target: str
    """`host:port` Pangolin forwards to, `old → new` when it changes."""
    firewall: tuple[str, ...]
    """The NSG rules opened or closed, e.g. `opens 41003 to 203.0.113.0/24`."""
    replaced: tuple[str, ...] = ()
    """Resources of the instance that are replaced, with the properties that force it."""
    touched: tuple[str, ...] = ()
    """What else changes (resource and property names), for rows whose port and target stay."""
    routing: Routing = Routing.PORT
    """`port`, or `connect` for a connect-mode instance (and the CONNECT entry's row)."""


# --- reading ---------------------------------------------------------------------------------------------------


def _old(step: Step | None) -> Mapping[str, Any]:
    return step.before if step is not None else {}


def _new(step: Step | None) -> Mapping[str, Any]:
    return step.after if step is not None else {}


@dataclass
class _Instance:
    name: str
    ops: dict[str, str] = field(default_factory=dict)
    """type -> what happened to its resource of that type."""
    steps: dict[str, Step] = field(default_factory=dict)
    """type -> the step that carries both states (the `replace` one for replacements)."""
    replace_reasons: dict[str, list[str]] = field(default_factory=dict)


def _owner(urn: str) -> str | None:
    """The row a resource belongs to: its instance's, the CONNECT entry's, or none."""
    name = instance_of(urn)
    return ENTRY_ROW if name is None and entry_of(urn) else name


def _collect(steps: Sequence[Step]) -> dict[str, _Instance]:
    instances: dict[str, _Instance] = {}
    for step in steps:
        op = _OPS.get(step.op)
        name = _owner(step.urn)
        if op is None or name is None:
            continue
        kind = urn_type(step.urn)
        inst = instances.setdefault(name, _Instance(name))
        if op == "replace" or kind not in inst.ops:
            inst.ops[kind] = op
        # Prefer the step that holds both states (the `replace` step of a replacement).
        if kind not in inst.steps or (step.old and step.new):
            inst.steps[kind] = step
        if step.replace_reasons:
            inst.replace_reasons[kind] = sorted({*inst.replace_reasons.get(kind, []), *step.replace_reasons})
    return instances


# --- deciding ----------------------------------------------------------------------------------------------------


def _target(inputs: Mapping[str, Any]) -> str | None:
    ip, port = inputs.get("targetIp"), as_int(inputs.get("targetPort"))
    return f"{ip}:{port}" if ip is not None and port is not None else None


def _sources(inputs: Mapping[str, Any]) -> list[str]:
    prefixes = [inputs.get("sourceAddressPrefix"), *(inputs.get("sourceAddressPrefixes") or [])]
    return [str(p) for p in prefixes if p]


def _nsg_port(inputs: Mapping[str, Any]) -> str:
    return str(inputs.get("destinationPortRange") or ", ".join(inputs.get("destinationPortRanges") or []) or "?")


def _firewall(inst: _Instance) -> tuple[str, ...]:
    op = inst.ops.get(NSG_RULE_TYPE)
    step = inst.steps.get(NSG_RULE_TYPE)
    if op is None or step is None:
        return ()
    old, new = _old(step), _new(step)
    opens = f"opens {_nsg_port(new)} to {', '.join(_sources(new)) or 'any source'}"
    closes = f"closes {_nsg_port(old)}"
    if op == "create":
        return (opens,)
    if op == "delete":
        return (closes,)
    if _nsg_port(old) != _nsg_port(new):
        return (closes, opens)
    if _sources(old) != _sources(new):
        return (f"{_nsg_port(new)}: sources {', '.join(_sources(old))} → {', '.join(_sources(new))}",)
    return (f"{_nsg_port(new)}: rule {'replaced' if op == 'replace' else 'updated'}",)


@dataclass(frozen=True)
class _MergedPorts:
    """The ports the stack's merged rules (`firewall.rules: merged`) open before and after, and to whom."""

    before: Mapping[int, str] = field(default_factory=dict)
    after: Mapping[int, str] = field(default_factory=dict)

    def changed(self) -> set[int]:
        """The ports opened, closed, or opened to others."""
        return {p for p in {*self.before, *self.after} if self.before.get(p) != self.after.get(p)}

    def of(self, old_port: int | None, new_port: int | None) -> tuple[str, ...]:
        """An instance's share, worded as its own rule's would be: its old port closed, its new one opened."""
        out = []
        if old_port is not None and old_port != new_port and old_port in self.before:
            out.append(f"closes {old_port}")
        if new_port is not None and new_port in self.after:
            now, was = self.after[new_port], self.before.get(new_port)
            if old_port != new_port or was is None:
                out.append(f"opens {new_port} to {now}")
            elif was != now:
                out.append(f"{new_port}: sources {was} → {now}")
        return tuple(out)


def _merged_ports(steps: Sequence[Step]) -> _MergedPorts:
    before: dict[int, str] = {}
    after: dict[int, str] = {}
    for step in steps:
        if urn_type(step.urn) != NSG_RULE_TYPE or FIREWALL_TYPE not in type_chain(step.urn):
            continue
        op = _OPS.get(step.op, "same")
        for inputs, into, skip in ((_old(step), before, "create"), (_new(step), after, "delete")):
            if op != skip and inputs:
                whom = ", ".join(_sources(inputs)) or "any source"
                into.update(dict.fromkeys(ports_of(inputs.get("destinationPortRanges") or []), whom))
    return _MergedPorts(before, after)


def _changed_keys(step: Step) -> list[str]:
    old, new = _old(step), _new(step)
    return sorted(k for k in {*old, *new} if not k.startswith("__") and old.get(k) != new.get(k))


def _change(component: str | None, *, port_moved: bool, target_moved: bool, left_connect: bool) -> str:
    """A port-mode instance's change, from what happens to its component, port, target and route."""
    if component != "delete" and left_connect:
        return "routing changed (connect → port)"  # its route goes, its Service stays (aliased)
    if component in ("create", "delete"):
        return "added" if component == "create" else "removed"
    if port_moved:
        return "port and target changed" if target_moved else "port changed"
    return "target changed" if target_moved else "touched"


def _row(inst: _Instance, alloc: Allocation, endpoints: Endpoints, merged: _MergedPorts) -> InstanceChange:
    component = inst.ops.get(COMPONENT_TYPE)
    pangolin = inst.steps.get(PANGOLIN_TYPE)
    old_in, new_in = _old(pangolin), _new(pangolin)
    old_port = as_int(old_in.get("proxyPort")) or alloc.old_ports.get(inst.name)
    new_port = as_int(new_in.get("proxyPort")) or alloc.new_ports.get(inst.name)
    old_target, new_target = _target(old_in), _target(new_in)
    if component == "delete":
        new_port = None
    if component == "create":
        old_port = None

    port_moved = old_port is not None and new_port is not None and old_port != new_port
    target_moved = any(k in old_in and k in new_in and old_in[k] != new_in[k] for k in _TARGET_KEYS)
    service_op = inst.ops.get(SERVICE_TYPE)
    target_moved = target_moved or (component is None and service_op is not None)
    left_connect = inst.ops.get(ENVOY_FILTER_TYPE) == "delete" or endpoints.was_connect(inst.name)
    change = _change(component, port_moved=port_moved, target_moved=target_moved, left_connect=left_connect)
    if old_target and new_target and old_target != new_target:
        target = f"{old_target} → {new_target}"
    else:
        target = new_target or old_target or ("the Service changes" if service_op else "unchanged")
    endpoint = endpoints.endpoint(inst.name, old_port if change == "removed" else new_port)
    replaced = tuple(
        f"{urn_name(inst.steps[kind].urn)} ({', '.join(inst.replace_reasons.get(kind, [])) or 'replaced'})"
        for kind, op in sorted(inst.ops.items())
        if op == "replace" and kind in inst.steps
    )
    touched = tuple(
        f"{urn_name(step.urn)}: {', '.join(keys)}"
        for kind, step in sorted(inst.steps.items())
        if change == "touched"
        and kind != COMPONENT_TYPE
        and inst.ops.get(kind) != "replace"
        and (keys := _changed_keys(step))
    )
    return InstanceChange(
        instance=inst.name,
        change=change,
        endpoint=endpoint,
        old_port=old_port,
        new_port=new_port,
        target=target,
        firewall=_firewall(inst) + merged.of(old_port, new_port),
        replaced=replaced,
        touched=touched,
    )


def _domain(step: Step | None) -> str | None:
    """The first domain of an instance's route (its EnvoyFilter's virtual host): its CONNECT authority."""
    for inputs in (_new(step), _old(step)):
        spec = inputs.get("spec")
        patches = spec.get("configPatches") if isinstance(spec, Mapping) else None
        if isinstance(patches, list) and patches and isinstance(patches[0], Mapping):
            domains = ((patches[0].get("patch") or {}).get("value") or {}).get("domains")
            if isinstance(domains, list) and domains:
                return str(domains[0])
    return None


def _connect_row(inst: _Instance, endpoints: Endpoints) -> InstanceChange:
    """A connect-mode instance: no port of its own; its route and Service behind the stack's CONNECT entry."""
    component = inst.ops.get(CONNECT_INSTANCE_TYPE)
    if component == "create":
        change = "added"
    elif component == "delete":
        change = "removed"
    elif inst.ops.get(PANGOLIN_TYPE) == "delete":
        change = "routing changed (port → connect)"  # its port's resources go, its Service stays (aliased)
    else:
        change = "touched"
    authority = _domain(inst.steps.get(ENVOY_FILTER_TYPE))
    endpoint = endpoints.connect_endpoint(inst.name, authority)
    target = endpoints.upstreams.get(inst.name) or f"{endpoints.authorities.get(inst.name) or authority or '?'}:22"
    touched = tuple(
        f"{urn_name(step.urn)}: {', '.join(keys)}"
        for kind, step in sorted(inst.steps.items())
        if change == "touched" and kind != CONNECT_INSTANCE_TYPE and (keys := _changed_keys(step))
    )
    return InstanceChange(
        instance=inst.name,
        change=change,
        endpoint=endpoint,
        old_port=None,
        new_port=None,
        target=target,
        firewall=_firewall(inst),  # only when it leaves routing port: its own rule closes
        touched=touched,
        routing=Routing.CONNECT,
    )


def _entry_row(inst: _Instance) -> InstanceChange:
    """The stack's CONNECT entry: its Pangolin resource (public port -> gateway) and its NSG rule."""
    component = inst.ops.get(CONNECT_ENTRY_TYPE)
    change = {"create": "added", "delete": "removed"}.get(component or "", "touched")
    pangolin = inst.steps.get(PANGOLIN_TYPE)
    old_in, new_in = _old(pangolin), _new(pangolin)
    old_port, new_port = as_int(old_in.get("proxyPort")), as_int(new_in.get("proxyPort"))
    port = old_port if change == "removed" else new_port or old_port
    old_target, new_target = _target(old_in), _target(new_in)
    target = f"{old_target} → {new_target}" if old_target and new_target and old_target != new_target else None
    if old_port and new_port and old_port != new_port:
        change = "port changed"
    touched = tuple(
        f"{urn_name(step.urn)}: {', '.join(keys)}"
        for kind, step in sorted(inst.steps.items())
        if change == "touched" and kind != CONNECT_ENTRY_TYPE and (keys := _changed_keys(step))
    )
    return InstanceChange(
        instance=ENTRY_ROW,
        change=change,
        endpoint=f"port {port}" if port else "the gateway's own address",
        old_port=old_port,
        new_port=new_port,
        target=target or new_target or old_target or "the gateway",
        firewall=_firewall(inst),
        touched=touched,
        routing=Routing.CONNECT,
    )


def _any_row(inst: _Instance, alloc: Allocation, endpoints: Endpoints, merged: _MergedPorts) -> InstanceChange:
    if inst.name == ENTRY_ROW:
        return _entry_row(inst)
    if endpoints.routing(inst.name, inst.ops) is Routing.CONNECT:
        return _connect_row(inst, endpoints)
    return _row(inst, alloc, endpoints, merged)


def instance_rows(preview: Preview, alloc: Allocation, endpoints: Endpoints) -> list[InstanceChange]:
    """The rows of the instances (and the CONNECT entry) the preview touches, in no particular order."""
    merged = _merged_ports(preview.steps)
    instances = _collect(preview.steps)
    # An instance whose port only a merged rule opens or closes has no step of its own: its row comes from there.
    holders = {**{p: n for n, p in alloc.old_ports.items()}, **{p: n for n, p in alloc.new_ports.items()}}
    for port in sorted(merged.changed()):
        if port in holders:
            instances.setdefault(holders[port], _Instance(holders[port]))
    return [_any_row(inst, alloc, endpoints, merged) for inst in instances.values()]
