"""The `SshHostCa` / `SshHostKeyRoot` providers' methods, called as the engine calls them (no engine, no processes)."""

from __future__ import annotations

import base64
from typing import Any

import dill
import pulumi
import pytest
from pulumi.runtime.rpc import UNKNOWN

from providers.host_identity import (
    SshHostCa,
    SshHostCaArgs,
    SshHostCaProvider,
    SshHostKeyProvider,
    SshHostKeyRoot,
    SshHostKeyRootProvider,
)
from ssh_gateway.core import host_identity as hi

from .conftest import RecordingMocks

pytestmark = pytest.mark.unit

CA = SshHostCaProvider()
ROOT = SshHostKeyRootProvider()


@pytest.fixture(scope="module")
def ca() -> dict[str, Any]:
    return dict(CA.create({"generation": 1.0}).outs or {})


@pytest.mark.parametrize("provider", [CA, ROOT], ids=["ca", "root"])
def test_check_names_the_generation(provider: SshHostCaProvider | SshHostKeyRootProvider) -> None:
    assert provider.check({}, {"generation": 2.0}).inputs["generation"] == 2
    [failure] = provider.check({}, {"generation": 1.5}).failures
    assert failure.property == "generation" and "1.5" in failure.reason and "whole number" in failure.reason
    assert provider.check({}, {"generation": UNKNOWN}).failures == []


def test_ca_create_and_diff(ca: dict[str, Any]) -> None:
    assert ca["publicKey"] == hi.public_key_of(ca["privateKey"])
    assert ca["fingerprint"] == hi.fingerprint(ca["publicKey"])
    same = CA.diff("id", ca, {"generation": 1, "__provider": "other"})
    assert not same.changes
    bumped = CA.diff("id", ca, {"generation": 2, "__provider": "other"})
    assert bumped.changes and bumped.replaces == ["generation"]
    assert CA.read("id", {**ca, "__provider": "x"}).outs == ca


def test_root_is_32_random_bytes_named_by_a_hash() -> None:
    first, second = ROOT.create({"generation": 1.0}), ROOT.create({"generation": 1.0})
    outs = dict(first.outs or {})
    assert outs["generation"] == 1 and len(base64.b64decode(outs["privateKey"])) == 32
    assert outs["privateKey"] != dict(second.outs or {})["privateKey"] and first.id != second.id
    assert outs["privateKey"] not in str(first.id)  # the id is public
    assert not ROOT.diff("id", outs, {"generation": 1, "__provider": "other"}).changes
    assert ROOT.diff("id", outs, {"generation": 2}).replaces == ["generation"]
    assert ROOT.read("id", {**outs, "__provider": "x"}).outs == outs


def test_stacks_made_before_derived_keys_can_delete_their_host_keys() -> None:
    # Their `SshHostKey` records name this class in `__provider`; the engine unpickles it to delete them.
    provider = dill.loads(dill.dumps(SshHostKeyProvider()))  # noqa: S301 - our own pickle
    assert provider.delete("SHA256:x", {"publicKey": "ssh-ed25519 AAAA", "__provider": "x"}) is None


def test_resources_register_with_their_type_tokens(mocks: RecordingMocks) -> None:
    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def program() -> pulumi.Output[Any]:
        authority = SshHostCa("host-ca", SshHostCaArgs(generation=3))
        root = SshHostKeyRoot("host-key-root", SshHostCaArgs(generation=1))
        return pulumi.Output.all(authority.urn, root.urn)

    program()
    (authority,) = mocks.of_type("pulumi-python:dynamic/ssh-gateway:SshHostCa")
    (root,) = mocks.of_type("pulumi-python:dynamic/ssh-gateway:SshHostKeyRoot")
    assert authority.inputs["generation"] == 3 and root.inputs["generation"] == 1
