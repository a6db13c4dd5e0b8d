"""What a real cluster does to a discovery stack (`from: pods`), on the cluster that acts: the scheduler leaves GPU
pods Pending, a node is lost with its pods, a tenant's namespace is deleted. Each time the stack's `up` succeeds,
nothing is orphaned, no port is bound twice, and the instances of the other namespaces converge in the same
run. Real stacks' settings: pulumi-kubernetes' await logic runs (no skipAwait anywhere)."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.local.cluster_nodes import GPU
from ssh_gateway.local.control_plane import ControlPlane

from .conftest import StackFactory, stack_config
from .test_cluster_instances import status

pytestmark = pytest.mark.integration

EXPOSE = {"ssh-gateway.io/expose": "true"}
NAME_LABEL = "ssh-gateway.io/instance"
_node_index = itertools.count(2)  # DEFAULT_NODES hold /24s 0 and 1 of the pod network


def pod(name: str, *, gpus: int = 0, node: str | None = None, finalizer: str | None = None) -> dict[str, Any]:
    resources = {"limits": {GPU: str(gpus)}} if gpus else {}
    spec: dict[str, Any] = {"containers": [{"name": "sshd", "image": "example.test/sshd:1", "resources": resources}]}
    if node is not None:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    meta: dict[str, Any] = {"name": f"{name}-0", "labels": {**EXPOSE, NAME_LABEL: name}}
    if finalizer is not None:
        meta["finalizers"] = [finalizer]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def create_pods(kube: ControlPlane, namespace: str, *pods: dict[str, Any]) -> None:
    with kube.client() as api:
        for body in pods:
            api.post(f"/api/v1/namespaces/{namespace}/pods", json=body).raise_for_status()


def get(kube: ControlPlane, path: str) -> dict[str, Any] | None:
    with kube.client() as api:
        response = api.get(path)
    if response.status_code == 404:
        return None
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def wait_for(what: str, check: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f}s"
        time.sleep(0.5)


def discovery_stack(
    emulator: EmulatorHandle, namespaces: list[str], status_namespace: str, grace: int = 3600
) -> dict[str, Any]:
    section = {"from": "pods", "namespaces": namespaces, "selector": EXPOSE, "nameLabel": NAME_LABEL}
    kubernetes = {"namespace": status_namespace, "kubeconfig": "", "nodeIp": "127.0.0.1"}
    return stack_config(emulator, [], kubernetes=kubernetes, discovery={**section, "gracePeriod": grace})


def configured(kube: ControlPlane, config: dict[str, Any]) -> dict[str, Any]:
    config["ssh-gateway:kubernetes"]["kubeconfig"] = str(kube.kubeconfig)
    return config


def assert_one_target_per_port(emulator: EmulatorHandle) -> None:
    ports = [r["proxyPort"] for r in emulator.state()["resources"]]
    assert len(ports) == len(set(ports)), ports


def new_namespace(kube: ControlPlane) -> str:
    name = f"it-{uuid.uuid4().hex[:8]}"
    kube.create_namespace(name)
    return name


def test_pending_gpu_pods_get_their_endpoints_and_hold_no_one_back(
    kube: ControlPlane, kube_namespace: str, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    ns = kube_namespace
    # No node has 9 GPUs: the scheduler leaves these Pending for good, as a full GPU pool does for hours.
    waiting = [pod(f"wait{i}", gpus=9) for i in range(10)]
    create_pods(kube, ns, *waiting, pod("fits", gpus=1))
    stack = make_stack(configured(kube, discovery_stack(emulator, [ns], ns)))
    up = stack.up()

    endpoints = up.outputs["endpoints"].value
    assert sorted(endpoints) == sorted([*(f"wait{i}" for i in range(10)), "fits"])
    assert_one_target_per_port(emulator)
    # The endpoint is there before the pod runs: the Services exist, the Pending pods' still without endpoints.
    for i in range(10):
        waiting_pod = get(kube, f"/api/v1/namespaces/{ns}/pods/wait{i}-0")
        assert waiting_pod is not None and waiting_pod["status"]["phase"] == "Pending"
        assert get(kube, f"/api/v1/namespaces/{ns}/services/ssh-wait{i}") is not None
    wait_for(
        "the fitting pod's endpoint",
        lambda: bool((get(kube, f"/api/v1/namespaces/{ns}/endpoints/ssh-fits") or {}).get("subsets")),
    )
    assert all(entry["endpoint"] for key, entry in status(kube, ns, stack).items() if key.startswith("instance."))


def test_a_lost_nodes_pods_keep_their_instances_for_the_grace_period(
    kube: ControlPlane, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    lost, other = new_namespace(kube), new_namespace(kube)
    node = f"lost-{uuid.uuid4().hex[:6]}"
    kubelet = kube.add_node_of_its_own(node, next(_node_index))
    create_pods(kube, lost, pod("on-lost", node=node))
    create_pods(kube, other, pod("stays"))
    stack = make_stack(configured(kube, discovery_stack(emulator, [lost, other], other)))
    first = stack.up().outputs["endpoints"].value
    assert sorted(first) == ["on-lost", "stays"]

    kubelet.stop()  # the machine is gone
    # NotReady after the node monitor's grace period, then evicted: Terminating for good, as no kubelet answers.
    evicted = f"/api/v1/namespaces/{lost}/pods/on-lost-0"
    wait_for(
        "the lost node's pod evicted",
        lambda: bool((get(kube, evicted) or {}).get("metadata", {}).get("deletionTimestamp")),
    )
    create_pods(kube, other, pod("newcomer"))
    emulator.reset_counters()
    kept = stack.up().outputs["endpoints"].value
    assert kept["on-lost"] == first["on-lost"] and kept["stays"] == first["stays"]  # same ports, no rewrite
    assert "newcomer" in kept  # another namespace converges in the same run
    entries = status(kube, other, stack)
    assert entries["instance.on-lost.json"]["missingSince"]
    assert entries["instance.stays.json"]["missingSince"] is None
    assert_one_target_per_port(emulator)


def test_a_deleted_namespace_keeps_its_instances_and_the_others_converge(
    kube: ControlPlane, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    doomed, other = new_namespace(kube), new_namespace(kube)
    # A finalizer holds the pod, and so the namespace, in Terminating: the `up`s below meet it terminating.
    hold = "ssh-gateway.dev/test-hold"
    create_pods(kube, doomed, pod("leaving", finalizer=hold))
    create_pods(kube, other, pod("stays"))
    config = configured(kube, discovery_stack(emulator, [doomed, other], other))
    stack = make_stack(config)
    first = stack.up().outputs["endpoints"].value
    assert sorted(first) == ["leaving", "stays"]

    with kube.client() as api:
        api.delete(f"/api/v1/namespaces/{doomed}").raise_for_status()
    terminating = f"/api/v1/namespaces/{doomed}"
    wait_for(
        "the namespace terminating",
        lambda: (get(kube, terminating) or {}).get("status", {}).get("phase") == "Terminating",
    )
    # Kubernetes 1.33+ deletes a namespace's pods first and the rest once they are gone (OrderedNamespaceDeletion):
    # the held pod is Terminating, its Service and Secret are still there.
    leaving = f"/api/v1/namespaces/{doomed}/pods/leaving-0"
    wait_for(
        "the pod terminating", lambda: bool((get(kube, leaving) or {}).get("metadata", {}).get("deletionTimestamp"))
    )
    create_pods(kube, other, pod("newcomer"))
    kept = stack.up().outputs["endpoints"].value
    assert kept["leaving"] == first["leaving"] and "newcomer" in kept
    assert status(kube, other, stack)["instance.leaving.json"]["missingSince"]

    # The grace period over, in a namespace still terminating: the instance goes, its objects with it.
    config["ssh-gateway:discovery"]["gracePeriod"] = 0
    stack = make_stack(config, name=stack.name)
    gone = stack.up().outputs["endpoints"].value
    assert sorted(gone) == ["newcomer", "stays"]
    assert [r["name"] for r in emulator.state()["resources"] if "leaving" in r["name"]] == []
    assert get(kube, f"/api/v1/namespaces/{doomed}/services/ssh-leaving") is None
    assert get(kube, f"/api/v1/namespaces/{doomed}/secrets/ssh-leaving-host-key") is None
    with kube.client() as api:
        patch = {"metadata": {"finalizers": None}}
        headers = {"Content-Type": "application/merge-patch+json"}
        api.patch(f"/api/v1/namespaces/{doomed}/pods/leaving-0", json=patch, headers=headers).raise_for_status()
    wait_for("the namespace gone", lambda: get(kube, terminating) is None)

    # The namespace made again with its pod: the instance and its Service come back.
    kube.create_namespace(doomed)
    create_pods(kube, doomed, pod("leaving"))
    back = stack.up().outputs["endpoints"].value
    assert "leaving" in back
    assert get(kube, f"/api/v1/namespaces/{doomed}/services/ssh-leaving") is not None
    assert_one_target_per_port(emulator)


def test_the_status_is_in_every_read_while_it_changes(
    kube: ControlPlane, kube_namespace: str, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    """A platform polling the status ConfigMap every 0.2 s through 20 changes: no read misses it, and every entry
    of an instance that stays is in every read (it is updated in place, never deleted and created again)."""
    ns = kube_namespace
    create_pods(kube, ns, pod("first"))
    stack = make_stack(configured(kube, discovery_stack(emulator, [ns], ns, grace=0)))
    stack.up()
    path = f"/api/v1/namespaces/{ns}/configmaps/ssh-gateway-status-{stack.name}"
    reads: list[set[str] | None] = []
    stop = threading.Event()

    def poll() -> None:
        with kube.client() as api:
            while not stop.is_set():
                response = api.get(path)
                reads.append(set(response.json().get("data") or {}) if response.status_code == 200 else None)
                stop.wait(0.2)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        for i in range(20):  # each change adds an instance, or takes the one before away
            if i % 2 == 0:
                create_pods(kube, ns, pod(f"n{i}"))
            else:
                with kube.client() as api:
                    api.delete(f"/api/v1/namespaces/{ns}/pods/n{i - 1}-0").raise_for_status()
            stack.up()
    finally:
        stop.set()
        poller.join()
    print(f"status polled: {len(reads)} reads through 20 changes, {reads.count(None)} missing")  # for the notes
    assert len(reads) > 20
    assert None not in reads, f"{reads.count(None)} of {len(reads)} reads found no status"
    assert all("instance.first.json" in keys for keys in reads if keys is not None)
