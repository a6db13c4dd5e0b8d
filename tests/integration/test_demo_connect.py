"""The main job with both families in one run, as `scripts/demo` runs the local stack: port-mode instances through
their own ports, and a connect-mode instance (target static) through the CONNECT port (the entry point of a real
Traefik, routed by the emulator's HTTP provider) and a real Envoy, the stack's standalone gateway
(connect.gateway.kind envoy) run from the `envoyConfig` output of
the real `pulumi up`, to a real sshd, with real ssh and proxytunnel. The stack registers nothing of Kubernetes.

Like test_main_job.py, it runs the demo's own code on a stack of its own with free ports: --keep, a second run
(Envoy restarted with the current routes), then `down`.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pulumi import automation as auto

from pangolin_emulator.keys import generate_api_key
from ssh_gateway.local.envoy import detached_envoy_pid, envoy_binary
from ssh_gateway.local.sshd import login_user, wait_for_port
from ssh_gateway.ops.cli import main as ssh_gateway
from ssh_gateway.ops.doctor.connect import connect_request
from ssh_gateway.ops.shared.automation import open_stack, remove_stack
from ssh_gateway.plumbing.loopback import free_port
from ssh_gateway.plumbing.toolchain import REPO

from .local_ports import free_port_block

pytestmark = pytest.mark.integration


@dataclass
class Demo:
    stack: auto.Stack
    state: Path
    sshd_port: int
    pod_port: int
    envoy_port: int
    connect_port: int

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "ssh_gateway.ops", "demo", *args, "--stack", self.stack.name]
        argv += ["--state-dir", str(self.state)]
        return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    emulator_port, sshd_port, pod_port = free_port(), free_port(), free_port()
    envoy_port, connect_port = free_port(), free_port()
    ports = free_port_block(4)
    config = {
        "ssh-gateway:pangolin": {"url": f"http://127.0.0.1:{emulator_port}/v1", "orgId": "acme", "siteId": 1},
        "ssh-gateway:ports": {"range": f"{ports.start}-{ports.stop - 1}"},
        "ssh-gateway:gateway": {"hostTemplate": "127.0.0.1"},
        "ssh-gateway:firewall": {"enabled": False},
        "ssh-gateway:connect": {
            "gateway": {
                "kind": "envoy",
                "listenerPort": envoy_port,
                "listenAddress": "127.0.0.1",
                "targetHost": "127.0.0.1",
            },
            "public": {"via": "pangolin", "port": connect_port},
        },
        "ssh-gateway:instances": [
            # Both serve the identities the stack issues them (no pinned hostKey): one sshd each.
            {"name": "alpha", "target": "static", "staticHost": "127.0.0.1", "staticPort": sshd_port},
            {
                "name": "gamma",
                "routing": "connect",
                "target": "static",
                "staticHost": "127.0.0.1",
                "staticPort": pod_port,
            },
        ],
    }
    stack = open_stack(f"it-demo-{uuid.uuid4().hex[:8]}", config, secrets={"pangolin:apiKey": generate_api_key()})
    demo = Demo(stack, tmp_path / "demo", sshd_port, pod_port, envoy_port, connect_port)
    try:
        yield demo
    finally:
        demo.run("down")
        remove_stack(stack)


def answers(stdout: str) -> dict[str, str]:
    return dict(re.findall(r"^    (\w+): (hello from .*)$", stdout, re.M))


def test_both_families_answer_in_one_run(demo: Demo, capsys: pytest.CaptureFixture[str]) -> None:
    first = demo.run("--keep")
    assert first.returncode == 0, first.stdout + first.stderr
    me, host = login_user(), socket.gethostname()
    authority = "ssh-gamma.default.svc.cluster.local"  # a routing name behind Envoy: it need not resolve
    assert answers(first.stdout) == {
        "alpha": f"hello from alpha: {me}@{host}, reached through 127.0.0.1:{_port_of(first.stdout, 'alpha')}",
        "gamma": f"hello from gamma: {me}@{host}, reached through CONNECT {authority} via 127.0.0.1:"
        f"{demo.connect_port}",
    }
    assert "main job OK: 2/2 instances answered" in first.stdout
    # The CONNECT port is one of Traefik's entry points, with the router of the stack's @connect resource.
    connect_router = rf"^      \d+-ssh-gateway-{demo.stack.name}-connect-router@http on tcp-{demo.connect_port}: "
    assert re.search(connect_router, first.stdout, re.M), first.stdout
    assert (
        f"Envoy, the stack's CONNECT gateway, on 127.0.0.1:{demo.envoy_port} (the envoyConfig output)" in first.stdout
    )
    assert f"      ssh-gateway.{authority}" in first.stdout
    assert f"ProxyCommand proxytunnel -q -p 127.0.0.1:{demo.connect_port} -d %h:%p" in first.stdout
    envoy_dir = demo.state / "envoy"
    kept = detached_envoy_pid(envoy_dir)
    assert kept is not None  # --keep leaves Envoy up with the rest

    # No Kubernetes at all: no provider, no Service, no EnvoyFilter (the local stack needs no kubernetes plugin).
    resources = (demo.stack.export_stack().deployment or {}).get("resources", [])
    assert resources and not [r["type"] for r in resources if "kubernetes" in r["type"]]
    # Envoy runs the output as it is, which Envoy also takes the README's way (--config-yaml).
    config = demo.stack.outputs()["envoyConfig"].value
    assert (envoy_dir / "bootstrap.yaml").read_text() == config
    argv = [str(envoy_binary()), "--mode", "validate", "--config-yaml", config, "-l", "critical"]
    validated = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert validated.returncode == 0, validated.stdout + validated.stderr

    # Through the same CONNECT port: the instance's authority is routed, any other is Envoy's 404 (no route).
    assert connect_status(demo.connect_port, authority) == 200
    assert connect_status(demo.connect_port, "ssh-nobody.default.svc.cluster.local") == 404
    capsys.readouterr()
    assert ssh_gateway(["doctor", "--stack", demo.stack.name, "--timeout", "8", "--json"]) == 0
    found = {i["instance"]: i for i in json.loads(capsys.readouterr().out)["instances"]}
    gamma = {c["layer"]: (c["status"], c["detail"]) for c in found["gamma"]["checks"]}
    assert gamma["connect"][0] == "ok" and gamma["pangolin"][0] == "ok"
    # Its issued certificate, fetched through the tunnel, is the stack CA's for its HostKeyAlias.
    assert gamma["hostidentity"][0] == "ok" and "for ssh-gamma, signed by the stack's CA" in gamma["hostidentity"][1]

    second = demo.run()
    assert second.returncode == 0, second.stdout + second.stderr
    assert "no changes" in second.stdout
    assert "stopped the one an earlier --keep run left" in second.stdout
    assert answers(second.stdout) == answers(first.stdout)
    assert detached_envoy_pid(envoy_dir) is None  # started by this run (not --keep): stopped with it

    down = demo.run("down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert (demo.stack.export_stack().deployment or {}).get("resources", []) == []
    for port in (demo.sshd_port, demo.pod_port, demo.envoy_port, demo.connect_port):
        assert not wait_for_port("127.0.0.1", port, 0)


def connect_status(port: int, authority: str) -> int:
    """The status Envoy answers `CONNECT <authority>:22` with, through Traefik's entry point on `port`."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(connect_request(authority))
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(1024)
            if not chunk:
                break
            head += chunk
    found = re.match(rb"HTTP/1\.1 (\d{3})", head)
    assert found, head
    return int(found[1])


def _port_of(stdout: str, instance: str) -> int:
    found = re.search(rf"^    {instance}\s+127\.0\.0\.1:(\d+)\s+port\s", stdout, re.M)
    assert found, stdout
    return int(found[1])
