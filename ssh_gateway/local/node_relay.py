"""What the host serves on loopback, at the real node's address, for its pods: a socat relay per port.

The API server, the Pangolin emulator and Azurite listen on 127.0.0.1, which a pod's network namespace cannot
reach; the node's address (`NODE_ADDRESS`, the bridge's) it can. A relay listens there on the same port number and
forwards each connection to 127.0.0.1: traffic stays on this machine, between the bridge and loopback. The
`kubernetes` Service points at the API server's relay through an EndpointSlice written here, since the API server
runs with `--endpoint-reconciler-type=none` (it would advertise 127.0.0.1, which a pod would dial in its own
namespace), so a pod's in-cluster config (10.96.0.1:443, named by the serving certificate) reaches it.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import httpx

from ssh_gateway.local.node_network import NODE_ADDRESS
from ssh_gateway.plumbing.process import ManagedProcess, ProcessError, ProcessSpec, tcp_ready

__all__ = ["point_kubernetes_service", "start_relay", "unpoint_kubernetes_service"]

_SERVICE_NAME = "kubernetes.io/service-name"
"""The label that ties an EndpointSlice to its Service (kube-proxy reads the slices by it)."""
KUBERNETES_SLICE = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes"


def start_relay(root: Path, port: int, error: type[ProcessError], timeout: float = 10.0) -> ManagedProcess:
    """socat on `NODE_ADDRESS:port`, forwarding to 127.0.0.1:`port`; returns once it accepts."""
    host = str(NODE_ADDRESS.ip)
    spec = ProcessSpec(
        name=f"relay-{port}",
        argv=("socat", f"TCP-LISTEN:{port},bind={host},reuseaddr,fork", f"TCP:127.0.0.1:{port}"),
        log=root / f"relay-{port}.log",
        stop_grace=5.0,
        death_signal=signal.SIGKILL,
        error=error,
    )
    process = ManagedProcess(spec)
    process.start(ready=tcp_ready(host, port), timeout=timeout)
    return process


def _slice(port: int) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": {_SERVICE_NAME: "kubernetes"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [str(NODE_ADDRESS.ip)], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    }


def point_kubernetes_service(api: httpx.Client, port: int) -> None:
    """The `kubernetes` Service's endpoint: the API server's relay at the node's address (made, or replaced)."""
    api.delete(KUBERNETES_SLICE)  # a killed run's, or none (404)
    api.post("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", json=_slice(port)).raise_for_status()


def unpoint_kubernetes_service(api: httpx.Client) -> None:
    """No endpoint for the `kubernetes` Service once the relay is gone."""
    api.delete(KUBERNETES_SLICE)
