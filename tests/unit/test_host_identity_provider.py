"""The `SshHostCa` / `SshHostKey` providers' methods, called as the engine calls them (no engine, no processes)."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
from pulumi.output import UNKNOWN as UNKNOWN_VALUE
from pulumi.runtime.rpc import UNKNOWN

from providers.host_identity import (
    DEFAULT_VALID_DAYS,
    SshHostCa,
    SshHostCaArgs,
    SshHostCaProvider,
    SshHostKey,
    SshHostKeyArgs,
    SshHostKeyProvider,
)
from ssh_gateway.core import host_identity as hi

from .conftest import RecordingMocks

pytestmark = pytest.mark.unit

CA = SshHostCaProvider()
KEY = SshHostKeyProvider()


@pytest.fixture(scope="module")
def ca() -> dict[str, Any]:
    return dict(CA.create({"generation": 1.0}).outs or {})


def _key_inputs(ca: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    news = {
        "principals": ["SSH-gpu-alice.example.com", "ssh-gpu-alice"],
        "validDays": 30.0,
        "keyId": "dev/gpu-alice",
        "caPublicKey": ca["publicKey"],
        "caPrivateKey": hi.private_seed(ca["privateKey"]),  # what SshHostKey sends: the CA key's seed
        "generation": 1.0,
        "__provider": "pickled-provider",
    }
    news.update(overrides)
    return news


def _checked(news: dict[str, Any]) -> dict[str, Any]:
    result = KEY.check({}, news)
    assert result.failures == []
    return result.inputs


def _created(ca: dict[str, Any], **overrides: Any) -> tuple[str, dict[str, Any]]:
    result = KEY.create(_checked(_key_inputs(ca, **overrides)))
    return str(result.id), dict(result.outs or {})


# --- check ----------------------------------------------------------------------------------------------------


def test_check_normalises(ca: dict[str, Any]) -> None:
    inputs = _checked(_key_inputs(ca))
    assert inputs["principals"] == ["ssh-gpu-alice", "ssh-gpu-alice.example.com"]
    assert (inputs["validDays"], inputs["generation"]) == (30, 1)
    assert inputs["__provider"] == "pickled-provider"


@pytest.mark.parametrize(
    ("overrides", "prop", "reason"),
    [
        ({"principals": []}, "principals", "principals is empty"),
        ({"principals": ["*.example.com"]}, "principals", "is not a host name or address"),
        ({"principals": "ssh-a"}, "principals", "expected a list of host names"),
        ({"validDays": 0}, "validDays", "validDays=0 is not allowed: expected a whole number from 1 to 3650"),
        ({"validDays": 2.5}, "validDays", "validDays=2.5 is not allowed"),
        ({"validDays": True}, "validDays", "validDays=True is not allowed"),
        ({"generation": -1}, "generation", "generation=-1 is not allowed"),
        ({"generation": "2"}, "generation", "generation='2' is not allowed"),
        ({"keyId": ""}, "keyId", "keyId='' is not allowed"),
        ({"caPublicKey": "ssh-rsa AAAA"}, "caPublicKey", "caPublicKey='ssh-rsa AAAA' is not an OpenSSH Ed25519"),
        ({"validDays": None}, "validDays", "validDays is required"),
    ],
)
def test_check_names_the_property(ca: dict[str, Any], overrides: dict[str, Any], prop: str, reason: str) -> None:
    failures = KEY.check({}, _key_inputs(ca, **overrides)).failures
    assert [(f.property, reason in f.reason) for f in failures] == [(prop, True)], failures


def test_check_never_shows_a_private_key(ca: dict[str, Any]) -> None:
    other = hi.generate_key_pair()
    other_seed = hi.private_seed(other.private_key)
    mismatched = KEY.check({}, _key_inputs(ca, caPrivateKey=other_seed)).failures
    broken = KEY.check({}, _key_inputs(ca, caPrivateKey=other_seed[:-4])).failures
    a_file = KEY.check({}, _key_inputs(ca, caPrivateKey=other.private_key)).failures
    # No property named: the engine would print the secret value beside it. The reason names it instead.
    assert [f.property for f in mismatched + broken + a_file] == [""] * 3
    assert all(f.reason.startswith("caPrivateKey ") for f in mismatched + broken + a_file)
    assert "not the private half of caPublicKey" in mismatched[0].reason
    assert "is not a 32-byte Ed25519 seed in base64" in broken[0].reason and a_file[0].reason == broken[0].reason
    for failure in mismatched + broken + a_file:
        assert "PRIVATE KEY" not in failure.reason and other_seed[:-4] not in failure.reason


@pytest.mark.parametrize("unknown", [UNKNOWN_VALUE, UNKNOWN], ids=["Unknown instance", "wire sentinel"])
def test_check_skips_unknowns_in_preview(ca: dict[str, Any], unknown: object) -> None:
    # Before the CA exists (first preview) its keys are unknown; a principal may be computed too. The provider
    # server hands check an `Unknown` instance (what a real preview sends, see test_host_identity_pulumi.py).
    news = _key_inputs(ca, caPublicKey=unknown, caPrivateKey=unknown, principals=["ssh-a.example.com", unknown])
    result = KEY.check({}, news)
    assert result.failures == []
    assert result.inputs["caPrivateKey"] is unknown and result.inputs["principals"][1] is unknown
    _, outs = _created(ca)
    diff = KEY.diff("id", outs, {**_checked(_key_inputs(ca)), "caPublicKey": unknown})
    assert diff.changes and diff.replaces == []


def test_ca_check() -> None:
    assert CA.check({}, {"generation": 2.0}).inputs["generation"] == 2
    assert [f.property for f in CA.check({}, {"generation": 1.5}).failures] == ["generation"]
    assert CA.check({}, {"generation": UNKNOWN}).failures == []


# --- create, diff, update, read ---------------------------------------------------------------------------------


def test_ca_create_and_diff(ca: dict[str, Any]) -> None:
    assert ca["publicKey"] == hi.public_key_of(ca["privateKey"])
    assert ca["fingerprint"] == hi.fingerprint(ca["publicKey"])
    same = CA.diff("id", ca, {"generation": 1, "__provider": "other"})
    assert not same.changes
    bumped = CA.diff("id", ca, {"generation": 2, "__provider": "other"})
    assert bumped.changes and bumped.replaces == ["generation"]
    assert CA.read("id", {**ca, "__provider": "x"}).outs == ca


def test_key_create_issues_a_certificate(ca: dict[str, Any]) -> None:
    id_, outs = _created(ca)
    assert id_ == outs["fingerprint"] == hi.fingerprint(outs["publicKey"])
    assert hi.public_key_of(outs["privateKey"]) == outs["publicKey"]
    assert "caPrivateKey" not in outs, "the CA's secret must not be copied into the host key's outputs"
    parsed = hi.verify_host_certificate(
        outs["certificate"], ca_public_keys=[ca["publicKey"]], principal="ssh-gpu-alice.example.com"
    )
    assert parsed.public_key == outs["publicKey"] and parsed.serial == outs["serial"]
    assert (parsed.valid_after, parsed.valid_before) == (outs["validAfter"], outs["validBefore"])
    assert parsed.key_id == "dev/gpu-alice" and outs["caFingerprint"] == ca["fingerprint"]


def test_key_diff_replaces_only_for_generation(ca: dict[str, Any]) -> None:
    _, outs = _created(ca)
    assert not KEY.diff("id", outs, _checked(_key_inputs(ca, __provider="changed-by-an-upgrade"))).changes
    bumped = KEY.diff("id", outs, _checked(_key_inputs(ca, generation=2)))
    assert bumped.changes and bumped.replaces == ["generation"]
    for overrides in (
        {"principals": ["ssh-gpu-alice.example.com"]},
        {"validDays": 60},
        {"keyId": "renamed"},
        {"caPublicKey": UNKNOWN, "caPrivateKey": UNKNOWN},
    ):
        reissue = KEY.diff("id", outs, _checked(_key_inputs(ca, **overrides)))
        assert reissue.changes and reissue.replaces == [], overrides


def test_key_update_reissues_and_keeps_the_key(ca: dict[str, Any]) -> None:
    _, outs = _created(ca)
    other_ca = dict(CA.create({"generation": 2}).outs or {})
    news = _checked(_key_inputs(other_ca, principals=["ssh-gpu-alice.example.com", "ssh-gpu-alice.example.org"]))
    updated = dict(KEY.update("id", outs, news).outs or {})
    for kept in ("publicKey", "privateKey", "fingerprint"):
        assert updated[kept] == outs[kept]
    assert updated["certificate"] != outs["certificate"]
    parsed = hi.verify_host_certificate(
        updated["certificate"], ca_public_keys=[other_ca["publicKey"]], principal="ssh-gpu-alice.example.org"
    )
    assert parsed.public_key == outs["publicKey"]
    assert updated["principals"] == ["ssh-gpu-alice.example.com", "ssh-gpu-alice.example.org"]
    assert updated["caFingerprint"] == other_ca["fingerprint"]
    # The diff after the update sees nothing more to do.
    assert not KEY.diff("id", updated, news).changes


def test_key_renewal_is_an_update_when_a_third_is_left(ca: dict[str, Any]) -> None:
    _, outs = _created(ca)
    news = _checked(_key_inputs(ca))
    span = outs["validBefore"] - outs["validAfter"]
    aging = {**outs, "validAfter": outs["validAfter"] - span * 0.7, "validBefore": outs["validBefore"] - span * 0.7}
    renew = KEY.diff("id", aging, news)
    assert renew.changes and renew.replaces == []


def test_key_read_returns_the_stored_state(ca: dict[str, Any]) -> None:
    id_, outs = _created(ca)
    result = KEY.read(id_, {**outs, "__provider": "x"})
    assert (result.id, result.outs, result.inputs) == (id_, outs, None)


# --- registration -----------------------------------------------------------------------------------------------


def test_resources_register_with_their_type_tokens(mocks: RecordingMocks) -> None:
    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def program() -> pulumi.Output[Any]:
        authority = SshHostCa("host-ca", SshHostCaArgs(generation=3))
        key = SshHostKey(
            "gpu-alice-host-key",
            SshHostKeyArgs(
                principals=["ssh-gpu-alice.example.com"],
                ca_private_key=authority.private_key,
                ca_public_key=authority.public_key,
            ),
        )
        return pulumi.Output.all(authority.urn, key.urn)

    program()
    (authority,) = mocks.of_type("pulumi-python:dynamic/ssh-gateway:SshHostCa")
    (key,) = mocks.of_type("pulumi-python:dynamic/ssh-gateway:SshHostKey")
    assert authority.inputs["generation"] == 3
    assert key.inputs["keyId"] == "gpu-alice-host-key" and key.inputs["validDays"] == DEFAULT_VALID_DAYS
    assert key.inputs["generation"] == 1 and key.inputs["principals"] == ["ssh-gpu-alice.example.com"]
