"""Instances discovered from the cluster (`ssh-gateway:discovery`), through the real CLI against the real
kube-apiserver and the Pangolin emulator: objects created become endpoints in the outputs and in the status
ConfigMap; a bad annotation refuses that object alone; a gone object keeps its instance for the grace period
with 0 Pangolin writes, then goes; the guard holds when the selector suddenly matches nothing; a listing that is
forbidden or fails changes nothing. There is no kubelet: pods and Services are created through the API."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.names import urn_name
from ssh_gateway.local.control_plane import RESTRICTED_USER, ControlPlane
from ssh_gateway.ops.preview.summary import summarize

from .cli import pulumi
from .conftest import StackFactory, stack_config

pytestmark = pytest.mark.integration

EXPOSE = {"ssh-gateway.io/expose": "true"}


def create(kube: ControlPlane, namespace: str, kind: str, body: dict[str, Any]) -> None:
    with kube.client() as api:
        api.post(f"/api/v1/namespaces/{namespace}/{kind}", json=body).raise_for_status()


def delete(kube: ControlPlane, namespace: str, kind: str, name: str) -> None:
    """Deletes the object and returns once it is gone: a pod on a node goes when its kubelet (kwok) confirms, as a
    StatefulSet waits for before it makes the pod again under its name."""
    path = f"/api/v1/namespaces/{namespace}/{kind}/{name}"
    with kube.client() as api:
        api.delete(path).raise_for_status()
        deadline = time.monotonic() + 60
        while api.get(path).status_code != 404:
            assert time.monotonic() < deadline, f"{kind} {namespace}/{name} still there 60 s after its delete"
            time.sleep(0.1)


def platform_service(name: str, node_port: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A NodePort Service as Seed A's platform makes one per instance (`ssh-<instance>`)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"ssh-{name}", "labels": EXPOSE, "annotations": annotations or {}},
        "spec": {
            "type": "NodePort",
            "selector": {"app": name},
            "ports": [{"name": "ssh", "port": 22, "targetPort": 22, "nodePort": node_port}],
        },
    }


def status(kube: ControlPlane, namespace: str, stack: auto.Stack) -> dict[str, Any]:
    """The stack's status ConfigMap's data, each key's JSON decoded."""
    with kube.client() as api:
        response = api.get(f"/api/v1/namespaces/{namespace}/configmaps/ssh-gateway-status-{stack.name}")
    response.raise_for_status()
    return {key: json.loads(value) for key, value in (response.json().get("data") or {}).items()}


def config_section(namespace: str, **overrides: Any) -> dict[str, Any]:
    """`ssh-gateway:discovery` of the platform's Services in `namespace`, an hour's grace by default."""
    return {"from": "services", "namespaces": [namespace], "selector": EXPOSE, "gracePeriod": 3600, **overrides}


def config(
    emulator: EmulatorHandle, kube: ControlPlane, namespace: str, kubeconfig: str | None = None, **discovery: Any
) -> dict[str, Any]:
    kubernetes = {
        "namespace": namespace,
        "kubeconfig": kubeconfig or str(kube.kubeconfig),
        "nodeIp": "127.0.0.1",
    }
    return stack_config(emulator, [], kubernetes=kubernetes, discovery=config_section(namespace, **discovery))


def writes(emulator: EmulatorHandle) -> list[str]:
    return [route for route, n in emulator.counters().items() if n and not route.startswith("GET ")]


def test_platform_services_become_endpoints_kept_in_grace_then_removed_and_the_guard_holds(
    kube: ControlPlane, kube_namespace: str, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    ns = kube_namespace
    create(kube, ns, "services", platform_service("alice", 30201, {"ssh-gateway.io/user": "alice"}))
    create(kube, ns, "services", platform_service("bob", 30202))
    create(kube, ns, "services", platform_service("eve", 30203, {"ssh-gateway.io/user": "ro ot"}))
    stack = make_stack(config(emulator, kube, ns))
    up = stack.up()

    endpoints = up.outputs["endpoints"].value
    assert sorted(endpoints) == ["alice", "bob"]  # eve refused alone; the others converge
    assert (endpoints["alice"]["user"], endpoints["bob"]["user"]) == ("alice", "root")
    targets = {t["resourceId"]: (t["ip"], t["port"]) for t in emulator.state()["targets"]}
    assert sorted(targets.values()) == [("127.0.0.1", 30201), ("127.0.0.1", 30202)]
    written = status(kube, ns, stack)
    assert written["selection.json"]["from"] == "services"
    assert written["instance.alice.json"]["endpoint"] == endpoints["alice"]
    assert written["instance.alice.json"]["object"] == {"kind": "services", "namespace": ns, "name": "ssh-alice"}
    refused = written[f"refused.{ns}.ssh-eve.json"]["error"]
    assert refused.startswith(f'service {ns}/ssh-eve: ssh-gateway.io/user = "ro ot": String should match pattern')
    with kube.client() as api:  # the stack made no Service; the host-key Secret is beside the platform's
        assert api.get(f"/api/v1/namespaces/{ns}/secrets/ssh-alice-host-key").status_code == 200
        services = api.get(f"/api/v1/namespaces/{ns}/services").json()["items"]
    assert sorted(s["metadata"]["name"] for s in services) == ["ssh-alice", "ssh-bob", "ssh-eve"]

    # bob's Service goes: within the grace period its instance stays, same port, and Pangolin sees no write.
    delete(kube, ns, "services", "ssh-bob")
    emulator.reset_counters()
    kept = stack.up()
    assert writes(emulator) == []
    assert kept.outputs["endpoints"].value["bob"] == endpoints["bob"]
    assert status(kube, ns, stack)["instance.bob.json"]["missingSince"]

    # The grace period over: bob goes, and so does his status entry.
    stack.set_config("ssh-gateway:discovery", auto.ConfigValue(json.dumps(config_section(ns, gracePeriod=0))))
    gone = stack.up()
    assert sorted(gone.outputs["endpoints"].value) == ["alice"]
    assert "instance.bob.json" not in status(kube, ns, stack)
    assert len(emulator.state()["resources"]) == 1

    # A selector that suddenly matches nothing, over maxRemovals: nothing goes, one warning, held.json.
    typo = config_section(ns, gracePeriod=0, maxRemovals=0, selector={"ssh-gateway.io/expose": "ture"})
    stack.set_config("ssh-gateway:discovery", auto.ConfigValue(json.dumps(typo)))
    emulator.reset_counters()
    held = stack.up()
    assert writes(emulator) == []
    assert sorted(held.outputs["endpoints"].value) == ["alice"]
    assert "discovery holds back 1 removals (alice), over ssh-gateway:discovery.maxRemovals 0" in held.stdout
    assert status(kube, ns, stack)["held.json"] == {"held": ["alice"], "maxRemovals": 0}


def test_a_labelled_pod_gets_a_service_keeps_it_when_rescheduled_and_frees_it_when_gone(
    kube: ControlPlane, kube_namespace: str, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    ns = kube_namespace
    labels = {**EXPOSE, "ssh-gateway.io/instance": "carol"}
    container = {"name": "sshd", "image": "example.test/sshd:1", "ports": [{"containerPort": 2222}]}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "carol-0", "labels": labels, "annotations": {"ssh-gateway.io/podPort": "2222"}},
        "spec": {"containers": [container]},
    }
    create(kube, ns, "pods", pod)
    stack = make_stack(config(emulator, kube, ns, **{"from": "pods", "nameLabel": "ssh-gateway.io/instance"}))
    # A preview shows the discovered instance's resources, as it shows the file's.
    planned: list[tuple[str, str]] = []

    def seen(event: auto.EngineEvent) -> None:
        if event.resource_pre_event is not None:
            step = event.resource_pre_event.metadata
            planned.append((step.op.value, urn_name(step.urn)))

    stack.preview(on_event=seen)
    assert {("create", "carol"), ("create", "carol-service"), ("create", "carol-pangolin")} <= set(planned)
    # The pull request's summary gives the discovered instance's endpoint: its user is in an annotation, which
    # the preview does not show, so the command leaves it to the user's ssh config.
    shown = pulumi("preview", "--json", "--stack", stack.name)
    assert shown.returncode == 0, shown.stderr
    [row] = [r for r in summarize(json.loads(shown.stdout)).rows if r.instance == "carol"]
    assert (row.change, row.endpoint) == ("added", f"ssh -p {row.new_port} ssh-carol.example.test"), row
    first = stack.up()
    endpoints = first.outputs["endpoints"].value
    assert sorted(endpoints) == ["carol"]
    with kube.client() as api:
        service = api.get(f"/api/v1/namespaces/{ns}/services/ssh-carol").raise_for_status().json()
    assert service["spec"]["selector"] == labels
    assert service["spec"]["ports"][0]["targetPort"] == 2222
    assert status(kube, ns, stack)["instance.carol.json"]["endpoint"]["port"] == endpoints["carol"]["port"]
    stack.preview(expect_no_changes=True)  # a steady cluster: the status is written again unchanged

    # Rescheduled: deleted and made again (a new uid) within the grace period: same port, same host key, and
    # Pangolin sees no write.
    delete(kube, ns, "pods", "carol-0")
    create(kube, ns, "pods", pod)
    emulator.reset_counters()
    back = stack.up()
    assert writes(emulator) == []
    assert back.outputs["endpoints"].value["carol"] == endpoints["carol"]
    assert back.outputs["hostKeys"].value["carol"] == first.outputs["hostKeys"].value["carol"]
    assert status(kube, ns, stack)["instance.carol.json"]["missingSince"] is None

    # Gone for good (no grace): the instance, its Service and its status entry go.
    delete(kube, ns, "pods", "carol-0")
    section = config_section(ns, gracePeriod=0, **{"from": "pods", "nameLabel": "ssh-gateway.io/instance"})
    stack.set_config("ssh-gateway:discovery", auto.ConfigValue(json.dumps(section)))
    assert stack.up().outputs["endpoints"].value == {}
    with kube.client() as api:
        assert api.get(f"/api/v1/namespaces/{ns}/services/ssh-carol").status_code == 404
    assert "instance.carol.json" not in status(kube, ns, stack)
    assert emulator.state()["resources"] == []


def test_a_listing_that_is_forbidden_or_fails_changes_nothing(
    kube: ControlPlane, kube_namespace: str, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    ns = kube_namespace
    create(kube, ns, "services", platform_service("dave", 30211))
    stack = make_stack(config(emulator, kube, ns))
    stack.up()
    before = emulator.state()
    admin = config(emulator, kube, ns)["ssh-gateway:kubernetes"]
    # A user whom RBAC allows nothing, then an API server that does not answer.
    unreachable = kube.root / "kubeconfig-unreachable"
    unreachable.write_text(kube.kubeconfig.read_text().replace(f":{kube.api_port}", ":9"))
    cases = [
        (str(kube.restricted_kubeconfig()), f'403 Forbidden: services is forbidden: User "{RESTRICTED_USER}"'),
        (str(unreachable), "MaxRetryError"),
    ]
    for kubeconfig, expected in cases:
        stack.set_config("ssh-gateway:kubernetes", auto.ConfigValue(json.dumps({**admin, "kubeconfig": kubeconfig})))
        emulator.reset_counters()
        with pytest.raises(auto.CommandError) as failed:
            stack.up()
        message = str(failed.value)
        assert f"error: ssh-gateway:discovery: cannot list services in namespace {ns}" in message, message
        assert expected in message and "Traceback" not in message, message
        assert writes(emulator) == [] and emulator.state() == before
    stack.set_config("ssh-gateway:kubernetes", auto.ConfigValue(json.dumps(admin)))
    assert sorted(stack.up().outputs["endpoints"].value) == ["dave"]


def test_an_object_two_stacks_select_is_refused_by_both_naming_the_stacks(
    kube: ControlPlane, kube_namespace: str, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    ns = kube_namespace
    create(kube, ns, "services", platform_service("erin", 30221))
    first = make_stack(config(emulator, kube, ns, gracePeriod=0))
    assert sorted(first.up().outputs["endpoints"].value) == ["erin"]  # alone, it takes the Service
    second = make_stack(config(emulator, kube, ns, gracePeriod=0))
    assert second.up().outputs["endpoints"].value == {}  # it sees the first's selection: refused
    assert first.up().outputs["endpoints"].value == {}  # and now the first sees the second's
    stacks = sorted(f"ssh-gateway.{s.name}" for s in (first, second))
    for stack in (first, second):
        line = status(kube, ns, stack)[f"refused.{ns}.ssh-erin.json"]["error"]
        assert line.startswith(f"service {ns}/ssh-erin: selected by stacks "), line
        assert all(name in line for name in stacks), line
    assert emulator.state()["resources"] == []
