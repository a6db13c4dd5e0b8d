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

from .connect import PangolinEntry
from .firewall import (
    AZURE_PRIORITY_MAX,
    AZURE_PRIORITY_MIN,
    RuleDesign,
    address_count,
    plan_rules,
)
from .names import CONNECT_RULE_NAME, merged_rule_key, merged_rule_name, nsg_rule_name, stack_mark
from .settings import FirewallOn, Settings

__all__ = [
    "NsgRule",
    "NsgView",
    "PlannedRule",
    "nsg_problem",
    "planned_rules",
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
        """The inbound priorities held by rules other than this stack's merged ones: a new merged rule avoids them."""
        return {
            r.priority
            for r in self.rules
            if r.direction.lower() == "inbound"
            and not (merged_rule_key(r.name, project, stack) is not None and self.ours(r, project, stack))
        }

    def held(self, project: str, stack: str) -> dict[str, int]:
        """This stack's merged rules in the NSG: key -> the priority each holds."""
        out: dict[str, int] = {}
        for rule in self.rules:
            key = merged_rule_key(rule.name, project, stack)
            if key is not None and self.ours(rule, project, stack):
                out[key] = rule.priority
        return out


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
    out: list[PlannedRule] = []
    if port_range is not None and fw.rules == RuleDesign.MERGED:
        held, busy = nsg.held(project, stack), nsg.busy(project, stack)
        plans = plan_rules(settings.port_sources(), fw.source_cidrs, fw.priority_base, held, busy)
        out += [
            PlannedRule(merged_rule_name(project, stack, p.key), (p.priority, p.priority), address_count(p.sources))
            for p in plans
        ]
    elif port_range is not None:
        block = (fw.priority_base, fw.priority_base + port_range.size - 1)
        out += [PlannedRule(nsg_rule_name(i), block, address_count(s)) for i, s in settings.port_sources().items()]
    if settings.connect is not None and isinstance(settings.connect_entry(), PangolinEntry):
        priority = settings.connect_rule_priority()
        out.append(PlannedRule(CONNECT_RULE_NAME, (priority, priority), address_count(fw.source_cidrs)))
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
    return _priority_problem(where, planned, others, staying)


def _priority_problem(
    where: str, planned: Sequence[PlannedRule], others: Sequence[NsgRule], staying: Sequence[NsgRule]
) -> str | None:
    """A planned rule whose priority another inbound rule holds while both exist: Azure refuses the write. An
    instance's rule may take any priority of the block, so only rules that are not this stack's are in its way
    there (an old rule of the stack in the block is an instance's, on its own port)."""
    for rule in planned:
        low, high = rule.priorities
        holders = [*others, *staying] if low == high else others
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
