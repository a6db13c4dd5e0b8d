"""The doctor against a stack whose instances are each broken at one layer on purpose, through the real CLI.

One stack, ten instances behind the emulator's data plane: two healthy (a pinned key, and an issued host
identity served from the files `ssh-gateway host-identity` derives), and one per broken layer, each made the way
it breaks in real life: no listener on the gateway port; packets dropped (a full accept queue never answers a
SYN, like a closed firewall), twice, to see instances checked side by side; the target's sshd stopped; the
Pangolin resource disabled; a host key pinned that the server does not have; and for the host identity, an sshd
that serves no certificate (the Secret not mounted) and one that serves a certificate from another CA.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle, running_emulator
from ssh_gateway.core import host_identity as hi
from ssh_gateway.core.host_identity import openssh_public_key
from ssh_gateway.local.sshd import LocalSshd, ensure_client_keypair
from ssh_gateway.local.sshd_identity import IdentitySshd, mount_secret
from ssh_gateway.ops.cli import main as ssh_gateway
from ssh_gateway.ops.doctor import diagnose, endpoints_from_outputs
from ssh_gateway.ops.shared.automation import open_stack, remove_stack
from ssh_gateway.ops.tools.host_identity_files import stack_identity_files
from ssh_gateway.plumbing.loopback import free_port
from ssh_gateway.plumbing.toolchain import REPO
from tests.host_keys import sign_host_certificate, validity_for_days

from .conftest import change_by_hand, stack_config
from .local_ports import free_port_block

pytestmark = pytest.mark.integration

TIMEOUT = 2.0


@dataclass
class World:
    stack: auto.Stack
    emulator: EmulatorHandle
    outputs: dict[str, Any]


def _full_listener(port: int) -> list[socket.socket]:
    """A socket on `port` whose accept queue is full: further SYNs are dropped, so connects time out."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", port))
    listener.listen(0)
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    time.sleep(0.2)
    return [listener, *fillers]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("doctor")
    keys = ensure_client_keypair(root / "id_ed25519", comment="doctor-test")
    sshd = LocalSshd(root / "sshd", port=free_port(), authorized_keys=[keys.public_key])
    doomed = LocalSshd(root / "sshd-doomed", port=free_port(), authorized_keys=[keys.public_key])
    certified, foreign = (
        IdentitySshd(root / f"sshd-{n}", mount_dir=root / f"mount-{n}", port=free_port(), authorized_keys=[])
        for n in ("certified", "foreign")
    )
    ports = free_port_block(12)
    no_listener_port, dropped_ports = ports[-1], (ports[-2], ports[-3])
    # Bound but not listening, without SO_REUSEADDR: the data plane cannot bind the port, nothing answers on it.
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", no_listener_port))
    droppers = [sock for port in dropped_ports for sock in _full_listener(port)]
    pin = sshd.host_public_key

    def instance(name: str, target: LocalSshd, **extra: Any) -> dict[str, Any]:
        return {"name": name, "target": "static", "staticHost": "127.0.0.1", "staticPort": target.port, **extra}

    with running_emulator(root / "pangolin", data_plane=True) as emulator:
        instances = [
            instance("healthy", sshd, hostKey=pin),
            instance("no-listener", sshd, port=no_listener_port),
            instance("dropped", sshd, port=dropped_ports[0]),
            instance("dropped-too", sshd, port=dropped_ports[1]),
            instance("target-down", doomed, hostKey=pin),
            instance("disabled", sshd, hostKey=pin),
            instance("wrong-key", sshd, hostKey=openssh_public_key(bytes(32))),
            instance("certified", certified),
            instance("uncertified", sshd),  # an issued identity, but the sshd serves only its own key
            instance("foreign-ca", foreign),
        ]
        config = stack_config(
            emulator,
            instances,
            port_range=f"{ports.start}-{ports.stop - 1}",
            gateway={"hostTemplate": "127.0.0.1"},
        )
        stack = open_stack(f"it-doctor-{uuid.uuid4().hex[:8]}", config, secrets={"pangolin:apiKey": emulator.api_key})
        try:
            sshd.start()
            doomed.start()
            outputs = {k: v.value for k, v in stack.up().outputs.items()}
            identities = {n: stack_identity_files(stack.name, n) for n in ("certified", "foreign-ca")}
            mount_secret(certified.mount_dir, identities["certified"])
            # The key of its own instance, certified for its names, but by a CA that is not the stack's.
            stale = sign_host_certificate(
                ca_private_key=hi.generate_key_pair().private_key,
                host_public_key=identities["foreign-ca"][hi.HOST_PUBLIC_KEY_FILE].strip(),
                principals=["127.0.0.1", "ssh-foreign-ca"],
                key_id="another-stack/foreign-ca",
                validity=validity_for_days(1),
                serial=1,
            )
            mount_secret(foreign.mount_dir, {**identities["foreign-ca"], hi.HOST_CERTIFICATE_FILE: stale + "\n"})
            certified.start()
            foreign.start()
            doomed.stop()
            change_by_hand(emulator, "disabled", enabled=False)
            time.sleep(1.5)  # the data plane follows Pangolin within a second
            yield World(stack, emulator, outputs)
        finally:
            try:
                stack.destroy()
            finally:
                remove_stack(stack)
                for server in (sshd, doomed, certified, foreign):
                    server.stop()
                for sock in [blocker, *droppers]:
                    sock.close()


def doctor(world: World, capsys: pytest.CaptureFixture[str], instance: str) -> tuple[int, dict[str, Any]]:
    """`ssh-gateway doctor --stack S --json --instance I` in-process: exit status and its one finding."""
    status = ssh_gateway(
        ["doctor", "--stack", world.stack.name, "--json", "--timeout", str(TIMEOUT), "--instance", instance]
    )
    report = json.loads(capsys.readouterr().out)
    [finding] = report["instances"]
    return status, finding


def statuses(finding: dict[str, Any]) -> dict[str, str]:
    return {c["layer"]: c["status"] for c in finding["checks"]}


def test_healthy_instance_passes_every_layer(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    status, finding = doctor(world, capsys, "healthy")
    assert status == 0
    assert finding["healthy"] and finding["brokenLayer"] is None
    assert statuses(finding) == {
        "dns": "ok", "tcp": "ok", "banner": "ok", "hostidentity": "skip", "hostkey": "ok", "pangolin": "ok"
    }  # fmt: skip
    checks = {c["layer"]: c["detail"] for c in finding["checks"]}
    assert checks["banner"].startswith("SSH-2.0-OpenSSH")
    assert "as pinned" in checks["hostkey"]


def test_an_issued_identity_served_as_issued_passes(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    status, finding = doctor(world, capsys, "certified")
    assert status == 0 and finding["healthy"], finding
    assert statuses(finding) == {
        "dns": "ok", "tcp": "ok", "banner": "ok", "hostidentity": "ok", "hostkey": "skip", "pangolin": "ok"
    }  # fmt: skip
    detail = next(c["detail"] for c in finding["checks"] if c["layer"] == "hostidentity")
    fingerprint = hi.fingerprint(world.outputs["hostKeys"]["certified"].split(" ", 1)[1])
    ca = world.outputs["hostCa"][0]["fingerprint"]
    assert detail.startswith(f"certificate of {fingerprint} for ssh-certified, signed by the stack's CA {ca}")


def test_no_certificate_served_is_host_identity(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    status, finding = doctor(world, capsys, "uncertified")
    assert status == 1
    assert finding["brokenLayer"] == "hostidentity"
    assert finding["problem"].startswith("host identity: the sshd serves no host certificate")
    assert "mount the Secret ssh-uncertified-host-key" in finding["fix"]
    assert "ssh-gateway host-identity" in finding["fix"]


def test_a_certificate_from_another_ca_is_host_identity(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    status, finding = doctor(world, capsys, "foreign-ca")
    assert status == 1
    assert finding["brokenLayer"] == "hostidentity"
    assert "not by the stack's host CA" in finding["problem"] and "another CA" in finding["fix"]
    assert statuses(finding)["pangolin"] == "ok"


def test_port_not_listening_is_the_gateway(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    status, finding = doctor(world, capsys, "no-listener")
    assert status == 1
    assert finding["brokenLayer"] == "tcp"
    assert "was refused" in finding["problem"]
    assert "tcp-" in finding["fix"] and "Gerbil" in finding["fix"]
    assert statuses(finding)["pangolin"] == "ok"  # Pangolin is fine: the gateway does not publish the port


def test_dropped_packets_time_out_and_name_the_firewall(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    status, finding = doctor(world, capsys, "dropped")
    assert status == 1
    assert finding["brokenLayer"] == "tcp"
    port = finding["port"]
    assert f"TCP connect to 127.0.0.1:{port} timed out" in finding["problem"]
    assert "firewall/NSG rule" in finding["fix"] and f"`tcp-{port}` entry point" in finding["fix"]
    assert time.monotonic() - started < 15  # the CLI reading outputs, plus at most one timeout


def test_target_down_is_no_banner(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    status, finding = doctor(world, capsys, "target-down")
    assert status == 1
    assert finding["brokenLayer"] == "banner"
    assert "accepted the connection and closed it" in finding["problem"]
    assert "target behind Pangolin is down" in finding["fix"]
    assert statuses(finding)["tcp"] == "ok" and statuses(finding)["pangolin"] == "ok"


def test_disabled_resource_is_pangolin(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    status, finding = doctor(world, capsys, "disabled")
    assert status == 1
    assert finding["brokenLayer"] == "pangolin"
    assert f"Pangolin resource {finding['pangolinResourceId']} is disabled" in finding["problem"]
    assert "pulumi up --refresh" in finding["fix"]
    assert statuses(finding)["tcp"] == "fail"  # the symptom; the disabled resource is the cause


def test_wrong_host_key_is_a_mismatch(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    status, finding = doctor(world, capsys, "wrong-key")
    assert status == 1
    assert finding["brokenLayer"] == "hostkey"
    assert finding["problem"].startswith(f"host key mismatch: [127.0.0.1]:{finding['port']} presents ssh-ed25519")
    assert statuses(finding)["banner"] == "ok" and statuses(finding)["pangolin"] == "ok"


def test_instances_are_checked_concurrently_within_one_timeout(world: World) -> None:
    project = world.stack.workspace.project_settings().name
    endpoints = endpoints_from_outputs(world.outputs, project=project, stack=world.stack.name)
    started = time.monotonic()
    reports = diagnose(endpoints, api_url=world.emulator.url, api_key=world.emulator.api_key, timeout=TIMEOUT)
    elapsed = time.monotonic() - started
    broken = {r.endpoint.instance: r.broken.layer if r.broken else None for r in reports}
    assert broken == {
        "healthy": None,
        "no-listener": "tcp",
        "dropped": "tcp",
        "dropped-too": "tcp",
        "target-down": "banner",
        "disabled": "pangolin",
        "wrong-key": "hostkey",
        "certified": None,
        "uncertified": "hostidentity",
        "foreign-ca": "hostidentity",
    }
    # Each dropped instance takes the whole timeout: one after the other they would take twice as long.
    assert TIMEOUT * 0.9 <= elapsed < TIMEOUT * 1.6, elapsed


def test_the_command_prints_a_table_and_exits_1(world: World) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ssh_gateway.ops", "doctor", "--stack", world.stack.name, "--timeout", str(TIMEOUT)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    rows = {line.split()[0]: line.split()[-1] for line in result.stdout.splitlines()[1:11]}
    assert rows == {
        "certified": "healthy",
        "foreign-ca": "hostidentity",
        "uncertified": "hostidentity",
        "disabled": "pangolin",
        "dropped": "tcp",
        "dropped-too": "tcp",
        "healthy": "healthy",
        "no-listener": "tcp",
        "target-down": "banner",
        "wrong-key": "hostkey",
    }
    assert "10 instance(s) of stack" in result.stdout and "8 broken" in result.stdout
    assert world.emulator.api_key.split(".")[1] not in result.stdout + result.stderr


def test_unknown_stack_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert ssh_gateway(["doctor", "--stack", f"it-missing-{uuid.uuid4().hex[:8]}"]) == 2
    assert "cannot open stack" in capsys.readouterr().err


def test_outputs_saved_to_a_file_give_the_same_findings(
    world: World, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--outputs`, as ssh-config and gateway-config take it: a stack on another backend; the key from the env."""
    saved = tmp_path / "outputs.json"
    saved.write_text(json.dumps(world.outputs))
    monkeypatch.setenv("PANGOLIN_API_KEY", world.emulator.api_key)
    for instance, layer in (("healthy", None), ("disabled", "pangolin"), ("wrong-key", "hostkey")):
        argv = ["--stack", world.stack.name, "--outputs", str(saved), "--json", "--timeout", str(TIMEOUT)]
        status = ssh_gateway(["doctor", *argv, "--instance", instance])
        [finding] = json.loads(capsys.readouterr().out)["instances"]
        assert (status, finding["brokenLayer"]) == (0 if layer is None else 1, layer), finding
    assert ssh_gateway(["doctor", "--stack", world.stack.name, "--outputs", str(tmp_path / "none.json")]) == 2
    assert "cannot open stack" in capsys.readouterr().err
