"""The NSG inbound rule in front of a public port (an instance's own, or the CONNECT port), in one place."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure_native

from ssh_gateway.core.firewall import Sources, source_fields
from ssh_gateway.core.names import stack_marked
from ssh_gateway.core.nsg_fit import FirewallPlan

__all__ = ["FirewallRuleArgs", "connect_rule_args", "instance_rule_args", "nsg_rule"]


@dataclass(frozen=True, kw_only=True)
class FirewallRuleArgs:
    """Where the rule goes and who may connect."""

    resource_group: str
    """Resource group of the network security group."""
    nsg_name: str
    """The network security group the gateway's NIC or subnet uses."""
    sources: Sources
    """Who may connect: CIDRs, or one service tag."""
    priority: pulumi.Input[int]
    """Rule priority, as the stack's firewall plan decides it."""


def instance_rule_args(plan: FirewallPlan | None, instance: str, port: pulumi.Output[int]) -> FirewallRuleArgs | None:
    """A port-mode instance's own rule (`perInstance`), its priority following its port; None when the plan opens
    its port otherwise (a merged rule) or not at all (firewall off)."""
    rules = plan.per_instance if plan is not None else None
    if plan is None or rules is None:
        return None
    priority = port.apply(rules.priority)
    return FirewallRuleArgs(
        resource_group=plan.resource_group, nsg_name=plan.nsg_name, sources=rules.sources[instance], priority=priority
    )


def connect_rule_args(plan: FirewallPlan | None) -> FirewallRuleArgs | None:
    """The CONNECT port's rule; None when the stack has none."""
    if plan is None or plan.connect_priority is None:
        return None
    return FirewallRuleArgs(
        resource_group=plan.resource_group, nsg_name=plan.nsg_name, sources=plan.sources, priority=plan.connect_priority
    )


def nsg_rule(
    name: str,
    fw: FirewallRuleArgs,
    *,
    rule_name: str,
    description: str,
    port: pulumi.Input[str] | None = None,
    port_ranges: pulumi.Input[Sequence[str]] | None = None,
    opts: pulumi.ResourceOptions,
) -> azure_native.network.SecurityRule:
    """One inbound TCP allow rule for `port` (or every entry of `port_ranges`, e.g. `40001-40007`) from
    `fw.sources`.

    A standalone SecurityRule, never inline rules on the NSG: inline rules make every NSG update delete and
    re-add the standalone ones (pulumi-azure-native#3359). Callers make it depend on the Pangolin resource of
    the port, so the port opens only once something is bound behind it and closes (destroy runs in reverse)
    before the binding goes away.
    """
    single, several = source_fields(fw.sources)
    return azure_native.network.SecurityRule(
        name,
        resource_group_name=fw.resource_group,
        network_security_group_name=fw.nsg_name,
        security_rule_name=rule_name,
        description=stack_marked(description, pulumi.get_project(), pulumi.get_stack()),
        direction="Inbound",
        access="Allow",
        protocol="Tcp",
        priority=fw.priority,
        source_port_range="*",
        source_address_prefix=single,
        source_address_prefixes=several,
        destination_address_prefix="*",
        destination_port_range=port,
        destination_port_ranges=port_ranges,
        opts=opts,
    )
