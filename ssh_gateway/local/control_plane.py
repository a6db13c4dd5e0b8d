"""The tests' Kubernetes cluster on loopback: a control plane that acts, and simulated nodes with GPUs.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler (built and cached by scripts/bootstrap, found
through .toolchain.env) run as processes with a directory of their own: the etcd data dir, a private CA and the
serving certificate it signs (made with the openssl CLI), a service-account signing key, a token file with a
user in `system:masters` and one in no group (RBAC allows it only what a test grants it), a kubeconfig for each,
and each process's log. kwok plays the kubelets of `DEFAULT_NODES` (cluster_nodes.py).

So the cluster reconciles what the stack makes, as a real one does: pods are scheduled or stay Pending, turn
Ready and fill their Services' Endpoints; deletes go through the garbage collector; namespaces terminate; a lost
node's pods are evicted (after `EVICTION_SECONDS`, not upstream's 300). Pulumi's await logic runs against it.

The session fixture in tests/integration/conftest.py and scripts/local-cluster (local_cluster.py) share
`start_control_plane` and `stop_control_plane`; both stop the processes by their own pids.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import shutil
import signal
import ssl
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import httpx
import yaml

from ssh_gateway.local.cluster_nodes import SimulatedNode, add_node, kwok_args, wait_nodes_ready
from ssh_gateway.local.controllers import controller_manager_args, healthz, scheduler_args
from ssh_gateway.plumbing.loopback import free_ports
from ssh_gateway.plumbing.process import (
    ManagedProcess,
    ProcessError,
    ProcessSpec,
    http_ready,
    process_alive,
    stop_pid,
)
from ssh_gateway.plumbing.toolchain import toolchain_binary

__all__ = [
    "DEFAULT_NODES",
    "RESTRICTED_USER",
    "ControlPlane",
    "ControlPlaneError",
    "start_control_plane",
    "stop_control_plane",
]

# Nothing ever sends traffic to it (there is no kube-proxy here). A /16: the benchmark's 40 shards of 250 hold
# 10,000 Services (a /20 holds 4,094; the create answers 500 past it).
SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
"""The `kubernetes` Service's address (the range's first): what a pod's in-cluster client dials, so the serving
certificate names it."""
DEFAULT_NODES = (SimulatedNode("rig-node-0", 0), SimulatedNode("rig-node-1", 1))
"""Two nodes of 8 GPUs: a pod asking for a GPU when all 16 are taken stays Pending."""
EVICTION_SECONDS = 10
"""A pod on a NotReady or unreachable node is evicted after this (the default tolerations' seconds)."""
USER = "ssh-gateway-admin"
RESTRICTED_USER = "ssh-gateway-restricted"
"""A user in no group: RBAC allows it only what a test grants it (`ControlPlane.restricted_kubeconfig`)."""


class ControlPlaneError(ProcessError):
    """A process of the cluster did not start, or its nodes did not turn Ready (the message says which)."""


@dataclass(frozen=True, kw_only=True)
class ControlPlane:
    """A running cluster: etcd, kube-apiserver, the controllers, the scheduler and kwok."""

    root: Path
    """Data dir, certificates, token file, kubeconfig and logs."""
    api_port: int
    """kube-apiserver's HTTPS port on 127.0.0.1."""
    etcd_port: int
    """etcd's client port on 127.0.0.1."""
    etcd_peer_port: int
    """etcd's peer port on 127.0.0.1 (a one-member cluster, but etcd listens anyway)."""
    token: str
    """Bearer token of a `system:masters` user."""
    pids: dict[str, int]
    """Each process's id by its name (etcd, kube-apiserver, ..., kwok), in the order they started."""
    startup_seconds: float
    """From launching etcd until the last node turned Ready."""
    processes: tuple[ManagedProcess, ...] = field(default=(), repr=False, compare=False)
    """The processes when this process started them (their handles kept so they are not reaped behind our
    back)."""

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def ca_file(self) -> Path:
        return self.root / "pki" / "ca.crt"

    def restricted_kubeconfig(self) -> Path:
        """A kubeconfig of `RESTRICTED_USER`, who may do only what a Role bound to it allows."""
        path = self.root / "kubeconfig-restricted"
        _write_kubeconfig(
            path, url=self.url, ca_file=self.ca_file, user=RESTRICTED_USER, token=_tokens(self.root / "tokens.csv")[1]
        )
        return path

    def client(self) -> httpx.Client:
        """An API client as the `system:masters` user, verifying the server against the plane's own CA."""
        return httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.token}"},
            verify=ssl.create_default_context(cafile=str(self.ca_file)),
            timeout=httpx.Timeout(10.0),
        )

    def create_namespace(self, name: str) -> None:
        with self.client() as api:
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            api.post("/api/v1/namespaces", json=body).raise_for_status()

    def add_node_of_its_own(self, name: str, index: int, timeout: float = 60.0) -> ManagedProcess:
        """A node served by a kwok process of its own, started attached to the caller: stopping that process is
        losing the machine (its Lease is no longer renewed, node lifecycle evicts its pods)."""
        kwok = ManagedProcess(_spec(f"kwok-{name}", kwok_args(self.kubeconfig, serves=name), self.root, binary="kwok"))
        kwok.start()
        try:
            self.add_nodes([SimulatedNode(name, index, kwok=name)], timeout)
        except BaseException:
            kwok.stop()
            raise
        return kwok

    def add_nodes(self, nodes: list[SimulatedNode], timeout: float = 60.0) -> None:
        """Registers more simulated nodes (kwok serves them) and waits until they are Ready."""
        with self.client() as api:
            for node in nodes:
                add_node(api, node)
            wait_nodes_ready(api, [node.name for node in nodes], timeout)

    def to_json(self) -> str:
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "processes"}
        return json.dumps({k: str(v) if isinstance(v, Path) else v for k, v in values.items()}, indent=2)

    @classmethod
    def from_json(cls, text: str) -> ControlPlane:
        values: dict[str, Any] = json.loads(text)
        return cls(**{**values, "root": Path(values["root"])})


def start_control_plane(
    root: Path,
    *,
    api_port: int | None = None,
    etcd_port: int | None = None,
    etcd_peer_port: int | None = None,
    detach: bool = False,
    timeout: float = 180.0,
) -> ControlPlane:
    """Starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok, each once the one before is
    ready, registers `DEFAULT_NODES`, and returns once they are Ready.

    Ports default to free loopback ports. Certificates, keys and the token already under `root` are reused
    (so a restarted local cluster keeps its kubeconfig). `detach` puts the processes in sessions of their
    own, so they outlive the caller (scripts/local-cluster). On any failure the started ones are stopped again.
    Raises `ToolchainMissing` when a binary is not built, `ControlPlaneError` when one does not come up.
    """
    free = iter(free_ports(5))
    api_port, etcd_port, etcd_peer_port = (p or next(free) for p in (api_port, etcd_port, etcd_peer_port))
    root.mkdir(parents=True, exist_ok=True)
    pki = _make_pki(root / "pki")
    token = _token_file(root / "tokens.csv")
    url = f"https://127.0.0.1:{api_port}"
    _write_kubeconfig(root / "kubeconfig", url=url, ca_file=pki / "ca.crt", user=USER, token=token)
    started = time.monotonic()
    steps = _steps(root, url, api_port, etcd_port, etcd_peer_port, next(free), next(free))
    running: list[ManagedProcess] = []
    pids: dict[str, int] = {}
    try:
        for spec, ready in steps:
            process = ManagedProcess(spec)
            left = started + timeout - time.monotonic()
            pids[spec.name] = process.start(ready=ready, timeout=left, detach=detach, needs=tuple(running))
            running.append(process)
        plane = ControlPlane(
            root=root,
            api_port=api_port,
            etcd_port=etcd_port,
            etcd_peer_port=etcd_peer_port,
            token=token,
            pids=pids,
            startup_seconds=0.0,
            processes=tuple(running),
        )
        plane.add_nodes(list(DEFAULT_NODES), timeout=max(started + timeout - time.monotonic(), 1.0))
    except TimeoutError as exc:
        _stop_all(running)
        raise ControlPlaneError(
            f"the cluster's nodes did not turn Ready: {exc} (kwok's log: {root / 'kwok.log'})"
        ) from None
    except BaseException:
        _stop_all(running)  # a failed start stops the processes it started itself
        raise
    return dataclasses.replace(plane, startup_seconds=time.monotonic() - started)


Step = tuple[ProcessSpec, Callable[[], bool] | None]
"""A process of the cluster and what says it is ready (None: running is enough)."""


def _steps(root: Path, url: str, api: int, etcd: int, etcd_peer: int, manager: int, scheduler: int) -> list[Step]:
    """The cluster's processes in the order they start, each needing the ones before."""
    readyz = http_ready(f"{url}/readyz", verify=ssl.create_default_context(cafile=str(root / "pki" / "ca.crt")))
    return [
        (_etcd_spec(root, etcd, etcd_peer), http_ready(f"http://127.0.0.1:{etcd}/health")),
        (_apiserver_spec(root, api, etcd), readyz),
        (_spec("kube-controller-manager", controller_manager_args(root, port=manager), root), healthz(root, manager)),
        (_spec("kube-scheduler", scheduler_args(root, port=scheduler), root), healthz(root, scheduler)),
        (_spec("kwok", kwok_args(root / "kubeconfig"), root), None),
    ]


def stop_control_plane(plane: ControlPlane, *, remove_data: bool = False) -> None:
    """Stops the processes by their pids in the reverse order of their start (SIGTERM, then SIGKILL after 15 s).

    `remove_data` deletes etcd's data dir afterwards (its WAL preallocates 64 MB); certificates, the
    kubeconfig and the logs stay for a post-mortem.
    """
    for name, pid in reversed(plane.pids.items()):
        stop_pid(pid, _STOP_GRACE, name=name)
    if remove_data:
        shutil.rmtree(plane.root / "etcd-data", ignore_errors=True)


def control_plane_running(plane: ControlPlane) -> bool:
    return all(process_alive(pid) for pid in plane.pids.values())


# --- processes -------------------------------------------------------------------------------------

_STOP_GRACE = 15.0
"""Seconds between SIGTERM and SIGKILL."""


def _spec(name: str, args: list[str], root: Path, *, binary: str | None = None) -> ProcessSpec:
    """The process `name` of `binary` (default: `name`), found as SSH_GATEWAY_<BINARY> in .toolchain.env."""
    path = toolchain_binary("SSH_GATEWAY_" + (binary or name).upper().replace("-", "_"))
    return ProcessSpec(
        name=name,
        argv=(str(path), *args),
        log=root / f"{name}.log",
        stop_grace=_STOP_GRACE,
        # Attached, killed with the process that started it, even one that dies by SIGKILL (a CI timeout, a killed
        # pytest) and runs no finalizer. KILL, not TERM: kube-apiserver's graceful shutdown hangs once etcd
        # (signalled at the same moment) is gone, and the test data is disposable.
        death_signal=signal.SIGKILL,
        error=ControlPlaneError,
    )


def _stop_all(running: list[ManagedProcess]) -> None:
    for process in reversed(running):
        process.stop()


def _etcd_spec(root: Path, port: int, peer_port: int) -> ProcessSpec:
    peer = f"http://127.0.0.1:{peer_port}"
    client = f"http://127.0.0.1:{port}"
    args = [
        "--name=ssh-gateway-test",
        f"--data-dir={root / 'etcd-data'}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=ssh-gateway-test={peer}",
        # Test data only: losing it on a crash is fine, and fsync dominates etcd's latency on a busy disk.
        "--unsafe-no-fsync=true",
        "--log-level=warn",
    ]
    return _spec("etcd", args, root)


def _apiserver_spec(root: Path, port: int, etcd_port: int) -> ProcessSpec:
    pki = root / "pki"
    args = [
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={pki / 'serving.crt'}",
        f"--tls-private-key-file={pki / 'serving.key'}",
        f"--cert-dir={root / 'certs'}",
        f"--token-auth-file={root / 'tokens.csv'}",
        "--authorization-mode=RBAC",  # system:masters bypasses it; RBAC keeps /readyz open to anonymous
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        f"--service-account-issuer=https://127.0.0.1:{port}/",
        f"--service-account-key-file={pki / 'sa.key'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        f"--default-not-ready-toleration-seconds={EVICTION_SECONDS}",
        f"--default-unreachable-toleration-seconds={EVICTION_SECONDS}",
        "--allow-privileged=true",
        # One loopback "master" only: no Endpoints for the kubernetes Service to keep reconciling.
        "--endpoint-reconciler-type=none",
        "--enable-priority-and-fairness=false",
    ]
    return _spec("kube-apiserver", args, root)


# --- certificates, token, kubeconfig ---------------------------------------------------------------


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ControlPlaneError("the control plane's certificates need the openssl CLI: apt-get install openssl")
    subprocess.run([openssl, *args], cwd=cwd, check=True, capture_output=True)  # noqa: S603 - fixed openssl argv


def _make_pki(pki: Path) -> Path:
    """A CA, the serving certificate it signs (for 127.0.0.1, and for the `kubernetes` Service that pods dial), and
    the service-account key; kept if present."""
    pki.mkdir(parents=True, exist_ok=True)
    new_ec_key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    if not (pki / "ca.crt").exists():
        ca_extensions = ["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"]
        ca_files = ["-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=ssh-gateway test cluster CA", "-days", "365"]
        _openssl("req", "-x509", *new_ec_key, *ca_files, *ca_extensions, cwd=pki)
        (pki / "serving.crt").unlink(missing_ok=True)
    if not (pki / "serving.crt").exists():
        (pki / "serving.ext").write_text(
            f"subjectAltName=IP:127.0.0.1,DNS:localhost,IP:{KUBERNETES_SERVICE_IP},DNS:kubernetes.default.svc\n"
            "extendedKeyUsage=serverAuth\n"
            "keyUsage=critical,digitalSignature\nbasicConstraints=CA:FALSE\n"
            "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
        )
        csr = ["-keyout", "serving.key", "-out", "serving.csr", "-subj", "/CN=kube-apiserver"]
        _openssl("req", *new_ec_key, *csr, cwd=pki)
        signing = ["-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "365", "-extfile", "serving.ext"]
        _openssl("x509", "-req", "-in", "serving.csr", *signing, "-out", "serving.crt", cwd=pki)
    if not (pki / "sa.key").exists():
        # One RSA key both verifies and signs service-account tokens.
        _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    return pki


def _token_file(path: Path) -> str:
    """The token of the `system:masters` user (`token,user,uid,"group"`), with the restricted user's on the next
    line; kept if present (a file of an older version gets the restricted user added)."""
    lines = path.read_text().splitlines() if path.exists() else []
    if not lines:
        lines.append(f'{secrets.token_urlsafe(32)},{USER},{USER},"system:masters"')
    if len(lines) < 2:  # the admin's line, then the restricted user's
        lines.append(f"{secrets.token_urlsafe(32)},{RESTRICTED_USER},{RESTRICTED_USER}")
        path.write_text("\n".join(lines) + "\n")
        path.chmod(0o600)
    return _tokens(path)[0]


def _tokens(path: Path) -> tuple[str, str]:
    """The admin's token and the restricted user's."""
    admin, restricted = path.read_text().splitlines()[:2]
    return admin.split(",", 1)[0], restricted.split(",", 1)[0]


def _write_kubeconfig(path: Path, *, url: str, ca_file: Path, user: str, token: str) -> None:
    cluster = {"server": url, "certificate-authority": str(ca_file)}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "ssh-gateway-test", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "ssh-gateway-test", "context": {"cluster": "ssh-gateway-test", "user": user}}],
        "current-context": "ssh-gateway-test",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
