"""The firewall's vocabulary: who may connect (CIDRs or one Azure service tag), the rule designs and priorities.

Two rule designs (`ssh-gateway:firewall.rules`):

- `merged`: one rule per distinct set of sources, carrying every port of the instances with that set in
  `destinationPortRanges`, contiguous ports merged ("40001-40007"). A rule keeps the priority it holds (read back
  from the NSG at preview); a new one takes the first priority from `priorityBase` up that no other inbound rule
  of the NSG holds and no other rule of the stack took. So stacks sharing an NSG need no block each: the program
  never gives two of them one priority. A +1 or a removal is one update of one rule; 10,000 instances in 40
  shards are 40 rules. Azure documents no limit on the entries of `destinationPortRanges` (its limits page
  lists rules per NSG, addresses per NSG and application security groups per rule), so one rule holds a set's
  ports, whatever many.
- `perInstance`: one rule per instance, priority `priorityBase + (port - range start)`: a bijection on the
  range, so priorities are unique across the stack's rules and an instance's priority changes only with its
  port. The block is the range's size; a +1 is one create; the rules (at most 1,000 per NSG) bound the stack.

The CONNECT port's one rule takes a priority as a new merged rule does (the one it holds, else the first free
from `priorityBase`), never one of the per-instance block's.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from .ports import PortRange

__all__ = [
    "AZURE_PRIORITY_MAX",
    "AZURE_PRIORITY_MIN",
    "DEFAULT_PRIORITY_BASE",
    "PRIORITY_BASE_KEY",
    "RULES_KEY",
    "Cidrs",
    "RuleDesign",
    "RulePlan",
    "ServiceTag",
    "Sources",
    "address_count",
    "check_priorities",
    "connect_priority",
    "merged_rules",
    "nsg_priority",
    "opens_to_world",
    "parse_sources",
    "plan_rules",
    "port_ranges",
    "ports_of",
    "rule_ports",
    "source_fields",
]

PRIORITY_BASE_KEY: Final = "ssh-gateway:firewall.priorityBase"
RULES_KEY: Final = "ssh-gateway:firewall.rules"
_RANGE_KEY: Final = "ssh-gateway:ports.range"

AZURE_PRIORITY_MIN: Final = 100
"""Lowest priority Azure accepts on a network security group rule."""

AZURE_PRIORITY_MAX: Final = 4096
"""Highest priority Azure accepts on a network security group rule."""

DEFAULT_PRIORITY_BASE: Final = 1000
"""The lowest NSG priority a stack's rules take, when `ssh-gateway:firewall.priorityBase` is not set."""

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


def connect_priority(
    base: int = DEFAULT_PRIORITY_BASE,
    *,
    held: int | None = None,
    taken: Iterable[int] = (),
    block: range = range(0),
) -> int:
    """The NSG priority of the CONNECT port's rule: the one it `held` (read at preview) while it is from `base` on
    and off the per-instance `block`, else the first from `base` that is not `taken` (other rules of the NSG, this
    stack's other rules) nor in the block; a `ValueError` with the fix when none is left."""
    blocked = {*taken, *block}
    if held is not None and held >= base and held not in blocked:
        return held
    return _first_free(base, blocked, "the CONNECT port's rule")


def source_fields(sources: Sources) -> tuple[str | None, list[str] | None]:
    """Azure's `sourceAddressPrefix` and `sourceAddressPrefixes`: a service tag goes only in the singular field."""
    match sources:
        case ServiceTag(tag):
            return tag, None
        case Cidrs((only,)):
            return only, None
        case Cidrs(networks):
            return None, list(networks)


class RuleDesign(StrEnum):
    """`ssh-gateway:firewall.rules`: how the ports of port-mode instances are opened."""

    MERGED = "merged"
    """One rule per distinct set of sources, every port of its instances in `destinationPortRanges`."""
    PER_INSTANCE = "perInstance"
    """One rule per instance, for exactly its port."""


def source_key(sources: Sources) -> str:
    """A set of sources as one text, the same whatever order the CIDRs were listed in."""
    match sources:
        case ServiceTag(tag):
            return tag
        case Cidrs(networks):
            return ",".join(sorted(set(networks)))


def _canonical(sources: Sources) -> Sources:
    return Cidrs(tuple(sorted(set(sources.networks)))) if isinstance(sources, Cidrs) else sources


def address_count(sources: Sources) -> int:
    """What the sources add to Azure's 4,000 "IP addresses and ranges" of an NSG: each CIDR; a tag is none."""
    return len(set(sources.networks)) if isinstance(sources, Cidrs) else 0


def port_ranges(ports: Iterable[int]) -> tuple[str, ...]:
    """The ports as Azure's `destinationPortRanges`, contiguous ones merged: 40001..40007 and 40009 are
    `("40001-40007", "40009")`; the fewest entries that say exactly these ports."""
    ordered = sorted(set(ports))
    out: list[str] = []
    start = prev = None
    for port in [*ordered, None]:
        if start is not None and prev is not None and (port is None or port != prev + 1):
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if port is not None and start is None:
            start = port
        prev = port
    return tuple(out)


def ports_of(ranges: Iterable[str]) -> set[int]:
    """The ports that `destinationPortRanges` entries name (`"40001-40007"`, `"40009"`); `*` and junk name none."""
    ports: set[int] = set()
    for entry in ranges:
        first, _, last = str(entry).partition("-")
        if first.strip().isdigit() and (not last or last.strip().isdigit()):
            ports.update(range(int(first), int(last or first) + 1))
    return ports


@dataclass(frozen=True)
class RulePlan:
    """One merged rule, as the config decides it (its ports come later, from the port table)."""

    key: str
    """`""` for the stack's default sources, else 8 hex digits of the sources: the rule's name and URN end in it."""
    sources: Sources
    """Who may connect, CIDRs sorted."""
    priority: int
    """Its NSG priority, from `priorityBase` on."""
    instances: tuple[str, ...]
    """The port-mode instances with these sources, in the settings' order."""


def _rule_key(key: str, default_key: str) -> str:
    return "" if key == default_key else hashlib.sha256(key.encode()).hexdigest()[:8]


def _first_free(base: int, taken: set[int], what: str) -> int:
    """The first priority from `base` up to Azure's highest that is not `taken`; a `ValueError` naming `what`
    needs it and the fix when every one is."""
    for priority in range(base, AZURE_PRIORITY_MAX + 1):
        if priority not in taken:
            return priority
    raise ValueError(
        f"no NSG priority is free for {what}: {PRIORITY_BASE_KEY}={base} leaves {base}-{AZURE_PRIORITY_MAX}, and "
        f"other rules of the NSG or of this stack hold every one; lower {PRIORITY_BASE_KEY} (Azure allows down to "
        f"{AZURE_PRIORITY_MIN}) or remove rules from the NSG"
    )


def plan_rules(
    sources: Mapping[str, Sources],
    default: Sources,
    base: int = DEFAULT_PRIORITY_BASE,
    held: Mapping[str, int] | None = None,
    busy: Iterable[int] = (),
) -> list[RulePlan]:
    """The merged rules for instances with these sources: one per distinct set, the default set's first.

    A set whose rule the NSG already holds (`held`: key -> priority, read at preview) keeps that priority while
    it is from `base` on. A new set takes the first priority from `base` that no other set took and that is not
    `busy` in the NSG: other rules', and this stack's that stay until the end of the `up` (Pulumi deletes after
    it creates: its per-instance rules while it moves to merged ones, its old CONNECT rule, a set's rule that
    goes). So no rule's priority moves when instances, sets or other stacks' rules come and go. A `ValueError`
    when the priorities up to Azure's highest run out.
    """
    members: dict[str, list[str]] = {}
    by_key: dict[str, Sources] = {}
    for instance, own in sources.items():
        key = source_key(own)
        members.setdefault(key, []).append(instance)
        by_key[key] = _canonical(own)
    default_key = source_key(default)
    wanted = sorted(members, key=lambda k: (k != default_key, k))
    held = held or {}
    taken: dict[int, str] = {}
    for key in wanted:
        priority = held.get(_rule_key(key, default_key))
        if priority is not None and priority >= base and priority not in taken:
            taken[priority] = key
    # A held rule that no set wants any more stays until its delete, at the end of the `up`.
    blocked = {*busy, *held.values()}
    for key in (k for k in wanted if k not in taken.values()):
        priority = _first_free(base, blocked | taken.keys(), f"this stack's merged rule of sources {key}")
        taken[priority] = key
    return [
        RulePlan(key=_rule_key(key, default_key), sources=by_key[key], priority=priority, instances=tuple(members[key]))
        for priority, key in sorted(taken.items())
    ]


def rule_ports(plan: RulePlan, ports: Mapping[str, int]) -> tuple[str, ...]:
    """The rule's `destinationPortRanges` from the port table: its instances' ports, merged."""
    return port_ranges(ports[i] for i in plan.instances if i in ports)


@dataclass(frozen=True)
class MergedRule:
    """A merged rule with its ports: what goes to Azure."""

    key: str
    sources: Sources
    priority: int
    port_ranges: tuple[str, ...]


def merged_rules(
    ports: Mapping[str, int],
    sources: Mapping[str, Sources],
    default: Sources,
    base: int = DEFAULT_PRIORITY_BASE,
    held: Mapping[str, int] | None = None,
    busy: Iterable[int] = (),
) -> list[MergedRule]:
    """Every merged rule of a stack from its port table and each instance's sources: what the program registers."""
    return [
        MergedRule(plan.key, plan.sources, plan.priority, rule_ports(plan, ports))
        for plan in plan_rules(sources, default, base, held, busy)
    ]
