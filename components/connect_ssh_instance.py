"""`ConnectSshInstance`: one instance with routing `connect`, reached through the stack's CONNECT entry.

Children: the ClusterIP Service `ssh-<instance>` in front of the pod's sshd (not for a static target), behind an
Istio gateway the EnvoyFilter that adds the instance's virtual host (CONNECT to its authority -> the Service's port
22) to the gateway's route configuration (`ssh_gateway.core.connect.instance_route_filter`), and - unless a host
key is pinned - its issued host key and the Secret the pod mounts it from (`components.host_identity`, as for a
port-mode instance). Behind a standalone Envoy the same virtual host is in the stack's `envoyConfig` output
instead. No public port, no Pangolin resource, no NSG rule: those are the stack's one `ConnectEntry`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from ssh_gateway.core.connect import (
    ConnectGateway,
    ConnectInstance,
    Entry,
    StandaloneEnvoy,
    connect_ssh_config,
    connect_virtual_host,
    instance_filter_name,
    instance_route_filter,
    proxytunnel_command,
)
from ssh_gateway.core.host_identity import ssh_config_identity_lines
from ssh_gateway.core.names import COMPONENT_TYPE, CONNECT_INSTANCE_TYPE, Role, child_name, ssh_alias
from ssh_gateway.core.targets import ServiceSpec, StaticTarget
from ssh_gateway.core.trust import plain_line

from .host_identity import HostIdentityArgs, issue_host_identity
from .kubernetes_objects import istio_object, ssh_service

__all__ = ["ConnectSshInstance", "ConnectSshInstanceArgs"]

SERVICE_PORT_NAME = "tcp-ssh"
"""The Service port's name: the `tcp-` prefix is Istio's protocol selection, so istiod treats the port as opaque TCP
(what the CONNECT tunnel carries), never as HTTP."""


@dataclass(frozen=True, kw_only=True)
class ConnectSshInstanceArgs:
    """One connect-mode instance: its Service, the gateway that routes to it, and how the public gets there."""

    instance: str
    """The instance's name (a DNS label)."""
    user: str
    """The login user."""
    target: ServiceSpec | StaticTarget
    """Where the gateway reaches the sshd: the ClusterIP Service `ssh-<instance>` in front of the pod, or a static
    host:port (only behind a standalone Envoy)."""
    route: ConnectInstance
    """The instance as the gateway routes to it (its authority)."""
    gateway: ConnectGateway | StandaloneEnvoy
    """The Istio ingress gateway whose route configuration gets the instance's virtual host, or the standalone
    Envoy that has it in the stack's `envoyConfig` (nothing to register here)."""
    entry: Entry
    """The stack's public CONNECT entry (host and port for the ProxyCommand)."""
    server_alive_interval: int
    """ssh's keepalive, so an idle session outlives the gateway's stream idle timeout."""
    host_key: str | None = None
    """The instance's pinned public host key, for a known_hosts line under its HostKeyAlias."""
    host_identity: HostIdentityArgs | None = None
    """The issued host key and certificate; None with a pinned `host_key` or when host identity is off."""
    known_hosts_file: str | None = None
    """`UserKnownHostsFile` of the ssh config block (where the user keeps the stack's knownHosts), with
    `StrictHostKeyChecking yes`; None when the stack publishes nothing that vouches for this instance."""


class ConnectSshInstance(pulumi.ComponentResource):
    """An instance reachable with `ssh ssh-<instance>` through the CONNECT entry: Service and EnvoyFilter (each
    where there is one)."""

    authority: pulumi.Output[str]
    """`ssh-<instance>.<namespace>.svc.<domain>`: the ssh HostName, sent as the CONNECT authority."""
    route: pulumi.Output[str]
    """Where its route is, for when the gateway has none: its EnvoyFilter `<gateway namespace>/<name>`, or its
    virtual host in the standalone Envoy's config, `envoyConfig/<virtual host>`."""
    user: pulumi.Output[str]
    ssh_command: pulumi.Output[str]
    ssh_config: pulumi.Output[str]
    """An OpenSSH `Host` block for this instance alone."""
    known_hosts: pulumi.Output[str]
    """A plain known_hosts line under the HostKeyAlias when a host key is pinned, else empty."""
    host_key_line: pulumi.Output[str]
    """A plain known_hosts line (under the HostKeyAlias) for the key the instance serves, issued or pinned."""

    def __init__(self, name: str, args: ConnectSshInstanceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        # The alias lets an instance switch from routing port to connect: its Service keeps its URN (updated in
        # place, not created beside the old one under the same Kubernetes name while that still exists).
        alias = pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=COMPONENT_TYPE)])
        gateway, target = args.gateway, args.target
        if isinstance(gateway, ConnectGateway) and isinstance(target, StaticTarget):
            raise ValueError(f"instance {args.instance!r}: an Istio gateway routes only to Services, not to {target}")
        super().__init__(CONNECT_INSTANCE_TYPE, name, None, pulumi.ResourceOptions.merge(opts, alias))
        if isinstance(target, ServiceSpec):
            service = self._create_service(name, args.instance, target)
            if isinstance(gateway, ConnectGateway):
                self._create_route(name, gateway, args.route, service)

        alias_name = ssh_alias(args.instance)
        # Every connect-mode instance shares the entry's address: ssh looks its key up under the HostKeyAlias.
        pinned = pulumi.Output.from_input(plain_line(alias_name, args.host_key) if args.host_key else "")
        identity = args.host_identity
        issued = issue_host_identity(self, name, args.instance, identity, alias_name) if identity else None
        authority = args.route.authority
        proxy = proxytunnel_command(args.entry.host, args.entry.port)
        self.authority = pulumi.Output.from_input(authority)
        if isinstance(gateway, ConnectGateway):
            route = f"{gateway.namespace}/{instance_filter_name(args.route)}"
        else:
            route = f"envoyConfig/{connect_virtual_host(args.route)['name']}"
        self.route = pulumi.Output.from_input(route)
        self.user = pulumi.Output.from_input(args.user)
        self.ssh_command = pulumi.Output.from_input(
            f'ssh -o "ProxyCommand={proxy}" -o HostKeyAlias={alias_name} {args.user}@{authority}'
        )
        block = connect_ssh_config(
            alias=alias_name,
            authority=authority,
            user=args.user,
            entry=args.entry,
            server_alive_interval=args.server_alive_interval,
        )
        if args.known_hosts_file is not None:  # the block already has its HostKeyAlias
            block += "".join(
                f"    {line}\n" for line in ssh_config_identity_lines(known_hosts_file=args.known_hosts_file)
            )
        self.ssh_config = pulumi.Output.from_input(block)
        self.known_hosts = pinned
        self.host_key_line = issued if issued is not None else pinned
        # Nothing registered, as for `SshInstance`: the stack outputs are the one copy of these values in state.
        self.register_outputs({})

    def _create_route(
        self,
        name: str,
        gateway: ConnectGateway,
        route: ConnectInstance,
        service: k8s.core.v1.Service,
    ) -> None:
        manifest = instance_route_filter(gateway, route)
        # After the Service: the route sends traffic only where something can answer (else 503), and destroy
        # removes the route before the Service.
        istio_object(
            child_name(name, Role.ROUTE),
            manifest,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[service]),
        )

    def _create_service(self, name: str, instance: str, spec: ServiceSpec) -> k8s.core.v1.Service:
        return ssh_service(
            child_name(name, Role.SERVICE),
            instance=instance,
            spec=spec,
            service_type="ClusterIP",
            port_name=SERVICE_PORT_NAME,
            opts=pulumi.ResourceOptions(parent=self),
        )
