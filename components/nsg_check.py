"""The NSG read at preview, the stack planned against it, and the refusal of a stack whose rules would not fit
it (`core/nsg_fit.py`)."""

from __future__ import annotations

import ipaddress
from typing import Final

import pulumi
import pulumi_azure_native as azure_native

from ssh_gateway.core.discovery_records import Outcome
from ssh_gateway.core.firewall import PRIORITY_BASE_KEY
from ssh_gateway.core.names import StackName
from ssh_gateway.core.nsg_fit import NsgRule, NsgView
from ssh_gateway.core.org import OrgView
from ssh_gateway.core.settings import FirewallOn, Settings
from ssh_gateway.core.stack_plan import StackPlan, plan_stack

from .refused import StackRefused

__all__ = ["checked_plan"]

_NOT_FOUND: Final = ("Status=404", 'Code="ResourceNotFound"', 'Code="ResourceGroupNotFound"')
"""How azure-native's error names an NSG or resource group that does not exist (`PulumiAzcoreResponseError`)."""


def _is_address(prefix: str) -> bool:
    try:
        ipaddress.ip_network(prefix, strict=False)
    except ValueError:
        return False  # a service tag or `*`: not among Azure's counted addresses
    return True


def read_nsg(fw: FirewallOn) -> NsgView:
    """The NSG's rules (azure-native's `getNetworkSecurityGroup`, synchronous, so previews read it too); a
    `RunError` when it cannot be read: a failed read is never taken for an empty NSG."""
    try:
        found = azure_native.network.get_network_security_group(
            resource_group_name=fw.resource_group, network_security_group_name=fw.nsg_name
        )
    except Exception as exc:  # whatever the invoke raises, the stack is stopped on one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        # An NSG (or resource group) that is not there stays missing until a person acts; anything else (a 429,
        # the network) may heal by itself.
        stop = StackRefused if any(mark in first for mark in _NOT_FOUND) else pulumi.RunError
        raise stop(
            f"cannot read NSG {fw.nsg_name!r} in resource group {fw.resource_group!r} (ssh-gateway:firewall) to "
            f"check that this stack's rules fit: {first}"
        ) from None
    rules = tuple(
        NsgRule(
            name=str(r.name or ""),
            priority=int(r.priority or 0),
            direction=str(r.direction or "Inbound"),
            description=str(r.description or ""),
            addresses=sum(_is_address(p) for p in [*(r.source_address_prefixes or []), r.source_address_prefix or ""]),
        )
        for r in found.security_rules or []
    )
    return NsgView(fw.nsg_name, rules)


def checked_plan(settings: Settings, *, org: OrgView, name: StackName, discovered: Outcome | None = None) -> StackPlan:
    """The run's plan against the stack's NSG as read (with the firewall on), once its rules (the configured
    instances' and the `discovered`) are known to fit it; a `RunError` in one line naming the NSG, what is used,
    what the stack adds and Azure's limit otherwise."""
    fw = settings.firewall
    nsg = read_nsg(fw) if isinstance(fw, FirewallOn) else None
    try:
        plan = plan_stack(settings, org=org, name=name, discovered=discovered, nsg=nsg)
    except ValueError as exc:  # no NSG priority free for a rule of the stack
        raise StackRefused(f"{PRIORITY_BASE_KEY}: {exc}") from None
    problem = plan.firewall.problem() if plan.firewall is not None else None
    if problem is not None:
        raise StackRefused(problem)
    return plan
