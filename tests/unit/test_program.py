"""The component wiring with Pulumi mocks: what `build(settings)` registers and exports."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from components.program import build
from ssh_gateway.core.names import ALLOCATION_TYPE, PANGOLIN_TYPE
from ssh_gateway.core.org import OrgView
from ssh_gateway.core.settings import parse_settings

from .conftest import ASSIGNED_NODE_PORT, RecordingMocks

pytestmark = pytest.mark.unit

NO_ORG = OrgView()


def settings(**overrides: Any) -> Any:
    raw: dict[str, Any] = {
        "pangolin": {"url": "https://pangolin.example.com/v1", "orgId": "acme", "siteId": 3},
        "ports": {"range": "40000-40099", "reserved": [40000]},
        "gateway": {"hostTemplate": "ssh-{instance}.example.com"},
        "kubernetes": {"namespace": "gpu", "nodeIp": "10.0.0.4"},
        "firewall": {
            "resourceGroup": "rg-gw",
            "nsgName": "nsg-gw",
            "sourceCidrs": ["203.0.113.0/24"],
            "priorityBase": 1000,
        },
        "instances": [
            {"name": "gpu-01", "user": "alice"},
            {"name": "gpu-02", "target": "clusterIp", "sourceCidrs": ["198.51.100.7/32", "198.51.100.8/32"]},
            {"name": "vm-01", "target": "static", "staticHost": "10.1.2.3", "staticPort": 2200, "port": 40050},
        ],
    }
    raw.update(overrides)
    return parse_settings(raw)


def run_program(settings: Any, org: OrgView = NO_ORG) -> dict[str, Any]:
    """Runs `build` under the mocks until every registration has settled; returns the resolved outputs."""
    resolved: dict[str, Any] = {}

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def program() -> pulumi.Output[None]:
        outputs = build(settings, org=org, project="ssh-gateway", stack="unit")
        return pulumi.Output.from_input(outputs).apply(resolved.update)

    program()
    return resolved


def test_each_instance_gets_service_pangolin_resource_and_nsg_rule(mocks: RecordingMocks) -> None:
    out = run_program(settings())
    assert out["allocations"] == {"gpu-01": 40001, "gpu-02": 40002, "vm-01": 40050}
    services = {r.inputs["metadata"]["name"]: r.inputs for r in mocks.of_type("kubernetes:core/v1:Service")}
    assert set(services) == {"ssh-gpu-01", "ssh-gpu-02"}  # static targets have no Service
    assert services["ssh-gpu-01"]["spec"]["type"] == "NodePort"
    assert services["ssh-gpu-02"]["spec"]["type"] == "ClusterIP"
    assert services["ssh-gpu-01"]["spec"]["selector"] == {"app": "gpu-01"}
    assert services["ssh-gpu-01"]["metadata"]["namespace"] == "gpu"

    pangolin = {r.inputs["name"]: r.inputs for r in mocks.of_type(PANGOLIN_TYPE)}
    assert (pangolin["ssh-gateway/unit/gpu-01"]["siteId"], pangolin["ssh-gateway/unit/gpu-01"]["orgId"]) == (3, "acme")
    assert (pangolin["ssh-gateway/unit/gpu-01"]["targetIp"], pangolin["ssh-gateway/unit/gpu-01"]["targetPort"]) == (
        "10.0.0.4",
        ASSIGNED_NODE_PORT,
    )
    assert (pangolin["ssh-gateway/unit/gpu-02"]["targetIp"], pangolin["ssh-gateway/unit/gpu-02"]["targetPort"]) == (
        "ssh-gpu-02.gpu.svc.cluster.local",
        22,
    )
    assert (pangolin["ssh-gateway/unit/vm-01"]["targetIp"], pangolin["ssh-gateway/unit/vm-01"]["targetPort"]) == (
        "10.1.2.3",
        2200,
    )
    assert {name: p["proxyPort"] for name, p in pangolin.items()} == {
        "ssh-gateway/unit/gpu-01": 40001,
        "ssh-gateway/unit/gpu-02": 40002,
        "ssh-gateway/unit/vm-01": 40050,
    }

    rules = {r.inputs["securityRuleName"]: r.inputs for r in mocks.of_type("azure-native:network:SecurityRule")}
    assert set(rules) == {"ssh-gateway-gpu-01", "ssh-gateway-gpu-02", "ssh-gateway-vm-01"}
    gpu01 = rules["ssh-gateway-gpu-01"]
    assert gpu01["destinationPortRange"] == "40001"
    assert gpu01["priority"] == 1001  # base + (port - range start): unique and stable per port
    assert gpu01["sourceAddressPrefix"] == "203.0.113.0/24"
    assert (gpu01["direction"], gpu01["access"], gpu01["protocol"]) == ("Inbound", "Allow", "Tcp")
    assert (gpu01["resourceGroupName"], gpu01["networkSecurityGroupName"]) == ("rg-gw", "nsg-gw")
    assert rules["ssh-gateway-gpu-02"]["sourceAddressPrefixes"] == ["198.51.100.7/32", "198.51.100.8/32"]
    assert rules["ssh-gateway-vm-01"]["priority"] == 1050
    assert not mocks.of_type("azure-native:network:NetworkSecurityGroup")  # never inline rules

    assert out["endpoints"]["gpu-01"] == {
        "routing": "port",
        "pangolinResourceId": 7,
        "host": "ssh-gpu-01.example.com",
        "port": 40001,
        "user": "alice",
        "ssh": "ssh -p 40001 alice@ssh-gpu-01.example.com",
    }
    assert "Host ssh-gpu-01\n    HostName ssh-gpu-01.example.com\n    Port 40001\n    User alice\n" in out["sshConfig"]
    assert out["sshConfig"].count("Host ") == 3 and "*" not in out["sshConfig"]
    assert out["gateway"]["gerbilPublishedPorts"] == "40000-40099:40000-40099/tcp"
    assert len(out["gateway"]["traefikEntryPoints"]) == 100
    assert out["gateway"]["traefikEntryPoints"]["tcp-40001"] == {"address": ":40001/tcp"}
    assert len(mocks.of_type(ALLOCATION_TYPE)) == 1


def test_firewall_layer_can_be_off(mocks: RecordingMocks) -> None:
    run_program(settings(firewall={"enabled": False}))
    assert not mocks.of_type("azure-native:network:SecurityRule")
    assert len(mocks.of_type(PANGOLIN_TYPE)) == 3


def test_components_parent_their_children(mocks: RecordingMocks) -> None:
    run_program(settings())
    components = [r for r in mocks.registered if r.typ == "ssh-gateway:index:SshInstance"]
    assert sorted(r.name for r in components) == ["gpu-01", "gpu-02", "vm-01"]
    children = [r for r in mocks.registered if r.name.startswith("gpu-01-")]
    assert sorted(r.name for r in children) == ["gpu-01-nsg-rule", "gpu-01-pangolin", "gpu-01-service"]
