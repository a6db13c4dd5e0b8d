"""SshInstance against a real kube-apiserver (the session's `kube` fixture) through the real CLI: the API server
accepts the Service and assigns its nodePort, which reaches the Pangolin target as an integer; ClusterIP
targets use the cluster DNS name; a Service deleted behind the stack's back is seen by refresh and healed by up;
destroy leaves no Service behind."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi.automation import OpType

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.local.control_plane import ControlPlane

from .conftest import StackFactory, stack_config

pytestmark = pytest.mark.integration


def kube_config(kube: ControlPlane, namespace: str) -> dict[str, Any]:
    return {"namespace": namespace, "kubeconfig": str(kube.kubeconfig), "nodeIp": "127.0.0.1"}


def services(kube: ControlPlane, namespace: str) -> dict[str, dict[str, Any]]:
    with kube.client() as api:
        response = api.get(f"/api/v1/namespaces/{namespace}/services")
    response.raise_for_status()
    return {item["metadata"]["name"]: item for item in response.json()["items"]}


def targets_by_instance(emulator: EmulatorHandle) -> dict[str, dict[str, Any]]:
    state = emulator.state()
    names = {r["resourceId"]: r["name"].rsplit("/", 1)[1] for r in state["resources"]}
    return {names[t["resourceId"]]: t for t in state["targets"]}


def test_the_api_server_reports_a_release_version(kube: ControlPlane) -> None:
    # pulumi-kubernetes refuses a cluster older than 1.13, and a build without the version ldflags says v0.0.
    with kube.client() as api:
        version = api.get("/version").raise_for_status().json()
    assert version["major"] == "1" and int(version["minor"]) >= 13, version
    assert version["gitVersion"].startswith(f"v1.{version['minor']}."), version


def test_services_are_accepted_and_their_addresses_become_the_targets(
    kube: ControlPlane, kube_namespace: str, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    ns = kube_namespace
    instances = [{"name": "gpu-np", "target": "nodePort"}, {"name": "gpu-cip", "target": "clusterIp"}]
    stack = make_stack(stack_config(emulator, instances, kubernetes=kube_config(kube, ns)))
    stack.up()

    live = services(kube, ns)
    assert sorted(live) == ["ssh-gpu-cip", "ssh-gpu-np"]
    node_port_service, cluster_ip_service = live["ssh-gpu-np"], live["ssh-gpu-cip"]
    assert node_port_service["spec"]["type"] == "NodePort"
    assert node_port_service["spec"]["selector"] == {"app": "gpu-np"}
    assert node_port_service["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    [port] = node_port_service["spec"]["ports"]
    assigned = port["nodePort"]
    assert 30000 <= assigned <= 32767  # the server's default service-node-port-range
    assert cluster_ip_service["spec"]["type"] == "ClusterIP"
    assert "nodePort" not in cluster_ip_service["spec"]["ports"][0]

    targets = targets_by_instance(emulator)
    node_port_target = targets["gpu-np"]
    assert (node_port_target["ip"], node_port_target["port"]) == ("127.0.0.1", assigned)
    assert type(node_port_target["port"]) is int  # an int through the engine, not "31234" or 31234.0
    cluster_ip_target = targets["gpu-cip"]
    assert (cluster_ip_target["ip"], cluster_ip_target["port"]) == (f"ssh-gpu-cip.{ns}.svc.cluster.local", 22)

    stack.preview(expect_no_changes=True)


def test_a_service_deleted_by_hand_is_seen_by_refresh_and_healed_by_up(
    kube: ControlPlane, kube_namespace: str, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    ns = kube_namespace
    stack = make_stack(stack_config(emulator, [{"name": "gpu-a"}], kubernetes=kube_config(kube, ns)))
    stack.up()
    with kube.client() as api:
        api.delete(f"/api/v1/namespaces/{ns}/services/ssh-gpu-a").raise_for_status()
    assert services(kube, ns) == {}

    refresh = stack.refresh()
    assert refresh.summary.resource_changes is not None
    assert refresh.summary.resource_changes.get(OpType.DELETE) == 1  # the Service, gone from the state

    stack.up()
    [(name, service)] = services(kube, ns).items()
    assert name == "ssh-gpu-a"
    reassigned = service["spec"]["ports"][0]["nodePort"]
    assert targets_by_instance(emulator)["gpu-a"]["port"] == reassigned
    stack.preview(expect_no_changes=True)

    stack.destroy()
    assert services(kube, ns) == {}
    assert emulator.state()["resources"] == []
