"""What a preview summary reads around the steps: the port table before and after, and who logs in where (the
stack's new config, else its outputs before the run). rows.py decides the rows from it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ssh_gateway.core.names import (
    ALLOCATION_TYPE,
    CONNECT_INSTANCE_TYPE,
    ENVOY_FILTER_TYPE,
    STACK_TYPE,
    public_host,
    urn_type,
)
from ssh_gateway.core.outputs import EndpointOutput, Routing, StackOutputs, parse_stack_outputs
from ssh_gateway.core.ports import PortRange
from ssh_gateway.core.settings import ConnectModeInstance, SettingsError, read_config
from ssh_gateway.core.targets import StaticTarget

from .steps import Preview, Step

__all__ = [
    "ENTRY_ROW",
    "Allocation",
    "Endpoints",
    "as_int",
    "outputs_before",
    "read_allocation",
    "read_endpoints",
]

ENTRY_ROW: Final = "CONNECT entry"
"""The row of the stack's CONNECT entry (a name no instance can have: instance names are DNS labels)."""


def as_int(value: Any) -> int | None:
    """A JSON number as an int (None for anything else, a bool included)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


@dataclass(frozen=True)
class Allocation:
    """The port table before and after the preview, its range and the ports it never hands out."""

    old_ports: Mapping[str, int]
    new_ports: Mapping[str, int]
    port_range: PortRange | None
    reserved: tuple[int, ...]


def _ports(value: Any) -> dict[str, int]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): p for k, v in value.items() if (p := as_int(v)) is not None}


def _port_list(value: Any) -> tuple[int, ...]:
    return tuple(p for v in value or () if (p := as_int(v)) is not None) if isinstance(value, list) else ()


def outputs_before(steps: Sequence[Step]) -> StackOutputs:
    """The stack's outputs before the run, through the contract; none when they are not the contract's: the
    summary says what it can, and never fails on what an older run wrote."""
    stack = next((s for s in steps if urn_type(s.urn) == STACK_TYPE), None)
    try:
        return parse_stack_outputs(stack.old.outputs if stack is not None and stack.old is not None else {})
    except (KeyError, TypeError, ValueError):
        return parse_stack_outputs({})


def _range(inputs: Mapping[str, Any], old_outputs: StackOutputs) -> PortRange | None:
    """The allocator's range (its `start`/`end` inputs), else the stack's `portRange` output."""
    start, end = as_int(inputs.get("start")), as_int(inputs.get("end"))
    try:
        return PortRange(start=start, end=end) if start and end else old_outputs.port_range
    except ValueError:
        return None


def read_allocation(steps: Sequence[Step], old_outputs: StackOutputs) -> Allocation:
    """The port table before and after: the allocator's step if it changes, else the stack's outputs."""
    step = next((s for s in steps if urn_type(s.urn) == ALLOCATION_TYPE), None)
    old, new = (step.before, step.after) if step is not None else ({}, {})
    old_ports = _ports(old.get("ports")) if old else dict(old_outputs.allocations)
    return Allocation(
        old_ports=old_ports,
        new_ports=_ports(new.get("ports")) if new else old_ports,
        port_range=_range(new or old, old_outputs),
        reserved=_port_list(new.get("reserved") or old.get("reserved")),
    )


@dataclass(frozen=True)
class Endpoints:
    """Who logs in where: from the stack's new config, else its old outputs."""

    users: Mapping[str, str]
    hosts: Mapping[str, str]
    old: Mapping[str, EndpointOutput]
    host_template: str | None = None
    """`gateway.hostTemplate` by the new config: the host of an instance the program discovers in the cluster."""
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
        if host is None and self.host_template is not None:  # discovered: its user is in an annotation
            host = public_host(self.host_template, instance)
        if host is None or port is None:
            return "unknown"
        return f"ssh -p {port} {user}@{host}" if user else f"ssh -p {port} {host}"


def read_endpoints(preview: Preview, old_outputs: StackOutputs) -> Endpoints:
    users: dict[str, str] = {}
    hosts: dict[str, str] = {}
    authorities: dict[str, str] = {}
    upstreams: dict[str, str] = {}
    entry = None
    template = None
    if preview.config:
        try:
            settings = read_config(preview.config)
        except SettingsError:
            settings = None
        if settings is not None:
            template = settings.gateway.host_template
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
    return Endpoints(
        users=users,
        hosts=hosts,
        old=old_outputs.endpoints,
        host_template=template,
        authorities=authorities,
        upstreams=upstreams,
        entry=entry,
    )
