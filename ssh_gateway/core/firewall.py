"""The firewall's vocabulary: who may connect (CIDRs or one Azure service tag) and the NSG priority rule.

An instance's inbound rule has priority `priorityBase + (port - range start)`: a bijection on the range, so
priorities are unique across the stack's rules and an instance's priority changes only with its port. The
CONNECT port's one rule takes the priority just below that block (`priorityBase - 1`), or, when the block starts
at Azure's lowest, the one just above it: never one of the per-port priorities.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from .ports import PortRange

__all__ = [
    "AZURE_PRIORITY_MAX",
    "AZURE_PRIORITY_MIN",
    "DEFAULT_PRIORITY_BASE",
    "PRIORITY_BASE_KEY",
    "SERVICE_TAGS",
    "WORLD",
    "Cidrs",
    "ServiceTag",
    "Sources",
    "check_priorities",
    "connect_priority",
    "nsg_priority",
    "opens_to_world",
    "parse_cidr",
    "parse_sources",
    "source_fields",
]

PRIORITY_BASE_KEY: Final = "ssh-gateway:firewall.priorityBase"
_RANGE_KEY: Final = "ssh-gateway:ports.range"

AZURE_PRIORITY_MIN: Final = 100
"""Lowest priority Azure accepts on a network security group rule."""

AZURE_PRIORITY_MAX: Final = 4096
"""Highest priority Azure accepts on a network security group rule."""

DEFAULT_PRIORITY_BASE: Final = 1000
"""NSG priority of the range's first port, when `ssh-gateway:firewall.priorityBase` is not set."""

SERVICE_TAGS: Final = ("*", "Internet", "VirtualNetwork", "AzureLoadBalancer")
"""Azure service tags a source may name; Azure takes a tag only alone, in `sourceAddressPrefix`."""

WORLD: Final = frozenset({"0.0.0.0/0", "::/0", "*", "internet", "any"})
"""Sources that mean "anyone" (compared lower-cased): catch-all CIDRs, `*`, `Internet` (`Any` in the portal)."""


@dataclass(frozen=True)
class Cidrs:
    """One or more networks, e.g. `203.0.113.0/24`, normalised."""

    networks: tuple[str, ...]


@dataclass(frozen=True)
class ServiceTag:
    """One Azure service tag, such as `Internet`."""

    tag: str


Sources = Cidrs | ServiceTag
"""Who may connect: Azure allows a list of CIDRs, or one service tag alone."""


def parse_cidr(value: str) -> str:
    """A network such as `203.0.113.0/24`, normalised; a `ValueError` naming the value otherwise."""
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a CIDR such as 203.0.113.0/24 ({exc})") from None


def parse_sources(values: Sequence[str]) -> Sources:
    """CIDRs, or exactly one service tag; anything else is a `ValueError` naming the value and what is allowed."""
    if not values:
        raise ValueError("no sources: list the CIDRs allowed to ssh in, e.g. [203.0.113.0/24]")
    tags = [v for v in values if v in SERVICE_TAGS]
    if tags:
        if len(values) > 1:
            raise ValueError(
                f"{list(values)!r} mixes the service tag {tags[0]!r} with other sources; Azure takes a service "
                "tag only alone: list CIDRs, or the tag by itself"
            )
        return ServiceTag(tags[0])
    return Cidrs(tuple(parse_cidr(v) for v in values))


def opens_to_world(sources: Sequence[str]) -> list[str]:
    """The sources among these that let anyone in."""
    return [s for s in sources if s.strip().lower() in WORLD]


def nsg_priority(port: int, port_range: PortRange, base: int = DEFAULT_PRIORITY_BASE) -> int:
    """The Azure NSG rule priority of `port`: `base` plus its offset in the range."""
    if port not in port_range:
        raise ValueError(f"port {port} is outside the range {port_range}; no NSG priority for it")
    priority = base + (port - port_range.start)
    if AZURE_PRIORITY_MIN <= priority <= AZURE_PRIORITY_MAX:
        return priority
    fix = (
        f"raise {PRIORITY_BASE_KEY}"
        if priority < AZURE_PRIORITY_MIN
        else f"lower {PRIORITY_BASE_KEY} or narrow the range"
    )
    raise ValueError(
        f"priority {priority} for port {port} is outside Azure's {AZURE_PRIORITY_MIN}-{AZURE_PRIORITY_MAX}; {fix}"
    )


def check_priorities(port_range: PortRange, base: int = DEFAULT_PRIORITY_BASE) -> None:
    """A `ValueError` if some port of the range would get a priority Azure rejects, with the fix."""
    first, last = base, base + port_range.size - 1
    if first >= AZURE_PRIORITY_MIN and last <= AZURE_PRIORITY_MAX:
        return
    if port_range.size > AZURE_PRIORITY_MAX - AZURE_PRIORITY_MIN + 1:
        hint = f"narrow {_RANGE_KEY} to at most {AZURE_PRIORITY_MAX - AZURE_PRIORITY_MIN + 1} ports"
    elif first < AZURE_PRIORITY_MIN:
        hint = f"raise {PRIORITY_BASE_KEY} to at least {AZURE_PRIORITY_MIN}"
    else:
        hint = f"lower {PRIORITY_BASE_KEY} to at most {AZURE_PRIORITY_MAX - port_range.size + 1} or narrow the range"
    raise ValueError(
        f"priorities {first}-{last} for ports {port_range} fall outside Azure's "
        f"{AZURE_PRIORITY_MIN}-{AZURE_PRIORITY_MAX} ({PRIORITY_BASE_KEY}={base}); {hint}"
    )


def connect_priority(port_range: PortRange | None, base: int = DEFAULT_PRIORITY_BASE) -> int:
    """The NSG priority of the CONNECT port's rule: next to the per-port block `base`..`base + size - 1`, below
    it where Azure allows, else above it; a `ValueError` with the fix when neither fits. Without a range (every
    instance connect-mode) the block is empty, and the rule keeps the priority it would have next to one."""
    below, above = base - 1, base + (port_range.size if port_range is not None else 0)
    if below >= AZURE_PRIORITY_MIN:
        return below
    if above <= AZURE_PRIORITY_MAX:
        return above
    raise ValueError(
        f"no NSG priority is left for the CONNECT port's rule: ports {port_range} take "
        f"{base}-{above - 1} ({PRIORITY_BASE_KEY}={base}) and Azure allows {AZURE_PRIORITY_MIN}-"
        f"{AZURE_PRIORITY_MAX}; leave one free next to them: narrow {_RANGE_KEY} by a port and raise "
        f"{PRIORITY_BASE_KEY} to at least {AZURE_PRIORITY_MIN + 1}"
    )


def source_fields(sources: Sources) -> tuple[str | None, list[str] | None]:
    """Azure's `sourceAddressPrefix` and `sourceAddressPrefixes`: a service tag goes only in the singular field."""
    match sources:
        case ServiceTag(tag):
            return tag, None
        case Cidrs((only,)):
            return only, None
        case Cidrs(networks):
            return None, list(networks)
