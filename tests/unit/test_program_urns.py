"""The URNs of the stack's shapes, pinned: a changed URN makes Pulumi replace the user's resource (delete and
create: a new port, rule or key), so no refactoring of the program may change one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pulumi
import pytest

from components.program import build
from ssh_gateway.core.cluster import ClusterObject, Listing
from ssh_gateway.core.discovery import discover
from ssh_gateway.core.names import DiscoverFrom
from ssh_gateway.core.org import OrgView
from ssh_gateway.core.settings import Settings
from ssh_gateway.core.stack_plan import plan_stack

from .conftest import RecordingMocks
from .test_program import UNIT, settings
from .test_program_connect import CONNECT, ENVOY, FIREWALL

pytestmark = pytest.mark.unit

EXPOSE = {"ssh-gateway.io/expose": "true"}
DISCOVERY = {"from": "pods", "namespaces": ["gpu-users"], "selector": EXPOSE, "nameLabel": "ssh-gateway.io/instance"}


def _pod(name: str, **annotations: str) -> ClusterObject:
    return ClusterObject(
        kind=DiscoverFrom.PODS,
        namespace="gpu-users",
        name=f"{name}-0",
        uid=f"uid-{name}",
        labels={**EXPOSE, "ssh-gateway.io/instance": name},
        annotations={f"ssh-gateway.io/{k}": v for k, v in annotations.items()},
    )


def _urns(stack_settings: Settings, *pods: ClusterObject) -> list[str]:
    """Every URN `build` registers, as the engine forms it (the mocks name the stack root in the type chain, the
    engine does not), without the `urn:pulumi:<stack>::<project>::` both share."""
    discovered = None
    if stack_settings.discovery is not None:
        listing = Listing(objects=pods, resource_versions={})
        now = datetime(2026, 12, 3, tzinfo=UTC)
        discovered = discover(
            listing=listing, memory={}, others=[], settings=stack_settings, stack="ssh-gateway.unit", now=now
        )

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def program() -> None:
        build(plan_stack(stack_settings, org=OrgView(), name=UNIT, discovered=discovered))

    program()
    monitor: Any = pulumi.runtime.settings.get_monitor()
    return sorted(
        urn.split("::", 2)[2].removeprefix("pulumi:pulumi:Stack$") for urn in monitor.get_registered_resources()
    )


def test_merged_rules_an_istio_entry_and_discovered_instances_keep_their_urns(mocks: RecordingMocks) -> None:
    instances = [
        {"name": "gpu-01", "user": "alice"},
        {"name": "gpu-02", "target": "clusterIp", "sourceCidrs": ["198.51.100.7/32"]},
        {"name": "vm-01", "target": "static", "staticHost": "10.1.2.3", "staticPort": 2200},
        {"name": "gpu-c1", "routing": "connect"},
    ]
    merged = {**FIREWALL, "rules": "merged"}
    shape = settings(firewall=merged, connect=CONNECT, instances=instances, discovery=DISCOVERY)
    assert _urns(shape, _pod("alice"), _pod("carl", routing="connect")) == [
        "kubernetes:core/v1:ConfigMap::discovery-status",
        "pulumi-python:dynamic/pangolin:PortCheck::port-check",
        "pulumi-python:dynamic/ssh-gateway:PortAllocation::ports",
        "pulumi-python:dynamic/ssh-gateway:SshHostCa::host-ca-g1",
        "pulumi-python:dynamic/ssh-gateway:SshHostKeyRoot::host-key-root",
        "pulumi:providers:kubernetes::kubernetes",
        "ssh-gateway:index:ConnectEntry$azure-native:network:SecurityRule::connect-nsg-rule",
        "ssh-gateway:index:ConnectEntry$kubernetes:networking.istio.io/v1alpha3:EnvoyFilter::connect-gateway-filter",
        "ssh-gateway:index:ConnectEntry$pulumi-python:dynamic/pangolin:TcpResource::connect-pangolin",
        "ssh-gateway:index:ConnectEntry::connect",
        "ssh-gateway:index:ConnectSshInstance$kubernetes:core/v1:Secret::carl-host-key-secret",
        "ssh-gateway:index:ConnectSshInstance$kubernetes:core/v1:Secret::gpu-c1-host-key-secret",
        "ssh-gateway:index:ConnectSshInstance$kubernetes:core/v1:Service::carl-service",
        "ssh-gateway:index:ConnectSshInstance$kubernetes:core/v1:Service::gpu-c1-service",
        "ssh-gateway:index:ConnectSshInstance$kubernetes:networking.istio.io/v1alpha3:EnvoyFilter::carl-route",
        "ssh-gateway:index:ConnectSshInstance$kubernetes:networking.istio.io/v1alpha3:EnvoyFilter::gpu-c1-route",
        "ssh-gateway:index:ConnectSshInstance::carl",
        "ssh-gateway:index:ConnectSshInstance::gpu-c1",
        "ssh-gateway:index:PortFirewall$azure-native:network:SecurityRule::firewall-ports",
        "ssh-gateway:index:PortFirewall$azure-native:network:SecurityRule::firewall-ports-cddcbaf2",
        "ssh-gateway:index:PortFirewall::firewall",
        "ssh-gateway:index:SshInstance$kubernetes:core/v1:Secret::alice-host-key-secret",
        "ssh-gateway:index:SshInstance$kubernetes:core/v1:Secret::gpu-01-host-key-secret",
        "ssh-gateway:index:SshInstance$kubernetes:core/v1:Secret::gpu-02-host-key-secret",
        "ssh-gateway:index:SshInstance$kubernetes:core/v1:Service::alice-service",
        "ssh-gateway:index:SshInstance$kubernetes:core/v1:Service::gpu-01-service",
        "ssh-gateway:index:SshInstance$kubernetes:core/v1:Service::gpu-02-service",
        "ssh-gateway:index:SshInstance$pulumi-python:dynamic/pangolin:TcpResource::alice-pangolin",
        "ssh-gateway:index:SshInstance$pulumi-python:dynamic/pangolin:TcpResource::gpu-01-pangolin",
        "ssh-gateway:index:SshInstance$pulumi-python:dynamic/pangolin:TcpResource::gpu-02-pangolin",
        "ssh-gateway:index:SshInstance$pulumi-python:dynamic/pangolin:TcpResource::vm-01-pangolin",
        "ssh-gateway:index:SshInstance::alice",
        "ssh-gateway:index:SshInstance::gpu-01",
        "ssh-gateway:index:SshInstance::gpu-02",
        "ssh-gateway:index:SshInstance::vm-01",
    ]


def test_instance_rules_an_envoy_entry_and_no_host_identity_keep_their_urns(mocks: RecordingMocks) -> None:
    instances = [
        {"name": "gpu-01", "user": "alice"},
        {"name": "gpu-s1", "routing": "connect", "target": "static", "staticHost": "10.1.0.5", "staticPort": 22},
        {"name": "gpu-c1", "routing": "connect"},
    ]
    shape = settings(firewall=FIREWALL, connect=ENVOY, instances=instances, hostIdentity={"enabled": False})
    assert _urns(shape) == [
        "pulumi-python:dynamic/pangolin:PortCheck::port-check",
        "pulumi-python:dynamic/ssh-gateway:PortAllocation::ports",
        "pulumi:providers:kubernetes::kubernetes",
        "ssh-gateway:index:ConnectEntry$azure-native:network:SecurityRule::connect-nsg-rule",
        "ssh-gateway:index:ConnectEntry$pulumi-python:dynamic/pangolin:TcpResource::connect-pangolin",
        "ssh-gateway:index:ConnectEntry::connect",
        "ssh-gateway:index:ConnectSshInstance$kubernetes:core/v1:Service::gpu-c1-service",
        "ssh-gateway:index:ConnectSshInstance::gpu-c1",
        "ssh-gateway:index:ConnectSshInstance::gpu-s1",
        "ssh-gateway:index:SshInstance$azure-native:network:SecurityRule::gpu-01-nsg-rule",
        "ssh-gateway:index:SshInstance$kubernetes:core/v1:Service::gpu-01-service",
        "ssh-gateway:index:SshInstance$pulumi-python:dynamic/pangolin:TcpResource::gpu-01-pangolin",
        "ssh-gateway:index:SshInstance::gpu-01",
    ]
