"""`ConnectEntry`: the stack's one CONNECT entry, through which every connect-mode instance is reached.

Children: on an Istio gateway, the EnvoyFilter that turns CONNECT (and, if asked, HTTP/1.0) on in the ingress
gateway's listener (`ssh_gateway.core.connect.gateway_connect_filter`; none when there is nothing to turn on; a
standalone Envoy has that in the stack's `envoyConfig` output instead) and, if asked (`createGateway`), the Istio
`Gateway` whose HTTP server makes istiod build that listener (`istio_gateway`); and the public way in. Through Pangolin:
one raw TCP resource on the CONNECT port whose target is the gateway (its Service, or the standalone Envoy's
listener), and one NSG rule for that port. Directly (the gateway's own LoadBalancer): nothing, only the address.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from providers.pangolin import PangolinTcpResource
from ssh_gateway.core.connect import (
    ConnectGateway,
    Entry,
    PangolinEntry,
    StandaloneEnvoy,
    gateway_connect_filter,
    istio_gateway,
)
from ssh_gateway.core.names import CONNECT_ENTRY_TYPE, Role, child_name

from .firewall_rule import FirewallRuleArgs, nsg_rule
from .kubernetes_objects import istio_object
from .pangolin_tcp import PangolinTargetArgs, pangolin_tcp

__all__ = ["ConnectEntry", "ConnectEntryArgs"]


@dataclass(frozen=True, kw_only=True)
class ConnectEntryArgs:
    """The gateway that terminates CONNECT and how the public reaches it."""

    gateway: ConnectGateway | StandaloneEnvoy
    """The Istio ingress gateway (its pods' labels, listener port, namespace, CONNECT and HTTP/1.0 options), or a
    standalone Envoy (nothing to register: its config is a stack output)."""
    entry: Entry
    """Through Pangolin (a resource to create) or directly (an address to publish)."""
    pangolin: PangolinTargetArgs
    """The Pangolin resource's API, org, site and name (used when `entry` goes through Pangolin)."""
    firewall: FirewallRuleArgs | None = None
    """The CONNECT port's NSG rule (through Pangolin only); None when the stack has no firewall layer."""
    firewall_rule_name: str
    """That rule's name in the NSG, the stack's own (`names.connect_rule_name`)."""


class ConnectEntry(pulumi.ComponentResource):
    """The CONNECT port: the gateway's CONNECT filter, and the Pangolin resource and NSG rule in front of it."""

    host: pulumi.Output[str]
    """The public name clients send CONNECT to."""
    port: pulumi.Output[int]
    """The public CONNECT port."""
    pangolin_resource_id: pulumi.Output[int | None]
    """The Pangolin resource of the port (None when the gateway is reached directly)."""
    pangolin: PangolinTcpResource | None
    """That resource itself, for what must run after its create (the port check)."""

    def __init__(self, name: str, args: ConnectEntryArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(CONNECT_ENTRY_TYPE, name, None, opts)
        self._create_gateway_objects(name, args)
        resource_id: pulumi.Input[int | None] = None
        self.pangolin = None
        entry = args.entry
        if isinstance(entry, PangolinEntry):
            pangolin_resource = pangolin_tcp(
                child_name(name, Role.PANGOLIN),
                args.pangolin,
                proxy_port=entry.port,
                target_ip=entry.target_host,
                target_port=entry.target_port,
                opts=pulumi.ResourceOptions(parent=self),
            )
            resource_id = pangolin_resource.resource_id
            self.pangolin = pangolin_resource
            if args.firewall is not None:
                self._create_firewall_rule(name, entry, args.firewall, args.firewall_rule_name, pangolin_resource)
        self.host = pulumi.Output.from_input(entry.host)
        self.port = pulumi.Output.from_input(entry.port)
        self.pangolin_resource_id = pulumi.Output.from_input(resource_id)
        self.register_outputs({"host": self.host, "port": self.port, "pangolin_resource_id": self.pangolin_resource_id})

    def _create_gateway_objects(self, name: str, args: ConnectEntryArgs) -> None:
        if not isinstance(args.gateway, ConnectGateway):
            return
        # None: no Gateway asked for (the cluster's own opens the port); CONNECT already on (enableConnect: false)
        # and no HTTP/1.0 to turn on.
        child = pulumi.ResourceOptions(parent=self)
        for role, manifest in (
            (Role.GATEWAY, istio_gateway(args.gateway)),
            (Role.GATEWAY_FILTER, gateway_connect_filter(args.gateway)),
        ):
            if manifest is not None:
                istio_object(child_name(name, role), manifest, opts=child)

    def _create_firewall_rule(
        self,
        name: str,
        entry: PangolinEntry,
        fw: FirewallRuleArgs,
        rule_name: str,
        pangolin_resource: PangolinTcpResource,
    ) -> None:
        # Like an instance's rule: opened only once Pangolin binds the port. A stack whose rule had the old shared
        # name `ssh-gateway.connect` gets it replaced, create before delete: the new one's priority is another
        # (`nsg_fit.plan_firewall`), so the port stays open throughout.
        nsg_rule(
            child_name(name, Role.NSG_RULE),
            fw,
            rule_name=rule_name,
            description="ssh-gateway: public ssh over HTTP CONNECT to every connect-mode instance",
            port=str(entry.port),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[pangolin_resource]),
        )
