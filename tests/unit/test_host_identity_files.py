"""`ssh-gateway host-identity`: an instance's files derived from a stack's settings and its exported state."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from providers.host_identity import SshHostCaProvider, SshHostKeyRootProvider
from ssh_gateway.core import host_identity as hi
from ssh_gateway.core.names import HOST_CA_TYPE, HOST_KEY_ROOT_TYPE
from ssh_gateway.core.settings import parse_settings
from ssh_gateway.ops.tools.host_identity_files import (
    HostIdentityFilesError,
    InstanceRefused,
    identity_files,
    write_files,
)
from tests.host_keys import checked_secret_files

pytestmark = pytest.mark.unit

NOW = 1_800_000_000
SIG = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270"}


def _settings(**overrides: Any) -> Any:
    raw: dict[str, Any] = {
        "pangolin": {"url": "https://pangolin.example.com/v1", "orgId": "acme", "siteId": 3},
        "ports": {"range": "40000-40099"},
        "gateway": {"hostTemplate": "ssh-{instance}.example.com"},
        "instances": [
            {"name": "vm-01", "target": "static", "staticHost": "10.1.2.3", "staticPort": 22},
            {"name": "vm-02", "target": "static", "staticHost": "10.1.2.4", "staticPort": 22, "hostKeyGeneration": 2},
        ],
        **overrides,
    }
    return parse_settings(raw)


def _secret(value: str) -> dict[str, str]:
    """A secret output as `pulumi stack export --show-secrets` prints it."""
    return {**SIG, "plaintext": json.dumps(value)}


def _record(typ: str, name: str, outputs: dict[str, Any]) -> dict[str, Any]:
    return {"type": typ, "urn": f"urn:pulumi:dev::ssh-gateway::{typ}::{name}", "outputs": outputs}


@pytest.fixture(scope="module")
def state() -> dict[str, Any]:
    ca = dict(SshHostCaProvider().create({"generation": 1}).outs or {})
    root = dict(SshHostKeyRootProvider().create({"generation": 1}).outs or {})
    resources = [
        _record(HOST_CA_TYPE, "host-ca-g1", {**ca, "privateKey": _secret(ca["privateKey"])}),
        _record(HOST_KEY_ROOT_TYPE, "host-key-root", {**root, "privateKey": _secret(root["privateKey"])}),
    ]
    return {"deployment": {"resources": resources}, "ca": ca, "root": root}


def _files(state: dict[str, Any], instance: str = "vm-01", **overrides: Any) -> dict[str, str]:
    return identity_files(_settings(**overrides), state, instance, project="ssh-gateway", stack="dev", now=NOW)


def test_the_files_belong_together_and_carry_the_certificate_the_settings_say(state: dict[str, Any]) -> None:
    files = _files(state)
    assert sorted(files) == sorted(hi.SECRET_KEYS)
    public = files[hi.HOST_PUBLIC_KEY_FILE].strip()
    certificate = files[hi.HOST_CERTIFICATE_FILE].strip()
    assert (
        checked_secret_files(private_key=files[hi.HOST_KEY_FILE], public_key=public, certificate=certificate) == files
    )
    verified = hi.verify_host_certificate(
        certificate, ca_public_keys=[state["ca"]["publicKey"]], principal="ssh-vm-01.example.com", now=NOW
    )
    assert verified.principals == ("ssh-vm-01", "ssh-vm-01.example.com")
    assert verified.key_id == "ssh-gateway/dev/vm-01"
    # Derived: the same bytes on every call; another instance or generation, another key.
    assert _files(state) == files
    other = _files(state, "vm-02")[hi.HOST_PUBLIC_KEY_FILE]
    assert other != files[hi.HOST_PUBLIC_KEY_FILE]


def test_an_unknown_or_pinned_instance_is_refused_by_name(state: dict[str, Any]) -> None:
    with pytest.raises(
        InstanceRefused, match=r"^--instance 'vm-9': stack dev has no such instance \(it has: vm-01, vm-02\)$"
    ):
        _files(state, "vm-9")
    pinned = hi.generate_key_pair().public_key
    instances = [{"name": "vm-01", "target": "static", "staticHost": "10.1.2.3", "staticPort": 22, "hostKey": pinned}]
    with pytest.raises(InstanceRefused, match="issues it no host key"):
        _files(state, instances=instances)
    with pytest.raises(InstanceRefused, match="issues it no host key"):
        _files(state, hostIdentity={"enabled": False})


def test_a_stack_never_brought_up_or_a_ca_not_in_state_names_the_resource(state: dict[str, Any]) -> None:
    with pytest.raises(HostIdentityFilesError, match=r"stack dev has no resource 'host-key-root' in its state"):
        identity_files(_settings(), {"deployment": {}}, "vm-01", project="ssh-gateway", stack="dev", now=NOW)
    # A signer the last `up` did not make yet (the config was edited since).
    with pytest.raises(HostIdentityFilesError, match=r"no resource 'host-ca-g2'"):
        _files(state, hostIdentity={"ca": {"generations": [1, 2], "signing": 2}})


def test_no_message_quotes_a_secret(state: dict[str, Any]) -> None:
    # A root that is not a seed: the error names it, never shows it.
    broken = json.loads(json.dumps(state))
    root = "bm90IGEgc2VlZCBidXQgc2VjcmV0"
    broken["deployment"]["resources"][1]["outputs"]["privateKey"] = _secret(root)
    with pytest.raises(HostIdentityFilesError) as raised:
        _files(broken)
    assert "host-key root" in str(raised.value) and root not in str(raised.value)


def test_the_files_are_written_0600_and_replaced_whole(state: dict[str, Any], tmp_path: Path) -> None:
    target = tmp_path / "etc" / "ssh-gateway"
    files = _files(state)
    written = write_files(target, files)
    assert sorted(p.name for p in written) == sorted(files)
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text() == files[path.name]
    # A second run (after a rotation) replaces each file; nothing else is left in the directory.
    rotated = _files(state, "vm-02")
    write_files(target, rotated)
    assert {p.name: p.read_text() for p in target.iterdir()} == rotated
