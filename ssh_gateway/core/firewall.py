"""The firewall's vocabulary: who may connect (CIDRs or one Azure service tag), the rule designs and priorities.

Two rule designs (`ssh-gateway:firewall.rules`):

- `merged`: one rule per distinct set of sources, carrying every port of the instances with that set in
  `destinationPortRanges`, contiguous ports merged ("40001-40007"). A rule keeps the priority it holds (read back
  from the NSG at preview); a new one takes the first priority of the stack's band (`priority_band`) that no
  other inbound rule of the NSG holds and no other rule of the stack took. The band is the priorities from
  `priorityBase` up, or, for a shard whose `ports.range` is a slice of `gateway.publishedRange`, the same slice
  of them: shards with disjoint ranges get disjoint bands, so they need no config of their own for priorities and
  never pick one priority, even when their `up`s all read the NSG before any writes (a read cannot see a rule
  that another `up` is about to create). A +1 or a removal is one update of one rule; 10,000 instances in 40
  shards are 40 rules. Azure documents no limit on the entries of `destinationPortRanges` (its limits page
  lists rules per NSG, addresses per NSG and application security groups per rule), so one rule holds a set's
  ports, whatever many.
- `perInstance`: one rule per instance, priority `priorityBase + (port - range start)`: a bijection on the
  range, so priorities are unique across the stack's rules and an instance's priority changes only with its
  port. The block is the range's size; a +1 is one create; the rules (at most 1,000 per NSG) bound the stack.

The CONNECT port's one rule takes a priority as a new merged rule does (the one it holds, else the first free
of the band), never one of the per-instance block's.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, NoReturn

from .ports import PortRange

__all__ = [
    "AZURE_PRIORITY_MAX",
    "AZURE_PRIORITY_MIN",
    "DEFAULT_PRIORITY_BASE",
    "PRIORITY_BASE_KEY",
    "RULES_KEY",
    "Cidrs",
    "PriorityBand",
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
    "priority_band",
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
    band: PriorityBand,
    *,
    held: int | None = None,
    taken: Mapping[int, str] | None = None,
    block: range = range(0),
) -> int:
    """The NSG priority of the CONNECT port's rule: the one it `held` (read at preview) while it is from the band's
    `priorityBase` on and off the per-instance `block`, else the first of the `band` that is not `taken` (priority
    -> the rule holding it: other rules of the NSG, this stack's other rules) nor in the block; a `ValueError`
    with the fix when none is left."""
    blocked = {**(taken or {}), **dict.fromkeys(block, "this stack's per-instance block")}
    if held is not None and held >= band.base and held not in blocked:
        return held
    return band.first_free(blocked, "the CONNECT port's rule")


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


_RANGE_PUBLISHED_KEY: Final = "ssh-gateway:gateway.publishedRange"


@dataclass(frozen=True)
class PriorityBand:
    """The priorities a stack's new merged and CONNECT rules take the first free of (`priority_band`)."""

    base: int
    """`priorityBase`: a rule the stack holds from here on keeps its priority, in the band or not."""
    priorities: range
    """The band: from `base` to Azure's highest, or the stack's share of them."""
    share: tuple[PortRange, PortRange] | None = None
    """(`ports.range`, `gateway.publishedRange`) when the band is the range's share; None when it is the whole."""

    def first_free(self, taken: Mapping[int, str], what: str) -> int:
        """The band's first priority not `taken` (priority -> the rule holding it, as the refusal names it: a
        quoted name, or "this stack's ..."); a `ValueError` naming `what` needs it, the rules in the way and the
        fix when every one is."""
        for priority in self.priorities:
            if priority not in taken:
                return priority
        band, top = self.priorities, AZURE_PRIORITY_MAX
        inside = sorted((p, name) for p, name in taken.items() if p in band)
        holders = ", ".join(f"{p} by {name}" for p, name in inside[:3])
        holders += f" and {len(inside) - 3} more" if len(inside) > 3 else ""
        if self.share is None:
            return _no_priority(
                f"{what}: {PRIORITY_BASE_KEY}={self.base} leaves {self.base}-{top}, and other rules of the NSG or of "
                f"this stack hold every one ({holders}); lower {PRIORITY_BASE_KEY} (Azure allows down to "
                f"{AZURE_PRIORITY_MIN}) or remove rules from the NSG"
            )
        own, published = self.share
        if not band:
            return _no_priority(
                f"{what}: {_RANGE_KEY} {own} is {own.size:,} of the {published.size:,} ports of "
                f"{_RANGE_PUBLISHED_KEY} {published}, too small a share to get one of the priorities "
                f"{self.base}-{top}; widen {_RANGE_KEY} or lower {PRIORITY_BASE_KEY}"
            )
        return _no_priority(
            f"{what}: this stack's band {band.start}-{band.stop - 1} ({_RANGE_KEY} {own}'s share of "
            f"{_RANGE_PUBLISHED_KEY} {published}, in {self.base}-{top}) is held by {holders}; remove those rules, "
            f"widen {_RANGE_KEY} (a wider share is a wider band) or lower {PRIORITY_BASE_KEY}"
        )


def _no_priority(text: str) -> NoReturn:
    raise ValueError(f"no NSG priority is free for {text}")


def priority_band(
    base: int = DEFAULT_PRIORITY_BASE, port_range: PortRange | None = None, published: PortRange | None = None
) -> PriorityBand:
    """The stack's band: the priorities from `base` to Azure's highest, or, when its `port_range` is a part of the
    `published` range, the same part of them in the same place (ports 20040-20059 of 20000-20199 get the third
    tenth). Stacks whose ranges are disjoint parts of one published range, with one `base`, get disjoint bands:
    their new rules never take one priority, however their `up`s overlap (the NSG read at preview cannot see a
    rule that another stack is about to create)."""
    whole = range(base, AZURE_PRIORITY_MAX + 1)
    if port_range is None or published is None or published == port_range or not published.covers(port_range):
        return PriorityBand(base, whole)
    # Floors of one monotone map: a range ending where the next begins gets a band ending where the next's begins.
    offset = port_range.start - published.start
    low = base + offset * len(whole) // published.size
    high = base + (offset + port_range.size) * len(whole) // published.size
    return PriorityBand(base, range(low, high), (port_range, published))


def plan_rules(
    sources: Mapping[str, Sources],
    default: Sources,
    band: PriorityBand | None = None,
    held: Mapping[str, int] | None = None,
    busy: Mapping[int, str] | None = None,
) -> list[RulePlan]:
    """The merged rules for instances with these sources: one per distinct set, the default set's first.

    A set whose rule the NSG already holds (`held`: key -> priority, read at preview) keeps that priority while
    it is from `priorityBase` on, in the stack's band or not. A new set takes the first priority of the `band`
    (default: from 1000 up) that no other set took and that is not `busy` in the NSG (priority -> the rule holding
    it): other rules', and this stack's that stay until the end of the `up` (Pulumi deletes after it creates: its
    per-instance rules while it moves to merged ones, its old CONNECT rule, a set's rule that goes). So no rule's
    priority moves when instances, sets or other stacks' rules come and go. A `ValueError` naming the rules in the
    way when the band runs out.
    """
    members: dict[str, list[str]] = {}
    by_key: dict[str, Sources] = {}
    for instance, own in sources.items():
        key = source_key(own)
        members.setdefault(key, []).append(instance)
        by_key[key] = _canonical(own)
    default_key = source_key(default)
    wanted = sorted(members, key=lambda k: (k != default_key, k))
    band, held = band or priority_band(), held or {}
    taken: dict[int, str] = {}
    for key in wanted:
        priority = held.get(_rule_key(key, default_key))
        if priority is not None and priority >= band.base and priority not in taken:
            taken[priority] = key
    # A held rule that no set wants any more stays until its delete, at the end of the `up`.
    blocked = {**(busy or {}), **{p: f"this stack's rule of sources {k or 'sourceCidrs'}" for k, p in held.items()}}
    for key in (k for k in wanted if k not in taken.values()):
        mine = {p: f"this stack's rule of sources {k}" for p, k in taken.items()}
        priority = band.first_free({**blocked, **mine}, f"this stack's merged rule of sources {key}")
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
    band: PriorityBand | None = None,
    held: Mapping[str, int] | None = None,
    busy: Mapping[int, str] | None = None,
) -> list[MergedRule]:
    """Every merged rule of a stack from its port table and each instance's sources: what the program registers."""
    return [
        MergedRule(plan.key, plan.sources, plan.priority, rule_ports(plan, ports))
        for plan in plan_rules(sources, default, band, held, busy)
    ]
