"""The stack's firewall plan (`FirewallPlan`), and whether its NSG rules fit the NSG as it is.

The plan is the one place `ssh-gateway:firewall.rules` is read: which rules open the instances' ports (one per
set of sources, or one per instance), the priority of each, the CONNECT rule's. The settings check its room in
Azure's priorities with it (`check_room`), the program registers what it says, and the check at preview holds it
against Azure's limits that no quota raises ("Networking limits - Azure Resource Manager"; "Network security
groups", Security rules): at most 1,000 rules per NSG; priorities 100-4096, unique per direction; a rule name of at
most 80 characters; at most 4,000 IP addresses and ranges for sources across the NSG's rules. A write that breaks
one is refused by Azure in the middle of `up`, after Pangolin resources were made; here it is refused before
anything changes, in one line naming the NSG, what is used, what the stack adds and the limit.

This stack's own rules are recognised by the mark at the end of their description (`names.stack_marked`). An own
rule that the stack no longer plans stays until the end of the `up` (Pulumi deletes after it creates), so it counts
while the new rules are made: that is the peak the NSG must hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from .firewall import (
    AZURE_PRIORITY_MAX,
    AZURE_PRIORITY_MIN,
    RULES_KEY,
    PriorityBand,
    RuleDesign,
    RulePlan,
    Sources,
    address_count,
    check_priorities,
    connect_priority,
    nsg_priority,
    plan_rules,
    priority_band,
)
from .names import StackName, connect_rule_name, merged_rule_key, merged_rule_name, nsg_rule_name, stack_mark
from .ports import PortRange

__all__ = [
    "FirewallPlan",
    "FirewallSection",
    "InstanceRules",
    "NsgRule",
    "NsgView",
    "PlannedRule",
    "check_room",
    "nsg_problem",
    "plan_firewall",
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

    def busy(self, project: str, stack: str) -> dict[int, str]:
        """The inbound priorities held by rules other than this stack's merged and CONNECT rules (those keep
        theirs), each with the rule's name: a new rule of the stack avoids them. This stack's other rules are among
        them: they stay until the end of the `up` (Pulumi deletes after it creates)."""
        connect = connect_rule_name(project, stack)
        return {
            r.priority: r.name
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


class FirewallSection(Protocol):
    """What the plan reads of `ssh-gateway:firewall` when it is on: `settings.FirewallOn`, whose cross-field
    check (`check_room`) is this module's, so this module does not import the settings."""

    @property
    def resource_group(self) -> str: ...
    @property
    def nsg_name(self) -> str: ...
    @property
    def source_cidrs(self) -> Sources: ...
    @property
    def priority_base(self) -> int: ...
    @property
    def rules(self) -> RuleDesign: ...


@dataclass(frozen=True)
class InstanceRules:
    """`perInstance`: a rule per port-mode instance at priority `priorityBase` plus its port's offset in the range,
    a bijection on the range: the stack's block is the range's size, and a rule's priority moves only with its port."""

    sources: Mapping[str, Sources]
    """Each port-mode instance's sources: its own `sourceCidrs`, else the stack's."""
    port_range: PortRange
    """`ports.range`."""
    base: int
    """`priorityBase`."""

    @property
    def block(self) -> range:
        """The priorities the instances' rules may take: one per port of the range."""
        return range(self.base, self.base + self.port_range.size)

    def priority(self, port: int) -> int:
        """The priority of the rule that opens `port`."""
        return nsg_priority(port, self.port_range, self.base)


@dataclass(frozen=True, kw_only=True)
class FirewallPlan:
    """The stack's inbound NSG rules, decided once a run from the config and the NSG as read at preview.

    `ssh-gateway:firewall.rules` is read here and nowhere else: the components register what the plan says,
    and the check at preview (`problem`) holds it against the NSG.
    """

    stack: StackName
    """The stack whose rules these are."""
    resource_group: str
    """Resource group of the network security group."""
    nsg: NsgView
    """The NSG as read at preview (its name and no rules when nothing was read)."""
    sources: Sources
    """The stack's `sourceCidrs`: the CONNECT rule's, and an instance's without its own."""
    merged: tuple[RulePlan, ...] = ()
    """`merged`: one rule per set of sources, with its priority (none with `perInstance`, or without port-mode
    instances)."""
    per_instance: InstanceRules | None = None
    """`perInstance`: a rule per port-mode instance (None with `merged`, or without `ports.range`)."""
    connect_priority: int | None = None
    """The CONNECT rule's; None when the stack has none (no CONNECT entry through Pangolin)."""
    fit_hint: str = ""
    """What a refusal at preview adds: with `perInstance`, that merged rules need fewer."""

    @property
    def nsg_name(self) -> str:
        return self.nsg.name

    def planned(self) -> list[PlannedRule]:
        """The inbound rules the stack holds after its `up`."""
        project, stack = self.stack.project, self.stack.stack
        out = [
            PlannedRule(merged_rule_name(project, stack, p.key), (p.priority, p.priority), address_count(p.sources))
            for p in self.merged
        ]
        rules = self.per_instance
        if rules is not None:
            whole = (rules.block.start, rules.block.stop - 1)
            out += [PlannedRule(nsg_rule_name(i), whole, address_count(s)) for i, s in rules.sources.items()]
        if self.connect_priority is not None:
            connect = (self.connect_priority, self.connect_priority)
            out.append(PlannedRule(connect_rule_name(project, stack), connect, address_count(self.sources)))
        return out

    def problem(self) -> str | None:
        """Why the stack's rules would not fit the NSG as read, in one line; None when they fit."""
        project, stack = self.stack.project, self.stack.stack
        return nsg_problem(self.nsg, self.planned(), project=project, stack=stack, hint=self.fit_hint)


def plan_firewall(
    fw: FirewallSection,
    *,
    port_range: PortRange | None,
    published: PortRange | None = None,
    port_sources: Mapping[str, Sources],
    connect_rule: bool,
    stack: StackName,
    nsg: NsgView | None = None,
) -> FirewallPlan:
    """The stack's rules in the NSG as read at preview (None: read nothing, an NSG without rules). A merged or
    CONNECT rule keeps the priority it holds, a new one takes the first free of the stack's band (`priority_band`:
    its `port_range`'s share of the `published` range, so shards never pick one priority); an instance's own rule
    follows its port. `port_sources`: each port-mode instance's sources; `connect_rule`: whether the stack has a
    CONNECT entry through Pangolin (the one entry with a public port of the stack's). A `ValueError` naming the
    rule, the rules in the way and the fix when no priority is free."""
    nsg = nsg or NsgView(fw.nsg_name)
    project, name = stack.project, stack.stack
    held, connect_held = nsg.held(project, name), nsg.connect_held(project, name)
    busy = {p: repr(rule) for p, rule in nsg.busy(project, name).items()}  # as a refusal names them
    band = priority_band(fw.priority_base, port_range, published)
    # The CONNECT rule's priority is the stack's while it holds it (it may move or go only at the end of the `up`).
    own = busy | ({connect_held: repr(connect_rule_name(project, name))} if connect_held is not None else {})
    merged, per_instance = _port_rules(fw, port_range, port_sources, held, own, band)
    connect = None
    if connect_rule:
        block = per_instance.block if per_instance is not None else range(0)
        mine = {p: repr(merged_rule_name(project, name, k)) for k, p in held.items()}
        mine |= {p.priority: repr(merged_rule_name(project, name, p.key)) for p in merged}
        connect = connect_priority(band, held=connect_held, taken=busy | mine, block=block)
    hint = ""
    if fw.rules == RuleDesign.PER_INSTANCE:
        hint = f"; {RULES_KEY}: {RuleDesign.MERGED} opens them with one rule per set of sources"
    return FirewallPlan(
        stack=stack,
        resource_group=fw.resource_group,
        nsg=nsg,
        sources=fw.source_cidrs,
        merged=merged,
        per_instance=per_instance,
        connect_priority=connect,
        fit_hint=hint,
    )


def check_room(fw: FirewallSection, port_range: PortRange, port_sources: Mapping[str, Sources]) -> None:
    """A `ValueError` with the fix when the rules that open the instances' ports find no room in Azure's priorities
    from `priorityBase` up, before any NSG is read (the settings' check; the stack's band and the NSG's own rules:
    `plan_firewall`, at preview, where the priorities the stack holds are known)."""
    _port_rules(fw, port_range, port_sources, {}, {}, priority_band(fw.priority_base))


def _port_rules(
    fw: FirewallSection,
    port_range: PortRange | None,
    port_sources: Mapping[str, Sources],
    held: Mapping[str, int],
    busy: Mapping[int, str],
    band: PriorityBand,
) -> tuple[tuple[RulePlan, ...], InstanceRules | None]:
    """The rules that open the port-mode instances' ports, as `firewall.rules` designs them (none without a range)."""
    if port_range is None:
        return (), None
    if fw.rules == RuleDesign.PER_INSTANCE:
        check_priorities(port_range, fw.priority_base)
        return (), InstanceRules(dict(port_sources), port_range, fw.priority_base)
    return tuple(plan_rules(port_sources, fw.source_cidrs, band, held, busy)), None


@dataclass(frozen=True)
class PlannedRule:
    """An inbound rule the stack will hold after its `up`."""

    name: str
    priorities: tuple[int, int]
    """The priorities it may take, inclusive: one for a rule whose priority is fixed by the config, the stack's
    whole block for an instance's rule (its priority follows its port, which the allocation decides later)."""
    addresses: int


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
