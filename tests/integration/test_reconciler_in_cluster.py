"""The reconciler in the cluster, as docs/reconciler.md installs it: its image loaded into the real node's
containerd, the backend's Secret made with kubectl (Azurite as the `azblob://` backend), an overlay copied from
overlays/from-pods and applied with `kubectl apply -k`, two replicas. A labelled pod gets its endpoint in the
status ConfigMap; the replica holding the stack's Lease, deleted mid-`up`, is taken over by the other, and
nothing is orphaned.

The pods reach the API server (the `kubernetes` Service), the Pangolin emulator and Azurite through the node's
relays (ssh_gateway/local/node_relay.py). Needs root (the real node)."""

from __future__ import annotations

import itertools
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.names import LAST_UP_ANNOTATION
from ssh_gateway.local.azurite import Azurite
from ssh_gateway.local.control_plane import ControlPlane
from ssh_gateway.local.kubelet_node import KubeletNode
from ssh_gateway.local.reconciler_install import (
    STATUS_NAMESPACE,
    in_cluster_stack,
    install_reconciler,
    uninstall_reconciler,
)
from ssh_gateway.ops.shared.automation import open_stack, remove_stack, stack_file
from ssh_gateway.plumbing.toolchain import pulumi_env

pytestmark = pytest.mark.integration

EXPOSE = {"ssh-gateway.io/expose": "true"}
NAME_LABEL = "ssh-gateway.io/instance"
STATUS_NS = STATUS_NAMESPACE
DEPLOYMENT = f"/apis/apps/v1/namespaces/{STATUS_NS}/deployments/ssh-gateway-reconciler"


def wait_for(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f}s"
        time.sleep(0.2)
    return found


def get(kube: ControlPlane, path: str) -> dict[str, Any]:
    with kube.client() as api:
        response = api.get(path)
    if response.status_code == 404:
        return {}
    response.raise_for_status()
    found: dict[str, Any] = response.json()
    return found


def the_stack(node: KubeletNode, emulator: EmulatorHandle, azurite: Azurite, kube: ControlPlane, ns: str) -> auto.Stack:
    """docs/reconciler.md step 1, made here (the host's destroy at the end uses the same backend)."""
    config = in_cluster_stack(node, emulator, ns, port_range="40000-40019", host_template="ssh-{instance}.example.test")
    env = {**azurite.env(), "KUBECONFIG": str(kube.kubeconfig)}
    name = f"incluster-{uuid.uuid4().hex[:6]}"
    return open_stack(name, config, secrets={"pangolin:apiKey": emulator.api_key}, env=env)


@pytest.fixture
def installed(
    kubelet_node: KubeletNode, kube: ControlPlane, azurite: Azurite, emulator: EmulatorHandle, tmp_path: Path
) -> Iterator[tuple[auto.Stack, str]]:
    assert os.geteuid() == 0, "the real node and the image need root"
    ns = f"it-{uuid.uuid4().hex[:8]}"
    kube.create_namespace(ns)
    stack = the_stack(kubelet_node, emulator, azurite, kube, ns)
    try:
        stack_file(stack.name).chmod(0o644)
        overlay = install_reconciler(
            kubelet_node,
            kube,
            azurite,
            stack_file=stack_file(stack.name),
            namespace=ns,
            passphrase=pulumi_env()["PULUMI_CONFIG_PASSPHRASE"],
            work=tmp_path,
        )
        try:
            yield stack, ns
        finally:
            uninstall_reconciler(kubelet_node, kube, overlay)
    finally:
        try:
            stack.cancel()  # the lock of an up the teardown killed
            stack.destroy()
        finally:
            remove_stack(stack)


def pod(name: str) -> dict[str, Any]:
    meta = {"name": f"{name}-0", "labels": {**EXPOSE, NAME_LABEL: name}}
    return {"metadata": meta, "spec": {"containers": [{"name": "sshd", "image": "example.test/sshd:1"}]}}


def endpoint(kube: ControlPlane, stack: auto.Stack, instance: str) -> Any:
    data = get(kube, f"/api/v1/namespaces/{STATUS_NS}/configmaps/ssh-gateway-status-{stack.name}").get("data") or {}
    entry = data.get(f"instance.{instance}.json")
    return entry and json.loads(entry).get("endpoint")


def events(log: str) -> list[dict[str, Any]]:
    """The reconciler's lease and recovery events in a pod's log (CRI lines: time, stream, tag, the JSON)."""
    found = []
    for line in log.splitlines():
        entry = json.loads(line.split(" ", 3)[3]) if ' F {"ts"' in line else {}
        if entry.get("event") in ("lease-taken-over", "recover", "up", "up-covered"):
            found.append({k: entry[k] for k in ("event", "holder_gone", "code") if k in entry})
    return found


def lease(kube: ControlPlane, stack: auto.Stack) -> dict[str, Any]:
    return get(kube, f"/apis/coordination.k8s.io/v1/namespaces/{STATUS_NS}/leases/ssh-gateway-reconcile-{stack.name}")


def test_two_replicas_in_the_cluster_converge_and_take_over_a_deleted_holders_stack(
    installed: tuple[auto.Stack, str], kube: ControlPlane, kubelet_node: KubeletNode, emulator: EmulatorHandle
) -> None:
    stack, ns = installed
    started = time.monotonic()
    wait_for("two Ready replicas", lambda: get(kube, DEPLOYMENT)["status"].get("readyReplicas") == 2, 300)
    print(f"\ntwo replicas Ready {time.monotonic() - started:.1f} s after kubectl apply -k")
    replicas = [p["metadata"]["name"] for p in get(kube, f"/api/v1/namespaces/{STATUS_NS}/pods")["items"]]
    log = kubelet_node.logs(STATUS_NS, replicas[0])
    assert '"event": "start"' in log, log[-3000:]  # in-cluster config: the API server answered the pod

    with kube.client() as api:
        api.post(f"/api/v1/namespaces/{ns}/pods", json=pod("alice")).raise_for_status()
    created = time.monotonic()
    wait_for("alice's endpoint", lambda: endpoint(kube, stack, "alice"), 300)
    print(f"pod created -> endpoint in the status ConfigMap: {time.monotonic() - created:.1f} s")

    with kube.client() as api:
        api.post(f"/api/v1/namespaces/{ns}/pods", json=pod("bob")).raise_for_status()
    holder = wait_for("an up holding the Lease", lambda: lease(kube, stack).get("spec", {}).get("holderIdentity"), 60)
    # Deleted as `kubectl delete pod --grace-period=0 --force` does: the kubelet still sends SIGTERM and the pod's
    # grace period (SIGKILLed mid-up instead: the test below).
    with kube.client() as api:
        api.delete(f"/api/v1/namespaces/{STATUS_NS}/pods/{holder}?gracePeriodSeconds=0").raise_for_status()
    deleted = time.time()

    wait_for("the other replica's up", lambda: taken_over(kube, stack, holder, deleted), 240)
    print(f"holder {holder} deleted -> the other replica's up completed: {time.time() - deleted:.1f} s")
    assert endpoint(kube, stack, "bob") and endpoint(kube, stack, "alice")
    print("after the deletion:", replica_events(kube, kubelet_node))
    assert_healed(stack, emulator, ["alice", "bob"])
    assert len(emulator.state()["targets"]) == 2


def last_up(kube: ControlPlane, stack: auto.Stack) -> dict[str, Any]:
    annotations = lease(kube, stack).get("metadata", {}).get("annotations", {})
    found: dict[str, Any] = json.loads(annotations.get(LAST_UP_ANNOTATION, "{}"))
    return found


def host_ca(stack: auto.Stack) -> str:
    return str(stack.outputs()["hostCa"].value[0]["publicKey"])


def in_pulumi_up_for(kubelet_node: KubeletNode, replica: str, pod_name: str) -> bool:
    """Whether the replica's log shows the `pulumi up` of a pass for the pod (the pass's up-start names it)."""
    lines = kubelet_node.logs(STATUS_NS, replica).splitlines()
    starts = [i for i, line in enumerate(lines) if '"event": "up-start"' in line and pod_name in line]
    return bool(starts) and any('"event": "pulumi-up-start"' in line for line in lines[starts[0] :])


def test_a_holder_killed_in_the_stacks_first_up_then_in_a_later_one_is_taken_over_and_healed(
    installed: tuple[auto.Stack, str], kube: ControlPlane, kubelet_node: KubeletNode, emulator: EmulatorHandle
) -> None:
    """The holder SIGKILLed twice. First in the stack's first `up`, right after it made alice's Service: that `up`
    writes its checkpoint once, at the end, so the state holds nothing, and the replica that takes over must
    adopt what exists (`recover`) and update it, not make it again or replace it. Then in bob's `up`, with alice
    and the host CA in the state: the replica that takes the Lease over must not take the dead holder's earlier
    `up` for one that covered bob (issue 37), and must recover its lock."""
    stack, ns = installed
    with kube.client() as api:  # before the replicas' first pass, which is then the stack's first up
        api.post(f"/api/v1/namespaces/{ns}/pods", json=pod("alice")).raise_for_status()
    holder = wait_for("an up holding the Lease", lambda: lease(kube, stack).get("spec", {}).get("holderIdentity"), 300)
    service = f"/api/v1/namespaces/{ns}/services/ssh-alice"
    made = wait_for("alice's Service, made by the first up", lambda: get(kube, service), 120)
    killed = kill_replica(kubelet_node, kube, holder)
    wait_for("the other replica's recover and up", lambda: taken_over(kube, stack, holder, killed), 240)
    print(f"\nholder {holder} SIGKILLed in the first up -> the other's up completed: {time.time() - killed:.1f} s")
    assert_taken_over_from_a_dead_holder(replica_events(kube, kubelet_node))
    assert endpoint(kube, stack, "alice")
    # Adopted and updated, not made again: its NodePort, the Pangolin target, stays.
    assert get(kube, service)["metadata"]["uid"] == made["metadata"]["uid"]
    assert_healed(stack, emulator, ["alice"])
    ca = host_ca(stack)

    with kube.client() as api:
        api.post(f"/api/v1/namespaces/{ns}/pods", json=pod("bob")).raise_for_status()
    holder = wait_for("an up holding the Lease", lambda: lease(kube, stack).get("spec", {}).get("holderIdentity"), 60)
    wait_for("bob's pulumi up", lambda: in_pulumi_up_for(kubelet_node, holder, f"{ns}/bob-0"), 120)
    wait_for("bob's Service", lambda: get(kube, f"/api/v1/namespaces/{ns}/services/ssh-bob"), 120)
    killed = kill_replica(kubelet_node, kube, holder)  # bob's Secret, Pangolin resource and status yet to come
    wait_for("the other replica's recover and up", lambda: taken_over(kube, stack, holder, killed), 240)
    print(f"holder {holder} SIGKILLed in a later up -> the other's up completed: {time.time() - killed:.1f} s")
    assert_taken_over_from_a_dead_holder(replica_events(kube, kubelet_node))
    assert endpoint(kube, stack, "bob") and endpoint(kube, stack, "alice")
    assert host_ca(stack) == ca  # never silently re-drawn: every user's @cert-authority line still holds
    assert_healed(stack, emulator, ["alice", "bob"])


def kill_replica(kubelet_node: KubeletNode, kube: ControlPlane, replica: str) -> float:
    """SIGKILL of the replica's containers, then its pod deleted, as the API server deletes the pod of a lost
    node once it is forced; the time of the kill."""
    kubelet_node.kill_pod(STATUS_NS, replica)
    with kube.client() as api:
        api.delete(f"/api/v1/namespaces/{STATUS_NS}/pods/{replica}?gracePeriodSeconds=0").raise_for_status()
    return time.time()


def taken_over(kube: ControlPlane, stack: auto.Stack, holder: str, killed: float) -> bool:
    """Whether another replica than `holder` finished an `up` it started after `killed`, and it succeeded."""
    last = last_up(kube, stack)
    return bool(last) and last["holder"] != holder and last["started"] > killed and last["code"] == 0


def replica_events(kube: ControlPlane, kubelet_node: KubeletNode) -> dict[str, list[dict[str, Any]]]:
    replicas = [p["metadata"]["name"] for p in get(kube, f"/api/v1/namespaces/{STATUS_NS}/pods")["items"]]
    return {p: events(kubelet_node.logs(STATUS_NS, p)) for p in replicas}


def assert_taken_over_from_a_dead_holder(events_by_replica: dict[str, list[dict[str, Any]]]) -> None:
    """A replica's log shows it took the Lease over from a holder that stopped renewing, then recovered: the kill
    landed in the holder's `up`, not after it."""
    print("after the kill:", events_by_replica)
    gone, recovered = {"event": "lease-taken-over", "holder_gone": True}, {"event": "recover", "code": 0}
    pairs = [pair for found in events_by_replica.values() for pair in itertools.pairwise(found)]
    assert (gone, recovered) in pairs, events_by_replica


def assert_healed(stack: auto.Stack, emulator: EmulatorHandle, instances: list[str]) -> None:
    """No pending operation; one Pangolin resource per instance, on ports bound once."""
    deployment = stack.export_stack().deployment or {}
    assert deployment.get("pending_operations") in (None, []), deployment.get("pending_operations")
    resources = emulator.state()["resources"]
    assert sorted(r["name"] for r in resources) == [f"ssh-gateway/{stack.name}/{i}" for i in instances]
    ports = [r["proxyPort"] for r in resources]
    assert len(ports) == len(set(ports)), ports
