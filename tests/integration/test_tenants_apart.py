"""Tenants kept apart (issue 36, point 1), through the real CLI against the real kube-apiserver and the Pangolin
emulator: an object whose instance needs a name another owner holds in its namespace (the platform's own
`ssh-<name>` Service, a `ssh-<name>-host-key` Secret the stack does not own), or whose instance name another
namespace's object holds, is refused alone, before anything is written for it, while another tenant's new pod
converges in the same `up`; the other owner's object is left exactly as it was."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.local.control_plane import ControlPlane

from .conftest import StackFactory
from .test_cluster_instances import EXPOSE, config, create, delete, platform_service, status

pytestmark = pytest.mark.integration

NAME_LABEL = "ssh-gateway.io/instance"
PODS = {"from": "pods", "nameLabel": NAME_LABEL}


def pod(name: str) -> dict[str, Any]:
    container = {"name": "sshd", "image": "example.test/sshd:1", "ports": [{"containerPort": 22}]}
    labels = {**EXPOSE, NAME_LABEL: name}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{name}-0", "labels": labels},
        "spec": {"containers": [container]},
    }


def read(kube: ControlPlane, namespace: str, kind: str, name: str) -> dict[str, Any]:
    with kube.client() as api:
        found: dict[str, Any] = api.get(f"/api/v1/namespaces/{namespace}/{kind}/{name}").raise_for_status().json()
    return found


def served(emulator: EmulatorHandle) -> list[str]:
    return sorted(r["name"].rsplit("/", 1)[-1] for r in emulator.state()["resources"])


def test_the_pre_existing_service_beside_a_converging_tenant(
    kube: ControlPlane, kube_namespace: str, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    ns = kube_namespace
    # Seed A's platform made its own Service for alice, selecting exactly what the stack's would: applying over it
    # would have gone through. The stack must not touch it.
    platform = platform_service("alice", 30501)
    platform["spec"]["selector"] = {**EXPOSE, NAME_LABEL: "alice"}
    create(kube, ns, "services", platform)
    before = read(kube, ns, "services", "ssh-alice")
    create(kube, ns, "pods", pod("alice"))
    create(kube, ns, "pods", pod("okay"))
    stack = make_stack(config(emulator, kube, ns, **PODS))

    up = stack.up()

    assert sorted(up.outputs["endpoints"].value) == ["okay"]  # the other tenant converges in the same up
    assert served(emulator) == ["okay"]  # nothing written for alice
    line = status(kube, ns, stack)[f"refused.{ns}.alice-0.json"]["error"]
    assert line.startswith(f"pod {ns}/alice-0: Service {ns}/ssh-alice exists and is not this stack's"), line
    assert f"discovery refused pod {ns}/alice-0: Service {ns}/ssh-alice exists" in up.stdout
    after = read(kube, ns, "services", "ssh-alice")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    with kube.client() as api:  # nor its host-key Secret
        assert api.get(f"/api/v1/namespaces/{ns}/secrets/ssh-alice-host-key").status_code == 404

    # A second tenant's pod arrives while alice is still refused: it converges too, and nothing fails.
    create(kube, ns, "pods", pod("okay2"))
    assert sorted(stack.up().outputs["endpoints"].value) == ["okay", "okay2"]

    # The platform hands the name back: alice converges on the next up, behind the stack's own Service.
    delete(kube, ns, "services", "ssh-alice")
    assert sorted(stack.up().outputs["endpoints"].value) == ["alice", "okay", "okay2"]
    assert read(kube, ns, "services", "ssh-alice")["metadata"]["annotations"]["ssh-gateway/stack"] == (
        f"ssh-gateway/{stack.name}"
    )
    assert f"refused.{ns}.alice-0.json" not in status(kube, ns, stack)


def test_a_secret_of_the_host_key_name_the_stack_does_not_own_refuses_that_object_alone(
    kube: ControlPlane, kube_namespace: str, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    ns = kube_namespace
    theirs = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "ssh-bob-host-key", "annotations": {"ssh-gateway/stack": "ssh-gateway/someone-else"}},
        "stringData": {"ssh_host_ed25519_key": "theirs"},
    }
    create(kube, ns, "secrets", theirs)
    before = read(kube, ns, "secrets", "ssh-bob-host-key")
    create(kube, ns, "services", platform_service("bob", 30511))
    create(kube, ns, "services", platform_service("carol", 30512))
    stack = make_stack(config(emulator, kube, ns))

    up = stack.up()

    assert sorted(up.outputs["endpoints"].value) == ["carol"]
    assert served(emulator) == ["carol"]
    line = status(kube, ns, stack)[f"refused.{ns}.ssh-bob.json"]["error"]
    assert f"Secret {ns}/ssh-bob-host-key exists and is not this stack's (stack ssh-gateway/someone-else's)" in line
    assert (
        read(kube, ns, "secrets", "ssh-bob-host-key")["metadata"]["resourceVersion"]
        == (before["metadata"]["resourceVersion"])
    )


def test_an_instance_name_taken_in_another_namespace_refuses_the_newcomer_alone(
    kube: ControlPlane, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    namespaces = [f"it-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    for namespace in namespaces:
        kube.create_namespace(namespace)
    home, other = namespaces
    create(kube, home, "pods", pod("dup"))
    section = {**config(emulator, kube, home, **PODS)}
    section["ssh-gateway:discovery"] = {**section["ssh-gateway:discovery"], "namespaces": namespaces}
    stack = make_stack(section)
    assert sorted(stack.up().outputs["endpoints"].value) == ["dup"]

    create(kube, other, "pods", pod("dup"))  # another tenant's pod claims the served name
    create(kube, other, "pods", pod("fresh"))
    up = stack.up()

    endpoints = up.outputs["endpoints"].value
    assert sorted(endpoints) == ["dup", "fresh"]
    assert status(kube, home, stack)["instance.dup.json"]["object"]["namespace"] == home
    line = status(kube, home, stack)[f"refused.{other}.dup-0.json"]["error"]
    assert line.startswith(f"pod {other}/dup-0: instance name 'dup' is also that of pod {home}/dup-0"), line
    with kube.client() as api:
        assert api.get(f"/api/v1/namespaces/{other}/services/ssh-dup").status_code == 404
