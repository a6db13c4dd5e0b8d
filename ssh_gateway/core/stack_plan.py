"""`StackPlan`: what a run of the program decides before it registers anything, once.

The program reads the settings, the org, the cluster (with discovery) and the NSG (with the firewall on), then
plans: the discovered instances join the file's, the firewall's rules and priorities are decided
(`nsg_fit.plan_firewall`), the CONNECT entry is translated. `components.program.build` only carries the plan out,
and the NSG check reads the same plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from .connect import ConnectGateway, Entry, StandaloneEnvoy
from .discovery_records import Outcome
from .names import StackName
from .nsg_fit import FirewallPlan, NsgView, plan_firewall
from .org import OrgView
from .settings import Connect, FirewallOn, PangolinPublic, Settings

__all__ = ["ConnectPlan", "StackPlan", "firewall_plan", "plan_stack"]


@dataclass(frozen=True)
class ConnectPlan:
    """The stack's CONNECT entry, translated from the settings once, for every resource of it."""

    settings: Connect
    gateway: ConnectGateway | StandaloneEnvoy
    entry: Entry


@dataclass(frozen=True, kw_only=True)
class StackPlan:
    """Everything a run decides before it registers a resource."""

    name: StackName
    """The stack: its resources' names are built from it."""
    settings: Settings
    """The stack's settings, the discovered instances after the file's."""
    org: OrgView
    """The Pangolin org as listed when the run began: the ports others hold, leftovers to adopt."""
    discovered: Outcome | None
    """What discovery found and refused; None for a stack without `ssh-gateway:discovery`."""
    firewall: FirewallPlan | None
    """The NSG rules and their priorities; None with the firewall off."""
    connect: ConnectPlan | None
    """The CONNECT entry; None for a stack without `ssh-gateway:connect`."""


def plan_stack(
    settings: Settings,
    *,
    org: OrgView,
    name: StackName,
    discovered: Outcome | None = None,
    nsg: NsgView | None = None,
) -> StackPlan:
    """The run's plan from what it read: `nsg` is the NSG as read at preview (None: an NSG without rules). A
    `ValueError` naming the rule and the fix when no NSG priority is free for one of the stack's rules."""
    if discovered is not None:  # each one already checked by the instance models and the stack's rules
        found = tuple(f.instance for f in discovered.instances)
        settings = settings.model_copy(update={"instances": (*settings.instances, *found)})
    connect = None
    if settings.connect is not None:
        connect = ConnectPlan(settings.connect, settings.connect_gateway(), settings.connect_entry())
    return StackPlan(
        name=name,
        settings=settings,
        org=org,
        discovered=discovered,
        firewall=firewall_plan(settings, stack=name, nsg=nsg),
        connect=connect,
    )


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
        published=settings.published_range,
        port_sources=settings.port_sources(),
        # The one entry with a public port of the stack's, so the one with a rule.
        connect_rule=connect is not None and isinstance(connect.public, PangolinPublic),
        stack=stack,
        nsg=nsg,
    )
