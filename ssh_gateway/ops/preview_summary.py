"""The reviewer's view of a preview: `pulumi preview --json` as a short Markdown table.

    scripts/pulumi preview --json --stack dev | python -m ssh_gateway.ops.preview_summary
    python -m ssh_gateway.ops.preview_summary preview.json
    scripts/preview-summary dev            # runs the preview, then renders it

One row per instance the preview touches: added, removed, port changed, target changed, routing changed, or
touched (something of it changes, but neither its port nor its target), with its public endpoint and the NSG
rules it opens or closes; a connect-mode instance's row gives its CONNECT authority, and the stack's CONNECT
entry has a row of its own.
Then the warnings: the port range nearly exhausted, ports freed, rules open to anyone, and the preview's errors.

It reads the steps (`op`, `urn`, `oldState`/`newState` with `inputs`, `outputs` and `parent`) and the stack's
config, never `detailedDiff`: Python dynamic providers that implement `diff` leave it empty in the JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ssh_gateway.core.firewall import opens_to_world, ports_of
from ssh_gateway.core.names import (
    ALLOCATION_TYPE,
    COMPONENT_TYPE,
    CONNECT_ENTRY_TYPE,
    CONNECT_INSTANCE_TYPE,
    ENVOY_FILTER_TYPE,
    FIREWALL_TYPE,
    NSG_RULE_TYPE,
    PANGOLIN_TYPE,
    SERVICE_TYPE,
    STACK_TYPE,
    entry_of,
    instance_of,
    public_host,
    type_chain,
    urn_name,
    urn_type,
)
from ssh_gateway.core.outputs import EndpointOutput, Routing, StackOutputs, parse_stack_outputs
from ssh_gateway.core.ports import PortRange
from ssh_gateway.core.settings import ConnectModeInstance, SettingsError, decode_config, parse_settings
from ssh_gateway.core.targets import StaticTarget

__all__ = ["InstanceChange", "Summary", "render", "summarize"]


ENTRY_ROW: Final = "CONNECT entry"
"""The row of the stack's CONNECT entry (a name no instance can have: instance names are DNS labels)."""
EXHAUSTION_THRESHOLD: Final = 0.8
"""Warn when at least this share of the range's usable ports is allocated."""
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


@dataclass(frozen=True)
class Summary:
    """A preview, read for review."""

    stack: str | None
    rows: tuple[InstanceChange, ...]
    warnings: tuple[str, ...]
    resource_changes: Mapping[str, int] = field(default_factory=dict)
    """The preview's own `changeSummary` (resources by op)."""


# --- reading ---------------------------------------------------------------------------------------------------


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _state(step: Mapping[str, Any], which: str) -> Mapping[str, Any]:
    state = step.get(which)
    return state if isinstance(state, Mapping) else {}


def _inputs(step: Mapping[str, Any], which: str) -> Mapping[str, Any]:
    state = _state(step, which)
    inputs = state.get("inputs") or state.get("outputs")
    return inputs if isinstance(inputs, Mapping) else {}


@dataclass
class _Instance:
    name: str
    ops: dict[str, str] = field(default_factory=dict)
    """type -> what happened to its resource of that type."""
    steps: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    """type -> the step that carries both states (the `replace` one for replacements)."""
    replace_reasons: dict[str, list[str]] = field(default_factory=dict)


def _owner(urn: str) -> str | None:
    """The row a resource belongs to: its instance's, the CONNECT entry's, or none."""
    name = instance_of(urn)
    return ENTRY_ROW if name is None and entry_of(urn) else name


def _collect(steps: Sequence[Mapping[str, Any]]) -> dict[str, _Instance]:
    instances: dict[str, _Instance] = {}
    for step in steps:
        op = _OPS.get(str(step.get("op")))
        name = _owner(str(step.get("urn", "")))
        if op is None or name is None:
            continue
        kind = urn_type(str(step.get("urn", "")))
        inst = instances.setdefault(name, _Instance(name))
        if op == "replace" or kind not in inst.ops:
            inst.ops[kind] = op
        # Prefer the step that holds both states (the `replace` step of a replacement).
        if kind not in inst.steps or (step.get("oldState") and step.get("newState")):
            inst.steps[kind] = step
        reasons = [str(r) for r in step.get("replaceReasons") or []]
        if reasons:
            inst.replace_reasons[kind] = sorted({*inst.replace_reasons.get(kind, []), *reasons})
    return instances


def _stack_step(steps: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    return next((s for s in steps if urn_type(str(s.get("urn", ""))) == STACK_TYPE), {})


def _stack_name(steps: Sequence[Mapping[str, Any]]) -> str | None:
    for step in steps:
        urn = str(step.get("urn", ""))
        if urn.startswith("urn:pulumi:"):
            return urn.removeprefix("urn:pulumi:").split("::", 1)[0]
    return None


@dataclass(frozen=True)
class _Allocation:
    old_ports: Mapping[str, int]
    new_ports: Mapping[str, int]
    port_range: PortRange | None
    reserved: tuple[int, ...]


def _ports(value: Any) -> dict[str, int]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): p for k, v in value.items() if (p := _int(v)) is not None}


def _port_list(value: Any) -> tuple[int, ...]:
    return tuple(p for v in value or () if (p := _int(v)) is not None) if isinstance(value, list) else ()


def _old_outputs(steps: Sequence[Mapping[str, Any]]) -> StackOutputs:
    """The stack's outputs before the run, through the contract; none when they are not the contract's: the
    summary says what it can, and never fails on what an older run wrote."""
    outputs = _state(_stack_step(steps), "oldState").get("outputs")
    try:
        return parse_stack_outputs(outputs if isinstance(outputs, Mapping) else {})
    except (KeyError, TypeError, ValueError):
        return parse_stack_outputs({})


def _range(inputs: Mapping[str, Any], old_outputs: StackOutputs) -> PortRange | None:
    """The allocator's range (its `start`/`end` inputs), else the stack's `portRange` output."""
    start, end = _int(inputs.get("start")), _int(inputs.get("end"))
    try:
        return PortRange(start=start, end=end) if start and end else old_outputs.port_range
    except ValueError:
        return None


def _allocation(steps: Sequence[Mapping[str, Any]], old_outputs: StackOutputs) -> _Allocation:
    """The port table before and after: the allocator's step if it changes, else the stack's outputs."""
    step = next((s for s in steps if urn_type(str(s.get("urn", ""))) == ALLOCATION_TYPE), None)
    old = _inputs(step, "oldState") if step else {}
    new = _inputs(step, "newState") if step else {}
    old_ports = _ports(old.get("ports")) if old else dict(old_outputs.allocations)
    return _Allocation(
        old_ports=old_ports,
        new_ports=_ports(new.get("ports")) if new else old_ports,
        port_range=_range(new or old, old_outputs),
        reserved=_port_list(new.get("reserved") or old.get("reserved")),
    )


@dataclass(frozen=True)
class _Endpoints:
    """Who logs in where: from the stack's new config, else its old outputs."""

    users: Mapping[str, str]
    hosts: Mapping[str, str]
    old: Mapping[str, EndpointOutput]
    authorities: Mapping[str, str] = field(default_factory=dict)
    """Connect-mode instances (by the new config) and their CONNECT authorities."""
    upstreams: Mapping[str, str] = field(default_factory=dict)
    """Static connect-mode instances (by the new config) and the `host:port` the gateway reaches them at."""
    entry: tuple[str, int] | None = None
    """The CONNECT entry's public host and port, by the new config."""

    def was_connect(self, instance: str) -> bool:
        """Whether the old outputs have the instance in connect mode (with or without an EnvoyFilter of its own)."""
        previous = self.old.get(instance)
        return previous is not None and previous.routing is Routing.CONNECT

    def routing(self, instance: str, ops: Mapping[str, str]) -> Routing:
        """`connect` or `port`: by the new config, else by the old outputs, else by the resources' types."""
        if instance == ENTRY_ROW or instance in self.authorities:
            return Routing.CONNECT
        if instance in self.hosts:
            return Routing.PORT
        previous = self.old.get(instance)
        if previous is not None:
            return previous.routing
        return Routing.CONNECT if CONNECT_INSTANCE_TYPE in ops or ENVOY_FILTER_TYPE in ops else Routing.PORT

    def connect_endpoint(self, instance: str, authority: str | None) -> str:
        """`CONNECT <authority> via <host>:<port>`, what a connect-mode instance's ProxyCommand does."""
        previous = self.old.get(instance)
        entry = self.entry
        if entry is None and previous is not None and previous.host and previous.port:
            entry = (previous.host, previous.port)
        authority = self.authorities.get(instance) or authority
        if authority is None and previous is not None:
            authority = previous.authority
        if authority is None or entry is None:
            return "unknown"
        return f"CONNECT {authority} via {entry[0]}:{entry[1]}"

    def endpoint(self, instance: str, port: int | None) -> str:
        host = self.hosts.get(instance)
        user = self.users.get(instance)
        previous = self.old.get(instance)
        if previous is not None:
            host = host or previous.host
            user = user or previous.user
        if host is None or port is None:
            return "unknown"
        return f"ssh -p {port} {user or 'root'}@{host}"


def _endpoints(preview: Mapping[str, Any], old_outputs: StackOutputs) -> _Endpoints:
    users: dict[str, str] = {}
    hosts: dict[str, str] = {}
    authorities: dict[str, str] = {}
    upstreams: dict[str, str] = {}
    entry = None
    config = preview.get("config")
    if isinstance(config, Mapping):
        try:
            settings = parse_settings(decode_config({str(k): str(v) for k, v in config.items()}))
        except SettingsError:
            settings = None
        if settings is not None:
            for inst in settings.instances:
                users[inst.name] = inst.user
                if isinstance(inst, ConnectModeInstance):
                    authorities[inst.name] = settings.connect_instance(inst).authority
                    target = settings.connect_target(inst)
                    if isinstance(target, StaticTarget):  # behind a standalone Envoy
                        upstreams[inst.name] = f"{target.host}:{target.port}"
                else:
                    hosts[inst.name] = public_host(settings.gateway.host_template, inst.name)
            if settings.connect is not None:
                public = settings.connect_entry()
                entry = (public.host, public.port)
    return _Endpoints(
        users=users,
        hosts=hosts,
        old=old_outputs.endpoints,
        authorities=authorities,
        upstreams=upstreams,
        entry=entry,
    )


# --- deciding ----------------------------------------------------------------------------------------------------


def _target(inputs: Mapping[str, Any]) -> str | None:
    ip, port = inputs.get("targetIp"), _int(inputs.get("targetPort"))
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
    old, new = _inputs(step, "oldState"), _inputs(step, "newState")
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


def _merged_ports(steps: Sequence[Mapping[str, Any]]) -> _MergedPorts:
    before: dict[int, str] = {}
    after: dict[int, str] = {}
    for step in steps:
        urn = str(step.get("urn", ""))
        if urn_type(urn) != NSG_RULE_TYPE or FIREWALL_TYPE not in type_chain(urn):
            continue
        op = _OPS.get(str(step.get("op")), "same")
        for which, into, skip in (("oldState", before, "create"), ("newState", after, "delete")):
            inputs = _inputs(step, which)
            if op != skip and inputs:
                whom = ", ".join(_sources(inputs)) or "any source"
                into.update(dict.fromkeys(ports_of(inputs.get("destinationPortRanges") or []), whom))
    return _MergedPorts(before, after)


def _changed_keys(step: Mapping[str, Any]) -> list[str]:
    old, new = _inputs(step, "oldState"), _inputs(step, "newState")
    return sorted(k for k in {*old, *new} if not k.startswith("__") and old.get(k) != new.get(k))


def _row(inst: _Instance, alloc: _Allocation, endpoints: _Endpoints, merged: _MergedPorts) -> InstanceChange:
    component = inst.ops.get(COMPONENT_TYPE)
    pangolin = inst.steps.get(PANGOLIN_TYPE, {})
    old_in, new_in = _inputs(pangolin, "oldState"), _inputs(pangolin, "newState")
    old_port = _int(old_in.get("proxyPort")) or alloc.old_ports.get(inst.name)
    new_port = _int(new_in.get("proxyPort")) or alloc.new_ports.get(inst.name)
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
    if component != "delete" and left_connect:
        change = "routing changed (connect → port)"  # its route goes, its Service stays (aliased)
    elif component == "create":
        change = "added"
    elif component == "delete":
        change = "removed"
    elif port_moved and target_moved:
        change = "port and target changed"
    elif port_moved:
        change = "port changed"
    elif target_moved:
        change = "target changed"
    else:
        change = "touched"

    if old_target and new_target and old_target != new_target:
        target = f"{old_target} → {new_target}"
    else:
        target = new_target or old_target or ("the Service changes" if service_op else "unchanged")
    endpoint = endpoints.endpoint(inst.name, old_port if change == "removed" else new_port)
    replaced = tuple(
        f"{urn_name(str(inst.steps[kind].get('urn', '')))} "
        f"({', '.join(inst.replace_reasons.get(kind, [])) or 'replaced'})"
        for kind, op in sorted(inst.ops.items())
        if op == "replace" and kind in inst.steps
    )
    touched = tuple(
        f"{urn_name(str(step.get('urn', '')))}: {', '.join(keys)}"
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


def _domain(step: Mapping[str, Any]) -> str | None:
    """The first domain of an instance's route (its EnvoyFilter's virtual host): its CONNECT authority."""
    for which in ("newState", "oldState"):
        spec = _inputs(step, which).get("spec")
        patches = spec.get("configPatches") if isinstance(spec, Mapping) else None
        if isinstance(patches, list) and patches and isinstance(patches[0], Mapping):
            domains = ((patches[0].get("patch") or {}).get("value") or {}).get("domains")
            if isinstance(domains, list) and domains:
                return str(domains[0])
    return None


def _connect_row(inst: _Instance, endpoints: _Endpoints) -> InstanceChange:
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
    authority = _domain(inst.steps.get(ENVOY_FILTER_TYPE, {}))
    endpoint = endpoints.connect_endpoint(inst.name, authority)
    target = endpoints.upstreams.get(inst.name) or f"{endpoints.authorities.get(inst.name) or authority or '?'}:22"
    touched = tuple(
        f"{urn_name(str(step.get('urn', '')))}: {', '.join(keys)}"
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
    pangolin = inst.steps.get(PANGOLIN_TYPE, {})
    old_in, new_in = _inputs(pangolin, "oldState"), _inputs(pangolin, "newState")
    old_port, new_port = _int(old_in.get("proxyPort")), _int(new_in.get("proxyPort"))
    port = old_port if change == "removed" else new_port or old_port
    old_target, new_target = _target(old_in), _target(new_in)
    target = f"{old_target} → {new_target}" if old_target and new_target and old_target != new_target else None
    if old_port and new_port and old_port != new_port:
        change = "port changed"
    touched = tuple(
        f"{urn_name(str(step.get('urn', '')))}: {', '.join(keys)}"
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


def _any_row(inst: _Instance, alloc: _Allocation, endpoints: _Endpoints, merged: _MergedPorts) -> InstanceChange:
    if inst.name == ENTRY_ROW:
        return _entry_row(inst)
    if endpoints.routing(inst.name, inst.ops) is Routing.CONNECT:
        return _connect_row(inst, endpoints)
    return _row(inst, alloc, endpoints, merged)


def _warnings(preview: Mapping[str, Any], rows: Sequence[InstanceChange], alloc: _Allocation) -> list[str]:
    warnings = []
    if alloc.port_range is not None:
        rng = alloc.port_range
        usable = rng.size - len([p for p in set(alloc.reserved) if p in rng])
        used = len(alloc.new_ports)
        if usable > 0 and used / usable >= EXHAUSTION_THRESHOLD:
            warnings.append(
                f"Port range {rng} is {used * 100 // usable}% allocated ({used} of {usable} usable ports, "
                f"{max(usable - used, 0)} free): widen `ssh-gateway:ports.range` (and the gateway's published "
                "range) before it runs out."
            )
    old_holders = {port: name for name, port in alloc.old_ports.items()}
    freed = sorted(set(alloc.old_ports.values()) - set(alloc.new_ports.values()))
    if freed:
        listed = ", ".join(f"{p} (was `{old_holders[p]}`)" for p in freed)
        warnings.append(
            f"Ports freed: {listed}. An ssh config that still has the old endpoint stops working; the allocator "
            "hands a freed port out again only after every never-used port."
        )
    for name, port in sorted(alloc.new_ports.items(), key=lambda item: item[1]):
        previous = old_holders.get(port)
        if previous is not None and previous != name:
            warnings.append(
                f"Port {port} passes from `{previous}` to `{name}`: an ssh config that still has `{previous}` on "
                f"{port} now reaches `{name}` (its host key differs, so ssh will refuse until the entry is fixed)."
            )
    for row in rows:
        for rule in row.firewall:
            opened = rule.split(" to ", 1)[1] if " to " in rule else ""
            if opens_to_world(opened.split(",")):
                warnings.append(f"`{row.instance}`: the NSG rule {rule}, i.e. to anyone.")
    for diagnostic in preview.get("diagnostics") or []:
        if isinstance(diagnostic, Mapping) and diagnostic.get("severity") in ("error", "warning"):
            message = str(diagnostic.get("message", "")).strip().removeprefix("error: ")
            where = f" ({urn_name(str(diagnostic['urn']))})" if diagnostic.get("urn") else ""
            warnings.append(f"Preview {diagnostic['severity']}{where}: {message}")
    return warnings


_ORDER: Final = (
    "added",
    "port and target changed",
    "port changed",
    "target changed",
    "routing changed (port → connect)",
    "routing changed (connect → port)",
    "touched",
    "removed",
)


def summarize(preview: Mapping[str, Any]) -> Summary:
    """Reads a `pulumi preview --json` document."""
    steps = [s for s in preview.get("steps") or [] if isinstance(s, Mapping)]
    old_outputs = _old_outputs(steps)
    alloc = _allocation(steps, old_outputs)
    endpoints = _endpoints(preview, old_outputs)
    merged = _merged_ports(steps)
    instances = _collect(steps)
    # An instance whose port only a merged rule opens or closes has no step of its own: its row comes from there.
    holders = {**{p: n for n, p in alloc.old_ports.items()}, **{p: n for n, p in alloc.new_ports.items()}}
    for port in sorted(merged.changed()):
        if port in holders:
            instances.setdefault(holders[port], _Instance(holders[port]))
    rows = sorted(
        (_any_row(inst, alloc, endpoints, merged) for inst in instances.values()),
        key=lambda r: (_ORDER.index(r.change), r.instance),
    )
    summary = preview.get("changeSummary")
    return Summary(
        stack=_stack_name(steps),
        rows=tuple(rows),
        warnings=tuple(_warnings(preview, rows, alloc)),
        resource_changes={str(k): int(v) for k, v in summary.items()} if isinstance(summary, Mapping) else {},
    )


# --- rendering ---------------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _change_cell(row: InstanceChange) -> str:
    text = row.change
    if row.change in ("port changed", "port and target changed"):
        text += f" ({row.old_port} → {row.new_port})"
    if row.replaced:
        text += "; replaces " + ", ".join(row.replaced)
    if row.touched:
        text += ": " + "; ".join(row.touched)
    return text


def render(summary: Summary) -> str:
    """The Markdown comment: a heading, the table, the warnings."""
    counts: dict[str, int] = {}
    for row in summary.rows:
        if row.instance != ENTRY_ROW:
            counts[row.change] = counts.get(row.change, 0) + 1
    title = f"### ssh-gateway preview: `{summary.stack}`" if summary.stack else "### ssh-gateway preview"
    lines = [title, ""]
    if summary.rows:
        tally = ", ".join(f"{counts[c]} {c}" for c in _ORDER if c in counts) or "none changes"
        lines += [f"Instances: {tally}.", ""]
        # The routing column only where a stack has connect-mode rows: port-only summaries stay as they were.
        routed = any(row.routing == Routing.CONNECT for row in summary.rows)
        header = ["Instance", *(["Routing"] if routed else []), "Change", "Public endpoint", "Target", "NSG rules"]
        lines += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        for row in summary.rows:
            endpoint = f"~~`{row.endpoint}`~~" if row.change == "removed" else f"`{row.endpoint}`"
            cells = [
                f"`{row.instance}`",
                *([row.routing] if routed else []),
                _change_cell(row),
                endpoint,
                row.target,
                "; ".join(row.firewall) or "—",
            ]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    else:
        lines.append("No instance gains, loses or changes a public port, target or NSG rule.")
    changed = {op: n for op, n in summary.resource_changes.items() if op != "same" and n}
    if changed:
        lines += ["", "Resources: " + ", ".join(f"{n} to {op}" for op, n in sorted(changed.items())) + "."]
    if summary.warnings:
        lines += ["", "**Warnings**", ""]
        lines += [f"- {w}" for w in summary.warnings]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render `pulumi preview --json` as a Markdown summary.")
    parser.add_argument("file", nargs="?", default="-", help="the preview's JSON (default: stdin)")
    args = parser.parse_args(argv)
    text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
    try:
        preview = json.loads(text)
    except json.JSONDecodeError as exc:
        print(
            f"preview_summary: not the JSON of `pulumi preview --json` ({exc}); input began: {text[:200]!r}",
            file=sys.stderr,
        )
        return 2
    if not isinstance(preview, Mapping):
        print("preview_summary: expected a JSON object with `steps`", file=sys.stderr)
        return 2
    sys.stdout.write(render(summarize(preview)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
