"""`ssh-gateway local-cluster start|stop|status` (scripts/local-cluster): the local stack's Kubernetes half.

A command of its own, apart from control_plane.py: starting the cluster also installs Istio's CRDs, and
istio_crds.py builds on control_plane.py, so the command that uses both sits above both (no circle).
"""

from __future__ import annotations

import sys
from typing import Literal

import httpx

from ssh_gateway.plumbing.toolchain import REPO, ToolchainMissing

from .control_plane import (
    ControlPlane,
    ControlPlaneError,
    control_plane_running,
    start_control_plane,
    stop_control_plane,
)
from .istio_crds import install_istio_crds, istio_crds_file

__all__ = ["CLUSTER_PORTS", "CLUSTER_ROOT", "run"]


CLUSTER_ROOT = REPO / ".pulumi-state" / "local-cluster"
CLUSTER_STATE = CLUSTER_ROOT / "state.json"
# Fixed, so the local stack's kubeconfig stays valid across restarts; away from 6443/2379 in case a real
# cluster or etcd runs on this machine.
CLUSTER_PORTS = {"api_port": 16443, "etcd_port": 12379, "etcd_peer_port": 12380}


def _local_plane() -> ControlPlane | None:
    return ControlPlane.from_json(CLUSTER_STATE.read_text()) if CLUSTER_STATE.exists() else None


def _how_to_use(plane: ControlPlane) -> str:
    pulumi = "scripts/pulumi config set --stack local --path"
    return "\n".join(
        [
            f"kube-apiserver: {plane.url}",
            f"processes:      {', '.join(f'{name} ({pid})' for name, pid in plane.pids.items())}",
            f"kubeconfig:     {plane.kubeconfig}",
            f"logs:           {plane.root}/<process>.log",
            "Point the local stack at it (instances with target nodePort or clusterIp then get a real Service):",
            f"  {pulumi} ssh-gateway:kubernetes.kubeconfig {plane.kubeconfig}",
            f"  {pulumi} ssh-gateway:kubernetes.nodeIp 127.0.0.1",
            f"Try it: KUBECONFIG={plane.kubeconfig} kubectl get services -A   (if you have kubectl)",
        ]
    )


def _start() -> int:
    plane = _local_plane()
    if plane is not None and control_plane_running(plane):
        print(f"already running\n{_how_to_use(plane)}")
        return 0
    try:
        plane = start_control_plane(CLUSTER_ROOT, detach=True, **CLUSTER_PORTS)
    except (ToolchainMissing, ControlPlaneError) as exc:
        print(f"local-cluster: {exc}", file=sys.stderr)
        return 1
    CLUSTER_STATE.write_text(plane.to_json())
    print(f"started in {plane.startup_seconds:.1f}s\n{_how_to_use(plane)}")
    return _install_istio_crds(plane)


def _install_istio_crds(plane: ControlPlane) -> int:
    """Istio's CRDs, when the bootstrap fetched them: a connect stack (kind istio) can then create its
    EnvoyFilters and Gateway here. Without them the cluster still serves everything else."""

    try:
        path = istio_crds_file()
    except ToolchainMissing:
        print("Istio's CRDs: not fetched, so not installed (scripts/bootstrap istio fetches them)")
        return 0
    try:
        names = install_istio_crds(plane, path)
    except ControlPlaneError as exc:
        print(f"local-cluster: {exc}", file=sys.stderr)
        return 1
    print(f"Istio's CRDs: {len(names)} served (EnvoyFilter, Gateway, ...): a connect stack can create its objects here")
    return 0


def _stop() -> int:
    plane = _local_plane()
    if plane is None:
        print("not running (no state file)")
        return 0
    stop_control_plane(plane)  # keeps the data: a restart finds the local stack's Services again
    CLUSTER_STATE.unlink()
    print(f"stopped {', '.join(plane.pids)}")
    print(f"data kept in {plane.root}")
    return 0


def _status() -> int:
    plane = _local_plane()
    if plane is None or not control_plane_running(plane):
        print("not running: scripts/local-cluster start")
        return 3
    try:
        with plane.client() as api:
            ready = api.get("/readyz").status_code == 200
    except httpx.HTTPError:
        ready = False
    print(f"running, {'ready' if ready else 'NOT ready'}\n{_how_to_use(plane)}")
    return 0 if ready else 1


def run(action: Literal["start", "stop", "status"]) -> int:
    """`ssh-gateway local-cluster ACTION`: starts, stops or reports the local cluster; its exit code."""
    return {"start": _start, "stop": _stop, "status": _status}[action]()
