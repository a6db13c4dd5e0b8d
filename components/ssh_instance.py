"""`SshInstance`: one instance's public ssh endpoint as one declarative unit.

Children: the `ssh-<instance>` Service in front of the pod's sshd (not for static targets), the Pangolin TCP
resource on the instance's allocated public port with its target, and the Azure NSG inbound rule for
exactly that port.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pulumi
import pulumi_azure_native as azure_native
import pulumi_kubernetes as k8s

from providers.pangolin import PangolinTcpResource, PangolinTcpResourceArgs

from .naming import service_name, ssh_alias

TargetMode = Literal["nodePort", "clusterIp", "static"]


@dataclass(frozen=True, kw_only=True)
class FirewallRuleArgs:
    """Where the instance's NSG rule goes and who may connect."""

    resource_group: str
    """Resource group of the network security group."""
    nsg_name: str
    """The network security group the gateway's NIC or subnet uses."""
    source_cidrs: Sequence[str]
    """Source address prefixes allowed in."""
    priority: pulumi.Input[int]
    """Rule priority, derived from the port so it is unique and stable."""


@dataclass(frozen=True, kw_only=True)
class PangolinTargetArgs:
    """The Pangolin side: where the API is and which site reaches the target."""

    api_url: str
    """Integration API base URL."""
    org_id: str
    """Org that owns the resource."""
    site_id: int
    """Newt (or local) site the target is reached through."""
    resource_name: str
    """Resource name, identifying the stack and the instance."""


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
    target_mode: TargetMode = "nodePort"
    """nodePort: node IP + the Service's nodePort; clusterIp: the Service's cluster DNS name + 22;
    static: a fixed host:port (a VM or a host outside Kubernetes)."""
    namespace: str = "default"
    """Namespace of the Service."""
    selector: Mapping[str, str] | None = None
    """Pod selector of the Service; default `{"app": instance}`."""
    pod_port: int = 22
    """The sshd port in the pod."""
    node_port: int | None = None
    """Pin the Service's nodePort (needed when manifests are rendered, not applied)."""
    node_ip: str | None = None
    """The node address a NodePort target is reached at."""
    cluster_domain: str = "cluster.local"
    """The cluster's DNS domain, for ClusterIP targets."""
    skip_await: bool = False
    """Only for clusters without controllers (tests): no await for endpoints, a background delete."""
    static_host: str | None = None
    """Target host for the static mode."""
    static_port: int | None = None
    """Target port for the static mode."""
    firewall: FirewallRuleArgs | None = None
    """The NSG rule; None when the stack has no firewall layer (local)."""
    host_key: str | None = None
    """The instance's pinned public host key (`ssh-ed25519 AAAA...`), for a known_hosts line."""


class SshInstance(pulumi.ComponentResource):
    """An instance reachable with `ssh -p PORT user@host`: Service, Pangolin resource and NSG rule."""

    host: pulumi.Output[str]
    port: pulumi.Output[int]
    user: pulumi.Output[str]
    ssh_command: pulumi.Output[str]
    ssh_config: pulumi.Output[str]
    """An OpenSSH `Host` block for this instance alone (VS Code Remote-SSH lists each one)."""
    known_hosts: pulumi.Output[str]
    """A `[host]:port key` line when a host key is pinned, else empty."""
    pangolin_resource_id: pulumi.Output[int]

    def __init__(self, name: str, args: SshInstanceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("ssh-gateway:index:SshInstance", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        target_ip, target_port = self._create_target(name, args, child)
        self.pangolin_resource = PangolinTcpResource(
            f"{name}-pangolin",
            PangolinTcpResourceArgs(
                api_url=args.pangolin.api_url,
                org_id=args.pangolin.org_id,
                site_id=args.pangolin.site_id,
                name=args.pangolin.resource_name,
                proxy_port=args.public_port,
                target_ip=target_ip,
                target_port=target_port,
            ),
            child,
        )
        if args.firewall is not None:
            self._create_firewall_rule(name, args, args.firewall)

        port = pulumi.Output.from_input(args.public_port)
        self.host = pulumi.Output.from_input(args.public_host)
        self.port = port
        self.user = pulumi.Output.from_input(args.user)
        self.ssh_command = port.apply(lambda p: f"ssh -p {p} {args.user}@{args.public_host}")
        self.ssh_config = port.apply(lambda p: _host_block(args, p))
        self.known_hosts = port.apply(lambda p: f"[{args.public_host}]:{p} {args.host_key}" if args.host_key else "")
        self.pangolin_resource_id = self.pangolin_resource.resource_id
        self.register_outputs(
            {
                "host": self.host,
                "port": self.port,
                "user": self.user,
                "ssh_command": self.ssh_command,
                "ssh_config": self.ssh_config,
                "known_hosts": self.known_hosts,
                "pangolin_resource_id": self.pangolin_resource_id,
            }
        )

    def _create_target(
        self, name: str, args: SshInstanceArgs, child: pulumi.ResourceOptions
    ) -> tuple[pulumi.Input[str], pulumi.Input[int]]:
        """The Service (unless static) and the address Pangolin's site forwards to."""
        if args.target_mode == "static":
            assert args.static_host is not None and args.static_port is not None  # noqa: S101 - settings checked
            return args.static_host, args.static_port
        node_port = args.target_mode == "nodePort"
        self.service = k8s.core.v1.Service(
            f"{name}-service",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=service_name(args.instance),
                namespace=args.namespace,
                labels={"app.kubernetes.io/managed-by": "ssh-gateway", "ssh-gateway/instance": args.instance},
                annotations=_SKIP_AWAIT if args.skip_await else None,
            ),
            spec=k8s.core.v1.ServiceSpecArgs(
                type="NodePort" if node_port else "ClusterIP",
                selector=dict(args.selector or {"app": args.instance}),
                ports=[
                    k8s.core.v1.ServicePortArgs(
                        name="ssh",
                        protocol="TCP",
                        port=22,
                        target_port=args.pod_port,
                        node_port=args.node_port if node_port else None,
                    )
                ],
            ),
            opts=child,
        )
        if not node_port:
            return f"{service_name(args.instance)}.{args.namespace}.svc.{args.cluster_domain}", 22
        assert args.node_ip is not None  # noqa: S101 - settings require nodeIp for nodePort targets
        assigned = self.service.spec.apply(_assigned_node_port)
        return args.node_ip, assigned if args.node_port is None else args.node_port

    def _create_firewall_rule(self, name: str, args: SshInstanceArgs, fw: FirewallRuleArgs) -> None:
        # A standalone SecurityRule, never inline rules on the NSG: inline rules make every NSG update
        # delete and re-add the standalone ones (pulumi-azure-native#3359).
        # It depends on the Pangolin resource so the port opens only once something is bound behind it,
        # and closes (destroy runs in reverse) before the binding goes away.
        self.firewall_rule = azure_native.network.SecurityRule(
            f"{name}-nsg-rule",
            resource_group_name=fw.resource_group,
            network_security_group_name=fw.nsg_name,
            security_rule_name=f"ssh-gateway-{args.instance}",
            description=f"ssh-gateway: public ssh to instance {args.instance}",
            direction="Inbound",
            access="Allow",
            protocol="Tcp",
            priority=fw.priority,
            source_port_range="*",
            # Azure takes a service tag ("Internet", "*") only in the singular field.
            source_address_prefix=fw.source_cidrs[0] if len(fw.source_cidrs) == 1 else None,
            source_address_prefixes=list(fw.source_cidrs) if len(fw.source_cidrs) > 1 else None,
            destination_address_prefix="*",
            destination_port_range=pulumi.Output.from_input(args.public_port).apply(str),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.pangolin_resource]),
        )


# For a cluster without controllers (the tests' kube-apiserver): no controller gives the Service endpoints, so
# pulumi-kubernetes would wait its full 10 minutes for them on create; and its default foreground delete
# leaves a `foregroundDeletion` finalizer that only the garbage collector removes, while skipAwait does not
# cover a Service's delete (provider pkg/metadata/overrides.go, allowsSkipAwaitWithDelete). A background
# delete removes the Service at once.
_SKIP_AWAIT = {"pulumi.com/skipAwait": "true", "pulumi.com/deletionPropagationPolicy": "background"}


def _assigned_node_port(spec: Any) -> int:
    """The nodePort the API server assigned to the Service's only port."""
    return int(spec.ports[0].node_port)


def _host_block(args: SshInstanceArgs, port: int) -> str:
    lines = [
        f"Host {ssh_alias(args.instance)}",
        f"    HostName {args.public_host}",
        f"    Port {port}",
        f"    User {args.user}",
    ]
    return "\n".join(lines) + "\n"
