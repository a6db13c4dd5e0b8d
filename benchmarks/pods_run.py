"""Issue 37's table on this machine: instance pods that run, on the real node, with the reconciler in the cluster.

    .venv/bin/python -m benchmarks.pods_run            # 3 pods, then a replica deleted mid-up (root)

The rig is scripts/demo-cluster's (ssh_gateway/ops/tools/cluster_demo.py): the cluster that acts and one real node
(containerd, kubelet, kube-proxy), the Pangolin emulator and Azurite, the stack `demo-cluster` (`from: pods`), the
reconciler installed with `kubectl apply -k` (two replicas), the instance image loaded, Traefik on the stack's
entry points. Then, one pod at a time, polled every 0.1 s from its creation: its host-key Secret made (the
reconciler's `up`), the pod Ready (the kubelet: the Secret mounted, sshd started), and `ssh ssh-<pod>` through
Traefik, the NodePort and kube-proxy answering with only the stack's @cert-authority line. Last, the replica that
holds the stack's Lease is deleted (grace 0, as `kubectl delete --force` does) right after a new pod appears, and
the other replica's `up` is timed to completion.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks.cluster import wait_until
from ssh_gateway.core.names import LAST_UP_ANNOTATION, host_key_secret_name
from ssh_gateway.local.node_pods import pod_ready
from ssh_gateway.local.reconciler_install import STATUS_NAMESPACE
from ssh_gateway.ops.tools.cluster_demo import NAMESPACE, STACK, ClusterRig, start_cluster_rig


def one_pod(cluster: ClusterRig, name: str) -> dict[str, float]:
    """A pod's path, in seconds since its creation: its Secret, Ready, the first ssh that gets in: when it began
    (`ssh`: an ssh typed then gets in) and when it had run its command (`ssh_done`: the handshake included)."""
    secret = f"/api/v1/namespaces/{NAMESPACE}/secrets/{host_key_secret_name(name)}"
    cluster.create_pod(name)
    created = time.perf_counter()
    row = {"secret": wait_until("its Secret", lambda: bool(cluster.get(secret)), 300)}
    # The laptop's ssh files come from the stack's outputs, which a user has before the pod runs; read beside the
    # wait for Ready (one `pulumi stack output` takes a second or more here), not counted after it.
    files = threading.Thread(target=wait_until, args=("its ssh files", lambda: cluster.ssh_files(name), 300))
    files.start()
    row["ready"] = row["secret"] + wait_until("Ready", lambda: pod_ready(cluster.pod(name)), 180)
    files.join()
    while True:
        began = time.perf_counter()
        if cluster.ssh(name) is not None:
            break
        if began - created > row["ready"] + 30:
            raise SystemExit(f"benchmark: ssh into {name} did not get in within 30 s of Ready")
        time.sleep(0.1)
    row["ssh"], row["ssh_done"] = began - created, time.perf_counter() - created
    print(f"... {name}: " + ", ".join(f"{k} {v:.2f} s" for k, v in row.items()), file=sys.stderr, flush=True)
    return row


LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{STATUS_NAMESPACE}/leases/ssh-gateway-reconcile-{STACK}"


def _last_up(cluster: ClusterRig) -> dict[str, Any]:
    lease = cluster.get(LEASE)
    found: dict[str, Any] = json.loads(lease.get("metadata", {}).get("annotations", {}).get(LAST_UP_ANNOTATION, "{}"))
    return found


def holder_deleted(cluster: ClusterRig, name: str) -> float:
    """Seconds from deleting the Lease holder (right after pod `name` appeared) to the other replica's `up` done."""
    cluster.create_pod(name)
    holder = cluster.get(LEASE)["spec"]["holderIdentity"]
    with cluster.plane.client() as api:
        api.delete(f"/api/v1/namespaces/{STATUS_NAMESPACE}/pods/{holder}?gracePeriodSeconds=0").raise_for_status()
    deleted_at = time.time()

    def taken_over() -> bool:
        last = _last_up(cluster)
        return bool(last) and last["holder"] != holder and last["started"] > deleted_at and last["code"] == 0

    return wait_until("the other replica's up", taken_over, 300)


def run(pods: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-pods-") as tmp, ExitStack() as rig:
        cluster = start_cluster_rig(rig, Path(tmp))
        status = f"/api/v1/namespaces/{STATUS_NAMESPACE}/configmaps/ssh-gateway-status-{STACK}"
        wait_until(
            "the first up", lambda: bool(cluster.get(status)), 300
        )  # the first up (no pod yet): the stack's outputs exist
        cluster.start_traefik(rig, routers=0)
        rows = [one_pod(cluster, f"user{n}") for n in range(pods)]
        return {"pods": rows, "takeover": holder_deleted(cluster, "late")}


def table(result: dict[str, Any]) -> str:
    rows = result["pods"]

    def median(key: str) -> float:
        return float(statistics.median(r[key] for r in rows))

    kubelet = statistics.median(r["ready"] - r["secret"] for r in rows)
    after_ready = statistics.median(r["ssh"] - r["ready"] for r in rows)
    handshake = statistics.median(r["ssh_done"] - r["ssh"] for r in rows)
    lines = [
        "| figure (medians of the pods) | measured | goal |",
        "|---|---|---|",
        f"| pod created -> its Secret (the reconciler's `up`) | {median('secret'):.2f} s | (report) |",
        f"| Secret -> pod Ready (the kubelet's own time) | {kubelet:.2f} s | (report) |",
        f"| pod created -> ssh into it works (the first ssh that gets in began) | {median('ssh'):.2f} s = Ready +"
        f" {after_ready:.2f} s; that ssh done {handshake:.2f} s later | <= Ready + 1 s |",
        f"| Lease holder deleted mid-`up` -> the other's `up` done | {result['takeover']:.1f} s | <= 30 s + one up |",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=3)
    result = run(parser.parse_args().pods)
    print(json.dumps(result, indent=2))
    print(table(result))


if __name__ == "__main__":
    main()
