"""The main job end to end, as `scripts/demo` runs it: the real pulumi CLI, a real Traefik on the stack's entry points
routing by what the emulator's HTTP provider serves, one real sshd per instance serving the host key and
certificate the stack issued to it, and the real `ssh` client in BatchMode with StrictHostKeyChecking yes and only
the stack's CA line, through the ports the program allocated.

It runs the demo's own code (`python -m ssh_gateway.ops demo`) on a stack of its own with free ports, so it never
clashes with a demo running on this machine: --keep, then a second run (idempotent, reusing what the first
left), then `down` after the emulator was killed (so down must start it to destroy).
"""

from __future__ import annotations

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

from pangolin_emulator.harness import DetachedEmulator
from pangolin_emulator.keys import generate_api_key
from ssh_gateway.core import host_identity as hi
from ssh_gateway.core.host_identity import openssh_public_key
from ssh_gateway.local.sshd import LocalSshd, login_user, wait_for_port
from ssh_gateway.ops.cli import main as ssh_gateway
from ssh_gateway.ops.shared.automation import open_stack, remove_stack
from ssh_gateway.plumbing.loopback import free_port
from ssh_gateway.plumbing.toolchain import REPO

from .local_ports import free_port_block

pytestmark = pytest.mark.integration

INSTANCES = ("alpha", "beta", "gamma")


@dataclass
class Demo:
    stack: auto.Stack
    state: Path
    emulator_port: int
    sshd_ports: dict[str, int]
    """Each instance's own sshd (its staticPort), as in stacks/Pulumi.local.yaml."""

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [
            sys.executable,
            "-m",
            "ssh_gateway.ops",
            "demo",
            *args,
            "--stack",
            self.stack.name,
            "--state-dir",
            str(self.state),
        ]
        return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    emulator_port = free_port()
    sshd_ports = {name: free_port() for name in INSTANCES}
    ports = free_port_block(6)
    config = {
        "ssh-gateway:pangolin": {"url": f"http://127.0.0.1:{emulator_port}/v1", "orgId": "acme", "siteId": 1},
        "ssh-gateway:ports": {"range": f"{ports.start}-{ports.stop - 1}"},
        "ssh-gateway:gateway": {"hostTemplate": "127.0.0.1"},
        "ssh-gateway:firewall": {"enabled": False},
        "ssh-gateway:instances": [
            {"name": name, "target": "static", "staticHost": "127.0.0.1", "staticPort": sshd_ports[name]}
            for name in INSTANCES
        ],
    }
    stack = open_stack(f"it-demo-{uuid.uuid4().hex[:8]}", config, secrets={"pangolin:apiKey": generate_api_key()})
    demo = Demo(stack, tmp_path / "demo", emulator_port, sshd_ports)
    try:
        yield demo
    finally:
        demo.run("down")  # idempotent: destroys what is left and stops leftovers, also after a failure
        remove_stack(stack)


def answers(stdout: str) -> dict[str, str]:
    return dict(re.findall(r"^    (\w+): (hello from .*)$", stdout, re.M))


def test_main_job_keep_rerun_and_down(demo: Demo) -> None:
    first = demo.run("--keep")
    assert first.returncode == 0, first.stdout + first.stderr
    ports = {name: int(port) for name, port in re.findall(r"^    (\w+)\s+127\.0\.0\.1:(\d+)\s", first.stdout, re.M)}
    assert sorted(ports) == list(INSTANCES)
    me = login_user()
    assert answers(first.stdout) == {
        name: f"hello from {name}: {me}@{socket.gethostname()}, reached through 127.0.0.1:{ports[name]}"
        for name in INSTANCES
    }
    assert "main job OK: 3/3 instances answered" in first.stdout
    # Through the real Traefik: its version, and one router per instance on the instance's entry point.
    assert "started Traefik 3.7.15 " in first.stdout
    for name in INSTANCES:
        router = rf"^      \d+-ssh-gateway-{demo.stack.name}-{name}-router@http on tcp-{ports[name]}: HostSNI"
        assert re.search(router, first.stdout, re.M), first.stdout
    assert "scripts/demo down" in first.stdout

    # The one line a laptop adds, printed; the demo's known_hosts holds it and nothing else.
    (ca_line,) = (demo.state / "known_hosts").read_text().splitlines()
    assert ca_line.startswith("@cert-authority 127.0.0.1,[127.0.0.1]:*,ssh-*,[ssh-*]:* ssh-ed25519 ")
    assert "==> known_hosts: what a laptop adds, once," in first.stdout and f"    {ca_line}\n" in first.stdout
    ca_key = " ".join(ca_line.split()[2:4])
    assert "serves the fixed demo host key" not in first.stdout
    for name in INSTANCES:
        issued = rf"serves its issued host key SHA256:\S+, certified for 127\.0\.0\.1, ssh-{name} by CA "
        assert re.search(issued, first.stdout), first.stdout
        served = (demo.state / "host-identity" / name / hi.HOST_CERTIFICATE_FILE).read_text()
        hi.verify_host_certificate(served, ca_public_keys=[ca_key], principal=f"ssh-{name}")

    # Kept: our own ssh, through the generated config (the CA line only, StrictHostKeyChecking yes, an alias each).
    config_text = (ssh_config := demo.state / "ssh_config").read_text()
    assert "StrictHostKeyChecking yes" in config_text and "StrictHostKeyChecking no" not in config_text
    assert all(f"    HostKeyAlias ssh-{name}\n" in config_text for name in INSTANCES)
    for name in INSTANCES:
        remote = subprocess.run(
            [
                "ssh",
                "-F",
                str(ssh_config),
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=5",
                f"ssh-{name}",
                "echo $((6 * 7)) $(id -un)",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert (remote.returncode, remote.stdout) == (0, f"42 {me}\n"), remote.stderr
    assert ssh_gateway(["doctor", "--stack", demo.stack.name, "--timeout", "3"]) == 0

    # Run again: nothing to change, the kept processes reused (and, not started by this run, left running).
    second = demo.run()
    assert second.returncode == 0, second.stdout + second.stderr
    assert "no changes" in second.stdout and second.stdout.count("reusing it") == 1 + len(INSTANCES)
    assert answers(second.stdout) == answers(first.stdout)
    emulator = DetachedEmulator(
        demo.state / "pangolin", url=f"http://127.0.0.1:{demo.emulator_port}/v1", org_id="acme", api_key="x.y"
    )
    assert emulator.running_pid() is not None

    # As after a reboot: the emulator is gone, the stack still has resources; down must bring it back to destroy.
    assert emulator.stop()
    down = demo.run("down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert "Pangolin emulator (destroy must reach it" in down.stdout
    assert (demo.stack.export_stack().deployment or {}).get("resources", []) == []
    assert emulator.running_pid() is None and not wait_for_port("127.0.0.1", demo.emulator_port, 0)
    for port in demo.sshd_ports.values():
        sshd = LocalSshd(demo.state / f"sshd-{port}", port=port, authorized_keys=[])
        assert sshd.running_pid() is None and not wait_for_port("127.0.0.1", port, 0)
    for port in ports.values():
        assert not wait_for_port("127.0.0.1", port, 0)


def test_an_instance_that_cannot_log_in_fails_the_job_and_is_diagnosed(demo: Demo) -> None:
    # beta pins a host key its sshd (the demo's fixed key, for pinned instances) does not have.
    demo.stack.set_config(
        "ssh-gateway:instances[1].hostKey", auto.ConfigValue(openssh_public_key(bytes(32))), path=True
    )
    result = demo.run()
    assert result.returncode == 1, result.stdout
    assert set(answers(result.stdout)) == {"alpha", "gamma"}
    assert re.search(r"^!!! beta: .*(host key|HOST IDENTIFICATION)", result.stdout, re.M | re.I), result.stdout
    assert "beta: broken at hostkey: host key mismatch" in result.stdout
    assert "main job failed: 2/3 instances answered" in result.stdout
