"""`SshInstance`: one instance's public ssh endpoint as one declarative unit.

Children: the `ssh-<instance>` Service in front of the pod's sshd (not for static targets), the Pangolin TCP
resource on the instance's allocated public port with its target, the Azure NSG inbound rule for
exactly that port, and - unless a host key is pinned - the `ssh-<instance>-host-key` Secret the pod mounts its
host key and certificate from (both derived from the stack's secrets, `components.host_identity`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s
from pulumi.output import UNKNOWN

from providers.pangolin import PangolinTcpResource
from providers.sdk_patches import declaration_site_only
from ssh_gateway.core.host_identity import ssh_config_identity_lines
from ssh_gateway.core.names import (
    COMPONENT_TYPE,
    CONNECT_INSTANCE_TYPE,
    Role,
    child_name,
    nsg_rule_name,
    ssh_alias,
)
from ssh_gateway.core.targets import ClusterIpTarget, NodePortTarget, StaticTarget, Target
from ssh_gateway.core.trust import plain_line

from .firewall_rule import FirewallRuleArgs, nsg_rule
from .host_identity import HostIdentityArgs, issue_host_identity
from .kubernetes_objects import ssh_service
from .pangolin_tcp import PangolinTargetArgs, pangolin_tcp


@dataclass(frozen=True, kw_only=True)
class SshInstanceArgs:
    """One instance: its public side, its target, and its firewall rule."""

    instance: str
    """The instance's name (a DNS label)."""
    public_host: str
    """The public name users ssh to."""
    public_port: pulumi.Input[int]
    """The allocated public port (from `PortAllocation`, so known at preview)."""
    user: str
    """The login user."""
    pangolin: PangolinTargetArgs
    """Pangolin resource settings."""
    target: Target
    """Where Pangolin forwards to: a NodePort or ClusterIP Service in front of the pod, or a static host:port."""
    firewall: FirewallRuleArgs | None = None
    """The NSG rule; None when the stack has no firewall layer (local)."""
    host_key: str | None = None
    """The instance's pinned public host key (`ssh-ed25519 AAAA...`), for a known_hosts line."""
    host_identity: HostIdentityArgs | None = None
    """The issued host key and certificate; None with a pinned `host_key` or when host identity is off."""
    host_key_alias: str | None = None
    """`HostKeyAlias` of the ssh config block where instances share a HostName: the name known_hosts is
    searched under instead of the host."""
    known_hosts_file: str | None = None
    """`UserKnownHostsFile` of the ssh config block (where the user keeps the stack's knownHosts), with
    `StrictHostKeyChecking yes`; None when the stack publishes nothing that vouches for this instance."""


class SshInstance(pulumi.ComponentResource):
    """An instance reachable with `ssh -p PORT user@host`: Service, Pangolin resource and NSG rule."""

    host: pulumi.Output[str]
    port: pulumi.Output[int]
    user: pulumi.Output[str]
    ssh_command: pulumi.Output[str]
    ssh_config: pulumi.Output[str]
    """An OpenSSH `Host` block for this instance alone (VS Code Remote-SSH lists each one)."""
    known_hosts: pulumi.Output[str]
    """A plain known_hosts line (every port) when a host key is pinned, else empty."""
    host_key_line: pulumi.Output[str]
    """A plain known_hosts line for the key the instance serves, issued or pinned; empty when neither. Not a
    registered output: the stack output `hostKeys` is its one copy in state."""
    pangolin_resource_id: pulumi.Output[int]
    pangolin: PangolinTcpResource
    """The instance's Pangolin resource: what the stack's port check runs after."""

    def __init__(self, name: str, args: SshInstanceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        with declaration_site_only():
            # The alias lets an instance switch from routing connect to port: its Service keeps its URN (and is
            # updated, not created beside the old one under the same Kubernetes name).
            alias = pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=CONNECT_INSTANCE_TYPE)])
            super().__init__(COMPONENT_TYPE, name, None, pulumi.ResourceOptions.merge(opts, alias))
            child = pulumi.ResourceOptions(parent=self)

            target_ip, target_port = self._create_target(name, args, child)
            pangolin_resource = pangolin_tcp(
                child_name(name, Role.PANGOLIN),
                args.pangolin,
                proxy_port=args.public_port,
                target_ip=target_ip,
                target_port=target_port,
                opts=child,
            )
            if args.firewall is not None:
                self._create_firewall_rule(name, args, args.firewall, pangolin_resource)
            # Port-agnostic, under the name ssh looks the instance up by: a moved port meets no stale entry.
            lookup = args.host_key_alias or args.public_host
            pinned = pulumi.Output.from_input(plain_line(lookup, args.host_key) if args.host_key else "")
            identity = args.host_identity
            issued = issue_host_identity(self, name, args.instance, identity, lookup) if identity else None

        port = pulumi.Output.from_input(args.public_port)
        self.host = pulumi.Output.from_input(args.public_host)
        self.port = port
        self.user = pulumi.Output.from_input(args.user)
        self.ssh_command = port.apply(lambda p: f"ssh -p {p} {args.user}@{args.public_host}")
        self.ssh_config = port.apply(lambda p: _host_block(args, p))
        self.known_hosts = pinned
        self.host_key_line = issued if issued is not None else pinned
        self.pangolin_resource_id = pangolin_resource.resource_id
        self.pangolin = pangolin_resource
        # Nothing registered: every value above reaches the stack outputs (endpoints, sshConfig, knownHosts), which
        # are its one copy in state. A registered copy would add ~360 bytes per instance to the checkpoint, which
        # the file backend rewrites at every step, and nothing reads a component's outputs.
        self.register_outputs({})

    def _create_target(
        self, name: str, args: SshInstanceArgs, child: pulumi.ResourceOptions
    ) -> tuple[pulumi.Input[str], pulumi.Input[int]]:
        """The Service (unless static) and the address Pangolin's site forwards to."""
        target = args.target
        if isinstance(target, StaticTarget):
            return target.host, target.port
        service = self._create_service(name, args.instance, target, child)
        if isinstance(target, ClusterIpTarget):
            return target.host, 22
        assigned = service.spec.apply(_assigned_node_port)
        return target.node_ip, assigned if target.node_port is None else target.node_port

    def _create_service(
        self, name: str, instance: str, target: NodePortTarget | ClusterIpTarget, child: pulumi.ResourceOptions
    ) -> k8s.core.v1.Service:
        node_port = target.node_port if isinstance(target, NodePortTarget) else None
        return ssh_service(
            child_name(name, Role.SERVICE),
            instance=instance,
            spec=target.service,
            service_type="NodePort" if isinstance(target, NodePortTarget) else "ClusterIP",
            port_name="ssh",
            node_port=node_port,
            opts=child,
        )

    def _create_firewall_rule(
        self, name: str, args: SshInstanceArgs, fw: FirewallRuleArgs, pangolin_resource: PangolinTcpResource
    ) -> None:
        nsg_rule(
            child_name(name, Role.NSG_RULE),
            fw,
            rule_name=nsg_rule_name(args.instance),
            description=f"ssh-gateway: public ssh to instance {args.instance}",
            port=pulumi.Output.from_input(args.public_port).apply(str),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[pangolin_resource]),
        )


def _assigned_node_port(spec: Any) -> int:
    """The nodePort the API server assigned to the Service's only port; unknown in a preview whose Service create
    the provider could not dry-run (client-side apply, or unknown inputs): it then plans the inputs, which have no
    nodePort."""
    node_port = spec.ports[0].node_port
    if node_port is None and pulumi.runtime.is_dry_run():
        return cast(int, UNKNOWN)  # serialized as the engine's unknown, as the SDK's own outputs are
    return int(node_port)


def _host_block(args: SshInstanceArgs, port: int) -> str:
    lines = [
        f"Host {ssh_alias(args.instance)}",
        f"    HostName {args.public_host}",
        f"    Port {port}",
        f"    User {args.user}",
    ]
    if args.known_hosts_file is not None:
        identity = ssh_config_identity_lines(known_hosts_file=args.known_hosts_file, host_key_alias=args.host_key_alias)
        lines += [f"    {line}" for line in identity]
    return "\n".join(lines) + "\n"
