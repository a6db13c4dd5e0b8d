"""Issue 13 "Done when", through the real pulumi CLI on the project itself, a real kube-apiserver and the
emulator's data plane:

- a real sshd serves the key and certificate exactly as a pod mounts them from the Secret read back from the
  API server (a nodePort instance: its Pangolin target is 127.0.0.1:<nodePort>, where that sshd listens), and
  another serves a static instance's identity from the files `ssh-gateway host-identity --write` derives;
- real ssh, StrictHostKeyChecking=yes and only the stack's CA line, connects through the allocated public port;
- the fingerprints stay the same when the port moves and when the Service and its Secret are destroyed and
  re-created (a namespace change replaces both), and when the CA is rotated;
- a certificate from another CA (the old one, after a rotation without overlap) is refused;
- `pulumi stack export` (no --show-secrets), every `up`'s output and `pulumi stack output` (even with
  --show-secrets: no output holds an identity) hold 0 plaintext private keys.
"""

from __future__ import annotations

import base64
import json
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle, running_emulator
from ssh_gateway.core import host_identity as hi
from ssh_gateway.core.names import HOST_CA_TYPE, HOST_KEY_ROOT_TYPE, HOST_KEY_TYPE, SECRET_TYPE, STACK_MARK
from ssh_gateway.core.targets import IN_PLACE_ANNOTATIONS
from ssh_gateway.local.control_plane import ControlPlane
from ssh_gateway.local.sshd import ClientKey, ensure_client_keypair
from ssh_gateway.local.sshd_identity import IdentitySshd, mount_secret
from ssh_gateway.plumbing.loopback import free_port
from ssh_gateway.plumbing.toolchain import REPO
from tests.host_keys import checked_secret_files, key_pair_from_private_seed

from .cli import pulumi, run
from .conftest import StackFactory, exported_resources, stack_config
from .local_ports import free_port_block
from .secret_scan import key_material, seed_fragments
from .strict_ssh import GREETING, strict_ssh

pytestmark = pytest.mark.integration

# How a checkpoint marks an encrypted value (Pulumi's `sig` package); --show-secrets adds "plaintext".
SIG_KEY = "4dabf18193072939515e22adb298388d"
ENCRYPTED_SIG = "1b47061264138c4ac30d75fd1eb44270"


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[EmulatorHandle]:
    """The conftest's emulator, with its data plane: the allocated public ports listen and forward."""
    with running_emulator(tmp_path / "pangolin", data_plane=True) as handle:
        yield handle


def _revealed(value: Any) -> Any:
    assert isinstance(value, dict) and value.get(SIG_KEY) == ENCRYPTED_SIG, f"expected a secret, got {value!r:.60}"
    return json.loads(value["plaintext"])


class World:
    """The stack under test, what its `up`s printed, and the sshds standing in for the pod and the VM."""

    def __init__(self, kube: ControlPlane, emulator: EmulatorHandle, make_stack: StackFactory, root: Path) -> None:
        self.kube, self.emulator, self.make_stack, self.root = kube, emulator, make_stack, root
        self.logs: list[str] = []
        self.private_keys: set[str] = set()
        self.client: ClientKey = ensure_client_keypair(root / "client" / "id_ed25519", "host-identity-stack")
        self.sshds: list[IdentitySshd] = []
        self.stack: auto.Stack | None = None

    def up(self, config: dict[str, Any], *, refresh: bool = False) -> dict[str, Any]:
        self.stack = self.make_stack(config, name=self.stack.name if self.stack else None)
        # --diff: the output then shows every changed property, which the leak check reads too.
        self.stack.up(on_output=self.logs.append, diff=True, refresh=refresh)
        self.private_keys |= set(self._state_private_keys())
        return {key: value.value for key, value in self.stack.outputs().items()}

    def command_files(self, instance: str) -> dict[str, str]:
        """What the real `ssh-gateway host-identity --write DIR` writes for a static instance: its files, 0600."""
        assert self.stack is not None
        where = self.root / f"identity-{uuid.uuid4().hex[:6]}"
        argv = [str(REPO / ".venv" / "bin" / "ssh-gateway"), "host-identity", "--stack", self.stack.name]
        done = run([*argv, "--instance", instance, "--write", str(where)])
        assert done.returncode == 0, done.stderr
        self.logs += [done.stdout, done.stderr]  # searched for key material too: it prints only paths
        files = {path.name: path.read_text() for path in where.iterdir()}
        assert sorted(files) == sorted(hi.SECRET_KEYS)
        assert {stat.S_IMODE(path.stat().st_mode) for path in where.iterdir()} == {0o600}
        self.private_keys.add(files[hi.HOST_KEY_FILE])
        return files

    def resources(self, typ: str) -> dict[str, dict[str, Any]]:
        assert self.stack is not None
        return {r["urn"].rsplit("::", 1)[1]: r for r in exported_resources(self.stack) if r["type"] == typ}

    def _state_private_keys(self) -> list[str]:
        cas = [str(_revealed(r["outputs"]["privateKey"])) for r in self.resources(HOST_CA_TYPE).values()]
        # The root is a 32-byte seed: searched for as the key file of that seed, whose fragments are the seed's.
        roots = [
            key_pair_from_private_seed(str(_revealed(r["outputs"]["privateKey"]))).private_key
            for r in self.resources(HOST_KEY_ROOT_TYPE).values()
        ]
        return cas + roots

    def secret_files(self, namespace: str, name: str) -> dict[str, Any]:
        """The Secret as the kubelet would get it from the API server: the files, and the object."""
        with self.kube.client() as api:
            response = api.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
        response.raise_for_status()
        secret = response.json()
        files = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
        return {"files": files, "object": secret}

    def secrets_in(self, namespace: str) -> list[str]:
        with self.kube.client() as api:
            items = api.get(f"/api/v1/namespaces/{namespace}/secrets").raise_for_status().json()["items"]
        return sorted(item["metadata"]["name"] for item in items)

    def serve(self, files: dict[str, str], port: int) -> IdentitySshd:
        """A real sshd on 127.0.0.1:`port` serving `files` laid out as a pod's Secret volume (mode 0600)."""
        run = self.root / f"sshd-{port}-{uuid.uuid4().hex[:6]}"
        sshd = IdentitySshd(
            run / "sshd",
            mount_dir=mount_secret(run / "secret", files),
            port=port,
            authorized_keys=[self.client.public_key],
        )
        self.sshds.append(sshd)
        sshd.start()
        return sshd

    def ssh(self, known_hosts: str, host: str, port: int) -> Any:
        """Real ssh to `host` on the public `port`, StrictHostKeyChecking=yes, trusting only `known_hosts`."""
        return strict_ssh(
            self.root / f"ssh-{uuid.uuid4().hex[:6]}", self.client, known_hosts.splitlines(), host=host, port=port
        )

    def stop(self) -> None:
        for sshd in self.sshds:
            sshd.stop()


@pytest.fixture
def world(kube: ControlPlane, emulator: EmulatorHandle, make_stack: StackFactory, tmp_path: Path) -> Iterator[World]:
    made = World(kube, emulator, make_stack, tmp_path)
    try:
        yield made
    finally:
        made.stop()


def _fingerprints(outputs: dict[str, Any]) -> dict[str, str]:
    return {name: hi.fingerprint(line.split(" ", 1)[1]) for name, line in outputs["hostKeys"].items()}


def _connects(result: Any) -> None:
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == GREETING
    assert "matches the ED25519-CERT host certificate" in result.stderr
    assert "Permanently added" not in result.stderr


def test_issued_identities_survive_and_nothing_leaks(
    world: World, kube: ControlPlane, emulator: EmulatorHandle
) -> None:
    namespace, moved_to = (f"it-{uuid.uuid4().hex[:8]}" for _ in range(2))
    kube.create_namespace(namespace)
    kube.create_namespace(moved_to)
    # The Services' nodePorts: where the pod's sshd listens (the target is nodeIp 127.0.0.1 + the nodePort).
    node_port, node_port_after = free_port_block(2, low=30000, high=32767)
    vm_port = free_port()
    public = free_port_block(10)
    extra_config: dict[str, Any] = {}

    def config(ns: str, np: int = node_port, **extra: Any) -> dict[str, Any]:
        instances = [
            {"name": "gpu-np", "target": "nodePort", "nodePort": np},
            {"name": "vm-01", "target": "static", "staticHost": "127.0.0.1", "staticPort": vm_port, **extra},
        ]
        kubernetes = {"namespace": ns, "kubeconfig": str(kube.kubeconfig), "nodeIp": "127.0.0.1"}
        return stack_config(
            emulator, instances, port_range=f"{public.start}-{public.stop - 1}", kubernetes=kubernetes, **extra_config
        )

    # 1. The first up: a CA, two issued keys, the Service's Secret.
    first = world.up(config(namespace))
    assert world.secrets_in(namespace) == ["ssh-gpu-np-host-key"]
    read_back = world.secret_files(namespace, "ssh-gpu-np-host-key")
    files, secret = read_back["files"], read_back["object"]
    assert sorted(files) == sorted(hi.SECRET_KEYS) and secret["type"] == "Opaque"
    # No await to skip: the mark, and the force of an object updated in place.
    assert sorted(secret["metadata"]["annotations"]) == sorted([STACK_MARK, *IN_PLACE_ANNOTATIONS])
    # The Secret holds a key and certificate that belong together, signed by the stack's CA, and the key the
    # stack publishes (hostKeys); no resource per instance holds them (they are derived from the stack's root).
    world.private_keys.add(files[hi.HOST_KEY_FILE])
    assert (
        checked_secret_files(
            private_key=files[hi.HOST_KEY_FILE],
            public_key=files[hi.HOST_PUBLIC_KEY_FILE].strip(),
            certificate=files[hi.HOST_CERTIFICATE_FILE].strip(),
        )
        == files
    )
    (ca_entry,) = first["hostCa"]
    hi.verify_host_certificate(
        files[hi.HOST_CERTIFICATE_FILE], ca_public_keys=[ca_entry["publicKey"]], principal="ssh-gpu-np.example.test"
    )
    assert first["hostKeys"]["gpu-np"].endswith(" " + files[hi.HOST_PUBLIC_KEY_FILE].strip())
    assert not world.resources(HOST_KEY_TYPE) and list(world.resources(HOST_KEY_ROOT_TYPE)) == ["host-key-root"]
    assert "hostIdentities" not in first  # no output holds an identity: the Secret, or the command, delivers it
    (ca_line,) = first["knownHosts"].splitlines()
    assert ca_line.startswith("@cert-authority ssh-*.example.test,[ssh-*.example.test]:* ssh-ed25519 ")
    # What the nightly drift check runs: a refresh reads the keys and the Secret back as they are, no changes.
    assert world.stack is not None
    world.stack.refresh(on_output=world.logs.append)
    world.stack.preview(expect_no_changes=True, on_output=world.logs.append)

    # 2. A real sshd from the Secret as the pod mounts it, and one from the command's files for the VM; real ssh
    # with only the CA line through the allocated public ports.
    world.serve(files, node_port)
    vm_files = world.command_files("vm-01")
    assert first["hostKeys"]["vm-01"].endswith(" " + vm_files[hi.HOST_PUBLIC_KEY_FILE].strip())
    world.serve(vm_files, vm_port)
    ports = first["allocations"]
    _connects(world.ssh(first["knownHosts"], "ssh-gpu-np.example.test", ports["gpu-np"]))
    _connects(world.ssh(first["knownHosts"], "ssh-vm-01.example.test", ports["vm-01"]))
    fingerprints = _fingerprints(first)

    # 3. The port moves: the key and the certificate stay, and the same CA line still connects.
    new_port = next(p for p in public if p not in ports.values())
    moved = world.up(config(namespace, port=new_port))
    assert moved["allocations"]["vm-01"] == new_port != ports["vm-01"]
    assert _fingerprints(moved) == fingerprints
    assert world.command_files("vm-01") == vm_files
    _connects(world.ssh(moved["knownHosts"], "ssh-vm-01.example.test", new_port))

    # 4. The Service and its Secret are destroyed and re-created (another namespace replaces both; the new
    # Service gets another nodePort, as the old one still holds its own until it is deleted): the same key,
    # served by a new "pod" from the new Secret, behind the same public port.
    replaced = world.up(config(moved_to, node_port_after, port=new_port))
    assert world.secrets_in(namespace) == [] and world.secrets_in(moved_to) == ["ssh-gpu-np-host-key"]
    assert world.secret_files(moved_to, "ssh-gpu-np-host-key")["files"] == files
    assert _fingerprints(replaced) == fingerprints and replaced["knownHosts"] == first["knownHosts"]
    world.sshds[0].stop()
    world.serve(world.secret_files(moved_to, "ssh-gpu-np-host-key")["files"], node_port_after)
    _connects(world.ssh(replaced["knownHosts"], "ssh-gpu-np.example.test", ports["gpu-np"]))

    # 5. A CA rotation without overlap: every certificate re-issued by CA 2, no key changes; a client that
    # still trusts only CA 1 refuses the new certificate (another CA), the new line connects.
    extra_config["hostIdentity"] = {"ca": {"generations": [2]}}
    rotated = world.up(config(moved_to, node_port_after, port=new_port))
    assert _fingerprints(rotated) == fingerprints
    assert rotated["knownHosts"] != first["knownHosts"] and [e["generation"] for e in rotated["hostCa"]] == [2]
    assert sorted(world.resources(HOST_CA_TYPE)) == ["host-ca-g2"]
    world.sshds[1].stop()  # the VM's operator installs the re-issued certificate and restarts sshd
    rotated_files = world.command_files("vm-01")
    assert rotated_files[hi.HOST_KEY_FILE] == vm_files[hi.HOST_KEY_FILE]  # the key stays, re-certified
    world.serve(rotated_files, vm_port)
    refused = world.ssh(first["knownHosts"], "ssh-vm-01.example.test", new_port)
    assert refused.returncode == 255 and "No matching CA found" in refused.stderr, refused.stderr
    assert "Host key verification failed." in refused.stderr and GREETING not in refused.stdout
    _connects(world.ssh(rotated["knownHosts"], "ssh-vm-01.example.test", new_port))
    rotated_secret = world.secret_files(moved_to, "ssh-gpu-np-host-key")["files"]
    assert rotated_secret[hi.HOST_KEY_FILE] == files[hi.HOST_KEY_FILE]  # the key stays, the certificate follows
    (rotated_ca,) = rotated["hostCa"]
    hi.verify_host_certificate(
        rotated_secret[hi.HOST_CERTIFICATE_FILE], ca_public_keys=[rotated_ca["publicKey"]], principal="ssh-gpu-np"
    )

    # 6. No plaintext private key: not in the export without --show-secrets, the ups' output, nor stack output.
    counts = _assert_no_plaintext_private_key(world)
    # CA g1 and g2 (both were in state), the host-key root, gpu-np's and vm-01's keys.
    assert counts["private keys searched"] == 5
    print(f"no-leak check: {counts}")


def _assert_no_plaintext_private_key(world: World) -> dict[str, int]:
    stack = world.stack
    assert stack is not None
    keys = sorted(world.private_keys)
    exported = pulumi("stack", "export", "--stack", stack.name)
    output = pulumi("stack", "output", "--json", "--stack", stack.name)
    assert exported.returncode == 0 and output.returncode == 0, exported.stderr + output.stderr
    revealed = pulumi("stack", "export", "--show-secrets", "--stack", stack.name)
    revealed_output = pulumi("stack", "output", "--json", "--show-secrets", "--stack", stack.name)
    # Distinct keys, by their seed: a static instance's key file is collected once per `up`.
    distinct = {frozenset(seed_fragments(key)) for key in keys}
    counts = {"private keys searched": len(distinct)}
    # The search finds the keys where they are in plaintext: in the export and the output with --show-secrets
    # (state: the CAs and the root; the Secret's stringData and data, base64). No output holds a key, and with
    # derived host keys no resource keeps a static instance's key: the root and the CA stand for them.
    counts["export --show-secrets"] = shown = key_material(revealed.stdout, keys)
    counts["stack output --show-secrets"] = shown_output = key_material(revealed_output.stdout, keys)
    assert shown >= len(distinct) and shown_output == 0, (shown, shown_output)
    for where, text in {
        "stack export": exported.stdout,
        "up output": "".join(world.logs),
        "stack output": output.stdout,
    }.items():
        counts[where] = found = key_material(text, keys)
        assert found == 0, f"{found} pieces of private keys in plaintext in the {where}"
    # Every place a private key is stored is a secret in the export.
    deployment = json.loads(exported.stdout)["deployment"]
    for resource in deployment["resources"]:
        if resource["type"] in (HOST_CA_TYPE, HOST_KEY_ROOT_TYPE):
            assert resource["outputs"]["privateKey"].get(SIG_KEY) == ENCRYPTED_SIG, resource["urn"]
        if resource["type"] == SECRET_TYPE:
            for field in ("data", "stringData"):
                for where in ("inputs", "outputs"):
                    value = resource[where].get(field)
                    assert value is None or value.get(SIG_KEY) == ENCRYPTED_SIG, (resource["urn"], where, field)
    assert "hostIdentities" not in json.loads(output.stdout)
    return counts
