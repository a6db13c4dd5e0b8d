"""The tests' cluster's nodes: kwok's simulated kubelets, with GPUs.

kwok (sigs.k8s.io/kwok) plays the kubelet of every Node that carries its annotation: it keeps the node's Lease
and Ready condition, and turns each pod the scheduler binds to it Running and Ready with an IP from the node's
podCIDR. So pods are scheduled against real capacity (a pod asking for an `nvidia.com/gpu` that no node has free
stays Pending), and the endpoints controller sees Ready pods. A node served by a kwok process of its own
(`ControlPlane.add_node_of_its_own`) is lost when that process stops: it goes NotReady and has its pods evicted,
as a lost machine's would.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import httpx

__all__ = ["GPU", "SimulatedNode", "add_node", "kwok_args", "wait_nodes_ready"]

GPU = "nvidia.com/gpu"
"""The extended resource a GPU pod asks for (the name NVIDIA's device plugin registers)."""
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
"""A kwok process manages exactly the nodes annotated with its value (`SimulatedNode.kwok`)."""
NODE_LABEL = "ssh-gateway.dev/simulated-node"
"""On every node made here, so a benchmark can list them."""
_POD_NETWORK = IPv4Network("10.244.0.0/16")
"""Cut into one /24 per node, as kube-controller-manager's node IPAM would; pod IPs are never routed."""
_STAGES = Path(__file__).with_name("kwok_stages.yaml")
_LEASE_SECONDS = 20
"""kwok renews each node's Lease every quarter of this (5 s), well inside the node monitor's grace period."""


@dataclass(frozen=True)
class SimulatedNode:
    name: str
    index: int
    """Picks the node's /24 of the pod network (0-255)."""
    gpus: int = 8
    pods: int = 250
    labels: dict[str, str] = field(default_factory=dict)
    kwok: str = "fake"
    """Which kwok process serves it: the cluster's own (`fake`), or one of its own (named after it)."""

    def manifest(self) -> dict[str, Any]:
        capacity = {"cpu": "64", "memory": "512Gi", "pods": str(self.pods), GPU: str(self.gpus)}
        cidr = str(list(_POD_NETWORK.subnets(new_prefix=24))[self.index])
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "annotations": {KWOK_ANNOTATION: self.kwok},
                "labels": {**self.labels, NODE_LABEL: "true", "kubernetes.io/hostname": self.name},
            },
            "spec": {"podCIDR": cidr, "podCIDRs": [cidr]},
            # kwok's node-initialize stage keeps a capacity the node was created with.
            "status": {"capacity": capacity, "allocatable": capacity},
        }


def kwok_args(kubeconfig: Path, serves: str = "fake") -> list[str]:
    """kwok serving the nodes whose `KWOK_ANNOTATION` is `serves`."""
    return [
        f"--kubeconfig={kubeconfig}",
        f"--config={_STAGES}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}={serves}",
        f"--node-lease-duration-seconds={_LEASE_SECONDS}",
        "--server-address=",  # no kwok API server (port-forward, exec, logs): nothing here uses it
        "--v=INFO",
    ]


def add_node(api: httpx.Client, node: SimulatedNode) -> None:
    """Registers the node; one already there (a cluster started again on its data) is kwok's again at once."""
    response = api.post("/api/v1/nodes", json=node.manifest())
    if response.status_code != httpx.codes.CONFLICT:
        response.raise_for_status()


def wait_nodes_ready(api: httpx.Client, names: list[str], timeout: float) -> None:
    """Returns once every named node reports Ready; raises TimeoutError naming those that do not."""
    deadline = time.monotonic() + timeout
    waiting = set(names)
    while waiting:
        waiting = {name for name in waiting if not _ready(api.get(f"/api/v1/nodes/{name}"))}
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"nodes not Ready after {timeout:.0f}s: {', '.join(sorted(waiting))}")
        time.sleep(0.2)


def _ready(response: httpx.Response) -> bool:
    """Whether the node reports Ready; one not registered yet (a kubelet still starting) is not."""
    if response.status_code == httpx.codes.NOT_FOUND:
        return False
    conditions = response.raise_for_status().json().get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
