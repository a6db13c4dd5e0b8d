"""kube-controller-manager and kube-scheduler for the tests' cluster: the controllers that make it act.

With them the cluster does what a real one does to what the stack makes: the endpoints and EndpointSlice
controllers fill a Service's Endpoints from Ready pods, the garbage collector finishes foreground deletes, the
namespace controller empties a terminating namespace, node lifecycle marks a silent node NotReady and evicts its
pods, and the scheduler binds pods to nodes with room (GPUs included) or leaves them Pending.

Both run as the plane's `system:masters` user on loopback, without leader election (one of each), and serve
/healthz on 127.0.0.1 with the plane's own serving certificate, which is how their readiness is probed.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import yaml

from ssh_gateway.plumbing.process import Probe, http_ready

__all__ = ["controller_manager_args", "healthz", "scheduler_args"]

NODE_MONITOR_GRACE_SECONDS = 20
"""A node whose lease is this old is NotReady (upstream's default is 40 s; the tests wait for it)."""

# The tests create hundreds of objects at once (a burst, a shard of 250); the default 20 qps would make the
# controllers, not the stack, the slow part.
_QPS = 200
_BURST = 400


def controller_manager_args(root: Path, *, port: int) -> list[str]:
    pki = root / "pki"
    return [
        *_serving(root, port),
        f"--kubeconfig={root / 'kubeconfig'}",
        "--leader-elect=false",
        "--controllers=*",
        # The token controller signs service accounts' tokens with the key kube-apiserver verifies them with.
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        f"--node-monitor-grace-period={NODE_MONITOR_GRACE_SECONDS}s",
        f"--kube-api-qps={_QPS}",
        f"--kube-api-burst={_BURST}",
        # Pods are deleted on a pass; the default 12500 terminated pods would keep them for the whole run.
        "--terminated-pod-gc-threshold=100",
    ]


def scheduler_args(root: Path, *, port: int) -> list[str]:
    # The client's qps is settable only in the scheduler's configuration file, which then holds the connection
    # and leader election too (the flags for them are ignored beside a file).
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(root / "kubeconfig"), "qps": _QPS, "burst": _BURST},
        "leaderElection": {"leaderElect": False},
    }
    path = root / "kube-scheduler.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return [*_serving(root, port), f"--config={path}"]


def healthz(root: Path, port: int) -> Probe:
    """The component's /healthz, verified against the plane's CA (it serves the plane's certificate)."""
    verify = ssl.create_default_context(cafile=str(root / "pki" / "ca.crt"))
    return http_ready(f"https://127.0.0.1:{port}/healthz", verify=verify)


def _serving(root: Path, port: int) -> list[str]:
    pki = root / "pki"
    return [
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={pki / 'serving.crt'}",
        f"--tls-private-key-file={pki / 'serving.key'}",
        "--v=1",
    ]
