"""Through the real Traefik, as Pangolin's gateway host runs it: a static configuration made only of the stack's
output `gateway.traefikEntryPoints`, routers from the emulator's HTTP provider (Pangolin's internal
`/api/v1/traefik-config`). Asserted through Traefik's API (`/api/tcp/routers`) and real ssh, which checks each
sshd's own host key (pinned per instance), so a connection routed to the wrong sshd fails.

One stack, one emulator and one Traefik for the module: Traefik is started once, after the first `up`, and never
restarted, which is the point (fosrl/pangolin #821: raw TCP used to need a Traefik restart per port).
"""

from __future__ import annotations

import socket
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle, running_emulator
from ssh_gateway.local.sshd import ClientKey, LocalSshd, ensure_client_keypair, login_user
from ssh_gateway.local.traefik import TraefikProcess
from ssh_gateway.ops.cli import main as ssh_gateway
from ssh_gateway.ops.doctor.traefik import check_entry_points
from ssh_gateway.ops.shared.automation import open_stack, remove_stack
from ssh_gateway.plumbing.loopback import free_port

from .conftest import stack_config
from .local_ports import free_port_block

pytestmark = pytest.mark.integration


@dataclass
class Gateway:
    root: Path
    emulator: EmulatorHandle
    stack: auto.Stack
    traefik: TraefikProcess
    client: ClientKey
    ports: range
    sshds: dict[str, LocalSshd] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)

    def sshd(self, name: str) -> LocalSshd:
        """The instance's own sshd, with a host key of its own."""
        if name not in self.sshds:
            seed = uuid.uuid5(uuid.NAMESPACE_DNS, name).bytes * 2
            sshd = LocalSshd(self.root / f"sshd-{name}", port=free_port(), authorized_keys=[self.client.public_key],
                             host_key_seed=seed)  # fmt: skip
            sshd.start()
            self.sshds[name] = sshd
        return self.sshds[name]

    def up(self, names: list[str]) -> dict[str, Any]:
        instances = [
            {"name": n, "target": "static", "staticHost": "127.0.0.1", "staticPort": self.sshd(n).port,
             "hostKey": self.sshd(n).host_public_key, "user": login_user()}
            for n in names
        ]  # fmt: skip
        config = stack_config(
            self.emulator,
            instances,
            port_range=f"{self.ports.start}-{self.ports.stop - 1}",
            gateway={"hostTemplate": "127.0.0.1"},
        )
        self.stack = open_stack(self.stack.name, config, secrets={"pangolin:apiKey": self.emulator.api_key})
        self.outputs = {k: v.value for k, v in self.stack.up().outputs.items()}
        return self.outputs

    def port_of(self, name: str) -> int:
        return int(self.outputs["endpoints"][name]["port"])

    def ssh(self, name: str) -> subprocess.CompletedProcess[str]:
        """Real ssh through the stack's generated block for `name`, trusting only the stack's knownHosts."""
        known_hosts = self.root / "known_hosts"
        known_hosts.write_text(str(self.outputs["knownHosts"]).strip() + "\n")
        config = self.root / "ssh_config"
        config.write_text(
            f'Host *\n    IdentityFile "{self.client.private}"\n    IdentitiesOnly yes\n'
            f'    UserKnownHostsFile "{known_hosts}"\n    GlobalKnownHostsFile /dev/null\n'
            "    StrictHostKeyChecking yes\n    UpdateHostKeys no\n\n" + str(self.outputs["sshConfig"])
        )
        argv = ["ssh", "-F", str(config), "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", f"ssh-{name}", "echo ok"]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)

    def routers_by_entry_point(self) -> dict[str, list[str]]:
        held: dict[str, list[str]] = {}
        for router in self.traefik.tcp_routers():
            for entry_point in router["entryPoints"]:
                held.setdefault(entry_point, []).append(str(router["name"]))
        return held


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("traefik-gateway")
    client = ensure_client_keypair(root / "client" / "id_ed25519", "traefik-gateway")
    with running_emulator(root / "pangolin") as emulator:
        stack = open_stack(f"it-traefik-{uuid.uuid4().hex[:8]}", {}, secrets={"pangolin:apiKey": emulator.api_key})
        world = Gateway(root, emulator, stack, TraefikProcess(root / "traefik", {}, ""), client, free_port_block(6))
        try:
            outputs = world.up(["alpha", "beta"])
            entry_points = outputs["gateway"]["traefikEntryPoints"]
            world.traefik = TraefikProcess(root / "traefik", entry_points, emulator.traefik_config_url)
            world.traefik.start()
            yield world
        finally:
            world.traefik.stop()
            world.stack.destroy()
            remove_stack(world.stack)
            for sshd in world.sshds.values():
                sshd.stop()


def test_each_instance_reaches_its_own_sshd_through_traefik(gateway: Gateway) -> None:
    held = gateway.traefik.wait_for_routers(lambda rs: len(rs) == 2)
    assert {r["entryPoints"][0] for r in held} == {f"tcp-{gateway.port_of(n)}" for n in ("alpha", "beta")}
    for name in ("alpha", "beta"):
        answer = gateway.ssh(name)
        assert (answer.returncode, answer.stdout) == (0, "ok\n"), answer.stderr


def test_every_router_is_on_an_entry_point_the_stack_published(gateway: Gateway) -> None:
    published = set(gateway.outputs["gateway"]["traefikEntryPoints"])
    assert published == {f"tcp-{p}" for p in gateway.ports}
    assert gateway.traefik.entry_point_names() == {"traefik", *published}
    routers = gateway.traefik.wait_for_routers(lambda rs: len(rs) == len(gateway.outputs["endpoints"]))
    assert routers and all(set(r["entryPoints"]) <= published and r["status"] == "enabled" for r in routers)
    # The doctor, given Traefik's API, finds nothing missing.
    finding = check_entry_points(gateway.outputs, gateway.traefik.api_url, stack=gateway.stack.name, timeout=5)
    assert finding.ok, finding.detail


def test_an_instance_added_while_traefik_runs_is_reachable_without_a_restart(gateway: Gateway) -> None:
    pid = gateway.traefik.running_pid()
    gateway.up(["alpha", "beta", "gamma"])
    entry_point = f"tcp-{gateway.port_of('gamma')}"
    gateway.traefik.wait_for_routers(lambda rs: any(entry_point in r["entryPoints"] for r in rs))
    answer = gateway.ssh("gamma")
    assert (answer.returncode, answer.stdout) == (0, "ok\n"), answer.stderr
    assert gateway.traefik.running_pid() == pid  # the same process: no restart
    assert all(len(names) == 1 for names in gateway.routers_by_entry_point().values())


def test_a_removed_instance_stops_answering(gateway: Gateway) -> None:
    names = sorted(gateway.outputs["endpoints"])
    gone = names[-1]
    port = gateway.port_of(gone)
    assert _banner(port).startswith(b"SSH-2.0-")
    gateway.up(names[:-1])
    gateway.traefik.wait_for_routers(lambda rs: all(f"tcp-{port}" not in r["entryPoints"] for r in rs))
    # Traefik still listens there (a static entry point), but with no router it passes nothing to any sshd.
    assert _banner(port) == b""
    assert gateway.ssh(names[0]).returncode == 0  # the others still answer


def test_the_doctor_names_an_entry_point_the_stack_needs_and_traefik_lacks(
    gateway: Gateway, capsys: pytest.CaptureFixture[str]
) -> None:
    # The stack's range grows after Traefik started: the new port's entry point exists only after a restart.
    gateway.ports = range(gateway.ports.start, gateway.ports.stop + 1)
    gateway.up(sorted(gateway.outputs["endpoints"]))
    extra = f"tcp-{gateway.ports.stop - 1}"
    assert extra in gateway.outputs["gateway"]["traefikEntryPoints"]
    capsys.readouterr()
    code = ssh_gateway(
        ["doctor", "--stack", gateway.stack.name, "--timeout", "8", "--traefik-api", gateway.traefik.api_url]
    )
    said = capsys.readouterr().out
    assert code == 1, said
    assert f"traefik: BROKEN: Traefik at {gateway.traefik.api_url} lacks entry point(s) {extra} that stack" in said
    assert f"ssh-gateway gateway-config --stack {gateway.stack.name}" in said


def _banner(port: int) -> bytes:
    """The first bytes through Traefik's entry point, b"" when it holds the connection and passes nothing."""
    with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
        try:
            return sock.recv(64)
        except TimeoutError:
            return b""
