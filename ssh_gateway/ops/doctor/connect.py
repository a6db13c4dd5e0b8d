"""The network checks of a connect-mode instance, along the path its ProxyCommand takes.

DNS of the CONNECT entry's host, TCP to its port (no gateway?), `CONNECT <authority>:22` answered `200` (else the
status names the broken layer: 404 no route for that authority, 503 no Service or endpoints, 426 an HTTP/1.0
client where HTTP/1.0 is off), the SSH banner through the tunnel, then what the instance presents under its
HostKeyAlias: its issued certificate (ssh-keyscan -c through a loopback relay that opens the tunnel, since
ssh-keyscan cannot use a proxy; judged as for a port-mode instance) or its pinned key (real `ssh` with
proxytunnel).
"""

from __future__ import annotations

import dataclasses
import re
import select
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ssh_gateway.core.connect import SSH_PORT, proxytunnel_command
from ssh_gateway.core.outputs import GatewayKind

from .checks import Deadline, check_banner, check_dns, check_host_identity, check_tcp, key_fingerprint
from .model import Check, Endpoint

__all__ = [
    "check_connect",
    "connect_checks",
    "connect_request",
]

_MAX_HEAD = 16384
"""Read at most this much of the gateway's answer looking for the end of its headers."""
_STATUS = re.compile(rb"HTTP/1\.[01] (\d{3})[^\r\n]*")
_OFFERED = re.compile(r"(SHA256:[A-Za-z0-9+/]+)")


def connect_request(authority: str, version: str = "1.1") -> bytes:
    """What proxytunnel (HTTP/1.1) or `nc -X connect` (HTTP/1.0) sends for `%h:%p` = `<authority>:22`."""
    return f"CONNECT {authority}:{SSH_PORT} HTTP/{version}\r\nHost: {authority}:{SSH_PORT}\r\n\r\n".encode()


_RESTART_ENVOY = 'restart it with the current one: envoy --config-yaml "$(pulumi stack output envoyConfig)"'


def _fix(endpoint: Endpoint, status: int) -> str:
    """Which layer a status names, and what to do about it."""
    authority = endpoint.authority
    if endpoint.gateway_kind is GatewayKind.ENVOY:
        return _envoy_fix(endpoint, status)
    match status:
        case 404:
            return (
                f"no route for {authority}: the gateway has no virtual host for it. The instance's EnvoyFilter "
                f"{endpoint.route or '(see the endpoints output)'} is missing or not applied (istiod; the gateway's "
                "selector or listenerPort), or no Istio Gateway has an HTTP server on that port (then istiod builds no "
                "route configuration to add it to: bind the port in a Gateway, or set "
                "ssh-gateway:connect.gateway.createGateway: true)"
            )
        case 503:
            return (
                f"no Service or endpoints behind {authority}: the Service is missing, selects no ready pod, or its "
                "targetPort (podPort) is not where the pod's sshd listens"
            )
        case 426:
            return (
                "the gateway refuses HTTP/1.0 CONNECT (nc -X connect, socat) although the stack sets "
                "ssh-gateway:connect.acceptHttp10: its EnvoyFilter ssh-gateway-connect is missing or not applied"
            )
        case _:
            return f"the gateway answered CONNECT with {status}: it is not routing CONNECT for {authority}"


def _envoy_fix(endpoint: Endpoint, status: int) -> str:
    """The same statuses from a standalone Envoy, whose whole config is the stack's `envoyConfig` output."""
    authority = endpoint.authority
    match status:
        case 404:
            return (
                f"no route for {authority}: the Envoy has no virtual host for it "
                f"({endpoint.route or 'see the endpoints output'}), so it runs an older envoyConfig than the stack's; "
                f"{_RESTART_ENVOY}"
            )
        case 503:
            return (
                f"nothing answers behind {authority}: Envoy's cluster for it (its staticHost:staticPort, or its "
                "Service's DNS name) is not reachable from Envoy, or no sshd listens there"
            )
        case 426:
            return (
                "the Envoy refuses HTTP/1.0 CONNECT (nc -X connect, socat) although the stack sets "
                f"ssh-gateway:connect.acceptHttp10: it runs an older envoyConfig; {_RESTART_ENVOY}"
            )
        case _:
            return f"the Envoy answered CONNECT with {status}: it is not routing CONNECT for {authority}"


def check_connect(sock: socket.socket, endpoint: Endpoint, timeout: float, version: str = "1.1") -> Check:
    """`CONNECT <authority>:22` on the connected socket, answered `200`: the gateway routes the tunnel. On success
    the socket is the tunnel (the instance's sshd speaks next)."""
    deadline = Deadline.after(timeout)
    where = f"{endpoint.host}:{endpoint.port}"
    head = b""
    try:
        sock.settimeout(deadline.remaining())
        sock.sendall(connect_request(str(endpoint.authority), version))
        while b"\r\n\r\n" not in head and len(head) < _MAX_HEAD:
            sock.settimeout(deadline.remaining())
            chunk = sock.recv(1)  # byte by byte: what follows the headers is the sshd's, for the banner check
            if not chunk:
                break
            head += chunk
    except TimeoutError:
        return Check(
            "connect",
            "fail",
            f"no answer to CONNECT from {where} within {timeout:.1f}s",
            "something accepts TCP on the CONNECT port but does not answer HTTP: the Pangolin resource's target "
            "is not the gateway Service (connect.gateway.service/servicePort/targetHost)",
        )
    except OSError as exc:
        head = head or f"({exc.strerror or exc})".encode()
    status = _STATUS.match(head)
    if status is None:
        seen = head.split(b"\r\n", 1)[0][:60].decode(errors="replace")
        said = f"answered {seen!r}" if head else "closed the connection without an answer"
        return Check(
            "connect",
            "fail",
            f"CONNECT {endpoint.authority}:{SSH_PORT} (HTTP/{version}) to {where}: the port {said}",
            "the CONNECT port does not lead to the ingress gateway: check the Pangolin resource's target "
            "(connect.gateway.service/servicePort/targetHost) or the LoadBalancer's address",
        )
    code = int(status.group(1))
    line = status.group(0).decode(errors="replace")
    if code == 200:
        return Check("connect", "ok", f"CONNECT {endpoint.authority}:{SSH_PORT} (HTTP/{version}): {line}")
    return Check(
        "connect", "fail", f"CONNECT {endpoint.authority}:{SSH_PORT} (HTTP/{version}): {line}", _fix(endpoint, code)
    )


def check_connect_host_key(endpoint: Endpoint, timeout: float) -> Check:
    """The host key the instance presents through the tunnel is the pinned one: real `ssh` with proxytunnel and
    only the pin as known_hosts, under the HostKeyAlias, with every authentication method off (it stops at
    "Permission denied" once the key checked out, at "Host key verification failed" when it did not)."""
    pinned = endpoint.pinned_key
    if not pinned:
        return Check("hostkey", "skip", "no host key pinned (hostKey) for this instance")
    ssh, proxytunnel = shutil.which("ssh"), shutil.which("proxytunnel")
    if ssh is None or proxytunnel is None:
        return Check("hostkey", "warn", "ssh or proxytunnel is not installed: host key not checked")
    key_type = pinned.split()[0]
    with tempfile.TemporaryDirectory(prefix="doctor-") as directory:
        known_hosts = Path(directory) / "known_hosts"
        known_hosts.write_text(f"{endpoint.alias} {pinned}\n")
        proxy = proxytunnel_command(endpoint.host, endpoint.port).replace("proxytunnel", proxytunnel, 1)
        argv = [ssh, "-F", "/dev/null", "-o", f"ProxyCommand={proxy}", "-o", f"HostKeyAlias={endpoint.alias}"]
        argv += ["-o", f"UserKnownHostsFile={known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null"]
        argv += ["-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", f"HostKeyAlgorithms={key_type}"]
        argv += ["-o", "PreferredAuthentications=none", "-o", f"ConnectTimeout={max(1, round(timeout))}"]
        argv += ["-p", str(SSH_PORT), "-l", endpoint.user or "root", str(endpoint.authority), "true"]
        try:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)  # noqa: S603
        except subprocess.TimeoutExpired:
            return Check("hostkey", "warn", f"ssh through the tunnel did not finish within {timeout:.1f}s")
    said = result.stderr
    if "Host key verification failed" in said or "IDENTIFICATION HAS CHANGED" in said:
        offered = _OFFERED.search(said)
        presented = f"presents {key_type} {offered.group(1)}, " if offered else ""
        return Check(
            "hostkey",
            "fail",
            f"host key mismatch: {endpoint.alias} ({endpoint.authority}) {presented}the stack pins "
            f"{key_fingerprint(pinned)}",
            "if the instance was rebuilt, put its new key in the instance's hostKey and run pulumi up; otherwise "
            "another server answers for this authority: do not connect",
        )
    if "Permission denied" in said or result.returncode == 0:
        return Check("hostkey", "ok", f"{key_type} {key_fingerprint(pinned)} as pinned (under {endpoint.alias})")
    last = said.strip().splitlines()[-1] if said.strip() else f"ssh exited {result.returncode}"
    return Check("hostkey", "warn", f"host key not checked: {last}")


@contextmanager
def _tunnel_relay(endpoint: Endpoint, timeout: float) -> Iterator[int]:
    """A loopback port whose every connection is the instance's CONNECT tunnel (for tools without a proxy
    option, like ssh-keyscan); closed when the block exits."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)

    def relay(client: socket.socket) -> None:
        with client, socket.create_connection((endpoint.host, endpoint.port), timeout=timeout) as upstream:
            if check_connect(upstream, endpoint, timeout).status != "ok":
                return
            for sock in (client, upstream):
                sock.setblocking(True)
                sock.settimeout(None)
            ends = {client: upstream, upstream: client}
            while True:
                ready, _, _ = select.select(list(ends), [], [], timeout)
                if not ready:
                    return
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    ends[sock].sendall(data)

    def serve() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=relay, args=(client,), name="doctor-relay", daemon=True).start()

    threading.Thread(target=serve, name="doctor-relay-accept", daemon=True).start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()


def check_connect_host_identity(endpoint: Endpoint, timeout: float) -> Check:
    """The certificate the instance serves through the tunnel is the stack's, for its HostKeyAlias: the
    port-mode check (`check_host_identity`) against a loopback relay into the tunnel."""
    if endpoint.pinned_key or not endpoint.trusted_cas:
        return check_host_identity(endpoint, timeout)  # the same skip, with the same words
    with _tunnel_relay(endpoint, timeout) as port:
        relayed = dataclasses.replace(endpoint, host="127.0.0.1", port=port, host_key_alias=endpoint.alias)
        return check_host_identity(relayed, timeout)


_TCP_FIX = (
    "no gateway on the CONNECT port: through Pangolin, its NSG rule (<project>.<stack>.connect), Gerbil's published "
    "port or Traefik's entry point for it (the stack's `gateway` output) is missing, or the Pangolin resource is "
    "off; directly, the ingress gateway's LoadBalancer does not listen there"
)


def connect_checks(endpoint: Endpoint, timeout: float) -> list[Check]:
    """DNS, TCP, CONNECT, banner and host key of a connect-mode instance, in that order, within `timeout`."""
    deadline = Deadline.after(timeout)
    host, port = endpoint.host, endpoint.port
    dns, addresses = check_dns(host, port, deadline.remaining())
    if dns.status != "ok":
        return [dns, *_not_reached("tcp", "connect", "banner", "hostidentity", "hostkey")]
    tcp, sock = check_tcp(host, addresses, port, deadline.remaining())
    if sock is None:
        return [dataclasses.replace(tcp, fix=_TCP_FIX), *_not_reached("connect", "banner", "hostidentity", "hostkey")]
    with sock:
        connect = check_connect(sock, endpoint, deadline.remaining())
        if connect.status != "ok":
            return [dns, tcp, connect, *_not_reached("banner", "hostidentity", "hostkey")]
        banner = check_banner(sock, f"{endpoint.authority} through {host}:{port}", deadline.remaining())
    if banner.status != "ok":
        fix = (
            f"the gateway opened the tunnel to {endpoint.authority} but no sshd spoke: the pod behind the Service "
            "is not sshd on podPort, or hangs"
        )
        return [dns, tcp, connect, dataclasses.replace(banner, fix=fix), *_not_reached("hostidentity", "hostkey")]
    if endpoint.accept_http10:
        http10 = _http10(endpoint, addresses, deadline)
        if http10.status != "ok":
            return [dns, tcp, http10, banner, *_not_reached("hostidentity", "hostkey")]
    identity = check_connect_host_identity(endpoint, deadline.remaining())
    return [dns, tcp, connect, banner, identity, check_connect_host_key(endpoint, deadline.remaining())]


def _http10(endpoint: Endpoint, addresses: list[str], deadline: Deadline) -> Check:
    """The stack says HTTP/1.0 clients work: one CONNECT as `nc -X connect` sends it, on a connection of its own."""
    _, sock = check_tcp(endpoint.host, addresses, endpoint.port, deadline.remaining())
    if sock is None:
        return Check("connect", "fail", "the CONNECT port stopped accepting TCP during the checks", _TCP_FIX)
    with sock:
        return check_connect(sock, endpoint, deadline.remaining(), version="1.0")


def _not_reached(*layers: str) -> list[Check]:
    return [Check(layer, "skip", "not reached: an earlier layer is broken") for layer in layers]
