"""The NSG read at preview, and the refusal of a stack whose rules would not fit it (`core/nsg_fit.py`)."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

import pulumi
import pulumi_azure_native as azure_native

from ssh_gateway.core.firewall import PRIORITY_BASE_KEY
from ssh_gateway.core.names import StackName
from ssh_gateway.core.nsg_fit import NsgRule, NsgView
from ssh_gateway.core.settings import FirewallOn, Instance, Settings
from ssh_gateway.core.stack_plan import firewall_plan

__all__ = ["check_nsg_fits"]


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
    except Exception as exc:  # whatever the invoke raises, the stack is refused on one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise pulumi.RunError(
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


def check_nsg_fits(settings: Settings, *, project: str, stack: str, extra: Sequence[Instance] = ()) -> NsgView | None:
    """The NSG as read, once the stack's rules (for its configured instances and the `extra` ones discovered in
    the cluster) are known to fit it; a `RunError` in one line naming the NSG, what is used, what the stack adds
    and Azure's limit otherwise. None with the firewall off."""
    fw = settings.firewall
    if not isinstance(fw, FirewallOn):
        return None
    if extra:
        settings = settings.model_copy(update={"instances": (*settings.instances, *extra)})
    view = read_nsg(fw)
    try:
        plan = firewall_plan(settings, stack=StackName(project, stack), nsg=view)
    except ValueError as exc:
        raise pulumi.RunError(f"{PRIORITY_BASE_KEY}: {exc}") from None
    problem = plan.problem() if plan is not None else None
    if problem is not None:
        raise pulumi.RunError(problem)
    return view
