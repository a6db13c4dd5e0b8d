"""Where an instance's Pangolin target points, resolved from its `target` and the cluster's settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from .names import service_name

__all__ = [
    "SKIP_AWAIT_ANNOTATIONS",
    "ClusterIpTarget",
    "NodePortTarget",
    "ServiceSpec",
    "StaticTarget",
    "Target",
    "cluster_dns_name",
    "service_spec",
]

# For a cluster without controllers (the tests' kube-apiserver): no controller gives the Service endpoints, so
# pulumi-kubernetes would wait its full 10 minutes for them on create; and its default foreground delete
# leaves a `foregroundDeletion` finalizer that only the garbage collector removes, while skipAwait does not
# cover a Service's delete (provider pkg/metadata/overrides.go, allowsSkipAwaitWithDelete). A background
# delete removes the Service at once.
SKIP_AWAIT_ANNOTATIONS: Final = {"pulumi.com/skipAwait": "true", "pulumi.com/deletionPropagationPolicy": "background"}
"""pulumi-kubernetes annotations for objects on a control-plane-only cluster (`ServiceSpec.skip_await`)."""


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
    skip_await: bool
    """Only for clusters without controllers (tests): no await for endpoints, a background delete."""


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


def service_spec(
    instance: str, namespace: str, selector: Mapping[str, str] | None, pod_port: int, *, skip_await: bool
) -> ServiceSpec:
    """The Service of an instance, with the default selector `{"app": instance}`."""
    return ServiceSpec(
        name=service_name(instance),
        namespace=namespace,
        selector=dict(selector or {"app": instance}),
        pod_port=pod_port,
        skip_await=skip_await,
    )
