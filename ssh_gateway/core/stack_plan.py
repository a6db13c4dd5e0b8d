"""What a run of the program plans from the settings before it registers anything."""

from __future__ import annotations

from .names import StackName
from .nsg_fit import FirewallPlan, NsgView, plan_firewall
from .settings import FirewallOn, PangolinPublic, Settings

__all__ = ["firewall_plan"]


def firewall_plan(settings: Settings, *, stack: StackName, nsg: NsgView | None = None) -> FirewallPlan | None:
    """The stack's firewall plan against the NSG as read at preview (`nsg_fit.plan_firewall`); None with the
    firewall off. A `ValueError` naming the rule and the fix when no priority is free."""
    fw = settings.firewall
    if not isinstance(fw, FirewallOn):
        return None
    connect = settings.connect
    return plan_firewall(
        fw,
        port_range=settings.ports.range,
        port_sources=settings.port_sources(),
        # The one entry with a public port of the stack's, so the one with a rule.
        connect_rule=connect is not None and isinstance(connect.public, PangolinPublic),
        stack=stack,
        nsg=nsg,
    )
