"""`PortFirewall`: the stack's merged NSG rules (`firewall.rules: merged`), one per set of sources.

Each rule opens every port of the port-mode instances with its sources, contiguous ports merged into ranges
(`ssh_gateway.core.firewall.rule_ports`). Which rules exist and their priorities are the stack's firewall plan
(`ssh_gateway.core.nsg_fit`: the config and the priorities the NSG already holds, read at preview); their ports
come from the port table, which is known at preview, so a preview shows each rule's `destinationPortRanges`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import pulumi

from providers.pangolin import PangolinTcpResource
from ssh_gateway.core.firewall import RulePlan, rule_ports
from ssh_gateway.core.names import FIREWALL, FIREWALL_TYPE, merged_rule_name, merged_rule_resource
from ssh_gateway.core.nsg_fit import FirewallPlan

from .firewall_rule import FirewallRuleArgs, nsg_rule

__all__ = ["PortFirewall", "merged_firewall"]


@dataclass(frozen=True, kw_only=True)
class PortFirewallArgs:
    """The NSG, the rules as the config plans them, and the ports they open."""

    resource_group: str
    """Resource group of the network security group."""
    nsg_name: str
    """The network security group the gateway's NIC or subnet uses."""
    plans: Sequence[RulePlan]
    """One per distinct set of sources: its key, sources, priority and instances (`FirewallPlan.merged`)."""
    ports: pulumi.Input[Mapping[str, int]]
    """The port table, instance -> port (from `PortAllocation`)."""
    pangolin: Mapping[str, PangolinTcpResource]
    """Each instance's Pangolin resource: a rule waits for those of its ports."""
    project: str
    stack: str


def _ranges(plan: RulePlan, table: Mapping[str, int]) -> list[str]:
    return list(rule_ports(plan, table))


class PortFirewall(pulumi.ComponentResource):
    """The merged inbound rules that open the stack's instance ports."""

    def __init__(self, name: str, args: PortFirewallArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(FIREWALL_TYPE, name, None, opts)
        ports = pulumi.Output.from_input(args.ports)
        for plan in args.plans:
            fw = FirewallRuleArgs(
                resource_group=args.resource_group, nsg_name=args.nsg_name, sources=plan.sources, priority=plan.priority
            )
            nsg_rule(
                merged_rule_resource(plan.key),
                fw,
                rule_name=merged_rule_name(args.project, args.stack, plan.key),
                description="ssh-gateway: public ssh to the port-mode instances with these sources",
                port_ranges=ports.apply(partial(_ranges, plan)),
                # As an instance's own rule does (nsg_rule's docstring): a port opens only once its Pangolin
                # resource binds it, and a removed instance's port closes (this update) before its resource goes
                # (deletes run after every update).
                opts=pulumi.ResourceOptions(
                    parent=self, depends_on=[args.pangolin[i] for i in plan.instances if i in args.pangolin]
                ),
            )
        self.register_outputs({})


def merged_firewall(
    plan: FirewallPlan | None,
    ports: pulumi.Input[Mapping[str, int]],
    pangolin: Mapping[str, PangolinTcpResource],
    *,
    project: str,
    stack: str,
) -> PortFirewall | None:
    """The stack's `PortFirewall` when its firewall plan has merged rules; else None."""
    if plan is None or not plan.merged:
        return None
    args = PortFirewallArgs(
        resource_group=plan.resource_group,
        nsg_name=plan.nsg_name,
        plans=plan.merged,
        ports=ports,
        pangolin=pangolin,
        project=project,
        stack=stack,
    )
    return PortFirewall(FIREWALL, args)
