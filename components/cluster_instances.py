"""Instances discovered from the cluster, in the program (`ssh-gateway:discovery`, docs/cluster-instances.md):
the cluster read before anything is registered (the plan, `core/stack_plan.py`, merges the instances into the
settings), and the stack's status ConfigMap, written once the instances' resources exist.

Reading is read-only, so previews do it too: `pulumi preview` shows a discovered instance's changes as it shows
the file's. Any failure to read (the listing, this stack's status, the other stacks') is one `RunError` before
anything is registered, so nothing is deleted for want of an answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from ssh_gateway.core.addresses import DNS_NAME_MAX
from ssh_gateway.core.discovery import discover
from ssh_gateway.core.discovery_names import names_to_check
from ssh_gateway.core.discovery_records import Outcome
from ssh_gateway.core.discovery_status import StatusError, next_status, read_memory, read_selections
from ssh_gateway.core.names import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    STACK_LABEL,
    STATUS_RESOURCE_NAME,
    owner_prefix,
    stack_label,
    stack_mark,
    status_config_map_name,
)
from ssh_gateway.core.org import OrgView
from ssh_gateway.core.settings import Settings
from ssh_gateway.core.targets import IN_PLACE_ANNOTATIONS

from .kubernetes_objects import ownership_annotations
from .refused import StackRefused

__all__ = ["read_discovered", "register_status"]

_LABEL_VALUE: Final = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def read_discovered(settings: Settings, org: OrgView, *, project: str, stack: str) -> Outcome | None:
    """The discovered instances of this run (None for a stack without `ssh-gateway:discovery`), from complete
    reads of the cluster; a `RunError` when any read fails or the status holds what this program never wrote."""
    section = settings.discovery
    if section is None:
        return None
    _check_names(project, stack)
    # Imported here: the kubernetes client takes 1.5-2 s to import (every API and model of it), which no run of a
    # stack without discovery should pay, neither its preview nor its up.
    from ssh_gateway.kube import KubeError, api_client, list_selected, read_occupants, read_status, read_statuses

    kube = settings.kubernetes
    namespace, name = settings.status_namespace, status_config_map_name(stack)
    try:
        api = api_client(kube.kubeconfig, kube.context)
        with api:
            listing = list_selected(api, section.from_, section.namespaces, section.selector)
            status = read_status(api, namespace, name)
            statuses = read_statuses(api, namespace)
            memory = read_memory(status)
            # Objects of the names the stack would create, read before anything is written: one there that is not
            # this stack's refuses that tenant's object alone, where the create would fail the whole `up`.
            occupants = read_occupants(api, names_to_check(listing, memory, settings))
    except (KubeError, StatusError) as exc:
        raise pulumi.RunError(f"ssh-gateway:discovery: {exc}; nothing was changed") from None
    own = stack_label(project, stack)
    port_range = settings.ports.range
    held = org.held_in(port_range) if port_range is not None else {}
    return discover(
        listing=listing,
        memory=memory,
        others=read_selections(statuses, own),
        settings=settings,
        stack=own,
        now=datetime.now(UTC),
        bound={port: [b.name for b in bindings] for port, bindings in held.items()},
        own_prefix=owner_prefix(project, stack),
        occupants=occupants,
        own_mark=stack_mark(project, stack),
    )


def _check_names(project: str, stack: str) -> None:
    """The status ConfigMap's name and stack label are built from the stack's name, which must fit them."""
    name, label = status_config_map_name(stack), stack_label(project, stack)
    if len(name) > DNS_NAME_MAX or not _SUBDOMAIN.fullmatch(name):
        raise StackRefused(
            f"ssh-gateway:discovery: stack {stack!r} makes the status ConfigMap name {name!r}, which Kubernetes "
            "refuses (lowercase letters, digits, '-' and '.'): use such a stack name"
        )
    if not _LABEL_VALUE.fullmatch(label):
        raise StackRefused(
            f"ssh-gateway:discovery: project and stack make the label value {label!r}, which Kubernetes refuses "
            "(at most 63 letters, digits, '-', '_' and '.'): use a shorter stack name"
        )


def register_status(
    settings: Settings,
    outcome: Outcome,
    endpoints: Mapping[str, object],
    instances: Mapping[str, pulumi.Resource],
    *,
    free_ports: pulumi.Input[tuple[str, int]] | None,
    provider: k8s.Provider | None,
    project: str,
    stack: str,
) -> k8s.core.v1.ConfigMap:
    """The stack's status ConfigMap: the selection, each discovered instance's object, accepted annotations and
    endpoint, each refused object's line, the held removals, the free ports of the range. It depends on every
    instance, so an endpoint is written once the instance's resources exist, and an entry goes in the run that
    removes its instance. Only the discovered instances: a dependency on a component is recorded as one on each
    of its children."""
    names = [f.instance.name for f in outcome.instances]
    resolved: pulumi.Output[Any] = pulumi.Output.from_input({n: endpoints[n] for n in names})
    data = pulumi.Output.all(resolved, free_ports).apply(lambda both: next_status(outcome, both[0], both[1]))
    return k8s.core.v1.ConfigMap(
        STATUS_RESOURCE_NAME,
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=status_config_map_name(stack),
            namespace=settings.status_namespace,
            labels={MANAGED_BY_LABEL: MANAGED_BY, STACK_LABEL: stack_label(project, stack)},
            annotations={**ownership_annotations(), **IN_PLACE_ANNOTATIONS},
        ),
        data=data,
        opts=pulumi.ResourceOptions(provider=provider, depends_on=[instances[n] for n in names]),
    )
