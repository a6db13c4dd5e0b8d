"""The program with `ssh-gateway:discovery`, under Pulumi mocks: discovered instances are registered like the
file's (a pod's in its own namespace behind a Service of the stack's; a platform Service as the target, not
owned), and the status ConfigMap records each endpoint once the instances exist."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import pulumi
import pytest

from components.program import build
from ssh_gateway.core.cluster import ClusterObject, Listing, ServicePort
from ssh_gateway.core.discovery import discover
from ssh_gateway.core.discovery_records import Outcome
from ssh_gateway.core.names import CONFIG_MAP_TYPE, SECRET_TYPE, SERVICE_TYPE, DiscoverFrom
from ssh_gateway.core.org import OrgView
from ssh_gateway.core.settings import Settings
from ssh_gateway.core.stack_plan import plan_stack
from ssh_gateway.plumbing.toolchain import REPO

from .conftest import RecordingMocks
from .test_program import UNIT
from .test_program import settings as program_settings

pytestmark = pytest.mark.unit

EXPOSE = {"ssh-gateway.io/expose": "true"}
NOW = datetime(2026, 12, 3, 10, 0, 0, tzinfo=UTC)


def stack(kind: str, **section: Any) -> Settings:
    discovery = {"from": kind, "namespaces": ["gpu-users"], "selector": EXPOSE, **section}
    return program_settings(discovery=discovery, firewall={"enabled": False})  # type: ignore[no-any-return]


def pod(name: str, **annotations: str) -> ClusterObject:
    return ClusterObject(
        kind=DiscoverFrom.PODS,
        namespace="gpu-users",
        name=f"{name}-0",
        uid=f"uid-{name}",
        labels={**EXPOSE, "ssh-gateway.io/instance": name},
        annotations={f"ssh-gateway.io/{k}": v for k, v in annotations.items()},
    )


def outcome(settings: Settings, *objects: ClusterObject) -> Outcome:
    listing = Listing(objects=objects, resource_versions={})
    return discover(listing=listing, memory={}, others=[], settings=settings, stack="ssh-gateway.unit", now=NOW)


def run_program(settings: Settings, discovered: Outcome | None) -> dict[str, Any]:
    resolved: dict[str, Any] = {}

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def program() -> pulumi.Output[None]:
        outputs = build(plan_stack(settings, org=OrgView(), name=UNIT, discovered=discovered))
        return pulumi.Output.from_input(outputs).apply(resolved.update)

    program()
    return resolved


def test_a_discovered_pod_gets_its_service_and_secret_in_its_namespace(mocks: RecordingMocks) -> None:
    settings = stack("pods", nameLabel="ssh-gateway.io/instance")
    out = run_program(settings, outcome(settings, pod("alice", user="alice"), pod("eve", user="no way")))
    assert set(out["endpoints"]) == {"gpu-01", "gpu-02", "vm-01", "alice"}
    assert out["endpoints"]["alice"]["user"] == "alice"
    services = {r.inputs["metadata"]["name"]: r.inputs for r in mocks.of_type(SERVICE_TYPE)}
    assert services["ssh-alice"]["metadata"]["namespace"] == "gpu-users"
    assert services["ssh-alice"]["spec"]["selector"] == {**EXPOSE, "ssh-gateway.io/instance": "alice"}
    assert services["ssh-gpu-01"]["metadata"]["namespace"] == "gpu"  # the file's keep kubernetes.namespace
    secrets = {r.inputs["metadata"]["name"]: r.inputs for r in mocks.of_type(SECRET_TYPE)}
    assert secrets["ssh-alice-host-key"]["metadata"]["namespace"] == "gpu-users"

    (status,) = mocks.of_type(CONFIG_MAP_TYPE)
    meta = status.inputs["metadata"]
    assert (meta["name"], meta["namespace"]) == ("ssh-gateway-status-unit", "gpu")
    assert meta["labels"] == {"app.kubernetes.io/managed-by": "ssh-gateway", "ssh-gateway.io/stack": "ssh-gateway.unit"}
    assert meta["annotations"]["pulumi.com/patchForce"] == "true"  # the adopted status's new field manager
    data = status.inputs["data"]
    assert sorted(data) == ["instance.alice.json", "ports.json", "refused.gpu-users.eve-0.json", "selection.json"]
    alice = json.loads(data["instance.alice.json"])
    assert alice["endpoint"] == out["endpoints"]["alice"]
    eve = json.loads(data["refused.gpu-users.eve-0.json"])
    assert '"no way"' in eve["error"]
    # What an Event on the pod names: kubectl describe matches the uid too.
    assert (eve["object"], eve["uid"]) == ({"kind": "pods", "namespace": "gpu-users", "name": "eve-0"}, "uid-eve")
    # The range's 100 ports less the reserved 40000 and the port-mode instances' (gpu-01, gpu-02, vm-01, alice).
    assert json.loads(data["ports.json"]) == {"range": "40000-40099", "free": 100 - 1 - len(out["allocations"])}
    assert len(out["allocations"]) == 4


def test_a_platform_service_is_the_target_and_the_stack_makes_no_service(mocks: RecordingMocks) -> None:
    settings = stack("services")
    platform = ClusterObject(
        kind=DiscoverFrom.SERVICES,
        namespace="gpu-users",
        name="ssh-carol",
        uid="uid-carol",
        labels=dict(EXPOSE),
        service_type="NodePort",
        ports=(ServicePort(name="ssh", port=22, node_port=30555),),
    )
    run_program(settings, outcome(settings, platform))
    assert "ssh-carol" not in {r.inputs["metadata"]["name"] for r in mocks.of_type(SERVICE_TYPE)}
    pangolin = {r.inputs["name"]: r.inputs for r in mocks.of_type("pulumi-python:dynamic/pangolin:TcpResource")}
    target = pangolin["ssh-gateway/unit/carol"]
    assert (target["targetIp"], target["targetPort"]) == ("10.0.0.4", 30555)
    secrets = {r.inputs["metadata"]["name"]: r.inputs for r in mocks.of_type(SECRET_TYPE)}
    assert secrets["ssh-carol-host-key"]["metadata"]["namespace"] == "gpu-users"  # beside the platform's Service


def test_a_stack_without_discovery_registers_no_status(mocks: RecordingMocks) -> None:
    run_program(program_settings(), None)
    assert mocks.of_type(CONFIG_MAP_TYPE) == []


def test_a_stack_without_discovery_does_not_import_the_kubernetes_client() -> None:
    # It takes 1.5-2 s to import (every API and model), paid twice per `ssh-gateway up` (preview and up).
    probe = "import sys, components.program; print('kubernetes' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO)
    assert found.stdout.strip() == "False", found.stderr
