"""The NSG inbound rule in front of a public port (an instance's own, or the CONNECT port), in one place."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure_native

from ssh_gateway.core.firewall import Sources, source_fields
from ssh_gateway.core.names import stack_marked

__all__ = ["FirewallRuleArgs", "nsg_rule"]


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
    """Rule priority, derived from the port so it is unique and stable."""


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
