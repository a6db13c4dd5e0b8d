"""What discovery adds to a run: reading a shard's pods and the status ConfigMaps, deciding, and the status size.

    .venv/bin/python -m benchmarks.discovery_read            # 250 pods, 3 runs
    .venv/bin/python -m benchmarks.discovery_read --pods 1000

On the tests' kube-apiserver (ssh_gateway/local/control_plane.py): the pods are made through the API (there is no
kubelet), then each run reads them as the program does (`ssh_gateway.kube`: a complete paged listing, this
stack's status ConfigMap, the other stacks') and decides (`core.discovery.discover`) without memory, and again
with the memory its own status gives. The status size is without the endpoints (about 0.2 KiB each more).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from ssh_gateway.core.cluster import StatusMap
from ssh_gateway.core.discovery import discover
from ssh_gateway.core.discovery_status import next_status, read_memory
from ssh_gateway.core.names import DiscoverFrom
from ssh_gateway.core.settings import parse_settings
from ssh_gateway.kube import api_client, list_selected, read_status, read_statuses
from ssh_gateway.local.control_plane import ControlPlane, start_control_plane, stop_control_plane

NAMESPACE: Final = "gpu-users"
LABELS: Final = {"ssh-gateway.io/expose": "true"}
NAME_LABEL: Final = "ssh-gateway.io/instance"


def _make_pods(plane: ControlPlane, count: int) -> None:
    plane.create_namespace(NAMESPACE)
    with plane.client() as api:
        for index in range(count):
            metadata = {
                "name": f"u{index}-0",
                "labels": {**LABELS, NAME_LABEL: f"u{index}"},
                "annotations": {"ssh-gateway.io/user": "dev"},
            }
            spec = {"containers": [{"name": "sshd", "image": "example.test/sshd:1"}]}
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
            api.post(f"/api/v1/namespaces/{NAMESPACE}/pods", json=body).raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.discovery_read", description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=250)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    settings = parse_settings(
        {
            "pangolin": {"url": "http://127.0.0.1:1/v1", "orgId": "acme", "siteId": 1},
            "ports": {"range": "20000-29999"},
            "gateway": {"hostTemplate": "ssh-{instance}.example.com"},
            "firewall": {"enabled": False},
            "kubernetes": {"nodeIp": "10.0.0.4"},
            "discovery": {"from": "pods", "namespaces": [NAMESPACE], "selector": LABELS, "nameLabel": NAME_LABEL},
        }
    )
    plane = start_control_plane(Path(tempfile.mkdtemp(prefix="discovery-read-")))
    try:
        _make_pods(plane, args.pods)
        for run in range(args.runs):
            started = time.perf_counter()
            with api_client(str(plane.kubeconfig), None) as api:
                listing = list_selected(api, DiscoverFrom.PODS, [NAMESPACE], LABELS)
                read_status(api, "default", "ssh-gateway-status-bench")
                read_statuses(api, "default")
            read = time.perf_counter()
            first = discover(
                listing=listing, memory={}, others=[], settings=settings, stack="b.b", now=datetime.now(UTC)
            )
            decided = time.perf_counter()
            data = next_status(first, {})
            memory = read_memory(StatusMap(namespace="default", name="s", stack="b.b", data=data))
            discover(listing=listing, memory=memory, others=[], settings=settings, stack="b.b", now=datetime.now(UTC))
            again = time.perf_counter()
            size = sum(len(k) + len(v) for k, v in data.items()) / 1024
            print(
                f"run {run + 1}: read {len(listing.objects)} pods and the status {1000 * (read - started):.0f} ms, "
                f"decide {1000 * (decided - read):.0f} ms, with memory {1000 * (again - decided):.0f} ms; "
                f"status {size:.0f} KiB without endpoints"
            )
    finally:
        stop_control_plane(plane, remove_data=True)


if __name__ == "__main__":
    main()
