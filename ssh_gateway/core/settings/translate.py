"""The settings translated into the domain objects the program builds from: where each instance's target is,
the CONNECT gateway, its public entry and its routes. Functions of the sections they read, so the cross-field
rules of `schema.Settings` can call them too (a target that cannot be built is a config error)."""

from __future__ import annotations

from collections.abc import Iterable

from ssh_gateway.core.connect import (
    ConnectGateway,
    ConnectInstance,
    DirectEntry,
    Entry,
    EnvoyRoute,
    GatewayServer,
    PangolinEntry,
    ServiceUpstream,
    StandaloneEnvoy,
    namespace_hosts,
)
from ssh_gateway.core.names import CONNECT_ENTRY, public_host
from ssh_gateway.core.targets import (
    ClusterIpTarget,
    NodePortTarget,
    ServiceSpec,
    StaticTarget,
    Target,
    cluster_dns_name,
    service_spec,
)

from .sections import (
    ClusterIpInstance,
    Connect,
    ConnectModeInstance,
    ConnectStaticInstance,
    DirectPublic,
    EnvoyGatewaySettings,
    Gateway,
    Instance,
    Kubernetes,
    PortModeInstance,
    StaticInstance,
)

__all__ = [
    "connect_entry",
    "connect_gateway",
    "connect_instance",
    "connect_target",
    "envoy_routes",
    "namespace_of",
    "target_of",
]


def namespace_of(inst: Instance, kube: Kubernetes) -> str:
    """The instance's namespace: its own (a discovered instance has its object's), else the stack's."""
    return inst.namespace or kube.namespace


def target_of(inst: PortModeInstance, kube: Kubernetes) -> Target:
    """Where the instance's Pangolin target points, with the cluster's settings filled in."""
    if isinstance(inst, StaticInstance):
        return StaticTarget(host=inst.static_host, port=inst.static_port)
    service = service_spec(inst.name, namespace_of(inst, kube), inst.selector, inst.pod_port)
    if isinstance(inst, ClusterIpInstance):
        return ClusterIpTarget(service=service, cluster_domain=kube.cluster_domain)
    if kube.node_ip is None:
        raise ValueError(f"instance {inst.name!r} has target nodePort, so set kubernetes.nodeIp (or use clusterIp)")
    return NodePortTarget(service=service, node_ip=kube.node_ip, node_port=inst.node_port)


def connect_gateway(
    connect: Connect, kube: Kubernetes, namespaces: Iterable[str] = ()
) -> ConnectGateway | StandaloneEnvoy:
    """The gateway of the CONNECT entry: the Istio gateway the EnvoyFilters select and match, or the
    standalone Envoy whose whole config the stack outputs. A Gateway the stack creates serves the Services of
    the stack's namespace and of `namespaces` (instances' own: the file's, and those discovery selects in)."""
    gw = connect.gateway
    if isinstance(gw, EnvoyGatewaySettings):
        return StandaloneEnvoy(
            listener_port=gw.listener_port,
            listen_address=gw.listen_address,
            accept_http10=connect.accept_http10,
            stream_idle_timeout=gw.idle_timeout,
        )
    served = [kube.namespace, *sorted(set(namespaces) - {kube.namespace})]
    hosts = tuple(h for ns in served for h in namespace_hosts(ns, kube.cluster_domain))
    server = GatewayServer(port=gw.service_port, hosts=hosts)
    return ConnectGateway(
        selector=dict(gw.selector),
        listener_port=gw.listener_port,
        namespace=gw.namespace,
        enable_connect=connect.enable_connect,
        accept_http10=connect.accept_http10,
        server=server if gw.create_gateway else None,
    )


def connect_instance(inst: ConnectModeInstance, kube: Kubernetes) -> ConnectInstance:
    """The instance as the gateway routes to it: its authority, the cluster DNS name of its Service in the
    instance's namespace and the cluster domain (for a static target, behind a standalone Envoy, only a routing name
    that need not resolve)."""
    return ConnectInstance(inst.name, namespace_of(inst, kube), kube.cluster_domain)


def connect_target(inst: ConnectModeInstance, kube: Kubernetes) -> ServiceSpec | StaticTarget:
    """Where the gateway reaches the instance's sshd: its ClusterIP Service `ssh-<instance>`, or a static
    host:port."""
    if isinstance(inst, ConnectStaticInstance):
        return StaticTarget(host=inst.static_host, port=inst.static_port)
    return service_spec(inst.name, namespace_of(inst, kube), inst.selector, inst.pod_port)


def envoy_routes(instances: Iterable[Instance], kube: Kubernetes) -> list[EnvoyRoute]:
    """Every connect-mode instance as a standalone Envoy routes it: its authority and its upstream."""
    routes = []
    for inst in instances:
        if isinstance(inst, ConnectModeInstance):
            target = connect_target(inst, kube)
            upstream = target if isinstance(target, StaticTarget) else ServiceUpstream()
            routes.append(EnvoyRoute(connect_instance(inst, kube), upstream))
    return routes


def connect_entry(connect: Connect, gateway: Gateway, kube: Kubernetes) -> Entry:
    """How the public reaches the gateway: a Pangolin resource to it, or the gateway's own address."""
    public, gw = connect.public, connect.gateway
    if isinstance(public, DirectPublic):
        return DirectEntry(host=public.host, port=public.port)
    host = public.host or public_host(gateway.host_template, CONNECT_ENTRY)
    if isinstance(gw, EnvoyGatewaySettings):
        return PangolinEntry(
            host=host, port=public.port, target_host=gw.target_host, target_port=gw.service_port or gw.listener_port
        )
    service_host = cluster_dns_name(gw.service, gw.namespace, kube.cluster_domain)
    return PangolinEntry(
        host=host, port=public.port, target_host=gw.target_host or service_host, target_port=gw.service_port
    )
