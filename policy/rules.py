"""The guardrails as pure functions over resources' properties.

No `pulumi_policy` here, so the project's own tests call these directly (the NSG rule cannot run through the
CLI on a machine without the azure-native plugin); `__main__.py` only wires them into a `PolicyPack`.
Every message names the resource, the value and what is allowed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

# The pack runs in its own venv (no pydantic): it imports only the stdlib-only parts of the core.
from ssh_gateway.core.firewall import opens_to_world
from ssh_gateway.core.names import (
    ALLOCATION_TYPE,
    FIREWALL_TYPE,
    INSTANCE_TYPES,
    NSG_RULE_TYPE,
    NSG_TYPE,
    PANGOLIN_TYPE,
    SERVICE_TYPE,
    entry_of,
    type_chain,
    urn_name,
)
from ssh_gateway.core.ports import PortRange


@dataclass(frozen=True)
class Resource:
    """What the rules need of a resource."""

    urn: str
    """Its URN; the type chain in it tells which component created it."""
    type: str
    """Its type token, e.g. `azure-native:network:SecurityRule`."""
    props: Mapping[str, Any]
    """Its input properties, camelCase as registered."""
    parent: str | None = None
    """The parent's URN (an `SshInstance` for the per-instance resources)."""


@dataclass(frozen=True)
class Violation:
    """One finding: what is wrong and, when it is one resource's fault, which."""

    message: str
    urn: str | None = None


def _int(value: Any) -> int | None:
    # The engine hands numbers over as floats.
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return int(float(value))
    except ValueError:
        return None


def _ports(text: Any) -> PortRange | None:
    """An Azure port field (`"40001"` or `"40000-40010"`) or a config range; None for anything else."""
    port = _int(text)
    if port is not None and not isinstance(text, str):
        return PortRange(start=port, end=port)
    try:
        return PortRange.parse(text) if "-" in str(text) else PortRange(start=int(str(text)), end=int(str(text)))
    except ValueError:
        return None


# --- no NSG rule open to the world in production -------------------------------------------------------------


def _world_sources(rule: Mapping[str, Any]) -> list[str]:
    """The catch-all sources of an inbound Allow rule."""
    if str(rule.get("direction") or "Inbound").lower() != "inbound":
        return []
    if str(rule.get("access") or "Allow").lower() != "allow":
        return []
    sources = [rule.get("sourceAddressPrefix"), *(rule.get("sourceAddressPrefixes") or [])]
    return opens_to_world([s for s in sources if isinstance(s, str)])


def nsg_open_to_world(resource: Resource, *, production: bool) -> list[Violation]:
    """In a production stack, an inbound Allow rule (standalone or inline in an NSG) from `0.0.0.0/0`, `*`,
    `Internet` or `Any`."""
    if not production:
        return []
    if resource.type == NSG_RULE_TYPE:
        rules: Iterable[Mapping[str, Any]] = [resource.props]
    elif resource.type == NSG_TYPE:
        rules = [r for r in resource.props.get("securityRules") or [] if isinstance(r, Mapping)]
    else:
        return []
    found: list[Violation] = []
    for rule in rules:
        label = rule.get("securityRuleName") or rule.get("name") or urn_name(resource.urn)
        ports = rule.get("destinationPortRange") or ", ".join(rule.get("destinationPortRanges") or []) or "*"
        found.extend(
            Violation(
                f"NSG rule {label!r} allows inbound {ports} from {source!r}, i.e. from anyone, in a production stack "
                "(ssh-gateway:production: true). Allowed: specific CIDRs such as 203.0.113.0/24 in "
                "ssh-gateway:firewall.sourceCidrs or the instance's sourceCidrs.",
                resource.urn,
            )
            for source in _world_sources(rule)
        )
    return found


# --- every Pangolin port inside the stack's range ----------------------------------------------------------------


def stack_range(config_ports: Any, resources: Iterable[Resource]) -> PortRange | None:
    """The stack's port range: `ssh-gateway:ports.range` from its config, else the allocation table's."""
    if isinstance(config_ports, Mapping):
        configured = _ports(config_ports.get("range"))
        if configured:
            return configured
    for resource in resources:
        if resource.type == ALLOCATION_TYPE:
            start, end = _int(resource.props.get("start")), _int(resource.props.get("end"))
            return PortRange(start=start, end=end) if start and end else None
    return None


def ports_outside_range(resources: Iterable[Resource], port_range: PortRange | None) -> list[Violation]:
    """Every instance's Pangolin `proxyPort` inside the stack's range (the ports Gerbil/Traefik publish and the NSG
    opens). The CONNECT entry's port is the one that must not be: `connect_port_in_range`."""
    resources = list(resources)
    pangolin = [r for r in resources if r.type == PANGOLIN_TYPE and not entry_of(r.urn)]
    if not pangolin:
        return []
    if port_range is None:
        return [Violation("the stack has Pangolin resources but no port range: set ssh-gateway:ports.range")]
    start, end = port_range.start, port_range.end
    found: list[Violation] = []
    for resource in pangolin:
        port = _int(resource.props.get("proxyPort"))
        if port is None or port not in port_range:
            found.append(
                Violation(
                    f"Pangolin resource {urn_name(resource.urn)!r} has proxyPort "
                    f"{port if port is not None else resource.props.get('proxyPort')!r}, "
                    f"outside the stack's range {start}-{end} (ssh-gateway:ports.range). Allowed: a port from "
                    f"{start} to {end}; pin one with the instance's `port`, or widen the range.",
                    resource.urn,
                )
            )
    return found


# --- the CONNECT port: outside the range, and opened by its own NSG rule -------------------------------------------


def connect_port_in_range(resources: Iterable[Resource], port_range: PortRange | None) -> list[Violation]:
    """The CONNECT entry's Pangolin `proxyPort` inside the instances' range, where the allocator may hand it out."""
    if port_range is None:
        return []
    found: list[Violation] = []
    for resource in resources:
        if resource.type != PANGOLIN_TYPE or not entry_of(resource.urn):
            continue
        port = _int(resource.props.get("proxyPort"))
        if port is not None and port in port_range:
            found.append(
                Violation(
                    f"the CONNECT entry's Pangolin resource {urn_name(resource.urn)!r} has proxyPort {port}, inside "
                    f"the instances' range {port_range} (ssh-gateway:ports.range), where the allocator hands ports "
                    "to port-mode instances. Allowed: a port outside the range in ssh-gateway:connect.public.port.",
                    resource.urn,
                )
            )
    return found


def connect_port_rule(resources: Iterable[Resource]) -> list[Violation]:
    """In a stack that manages NSG rules, the CONNECT entry's Pangolin port is opened by the entry's own rule,
    for exactly that port (without it every connect-mode instance is unreachable)."""
    resources = list(resources)
    rules = [r for r in resources if r.type == NSG_RULE_TYPE]
    if not rules:
        return []  # no firewall layer (firewall.enabled: false)
    found: list[Violation] = []
    for entry in (r for r in resources if r.type == PANGOLIN_TYPE and entry_of(r.urn)):
        port = _int(entry.props.get("proxyPort"))
        opened = {p for rule in rules if entry_of(rule.urn) for p in _nsg_ports(rule.props)}
        if port is not None and port not in opened:
            found.append(
                Violation(
                    f"the CONNECT entry's Pangolin resource {urn_name(entry.urn)!r} listens on {port}, but no NSG rule "
                    f"of the entry opens {port} (it opens {sorted(opened) or 'nothing'}): every connect-mode instance "
                    "would time out. Allowed: the entry's rule for exactly ssh-gateway:connect.public.port.",
                    entry.urn,
                )
            )
    return found


# --- no two resources of the stack on the same port ------------------------------------------------------------


def _nsg_ports(props: Mapping[str, Any]) -> Iterator[int]:
    if str(props.get("direction") or "Inbound").lower() != "inbound":
        return
    for text in [props.get("destinationPortRange"), *(props.get("destinationPortRanges") or [])]:
        bounds = _ports(text)
        if bounds:
            yield from bounds


def shared_ports(resources: Iterable[Resource]) -> list[Violation]:
    """A public port used by two owners: two Pangolin resources, two inbound NSG rules, or a Pangolin resource
    and an NSG rule of different instances (an instance's own resource and rule share its port, as they should).
    """
    resources = list(resources)
    holders: dict[int, dict[str, list[Resource]]] = defaultdict(lambda: defaultdict(list))
    bound: dict[int, str] = {}
    for resource in resources:
        if resource.type == PANGOLIN_TYPE:
            port = _int(resource.props.get("proxyPort"))
            if port is not None:
                owner = resource.parent or resource.urn
                bound.setdefault(port, owner)
                holders[port][owner].append(resource)
    for resource in (r for r in resources if r.type == NSG_RULE_TYPE):
        # A merged rule (firewall.rules: merged) opens the ports of many instances: each of its ports belongs to
        # the instance whose Pangolin resource binds it, as an instance's own rule's port does.
        merged = FIREWALL_TYPE in type_chain(resource.urn)
        for port in _nsg_ports(resource.props):
            owner = bound.get(port, resource.urn) if merged else resource.parent or resource.urn
            holders[port][owner].append(resource)
    found: list[Violation] = []
    for port, owners in sorted(holders.items()):
        clash = len(owners) > 1 or any(
            sum(r.type == kind for r in held) > 1 for held in owners.values() for kind in (PANGOLIN_TYPE, NSG_RULE_TYPE)
        )
        if not clash:
            continue
        users = sorted({urn_name(r.urn) for held in owners.values() for r in held})
        for held in owners.values():
            for resource in held:
                others = ", ".join(u for u in users if u != urn_name(resource.urn))
                found.append(
                    Violation(
                        f"port {port} is used by {urn_name(resource.urn)!r} and also by {others}: each public port "
                        "belongs to one instance. Allowed: distinct ports, as the allocator hands out (unpin one).",
                        resource.urn,
                    )
                )
    return found


# --- no LoadBalancer Service from the component -----------------------------------------------------------------


def created_by_component(urn: str) -> bool:
    """Whether an instance's component (`SshInstance` or `ConnectSshInstance`) is among the resource's ancestors."""
    return any(t in INSTANCE_TYPES for t in type_chain(urn)[:-1])


def load_balancer_from_component(resource: Resource) -> list[Violation]:
    """A Service of type LoadBalancer made by `SshInstance`: it would publish sshd past Pangolin and the NSG."""
    if resource.type != SERVICE_TYPE or not created_by_component(resource.urn):
        return []
    spec = resource.props.get("spec")
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    if kind != "LoadBalancer":
        return []
    return [
        Violation(
            f"Service {urn_name(resource.urn)!r} of an SshInstance has type LoadBalancer, which gives sshd a public IP "
            "of its own, bypassing Pangolin and the NSG rule. Allowed: NodePort or ClusterIP.",
            resource.urn,
        )
    ]
