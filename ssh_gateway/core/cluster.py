"""The cluster's objects as discovery sees them: plain typed records, read by `ssh_gateway.kube` and reasoned
about by `ssh_gateway.core.discovery` (which never talks to a cluster, so it is tested without one).

A `Listing` is complete by construction: the reader returns one only after the last page of every namespace
(no `continue` token left); any failure is an exception instead, never a shorter list.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .names import DiscoverFrom

__all__ = ["ClusterObject", "Listing", "NamedObject", "Occupants", "ServicePort", "StatusMap", "selector_text"]


@dataclass(frozen=True, kw_only=True)
class ServicePort:
    """One port of a Service."""

    name: str | None
    """The port's name, if it has one."""
    port: int
    """The Service's port (what a cluster DNS name reaches)."""
    node_port: int | None
    """The node port, on NodePort and LoadBalancer Services."""


@dataclass(frozen=True, kw_only=True)
class ClusterObject:
    """A selected pod or Service: what discovery reads of it."""

    kind: DiscoverFrom
    """`pods` or `services`: what the stack lists."""
    namespace: str
    name: str
    uid: str
    """The object's uid: a pod deleted and made again under its name has a new one."""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    service_type: str | None = None
    """A Service's `spec.type` (`NodePort`, `ClusterIP`, ...); None for a pod."""
    ports: tuple[ServicePort, ...] = ()
    """A Service's ports; empty for a pod."""

    @property
    def ref(self) -> str:
        """How a message names the object, e.g. `pod gpu-users/alice-0`."""
        kind = "pod" if self.kind is DiscoverFrom.PODS else "service"
        return f"{kind} {self.namespace}/{self.name}"


@dataclass(frozen=True, kw_only=True)
class Listing:
    """Every selected object of every selected namespace, from complete listings."""

    objects: tuple[ClusterObject, ...]
    resource_versions: Mapping[str, str]
    """Per namespace, the listing's resourceVersion (where a watch of it resumes)."""


@dataclass(frozen=True, kw_only=True)
class NamedObject:
    """An object the stack would create for an instance, by kind and name: its `ssh-<instance>` Service or its
    `ssh-<instance>-host-key` Secret."""

    kind: Literal["Service", "Secret"]
    namespace: str
    name: str

    @property
    def ref(self) -> str:
        """How a message names it, e.g. `Service gpu-users/ssh-alice`."""
        return f"{self.kind} {self.namespace}/{self.name}"


Occupants = Mapping[NamedObject, str | None]
"""The objects of those names that exist, each with its stack mark (`names.STACK_MARK`; None: it carries none)."""


@dataclass(frozen=True, kw_only=True)
class StatusMap:
    """A stack's status ConfigMap as read."""

    namespace: str
    name: str
    stack: str
    """The stack it belongs to, from its `STACK_LABEL` (`<project>.<stack>`)."""
    data: Mapping[str, str]


def selector_text(selector: Mapping[str, str]) -> str:
    """An equality label selector as the API takes it, e.g. `app=ssh,ssh-gateway.io/expose=true`."""
    return ",".join(f"{key}={value}" for key, value in sorted(selector.items()))
