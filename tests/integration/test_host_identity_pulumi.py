"""`SshHostCa`, `SshHostKeyRoot` and the derived host identities through the real pulumi CLI (project
host_identity_project/): keys that never change on their own, certificates that follow their names and CA,
rotation of one instance and of the CA with overlap, no resource per host, and no plaintext private key in
`pulumi stack export`, the state file or the engine's output.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto
from pulumi.automation import OpType

from ssh_gateway.core import host_identity as hi
from ssh_gateway.local.sshd import ClientKey, ensure_client_keypair
from ssh_gateway.local.sshd_identity import IdentitySshd, mount_secret
from ssh_gateway.ops.shared.automation import open_stack, remove_stack, state_file
from ssh_gateway.plumbing.loopback import free_port
from tests.host_keys import checked_secret_files, key_pair_from_private_seed

from .cli import pulumi
from .secret_scan import key_material, seed_fragments
from .strict_ssh import GREETING, strict_ssh

pytestmark = pytest.mark.integration

PROJECT = Path(__file__).parent / "host_identity_project"
NAMESPACE = "host-identity-test"
CA_TYPE = "pulumi-python:dynamic/ssh-gateway:SshHostCa"
ROOT_TYPE = "pulumi-python:dynamic/ssh-gateway:SshHostKeyRoot"
# How a checkpoint marks an encrypted value: {SIG_KEY: ENCRYPTED_SIG, "ciphertext": ...} (Pulumi's `sig` package).
SIG_KEY = "4dabf18193072939515e22adb298388d"
ENCRYPTED_SIG = "1b47061264138c4ac30d75fd1eb44270"


def principals(instance: str, *extra: str) -> list[str]:
    return [f"ssh-{instance}.example.test", f"ssh-{instance}", *extra]


class Identities:
    """The project's stack, its config, and what an `up` made of it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ca_generations = [1]
        self.signing = 1
        self.hosts: dict[str, dict[str, Any]] = {
            "gpu-alice": {"principals": principals("gpu-alice"), "generation": 1},
            "gpu-bob": {"principals": principals("gpu-bob"), "generation": 1},
        }
        self.logs: list[str] = []
        self.stack = self._configure()

    def _configure(self) -> auto.Stack:
        config = {
            f"{NAMESPACE}:caGenerations": self.ca_generations,
            f"{NAMESPACE}:signingGeneration": self.signing,
            f"{NAMESPACE}:hosts": self.hosts,
            f"{NAMESPACE}:validDays": 30,
        }
        return open_stack(self.name, config, work_dir=PROJECT)

    def up(self) -> dict[str, int]:
        """`pulumi up` with the current config; the counts of what it did."""
        self.stack = self._configure()
        # --diff: the engine output then shows every changed property, which the leak check reads too.
        result = self.stack.up(on_output=self.logs.append, diff=True)
        return {OpType(op).value: count for op, count in (result.summary.resource_changes or {}).items()}

    def outputs(self) -> dict[str, Any]:
        return {key: value.value for key, value in self.stack.outputs().items()}

    def resources(self) -> list[dict[str, Any]]:
        """The state with secrets decrypted (Automation's export is `--show-secrets`)."""
        deployment = self.stack.export_stack().deployment
        assert deployment is not None
        return list(deployment["resources"])

    def private_keys(self) -> dict[str, str]:
        """Every private key in state, decrypted: resource or host name -> key file (the root as the key file of
        its seed, whose seed fragments are the root's)."""
        keys = {
            r["urn"].rsplit("::", 1)[1]: _revealed(r["outputs"]["privateKey"])
            for r in self.resources()
            if r["type"] in (CA_TYPE, ROOT_TYPE)
        }
        keys["host-key-root"] = key_pair_from_private_seed(keys["host-key-root"]).private_key
        return keys | {f"{name}-host-key": key for name, key in self.outputs()["privateKeys"].items()}


def _revealed(value: Any) -> str:
    """A secret as `--show-secrets` exports it: {SIG_KEY: ENCRYPTED_SIG, "plaintext": <JSON text>}."""
    assert isinstance(value, dict) and value.get(SIG_KEY) == ENCRYPTED_SIG, "expected a secret"
    return str(json.loads(value["plaintext"]))


@pytest.fixture
def identities() -> Iterator[Identities]:
    made = Identities(f"hi-{uuid.uuid4().hex[:8]}")
    try:
        yield made
    finally:
        try:
            made.stack.destroy()
        finally:
            remove_stack(made.stack)


def assert_no_plaintext_private_key(identities: Identities) -> dict[str, int]:
    """`pulumi stack export` (no --show-secrets), the state file and the engine's output hold no private key
    in plaintext; every private key and the CA key input are secrets. Returns what was counted."""
    keys = identities.private_keys()
    assert keys, "no private keys in state to look for"
    exported = pulumi("stack", "export", "--stack", identities.name, cwd=PROJECT)
    assert exported.returncode == 0, exported.stderr
    texts = {
        "stack export": exported.stdout,
        "state file": state_file(identities.stack).read_text(),
        "engine output": "".join(identities.logs),
    }
    fragments = set().union(*(seed_fragments(key) for key in keys.values()))
    counts = {"private keys in state": len(keys), "fragments searched": len(fragments)}

    # The search does find every key where it is in plaintext: in the export with --show-secrets.
    revealed = pulumi("stack", "export", "--show-secrets", "--stack", identities.name, cwd=PROJECT)
    counts["export --show-secrets: plaintext key material"] = shown = key_material(revealed.stdout, keys.values())
    missed = [name for name, key in keys.items() if key_material(revealed.stdout, [key]) == 0]
    assert shown >= len(keys) and not missed, (shown, missed)
    for where, text in texts.items():
        counts[f"{where}: plaintext key material"] = found = key_material(text, keys.values())
        assert found == 0, f"{found} pieces of private keys in plaintext in the {where}"
    deployment = json.loads(exported.stdout)["deployment"]
    secrets = 0
    for resource in deployment["resources"]:
        if resource["type"] in (CA_TYPE, ROOT_TYPE):
            assert resource["outputs"]["privateKey"].get(SIG_KEY) == ENCRYPTED_SIG, resource["urn"]
            secrets += 1
        if resource["type"] == "pulumi:pulumi:Stack":
            for key in resource["outputs"]["privateKeys"].values():
                assert key.get(SIG_KEY) == ENCRYPTED_SIG
                secrets += 1
    counts["secret key fields"] = secrets
    return counts


def serve_and_connect(tmp_path: Path, identities: Identities, instance: str) -> None:
    """Serves the instance's issued key and certificate from a Secret-shaped mount to real ssh, which trusts
    only the stack's knownHosts output."""
    outputs = identities.outputs()
    host = outputs["hosts"][instance]
    data = checked_secret_files(
        private_key=outputs["privateKeys"][instance],
        public_key=host["publicKey"],
        certificate=host["certificate"],
    )
    run = tmp_path / f"{instance}-{uuid.uuid4().hex[:6]}"
    client: ClientKey = ensure_client_keypair(tmp_path / "client" / "id_ed25519", "host-identity-pulumi")
    sshd = IdentitySshd(
        run / "sshd",
        mount_dir=mount_secret(run / "secret", data),
        port=free_port(),
        authorized_keys=[client.public_key],
    )
    sshd.start()
    try:
        known = outputs["knownHosts"].splitlines()
        result = strict_ssh(run, client, known, host=f"ssh-{instance}.example.test", port=sshd.port)
    finally:
        sshd.stop()
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == GREETING


def _ca_of(host: dict[str, Any]) -> str:
    return hi.fingerprint(hi.parse_host_certificate(host["certificate"]).ca_public_key)


def test_keys_stay_certificates_follow_and_nothing_leaks(identities: Identities, tmp_path: Path) -> None:
    # 0. A preview of a new stack: the stack, a CA and the root; nothing per host.
    preview = identities.stack.preview(on_output=identities.logs.append, diff=True)
    assert {OpType(op).value: n for op, n in preview.change_summary.items()} == {"create": 3}

    # 1. A CA, the root and two hosts' identities, each certified by the CA for its names.
    assert identities.up() == {"create": 3}
    first = identities.outputs()
    ca1 = first["caFingerprints"]["1"]
    for instance in ("gpu-alice", "gpu-bob"):
        issued = hi.parse_host_certificate(first["hosts"][instance]["certificate"])
        assert issued.principals == tuple(sorted(principals(instance)))
        assert hi.fingerprint(issued.ca_public_key) == ca1
        assert issued.public_key == first["hosts"][instance]["publicKey"]
    (ca_line,) = first["knownHosts"].splitlines()
    assert ca_line.startswith("@cert-authority ssh-*.example.test,[ssh-*.example.test]:* ssh-ed25519 ")
    serve_and_connect(tmp_path, identities, "gpu-alice")

    # 2. New principals: alice's certificate is re-issued, her key stays; bob is untouched; no resource changes.
    identities.hosts["gpu-alice"]["principals"] = principals("gpu-alice", "gpu-alice.connect.example.test")
    assert identities.up() == {"same": 3}
    second = identities.outputs()
    alice, alice_before = second["hosts"]["gpu-alice"], first["hosts"]["gpu-alice"]
    assert alice["fingerprint"] == alice_before["fingerprint"] and alice["publicKey"] == alice_before["publicKey"]
    assert alice["certificate"] != alice_before["certificate"]
    assert "gpu-alice.connect.example.test" in hi.parse_host_certificate(alice["certificate"]).principals
    assert second["hosts"]["gpu-bob"] == first["hosts"]["gpu-bob"]
    assert second["privateKeys"] == first["privateKeys"]  # byte for byte: the files are derived, not drawn

    # 3. Again, and after a refresh: nothing changes.
    assert identities.up() == {"same": 3}
    identities.stack.refresh(on_output=identities.logs.append)
    identities.stack.preview(expect_no_changes=True, on_output=identities.logs.append)
    assert identities.outputs() == second

    # 4. Rotating one instance: only bob's key changes.
    identities.hosts["gpu-bob"]["generation"] = 2
    assert identities.up() == {"same": 3}
    third = identities.outputs()
    assert third["hosts"]["gpu-bob"]["fingerprint"] != second["hosts"]["gpu-bob"]["fingerprint"]
    assert third["hosts"]["gpu-alice"] == second["hosts"]["gpu-alice"]

    # 5. CA rotation with overlap: publish generation 2 beside 1; then sign with 2; then retire 1.
    identities.ca_generations = [1, 2]
    assert identities.up() == {"create": 1, "same": 3}
    overlap = identities.outputs()
    assert len(overlap["knownHosts"].splitlines()) == 2 and overlap["hosts"] == third["hosts"]
    identities.signing = 2
    assert identities.up() == {"same": 4}
    switched = identities.outputs()
    ca2 = switched["caFingerprints"]["2"]
    for instance in ("gpu-alice", "gpu-bob"):
        now, before = switched["hosts"][instance], third["hosts"][instance]
        assert now["fingerprint"] == before["fingerprint"], "a CA rotation must not change any host key"
        assert _ca_of(now) == ca2 != ca1
    serve_and_connect(tmp_path, identities, "gpu-bob")  # both lines still published
    identities.ca_generations = [2]
    assert identities.up() == {"delete": 1, "same": 3}
    retired = identities.outputs()
    (only_line,) = retired["knownHosts"].splitlines()
    assert hi.fingerprint(" ".join(only_line.split()[2:4])) == ca2
    assert retired["hosts"] == switched["hosts"]
    serve_and_connect(tmp_path, identities, "gpu-alice")

    # 6. No private key in plaintext anywhere Pulumi writes.
    counts = assert_no_plaintext_private_key(identities)
    assert counts["private keys in state"] == 4  # CA g2, the root, alice's and bob's keys (in a stack output)
    assert counts["secret key fields"] == 4  # 2 privateKey outputs (CA, root) + each host's in the stack output
    print(f"export check: {counts}")
