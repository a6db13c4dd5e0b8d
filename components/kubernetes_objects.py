"""The Kubernetes objects the components create, one function each: an ssh Service, and an Istio object from
its manifest (`ssh_gateway.core.connect` builds the manifests as plain dicts).

Plain functions, not components: each object stays a direct child of the component that calls it, so its
URN is the one it always had.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import pulumi
import pulumi_kubernetes as k8s

from ssh_gateway.core.connect import SSH_PORT
from ssh_gateway.core.names import INSTANCE_LABEL, MANAGED_BY, MANAGED_BY_LABEL, STACK_MARK, stack_mark
from ssh_gateway.core.targets import SERVICE_AWAIT_ANNOTATIONS, ServiceSpec

__all__ = ["istio_object", "ownership_annotations", "ssh_service"]


def ssh_service(
    name: str,
    *,
    instance: str,
    spec: ServiceSpec,
    service_type: Literal["ClusterIP", "NodePort"],
    port_name: str,
    opts: pulumi.ResourceOptions,
    node_port: int | None = None,
) -> k8s.core.v1.Service:
    """The instance's `ssh-<instance>` Service: port 22 to the pod's sshd port."""
    return k8s.core.v1.Service(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=spec.name,
            namespace=spec.namespace,
            labels={MANAGED_BY_LABEL: MANAGED_BY, INSTANCE_LABEL: instance},
            annotations={**ownership_annotations(), **SERVICE_AWAIT_ANNOTATIONS},
        ),
        spec=k8s.core.v1.ServiceSpecArgs(
            type=service_type,
            selector=dict(spec.selector),
            ports=[
                k8s.core.v1.ServicePortArgs(
                    name=port_name, protocol="TCP", port=SSH_PORT, target_port=spec.pod_port, node_port=node_port
                )
            ],
        ),
        opts=opts,
    )


def ownership_annotations() -> dict[str, str]:
    """The annotation of an object this stack owns: its mark (`STACK_MARK`, what `recover` checks before it
    adopts an object no state holds)."""
    return {STACK_MARK: stack_mark(pulumi.get_project(), pulumi.get_stack())}


def istio_object(
    name: str, manifest: Mapping[str, Any], *, opts: pulumi.ResourceOptions
) -> k8s.apiextensions.CustomResource:
    """An Istio custom resource (EnvoyFilter, Gateway) from its manifest: apiVersion, kind, metadata, spec."""
    metadata = manifest["metadata"]
    return k8s.apiextensions.CustomResource(
        name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=metadata["name"],
            namespace=metadata["namespace"],
            labels=metadata["labels"],
        ),
        spec=manifest["spec"],
        opts=opts,
    )
