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
import os
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


class ControlPlaneError(RuntimeError):
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
    processes: tuple[subprocess.Popen[bytes], ...] = field(default=(), repr=False, compare=False)
    """The Popen handles when this process started them (kept so they are not reaped behind our back)."""

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
    etcd = toolchain_binary("SSH_GATEWAY_ETCD")
    apiserver = toolchain_binary("SSH_GATEWAY_KUBE_APISERVER")
    free = iter(free_ports(3))
    api_port, etcd_port, etcd_peer_port = (p or next(free) for p in (api_port, etcd_port, etcd_peer_port))
    root.mkdir(parents=True, exist_ok=True)
    pki = _make_pki(root / "pki")
    token = _token_file(root / "tokens.csv")
    started = time.monotonic()
    running: dict[str, subprocess.Popen[bytes]] = {}
    try:
        peer = f"http://127.0.0.1:{etcd_peer_port}"
        client = f"http://127.0.0.1:{etcd_port}"
        etcd_args = [
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
        running["etcd"] = _launch(etcd, etcd_args, root / "etcd.log", detach=detach)
        _wait_until(f"{client}/health", None, running, root, started + timeout)

        url = f"https://127.0.0.1:{api_port}"
        apiserver_args = [
            f"--etcd-servers={client}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--tls-cert-file={pki / 'serving.crt'}",
            f"--tls-private-key-file={pki / 'serving.key'}",
            f"--cert-dir={root / 'certs'}",
            f"--token-auth-file={root / 'tokens.csv'}",
            "--authorization-mode=RBAC",  # system:masters bypasses it; RBAC keeps /readyz open to anonymous
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            f"--service-account-issuer={url}/",
            f"--service-account-key-file={pki / 'sa.key'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            # No controller-manager creates service accounts' tokens here.
            "--disable-admission-plugins=ServiceAccount",
            "--allow-privileged=true",
            # One loopback "master" only: no Endpoints for the kubernetes Service to keep reconciling.
            "--endpoint-reconciler-type=none",
            "--enable-priority-and-fairness=false",
        ]
        running["kube-apiserver"] = _launch(apiserver, apiserver_args, root / "kube-apiserver.log", detach=detach)
        _wait_until(f"{url}/readyz", pki / "ca.crt", running, root, started + timeout)
    except BaseException:
        for process in reversed(running.values()):
            _stop_pid(process.pid)
        raise
    plane = ControlPlane(
        root=root,
        api_port=api_port,
        etcd_port=etcd_port,
        etcd_peer_port=etcd_peer_port,
        token=token,
        etcd_pid=running["etcd"].pid,
        apiserver_pid=running["kube-apiserver"].pid,
        startup_seconds=time.monotonic() - started,
        processes=tuple(running.values()),
    )
    _write_kubeconfig(plane)
    return plane


def stop_control_plane(plane: ControlPlane, *, remove_data: bool = False) -> None:
    """Stops kube-apiserver, then etcd, by their pids (SIGTERM, then SIGKILL after 15 s).

    `remove_data` deletes etcd's data dir afterwards (its WAL preallocates 64 MB); certificates, the
    kubeconfig and the logs stay for a post-mortem.
    """
    try:
        _stop_pid(plane.apiserver_pid)
    finally:
        _stop_pid(plane.etcd_pid)
    if remove_data:
        shutil.rmtree(plane.root / "etcd-data", ignore_errors=True)


def control_plane_running(plane: ControlPlane) -> bool:
    return _alive(plane.etcd_pid) and _alive(plane.apiserver_pid)


# --- processes -------------------------------------------------------------------------------------


def _launch(binary: Path, args: list[str], log: Path, *, detach: bool) -> subprocess.Popen[bytes]:
    command = [str(binary), *args]
    setpriv = shutil.which("setpriv")  # util-linux; it execs the binary, so the pid stays the binary's
    if not detach and setpriv:
        # Killed with the process that started it, even when that one dies by SIGKILL (a CI timeout, a killed
        # pytest) and no finalizer of ours runs. KILL, not TERM: kube-apiserver's graceful shutdown hangs once
        # etcd (signalled at the same moment) is gone, and the test data is disposable.
        command = [setpriv, "--pdeathsig", "KILL", "--", *command]
    with log.open("ab") as out:
        return subprocess.Popen(  # noqa: S603 - our own cached binaries, argv built here
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=detach,
        )


def _wait_until(
    url: str, ca_file: Path | None, running: dict[str, subprocess.Popen[bytes]], root: Path, deadline: float
) -> None:
    """Polls `url` until it answers 200, failing early (with its log, `root/<name>.log`) when a process exits."""
    verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=str(ca_file)) if ca_file else True
    last = "no answer yet"
    with httpx.Client(verify=verify, timeout=httpx.Timeout(2.0)) as http:
        while time.monotonic() < deadline:
            for name, process in running.items():
                if process.poll() is not None:
                    log = root / f"{name}.log"
                    raise ControlPlaneError(
                        f"{name} exited with {process.returncode} before {url} was ready; "
                        f"last lines of {log}:\n{_tail(log)}"
                    )
            try:
                response = http.get(url)
            except httpx.TransportError as exc:
                last = repr(exc)
            else:
                if response.status_code == 200:
                    return
                last = f"{response.status_code} {response.text[:500]}"
            time.sleep(0.25)
    log = root / f"{list(running)[-1]}.log"
    raise ControlPlaneError(f"{url} not ready in time (last: {last}); last lines of {log}:\n{_tail(log)}")


def _tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"({exc})"


def _alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)  # our child: reap it, or a zombie would look alive
        if done:
            return False
    except ChildProcessError:
        pass  # not our child (scripts/local-cluster stop): ask the kernel
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0): one whose parent (an init that does not reap) never waited for it.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _stop_pid(pid: int, grace: float = 15.0) -> None:
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if not _alive(pid):
            return
        os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _alive(pid):
                return
            time.sleep(0.05)
    raise ControlPlaneError(f"process {pid} survived SIGKILL")


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
