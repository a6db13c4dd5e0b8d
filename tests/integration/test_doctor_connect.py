"""The doctor on connect-mode instances, each broken at one layer, against the real Envoy rig (an Istio-style
gateway with the core's EnvoyFilters applied by Istio's patch code) in front of a real sshd.

no gateway on the port -> tcp; an authority without a route -> connect (404); a route to a Service without
endpoints (nothing listens) -> connect (503); HTTP/1.0 where the gateway refuses it -> connect (426); a tunnel
to something that is not sshd -> banner; another host key -> hostkey. The outputs are shaped as the program
exports them (tests/unit/test_program_connect.py checks that shape).
"""

from __future__ import annotations

import dataclasses
import hashlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from ssh_gateway.core.connect import ConnectGateway, ConnectInstance, connect_cluster, connect_manifests
from ssh_gateway.core.host_identity import openssh_public_key
from ssh_gateway.local.envoy import EnvoyGateway
from ssh_gateway.local.sshd import LocalSshd, ensure_client_keypair, login_user
from ssh_gateway.ops.doctor import InstanceReport, diagnose, endpoints_from_outputs, render
from ssh_gateway.ops.doctor.model import Endpoint
from ssh_gateway.plumbing.loopback import free_port

pytestmark = pytest.mark.integration

SELECTOR = {"istio": "ingressgateway"}
NAMESPACE = "dev"
TIMEOUT = 8.0
ROUTED = ("healthy", "wrong-key", "no-endpoints", "silent")


@dataclass
class Rig:
    gateway: EnvoyGateway
    http10_gateway: EnvoyGateway
    sshd: LocalSshd
    endpoints: dict[str, Endpoint]


def silent_listener() -> Iterator[int]:
    """A TCP port that accepts and never says a word (not sshd)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    yield int(listener.getsockname()[1])
    listener.close()
    for conn in held:
        conn.close()


def authority(name: str) -> str:
    return ConnectInstance(name, NAMESPACE).authority


def outputs_for(port: int, pins: dict[str, str], *, accept_http10: bool = False) -> dict[str, Any]:
    """The stack outputs of connect-mode instances behind a direct CONNECT entry on 127.0.0.1:`port`."""
    names = (*ROUTED, "no-route")
    return {
        "endpoints": {
            name: {
                "routing": "connect",
                "host": "127.0.0.1",
                "port": port,
                "authority": authority(name),
                "route": f"istio-system/ssh-{name}.{NAMESPACE}.connect",
                "user": login_user(),
                "ssh": "...",
                "pangolinResourceId": None,
            }
            for name in names
        },
        "knownHosts": "\n".join(f"ssh-{name} {key}" for name, key in pins.items()),
        "connect": {"via": "direct", "host": "127.0.0.1", "port": port, "acceptHttp10": accept_http10},
    }


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    root = tmp_path_factory.mktemp("doctor-connect")
    key = ensure_client_keypair(root / "id_ed25519", "doctor-connect-test")
    seed = hashlib.sha256(b"doctor-connect test sshd").digest()
    sshd = LocalSshd(root / "sshd", port=free_port(), authorized_keys=[key.public_key], host_key_seed=seed)
    sshd.start()
    silent = silent_listener()
    silent_port = next(silent)
    upstreams = {"healthy": sshd.port, "wrong-key": sshd.port, "no-endpoints": free_port(), "silent": silent_port}
    clusters = {connect_cluster(authority(name)): port for name, port in upstreams.items()}
    instances = [ConnectInstance(name, NAMESPACE) for name in ROUTED]
    gateways = []
    try:
        for name, accept in (("envoy", False), ("envoy-http10", True)):
            port = free_port()
            filters = connect_manifests(ConnectGateway(SELECTOR, port, accept_http10=accept), instances)
            gateway = EnvoyGateway(root / name, port=port, clusters=clusters, filters=filters, selector=SELECTOR)
            gateway.start()
            gateways.append(gateway)
        pins = {
            "healthy": openssh_public_key(seed),
            "wrong-key": openssh_public_key(hashlib.sha256(b"someone else").digest()),
        }
        found = endpoints_from_outputs(outputs_for(gateways[0].port, pins), project="ssh-gateway", stack="it")
        endpoints = {ep.instance: ep for ep in found}
        no_gateway = dataclasses.replace(endpoints["healthy"], instance="no-gateway", port=free_port())
        http10 = dataclasses.replace(endpoints["healthy"], instance="http10", accept_http10=True)
        endpoints.update({"no-gateway": no_gateway, "http10": http10})
        yield Rig(gateways[0], gateways[1], sshd, endpoints)
    finally:
        for gateway in gateways:
            gateway.stop()
        sshd.stop()
        next(silent, None)


def run(rig: Rig, *names: str, endpoints: list[Endpoint] | None = None) -> dict[str, InstanceReport]:
    chosen = endpoints or [rig.endpoints[name] for name in names]
    reports = diagnose(chosen, api_url="", api_key=None, timeout=TIMEOUT)
    return {r.endpoint.instance: r for r in reports}


def status(report: InstanceReport) -> dict[str, str]:
    return {c.layer: c.status for c in report.checks}


def test_a_healthy_connect_instance_passes_every_layer(rig: Rig) -> None:
    [report] = run(rig, "healthy").values()
    assert report.broken is None, report.checks
    assert status(report) == {
        "dns": "ok",
        "tcp": "ok",
        "connect": "ok",
        "banner": "ok",
        "hostidentity": "skip",  # the key is pinned: the hostkey layer checks it
        "hostkey": "ok",
        "pangolin": "skip",  # a direct entry: no Pangolin resource
    }
    assert report.check("connect").detail == (f"CONNECT {authority('healthy')}:22 (HTTP/1.1): HTTP/1.1 200 OK")
    assert report.check("banner").detail.startswith("SSH-2.0-OpenSSH")
    assert "as pinned (under ssh-healthy)" in report.check("hostkey").detail


def test_each_broken_layer_is_named(rig: Rig) -> None:
    reports = run(rig, "no-gateway", "no-route", "no-endpoints", "http10", "silent", "wrong-key")
    broken = {name: r.broken.layer if r.broken else None for name, r in reports.items()}
    assert broken == {
        "no-gateway": "tcp",
        "no-route": "connect",
        "no-endpoints": "connect",
        "http10": "connect",
        "silent": "banner",
        "wrong-key": "hostkey",
    }
    problem = {name: r.broken for name, r in reports.items() if r.broken}
    assert "was refused" in problem["no-gateway"].detail
    assert "no gateway on the CONNECT port" in problem["no-gateway"].fix
    assert problem["no-route"].detail.endswith("(HTTP/1.1): HTTP/1.1 404 Not Found")
    assert f"no route for {authority('no-route')}" in problem["no-route"].fix
    assert f"istio-system/ssh-no-route.{NAMESPACE}.connect" in problem["no-route"].fix
    assert "createGateway: true" in problem["no-route"].fix  # the other reason istiod has nothing to patch
    assert problem["no-endpoints"].detail.endswith("(HTTP/1.1): HTTP/1.1 503 Service Unavailable")
    assert "no Service or endpoints" in problem["no-endpoints"].fix
    assert problem["http10"].detail.endswith("(HTTP/1.0): HTTP/1.1 426 Upgrade Required")
    assert "acceptHttp10" in problem["http10"].fix
    assert status(reports["http10"])["banner"] == "ok"  # the HTTP/1.1 tunnel itself works
    assert "no sshd spoke" in problem["silent"].fix
    assert problem["wrong-key"].detail.startswith("host key mismatch: ssh-wrong-key (")
    assert "presents ssh-ed25519 SHA256:" in problem["wrong-key"].detail

    table = render(list(reports.values()), stack="it", elapsed=1.0)
    assert table.splitlines()[0].split() == [
        "INSTANCE",
        "ENDPOINT",
        "DNS",
        "TCP",
        "CONNECT",
        "BANNER",
        "HOSTIDENTITY",
        "HOSTKEY",
        "PANGOLIN",
        "VERDICT",
    ]


def test_http10_passes_where_the_gateway_accepts_it(rig: Rig) -> None:
    http10 = dataclasses.replace(rig.endpoints["http10"], port=rig.http10_gateway.port)
    [report] = run(rig, endpoints=[http10]).values()
    assert report.broken is None, report.checks
    assert report.check("connect").status == "ok"
    assert rig.http10_gateway.port != rig.gateway.port


def test_a_silent_tunnel_costs_one_timeout_and_the_others_do_not_wait_for_it(rig: Rig) -> None:
    started = time.monotonic()
    reports = run(rig, "healthy", "no-route", "no-endpoints", "silent")
    elapsed = time.monotonic() - started
    # The silent tunnel waits for its banner until its instance's deadline; the others run beside it.
    assert reports["silent"].check("banner").detail.startswith(f"no SSH banner from {authority('silent')}")
    assert TIMEOUT * 0.8 <= elapsed < TIMEOUT * 1.5, elapsed
