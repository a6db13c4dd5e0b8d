"""A Kubernetes control plane on loopback, started the way controller-runtime's envtest starts one.

etcd and kube-apiserver (built and cached by scripts/bootstrap, found through .toolchain.env) run as two
processes with a directory of their own: the etcd data dir, a private CA and the serving certificate it signs
(made with the openssl CLI), a service-account signing key, a token file with a user in `system:masters` and
one in no group (RBAC allows it only what a test grants it), a kubeconfig for each, and each process's log.
There is no controller-manager, scheduler or kubelet: objects are validated and stored, and nothing reconciles
them (a Service gets no endpoints, a Namespace never finishes deleting), so Pulumi's await logic must be
skipped on this cluster (`kubernetes.skipAwait`).

The session fixture in tests/integration/conftest.py and scripts/local-cluster (local_cluster.py) share
`start_control_plane` and `stop_control_plane`; both stop the processes by their own pids.
"""

from __future__ import annotations

import json
import secrets
import shutil
import signal
import ssl
import subprocess
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import httpx
import yaml

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
    "RESTRICTED_USER",
    "ControlPlane",
    "ControlPlaneError",
    "start_control_plane",
    "stop_control_plane",
]

# A range no real cluster of ours uses; nothing ever sends traffic to it (there is no kube-proxy here). A /20: a
# shard of a few hundred Services (benchmarks.cluster) would exhaust a /24 (254 ClusterIPs; the create answers 500).
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/20"
USER = "ssh-gateway-admin"
RESTRICTED_USER = "ssh-gateway-restricted"
"""A user in no group: RBAC allows it only what a test grants it (`ControlPlane.restricted_kubeconfig`)."""


class ControlPlaneError(ProcessError):
    """etcd or kube-apiserver did not start (the message carries the tail of its log)."""


@dataclass(frozen=True, kw_only=True)
class ControlPlane:
    """A running etcd + kube-apiserver pair."""

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
    etcd_pid: int
    """etcd's process id."""
    apiserver_pid: int
    """kube-apiserver's process id."""
    startup_seconds: float
    """From launching etcd until kube-apiserver's /readyz answered ok."""
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
        _write_kubeconfig(self, path=path, user=RESTRICTED_USER, token=_tokens(self.root / "tokens.csv")[1])
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
    timeout: float = 120.0,
) -> ControlPlane:
    """Starts etcd, then kube-apiserver, and returns once /readyz answers ok.

    Ports default to free loopback ports. Certificates, keys and the token already under `root` are reused
    (so a restarted local cluster keeps its kubeconfig). `detach` puts both processes in a session of their
    own, so they outlive the caller (scripts/local-cluster). On any failure both are stopped again.
    Raises `ToolchainMissing` when a binary is not built, `ControlPlaneError` when one does not come up.
    """
    etcd_binary = toolchain_binary("SSH_GATEWAY_ETCD")
    apiserver_binary = toolchain_binary("SSH_GATEWAY_KUBE_APISERVER")
    free = iter(free_ports(3))
    api_port, etcd_port, etcd_peer_port = (p or next(free) for p in (api_port, etcd_port, etcd_peer_port))
    root.mkdir(parents=True, exist_ok=True)
    pki = _make_pki(root / "pki")
    token = _token_file(root / "tokens.csv")
    started = time.monotonic()
    etcd = ManagedProcess(_etcd_spec(etcd_binary, root, etcd_port, etcd_peer_port))
    apiserver = ManagedProcess(_apiserver_spec(apiserver_binary, root, api_port, etcd_port))
    try:
        etcd_pid = etcd.start(ready=http_ready(f"http://127.0.0.1:{etcd_port}/health"), timeout=timeout, detach=detach)
        readyz = http_ready(
            f"https://127.0.0.1:{api_port}/readyz", verify=ssl.create_default_context(cafile=str(pki / "ca.crt"))
        )
        left = started + timeout - time.monotonic()
        apiserver_pid = apiserver.start(ready=readyz, timeout=left, detach=detach, needs=[etcd])
    except BaseException:
        etcd.stop()  # a failed start stops the process it started itself
        raise
    plane = ControlPlane(
        root=root,
        api_port=api_port,
        etcd_port=etcd_port,
        etcd_peer_port=etcd_peer_port,
        token=token,
        etcd_pid=etcd_pid,
        apiserver_pid=apiserver_pid,
        startup_seconds=time.monotonic() - started,
        processes=(etcd, apiserver),
    )
    _write_kubeconfig(plane)
    return plane


def stop_control_plane(plane: ControlPlane, *, remove_data: bool = False) -> None:
    """Stops kube-apiserver, then etcd, by their pids (SIGTERM, then SIGKILL after 15 s).

    `remove_data` deletes etcd's data dir afterwards (its WAL preallocates 64 MB); certificates, the
    kubeconfig and the logs stay for a post-mortem.
    """
    try:
        stop_pid(plane.apiserver_pid, _STOP_GRACE, name="kube-apiserver")
    finally:
        stop_pid(plane.etcd_pid, _STOP_GRACE, name="etcd")
    if remove_data:
        shutil.rmtree(plane.root / "etcd-data", ignore_errors=True)


def control_plane_running(plane: ControlPlane) -> bool:
    return process_alive(plane.etcd_pid) and process_alive(plane.apiserver_pid)


# --- processes -------------------------------------------------------------------------------------

_STOP_GRACE = 15.0
"""Seconds between SIGTERM and SIGKILL."""


def _spec(name: str, binary: Path, args: list[str], root: Path) -> ProcessSpec:
    return ProcessSpec(
        name=name,
        argv=(str(binary), *args),
        log=root / f"{name}.log",
        stop_grace=_STOP_GRACE,
        # Attached, killed with the process that started it, even one that dies by SIGKILL (a CI timeout, a killed
        # pytest) and runs no finalizer. KILL, not TERM: kube-apiserver's graceful shutdown hangs once etcd
        # (signalled at the same moment) is gone, and the test data is disposable.
        death_signal=signal.SIGKILL,
        error=ControlPlaneError,
    )


def _etcd_spec(binary: Path, root: Path, port: int, peer_port: int) -> ProcessSpec:
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
    return _spec("etcd", binary, args, root)


def _apiserver_spec(binary: Path, root: Path, port: int, etcd_port: int) -> ProcessSpec:
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
        # No controller-manager creates service accounts' tokens here.
        "--disable-admission-plugins=ServiceAccount",
        "--allow-privileged=true",
        # One loopback "master" only: no Endpoints for the kubernetes Service to keep reconciling.
        "--endpoint-reconciler-type=none",
        "--enable-priority-and-fairness=false",
    ]
    return _spec("kube-apiserver", binary, args, root)


# --- certificates, token, kubeconfig ---------------------------------------------------------------


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ControlPlaneError("the control plane's certificates need the openssl CLI: apt-get install openssl")
    subprocess.run([openssl, *args], cwd=cwd, check=True, capture_output=True)  # noqa: S603 - fixed openssl argv


def _make_pki(pki: Path) -> Path:
    """A CA, the serving certificate for 127.0.0.1 it signs, and the service-account key; kept if present."""
    pki.mkdir(parents=True, exist_ok=True)
    new_ec_key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    if not (pki / "ca.crt").exists():
        ca_extensions = ["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"]
        ca_files = ["-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=ssh-gateway test cluster CA", "-days", "365"]
        _openssl("req", "-x509", *new_ec_key, *ca_files, *ca_extensions, cwd=pki)
        (pki / "serving.crt").unlink(missing_ok=True)
    if not (pki / "serving.crt").exists():
        (pki / "serving.ext").write_text(
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
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


def _write_kubeconfig(
    plane: ControlPlane, *, path: Path | None = None, user: str = USER, token: str | None = None
) -> None:
    cluster = {"server": plane.url, "certificate-authority": str(plane.ca_file)}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "ssh-gateway-test", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token or plane.token}}],
        "contexts": [{"name": "ssh-gateway-test", "context": {"cluster": "ssh-gateway-test", "user": user}}],
        "current-context": "ssh-gateway-test",
    }
    path = path or plane.kubeconfig
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
