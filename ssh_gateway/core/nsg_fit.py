"""Whether a stack's NSG rules fit the NSG as it is: Azure's limits, checked at preview against the NSG's read.

Azure's limits that no quota raises ("Networking limits - Azure Resource Manager"; "Network security groups",
Security rules): at most 1,000 rules per NSG; priorities 100-4096, unique per direction; a rule name of at most
80 characters; at most 4,000 IP addresses and ranges for sources across the NSG's rules. A write that breaks one
is refused by Azure in the middle of `up`, after Pangolin resources were made; here it is refused before anything
changes, in one line naming the NSG, what is used, what the stack adds and the limit.

This stack's own rules are recognised by the mark at the end of their description (`names.stack_marked`). An own
rule that the stack no longer plans stays until the end of the `up` (Pulumi deletes after it creates), so it counts
while the new rules are made: that is the peak the NSG must hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from .firewall import (
    AZURE_PRIORITY_MAX,
    AZURE_PRIORITY_MIN,
    RuleDesign,
    RulePlan,
    address_count,
    connect_priority,
    plan_rules,
)
from .names import connect_rule_name, merged_rule_key, merged_rule_name, nsg_rule_name, stack_mark
from .settings import FirewallOn, PangolinPublic, Settings

__all__ = [
    "NsgRule",
    "NsgView",
    "PlannedRule",
    "StackPriorities",
    "nsg_problem",
    "planned_rules",
    "stack_priorities",
]

AZURE_RULES_MAX: Final = 1000
"""Security rules per network security group."""
AZURE_ADDRESSES_MAX: Final = 4000
"""Source IP addresses and ranges per network security group, across its rules."""
AZURE_RULE_NAME_MAX: Final = 80
"""Characters of a security rule's name."""


@dataclass(frozen=True)
class NsgRule:
    """One rule the NSG holds, as its read returns it."""

    name: str
    priority: int
    direction: str
    """`Inbound` or `Outbound`: priorities are unique per direction."""
    description: str
    addresses: int
    """Its source IP addresses and ranges (a service tag is none)."""


@dataclass(frozen=True)
class NsgView:
    """An NSG's rules, read at preview."""

    name: str
    rules: tuple[NsgRule, ...] = ()

    def ours(self, rule: NsgRule, project: str, stack: str) -> bool:
        """Whether the rule is this stack's, by the mark at the end of its description."""
        return rule.description.endswith(f"[stack {stack_mark(project, stack)}]")

    def busy(self, project: str, stack: str) -> set[int]:
        """The inbound priorities held by rules other than this stack's merged and CONNECT rules (those keep
        theirs): a new rule of the stack avoids them. This stack's other rules are among them: they stay until
        the end of the `up` (Pulumi deletes after it creates)."""
        connect = connect_rule_name(project, stack)
        return {
            r.priority
            for r in self.rules
            if r.direction.lower() == "inbound"
            and not (
                (r.name == connect or merged_rule_key(r.name, project, stack) is not None)
                and self.ours(r, project, stack)
            )
        }

    def held(self, project: str, stack: str) -> dict[str, int]:
        """This stack's merged rules in the NSG: key -> the priority each holds."""
        out: dict[str, int] = {}
        for rule in self.rules:
            key = merged_rule_key(rule.name, project, stack)
            if key is not None and self.ours(rule, project, stack):
                out[key] = rule.priority
        return out

    def connect_held(self, project: str, stack: str) -> int | None:
        """The priority this stack's CONNECT rule holds in the NSG, if it has one."""
        name = connect_rule_name(project, stack)
        return next((r.priority for r in self.rules if r.name == name and self.ours(r, project, stack)), None)


@dataclass(frozen=True)
class StackPriorities:
    """The priorities of the stack's rules that do not follow a port: its merged rules' and its CONNECT rule's."""

    merged: tuple[RulePlan, ...]
    """The merged rules (none with `perInstance` or without port-mode instances)."""
    connect: int | None
    """The CONNECT rule's, or None when the stack has none (no CONNECT entry through Pangolin)."""


def stack_priorities(settings: Settings, *, project: str, stack: str, nsg: NsgView | None) -> StackPriorities:
    """Where the stack's merged and CONNECT rules go in the NSG as read at preview (None: read nothing, an NSG
    without rules): each keeps the priority it holds, a new one takes the first free from `priorityBase`. A
    `ValueError` naming the rule and the fix when none is free."""
    fw = settings.firewall
    if not isinstance(fw, FirewallOn):
        return StackPriorities((), None)
    nsg = nsg or NsgView(fw.nsg_name)
    port_range = settings.ports.range
    busy, held, connect_held = nsg.busy(project, stack), nsg.held(project, stack), nsg.connect_held(project, stack)
    # The CONNECT rule's priority is the stack's while it holds it (it may move or go only at the end of the `up`).
    own = busy | ({connect_held} if connect_held is not None else set())
    merged: tuple[RulePlan, ...] = ()
    if port_range is not None and fw.rules == RuleDesign.MERGED:
        merged = tuple(plan_rules(settings.port_sources(), fw.source_cidrs, fw.priority_base, held, own))
    if settings.connect is None or not isinstance(settings.connect.public, PangolinPublic):  # a rule only there
        return StackPriorities(merged, None)
    block = range(0)
    if port_range is not None and fw.rules == RuleDesign.PER_INSTANCE:
        block = range(fw.priority_base, fw.priority_base + port_range.size)
    taken = busy | set(held.values()) | {p.priority for p in merged}
    return StackPriorities(merged, connect_priority(fw.priority_base, held=connect_held, taken=taken, block=block))


@dataclass(frozen=True)
class PlannedRule:
    """An inbound rule the stack will hold after its `up`."""

    name: str
    priorities: tuple[int, int]
    """The priorities it may take, inclusive: one for a rule whose priority is fixed by the config, the stack's
    whole block for an instance's rule (its priority follows its port, which the allocation decides later)."""
    addresses: int


def planned_rules(settings: Settings, *, project: str, stack: str, nsg: NsgView) -> list[PlannedRule]:
    """The inbound rules the stack holds after its `up`, as the config decides them (none with the firewall off)."""
    fw = settings.firewall
    if not isinstance(fw, FirewallOn):
        return []
    port_range = settings.ports.range
    priorities = stack_priorities(settings, project=project, stack=stack, nsg=nsg)
    out = [
        PlannedRule(merged_rule_name(project, stack, p.key), (p.priority, p.priority), address_count(p.sources))
        for p in priorities.merged
    ]
    if port_range is not None and fw.rules == RuleDesign.PER_INSTANCE:
        block = (fw.priority_base, fw.priority_base + port_range.size - 1)
        out += [PlannedRule(nsg_rule_name(i), block, address_count(s)) for i, s in settings.port_sources().items()]
    if priorities.connect is not None:
        connect = (priorities.connect, priorities.connect)
        out.append(PlannedRule(connect_rule_name(project, stack), connect, address_count(fw.source_cidrs)))
    return out


def _n(count: int) -> str:
    return f"{count:,}"


def nsg_problem(
    view: NsgView, planned: Sequence[PlannedRule], *, project: str, stack: str, hint: str = ""
) -> str | None:
    """Why the stack's rules would not fit the NSG, in one line, or None when they fit."""
    where = f"NSG {view.name!r}"
    for rule in planned:
        if len(rule.name) > AZURE_RULE_NAME_MAX:
            return (
                f"{where}: this stack's rule name {rule.name!r} has {len(rule.name)} characters, over Azure's "
                f"{AZURE_RULE_NAME_MAX}; shorten the project or stack name"
            )
        low, high = rule.priorities
        if low < AZURE_PRIORITY_MIN or high > AZURE_PRIORITY_MAX:
            return (
                f"{where}: this stack's rule {rule.name!r} needs priorities {low}-{high}, outside Azure's "
                f"{AZURE_PRIORITY_MIN}-{AZURE_PRIORITY_MAX} (ssh-gateway:firewall.priorityBase)"
            )
    ours = {r.name: r for r in view.rules if view.ours(r, project, stack)}
    others = [r for r in view.rules if r.name not in ours]
    names = {r.name for r in planned}
    for other in others:
        if other.name in names:
            return (
                f"{where}: this stack's rule name {other.name!r} is taken by a rule that is not this stack's "
                f"(its description has no [stack {stack_mark(project, stack)}] mark); rename or remove that rule"
            )
    staying = [r for name, r in ours.items() if name not in names]  # deleted only after the new rules exist
    peak_rules = len(others) + len(staying) + len(planned)
    if peak_rules > AZURE_RULES_MAX:
        return (
            f"{where} would hold {_n(peak_rules)} rules, over Azure's {_n(AZURE_RULES_MAX)} per NSG: "
            f"{_n(len(others))} are not this stack's, {_n(len(staying))} of its old ones stay until the new exist, "
            f"and this stack adds {_n(len(planned))}{hint}"
        )
    used = sum(r.addresses for r in others) + sum(r.addresses for r in staying)
    adds = sum(r.addresses for r in planned)
    if used + adds > AZURE_ADDRESSES_MAX:
        return (
            f"{where} would hold {_n(used + adds)} source addresses and ranges, over Azure's "
            f"{_n(AZURE_ADDRESSES_MAX)} per NSG: {_n(used)} are in use and this stack adds {_n(adds)}{hint}"
        )
    # An old rule of the stack in its per-instance block is an instance's, on its own port, unless it is a merged
    # or CONNECT rule (a stack moving back to `perInstance`): those stay until the new rules exist.
    connect = connect_rule_name(project, stack)
    in_block = [r for r in staying if r.name == connect or merged_rule_key(r.name, project, stack) is not None]
    return _priority_problem(where, planned, others, staying, in_block)


def _priority_problem(
    where: str,
    planned: Sequence[PlannedRule],
    others: Sequence[NsgRule],
    staying: Sequence[NsgRule],
    in_block: Sequence[NsgRule],
) -> str | None:
    """A planned rule whose priority another inbound rule holds while both exist: Azure refuses the write. An
    instance's rule may take any priority of the block, so only rules that are not this stack's are in its way
    there, and the stack's old rules `in_block` (merged or CONNECT; another old one is an instance's, on its
    own port)."""
    for rule in planned:
        low, high = rule.priorities
        holders = [*others, *staying] if low == high else [*others, *in_block]
        for holder in holders:
            if holder.direction.lower() != "inbound" or not low <= holder.priority <= high:
                continue
            if low == high:
                need = f"this stack's rule {rule.name!r} needs priority {low}, held by"
            else:
                need = f"this stack's instance rules take priorities {low}-{high}, and {holder.priority} is held by"
            if holder in staying:
                return (
                    f"{where}: {need} {holder.name!r}, an old rule of this stack that stays until the new rules exist "
                    "(Pulumi deletes after it creates), and Azure refuses two inbound rules at one priority"
                )
            return (
                f"{where}: {need} {holder.name!r}, a rule not this stack's; give stacks that share an NSG disjoint "
                "blocks of priorities firewall.priorityBase .. priorityBase + ports.range size - 1 (docs/scaling.md)"
            )
    return None
