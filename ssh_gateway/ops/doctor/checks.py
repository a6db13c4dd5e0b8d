"""The network checks, along the path a user's `ssh -p PORT user@host` takes; each is bounded by a timeout.

Each function checks one layer and returns a `Check` naming what it saw and, when broken, the likely fix.
`network_checks` runs them in order and stops at the first broken one (the later ones need it).
"""

from __future__ import annotations

import base64
import hashlib
import math
import queue
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ssh_gateway.core.host_identity import (
    CertificateRejected,
    HostIdentityError,
    RejectReason,
    certificates_in_keyscan,
    fingerprint,
    verify_host_certificate,
)
from ssh_gateway.core.names import entry_point_name, host_key_secret_name

from .model import Check, Endpoint

__all__ = [
    "Deadline",
    "check_banner",
    "check_dns",
    "check_host_identity",
    "check_host_key",
    "check_tcp",
    "judge_certificates",
    "key_fingerprint",
    "network_checks",
]

_MAX_PRE_BANNER = 8192
"""RFC 4253 §4.2 lets a server send other lines before its version line; read at most this much."""


@dataclass(frozen=True)
class Deadline:
    """A point in time the checks of one instance must finish by."""

    at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds)

    def remaining(self) -> float:
        # Never zero: a socket timeout of 0 means non-blocking, not "no time left".
        return max(0.05, self.at - time.monotonic())


def check_dns(host: str, port: int, timeout: float) -> tuple[Check, list[str]]:
    """The public name resolves; returns the addresses."""
    # getaddrinfo has no timeout of its own: run it in a daemon thread and stop waiting for it.
    answer: queue.Queue[list[str] | OSError] = queue.Queue(maxsize=1)

    def resolve() -> None:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            answer.put(list(dict.fromkeys(str(info[4][0]) for info in infos)))
        except OSError as exc:
            answer.put(exc)

    threading.Thread(target=resolve, name=f"dns-{host}", daemon=True).start()
    try:
        result = answer.get(timeout=timeout)
    except queue.Empty:
        return Check("dns", "fail", f"resolving {host} timed out after {timeout:.1f}s", _DNS_FIX), []
    if isinstance(result, OSError):
        return Check("dns", "fail", f"{host} does not resolve: {result}", _DNS_FIX), []
    return Check("dns", "ok", f"{host} -> {', '.join(result)}"), result


_DNS_FIX = "add the DNS record (a wildcard `*.<domain>` to the gateway's public IP) or fix gateway.hostTemplate"


def check_tcp(host: str, addresses: list[str], port: int, timeout: float) -> tuple[Check, socket.socket | None]:
    """The gateway port accepts a TCP connection; returns the connected socket."""
    deadline = Deadline.after(timeout)
    where = f"{host}:{port}"
    failure: Check | None = None
    for address in addresses:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(deadline.remaining())
        started = time.monotonic()
        try:
            sock.connect((address, port))
        except TimeoutError:
            sock.close()
            failure = Check(
                "tcp",
                "fail",
                f"TCP connect to {where} timed out after {time.monotonic() - started:.1f}s",
                f"packets to port {port} are dropped: the firewall/NSG rule for {port}, Gerbil's published ports "
                f"or Traefik's `{entry_point_name(port)}` entry point is missing",
            )
        except ConnectionRefusedError:
            sock.close()
            failure = Check(
                "tcp",
                "fail",
                f"TCP connect to {where} was refused",
                f"the gateway answers but nothing listens on {port}: Gerbil does not publish it, Traefik has no "
                f"`{entry_point_name(port)}` entry point (see the stack's `gateway` output), or no enabled Pangolin "
                "resource uses the port",
            )
        except OSError as exc:
            sock.close()
            failure = Check(
                "tcp",
                "fail",
                f"TCP connect to {where} ({address}) failed: {exc.strerror or exc}",
                "no route from here to the gateway: check its address and this machine's network",
            )
        else:
            return Check("tcp", "ok", f"{where} accepts TCP ({address})"), sock
    return failure or Check("tcp", "fail", f"{host} has no address to connect to", _DNS_FIX), None


def check_banner(sock: socket.socket, where: str, timeout: float) -> Check:
    """An SSH version line (`SSH-2.0-...`) comes back on the connection."""
    deadline = Deadline.after(timeout)
    data = b""
    closed = ""
    try:
        while len(data) < _MAX_PRE_BANNER:
            sock.settimeout(deadline.remaining())
            chunk = sock.recv(1024)
            if not chunk:
                break
            data += chunk
            for line in data.split(b"\n")[:-1]:
                if line.startswith(b"SSH-"):
                    return Check("banner", "ok", line.rstrip(b"\r").decode(errors="replace"))
    except TimeoutError:
        return Check(
            "banner",
            "fail",
            f"no SSH banner from {where} within {timeout:.1f}s",
            "the target behind Pangolin accepts connections but is not an sshd (or hangs): check the "
            "instance's target port",
        )
    except OSError as exc:  # e.g. reset by the gateway
        closed = f" ({exc.strerror or exc})"
    if not data:
        return Check(
            "banner",
            "fail",
            f"no SSH banner: {where} accepted the connection and closed it{closed}",
            "the target behind Pangolin is down or unreachable from its site: check the instance's sshd and the "
            "site's tunnel (Newt); the gateway closes a connection it cannot forward",
        )
    first = data.split(b"\n", 1)[0][:60].decode(errors="replace")
    return Check(
        "banner",
        "fail",
        f"no SSH banner: {where} answered {first!r}",
        "the Pangolin target points at another service, not sshd: fix the instance's target port",
    )


def key_fingerprint(key: str) -> str:
    """`SHA256:...` of `keytype base64`, as ssh-keygen -l prints it."""
    blob = base64.b64decode(key.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def check_host_key(host: str, port: int, pinned: str | None, timeout: float) -> Check:
    """The host key the server presents is the one the stack pins (skipped when none is pinned)."""
    if not pinned:
        return Check("hostkey", "skip", "no host key pinned (hostKey) for this instance")
    keyscan = shutil.which("ssh-keyscan")
    if keyscan is None:
        return Check("hostkey", "warn", "ssh-keyscan is not installed (openssh-client): host key not checked")
    key_type = pinned.split()[0]
    scan_type = key_type.removeprefix("ssh-")  # ssh-keyscan -t takes "ed25519", "rsa", "ecdsa"
    argv = [keyscan, "-T", str(math.ceil(timeout)), "-t", scan_type, "-p", str(port), host]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)  # noqa: S603
    except subprocess.TimeoutExpired:
        return Check("hostkey", "warn", f"ssh-keyscan of {host}:{port} did not finish within {timeout:.1f}s")
    offered = [" ".join(line.split()[1:3]) for line in result.stdout.splitlines() if line and line[0] != "#"]
    if not offered:
        return Check(
            "hostkey",
            "fail",
            f"{host}:{port} offered no {key_type} host key",
            f"the sshd has no {key_type} key: pin a key type it has (ssh-keyscan -p {port} {host})",
        )
    want = " ".join(pinned.split()[:2])
    if want in offered:
        return Check("hostkey", "ok", f"{key_type} {key_fingerprint(want)} as pinned")
    return Check(
        "hostkey",
        "fail",
        f"host key mismatch: [{host}]:{port} presents {key_type} {key_fingerprint(offered[0])}, the stack pins "
        f"{key_fingerprint(want)}",
        "if the instance was rebuilt, put its new key in the instance's hostKey and run pulumi up; otherwise "
        "something else answers on this port: do not connect",
    )


_IDENTITY = "host identity"
"""How the doctor names the `hostidentity` layer to a user."""

_FIXES: dict[RejectReason, str] = {
    "ca": "the sshd serves a certificate from another CA: after a CA rotation the pod still mounts a stale "
    "Secret (restart it) or the static host an old file (write it again: ssh-gateway host-identity); if the stack's "
    "CA was rotated without overlap, copy the stack's knownHosts output again; else another stack's sshd answers",
    "principal": "the certificate is not for this name: run `pulumi up` to re-issue it for the instance's names, "
    "then restart the pod (or send sshd SIGHUP; a static host writes it again with ssh-gateway host-identity); if "
    "that does not help, another instance's sshd answers on this port (check the Pangolin target)",
    "expired": "the certificate expired: run `pulumi up` (it re-issues one with a third of its validity left), then "
    "restart the pod or send sshd SIGHUP; run `up` at least that often (a static host: ssh-gateway host-identity "
    "writes the current one)",
    "not-yet-valid": "the certificate is not valid yet: check this machine's clock (and the host's)",
    "malformed": "the served certificate is corrupt or not a host certificate: run `pulumi up` to re-create the "
    "Secret, then restart the pod",
}


def judge_certificates(
    certificates: Sequence[str], *, instance: str, ca_public_keys: Sequence[str], principal: str, now: int | None = None
) -> Check:
    """The hostidentity verdict on the certificates an endpoint served, as ssh would check them."""
    if not certificates:
        return Check(
            "hostidentity",
            "fail",
            f"{_IDENTITY}: the sshd serves no host certificate, so ssh with the stack's CA line refuses it",
            f"mount the Secret {host_key_secret_name(instance)} in the pod and serve it with the `HostKey` and "
            "`HostCertificate` lines (docs/host-identity.md); for a static instance write its files with "
            f"`ssh-gateway host-identity --instance {instance} --write DIR`",
        )
    rejected: list[CertificateRejected] = []
    for certificate in certificates:
        try:
            verified = verify_host_certificate(certificate, ca_public_keys=ca_public_keys, principal=principal, now=now)
        except CertificateRejected as exc:
            rejected.append(exc)
            continue
        except HostIdentityError as exc:
            rejected.append(CertificateRejected(str(exc), reason="malformed"))
            continue
        until = datetime.fromtimestamp(verified.valid_before, UTC).strftime("%Y-%m-%d")
        return Check(
            "hostidentity",
            "ok",
            f"certificate of {verified.fingerprint} for {principal}, signed by the stack's CA "
            f"{fingerprint(verified.ca_public_key)}, valid until {until}",
        )
    first = rejected[0]
    return Check("hostidentity", "fail", f"{_IDENTITY}: {first}", _FIXES[first.reason])


def check_host_identity(endpoint: Endpoint, timeout: float) -> Check:
    """The certificate the endpoint serves is the stack's: signed by one of the CAs whose lines cover the
    instance, for the name ssh checks (its HostKeyAlias, else its host), and valid now. Skipped for an instance
    with a pinned key (the hostkey layer checks that) and for one no CA line covers."""
    if endpoint.pinned_key:
        return Check("hostidentity", "skip", "a host key is pinned (hostKey): the hostkey layer checks it")
    if not endpoint.trusted_cas:
        return Check(
            "hostidentity", "skip", f"no @cert-authority line of the stack's knownHosts covers {endpoint.lookup}"
        )
    keyscan = shutil.which("ssh-keyscan")
    if keyscan is None:
        return Check("hostidentity", "warn", "ssh-keyscan is not installed (openssh-client): certificate not checked")
    host, port = endpoint.host, endpoint.port
    argv = [keyscan, "-c", "-T", str(math.ceil(timeout)), "-p", str(port), host]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)  # noqa: S603
    except subprocess.TimeoutExpired:
        return Check("hostidentity", "warn", f"ssh-keyscan -c of {host}:{port} did not finish within {timeout:.1f}s")
    return judge_certificates(
        certificates_in_keyscan(result.stdout),
        instance=endpoint.instance,
        ca_public_keys=endpoint.trusted_cas,
        principal=endpoint.principal,
    )


def network_checks(endpoint: Endpoint, timeout: float) -> list[Check]:
    """DNS, TCP, banner, host identity and host key of one endpoint, in that order, within `timeout` seconds."""
    deadline = Deadline.after(timeout)
    host, port = endpoint.host, endpoint.port
    dns, addresses = check_dns(host, port, deadline.remaining())
    if dns.status != "ok":
        return [dns, *_not_reached("tcp", "banner", "hostidentity", "hostkey")]
    tcp, sock = check_tcp(host, addresses, port, deadline.remaining())
    if sock is None:
        return [dns, tcp, *_not_reached("banner", "hostidentity", "hostkey")]
    with sock:
        banner = check_banner(sock, f"{host}:{port}", deadline.remaining())
    if banner.status != "ok":
        return [dns, tcp, banner, *_not_reached("hostidentity", "hostkey")]
    identity = check_host_identity(endpoint, deadline.remaining())
    return [dns, tcp, banner, identity, check_host_key(host, port, endpoint.pinned_key, deadline.remaining())]


def _not_reached(*layers: str) -> list[Check]:
    return [Check(layer, "skip", "not reached: an earlier layer is broken") for layer in layers]
