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
from dataclasses import dataclass

from .model import Check, Endpoint

__all__ = [
    "Deadline",
    "check_banner",
    "check_dns",
    "check_host_key",
    "check_tcp",
    "fingerprint",
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
                f"or Traefik's `tcp-{port}` entry point is missing",
            )
        except ConnectionRefusedError:
            sock.close()
            failure = Check(
                "tcp",
                "fail",
                f"TCP connect to {where} was refused",
                f"the gateway answers but nothing listens on {port}: Gerbil does not publish it, Traefik has no "
                f"`tcp-{port}` entry point (see the stack's `gateway` output), or no enabled Pangolin resource "
                "uses the port",
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


def fingerprint(key: str) -> str:
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
        return Check("hostkey", "ok", f"{key_type} {fingerprint(want)} as pinned")
    return Check(
        "hostkey",
        "fail",
        f"host key mismatch: [{host}]:{port} presents {key_type} {fingerprint(offered[0])}, the stack pins "
        f"{fingerprint(want)}",
        "if the instance was rebuilt, put its new key in the instance's hostKey and run pulumi up; otherwise "
        "something else answers on this port: do not connect",
    )


def network_checks(endpoint: Endpoint, timeout: float) -> list[Check]:
    """DNS, TCP, banner and host key of one endpoint, in that order, within `timeout` seconds in all."""
    deadline = Deadline.after(timeout)
    host, port = endpoint.host, endpoint.port
    dns, addresses = check_dns(host, port, deadline.remaining())
    if dns.status != "ok":
        return [dns, *_not_reached("tcp", "banner", "hostkey")]
    tcp, sock = check_tcp(host, addresses, port, deadline.remaining())
    if sock is None:
        return [dns, tcp, *_not_reached("banner", "hostkey")]
    with sock:
        banner = check_banner(sock, f"{host}:{port}", deadline.remaining())
    if banner.status != "ok":
        return [dns, tcp, banner, *_not_reached("hostkey")]
    return [dns, tcp, banner, check_host_key(host, port, endpoint.pinned_key, deadline.remaining())]


def _not_reached(*layers: str) -> list[Check]:
    return [Check(layer, "skip", "not reached: an earlier layer is broken") for layer in layers]
