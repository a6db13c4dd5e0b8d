"""Where an instance's Pangolin target points, resolved from its `target` and the cluster's settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from .names import service_name

__all__ = [
    "IN_PLACE_ANNOTATIONS",
    "SERVICE_AWAIT_ANNOTATIONS",
    "ClusterIpTarget",
    "NodePortTarget",
    "ServiceSpec",
    "StaticTarget",
    "Target",
    "cluster_dns_name",
    "service_spec",
]

# What an `up` waits for, per object (docs/cluster-instances.md, "What an up waits for"). The ssh Service is
# published before its pod runs: pulumi-kubernetes would otherwise wait until the pod is Ready and in the
# Service's Endpoints, so a GPU pod Pending for hours would hold the `up`, and every other instance's endpoint
# with it. skipAwait does not cover a Service's delete (provider pkg/metadata/overrides.go,
# allowsSkipAwaitWithDelete); a background delete removes the Service at once, its EndpointSlices after it,
# instead of waiting for the garbage collector.
SERVICE_AWAIT_ANNOTATIONS: Final = {
    "pulumi.com/skipAwait": "true",
    "pulumi.com/deletionPropagationPolicy": "background",
}
"""pulumi-kubernetes annotations of every ssh Service the stack makes."""

# The status ConfigMap and the host-key Secrets are updated in place (the provider's enableConfigMapMutable and
# enableSecretMutable), by server-side apply under the field manager their state names. One `recover` adopted
# carries a new manager's name, which then conflicts with the killed run's on every changed key; the stack is the
# only writer of each (its name is the stack's, and one the program never wrote is refused before anything
# runs), so its apply takes the fields over.
IN_PLACE_ANNOTATIONS: Final = {"pulumi.com/patchForce": "true"}
"""pulumi-kubernetes annotations of the objects the stack updates in place: its status ConfigMap and host-key
Secrets."""


@dataclass(frozen=True, kw_only=True)
class ServiceSpec:
    """The `ssh-<instance>` Service in front of the pod's sshd."""

    name: str
    """The Service's name."""
    namespace: str
    """Its namespace."""
    selector: Mapping[str, str]
    """The pods it selects."""
    pod_port: int
    """The sshd port in the pod."""


@dataclass(frozen=True, kw_only=True)
class NodePortTarget:
    """A NodePort Service, reached at a node's IP and the Service's nodePort."""

    service: ServiceSpec
    node_ip: str
    """The node address Pangolin's site forwards to."""
    node_port: int | None
    """A pinned nodePort, or None for the one the API server assigns."""


def cluster_dns_name(service: str, namespace: str, cluster_domain: str) -> str:
    """`<service>.<namespace>.svc.<cluster_domain>`: the name cluster DNS gives a Service."""
    return f"{service}.{namespace}.svc.{cluster_domain}"


@dataclass(frozen=True, kw_only=True)
class ClusterIpTarget:
    """A ClusterIP Service, reached at its cluster DNS name (a Newt site inside the cluster)."""

    service: ServiceSpec
    cluster_domain: str

    @property
    def host(self) -> str:
        """`ssh-<instance>.<namespace>.svc.<domain>`."""
        return cluster_dns_name(self.service.name, self.service.namespace, self.cluster_domain)


@dataclass(frozen=True, kw_only=True)
class StaticTarget:
    """A fixed host:port (a VM, or any host outside Kubernetes)."""

    host: str
    port: int


Target = NodePortTarget | ClusterIpTarget | StaticTarget


def service_spec(instance: str, namespace: str, selector: Mapping[str, str] | None, pod_port: int) -> ServiceSpec:
    """The Service of an instance, with the default selector `{"app": instance}`."""
    return ServiceSpec(
        name=service_name(instance),
        namespace=namespace,
        selector=dict(selector or {"app": instance}),
        pod_port=pod_port,
    )
