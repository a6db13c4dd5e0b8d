"""`check` and `diff`, which never call Pangolin, and the provider's pickle round-trip."""

from __future__ import annotations

import base64
from typing import Any

import dill
import pulumi
import pytest
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime.rpc import UNKNOWN

from providers.pangolin import PangolinTcpProvider, PangolinTcpResource, PangolinTcpResourceArgs
from providers.pangolin.policy import DEFAULT_POLICY, HttpPolicy
from providers.pangolin.port_check import PortCheckProvider
from tests.mocks import RecordingMocks, unknown

from .conftest import configure

pytestmark = pytest.mark.provider

KEY = "abcdefghijklmno.thisisthesecretpartofthekey0123456789ab"

VALID: dict[str, Any] = {
    "apiUrl": "https://pangolin.example.com/v1/",
    "orgId": "acme",
    "siteId": 3,
    "name": "ssh-gpu-1",
    "proxyPort": 40001,
    "targetIp": "10.0.0.7",
    "targetPort": 30022,
}


def _state(**changes: Any) -> dict[str, Any]:
    result = PangolinTcpProvider().check({}, VALID)
    return {**result.inputs, "resourceId": 5, "targetId": 9, "niceId": "brave-otter", **changes}


def test_check_fills_defaults_and_normalises() -> None:
    news = {**VALID, "siteId": 3.0, "proxyPort": 40001.0, "targetPort": 30022.0, "resourceId": None, "__x": 1}
    result = PangolinTcpProvider().check({}, news)
    assert result.failures == []
    assert result.inputs == {
        **VALID,
        "apiUrl": "https://pangolin.example.com/v1",
        "protocol": "tcp",
        "enabled": True,
        "adoptResourceId": None,
    }
    assert all(type(result.inputs[k]) is int for k in ("siteId", "proxyPort", "targetPort"))


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("proxyPort", 70000, "1 to 65535"),
        ("proxyPort", 40001.5, "1 to 65535"),
        ("proxyPort", "40001", "1 to 65535"),
        ("targetPort", 0, "1 to 65535"),
        ("siteId", True, "positive integer"),
        ("protocol", "sctp", '"tcp" or "udp"'),
        ("name", "", "1 to 255"),
        ("name", "n" * 256, "1 to 255"),
        ("targetIp", "not a host!", "IPv4 or IPv6 address, or a hostname"),
        ("apiUrl", "ftp://pangolin", "http(s) URL"),
        ("enabled", "yes", "true or false"),
        ("adoptResourceId", -1, "positive integer"),
    ],
)
def test_check_failure_names_field_value_and_what_is_allowed(key: str, value: Any, allowed: str) -> None:
    [failure] = PangolinTcpProvider().check({}, {**VALID, key: value}).failures
    assert failure.property == key
    assert failure.reason.startswith(f"{key}={repr(value)[:50]}")
    assert allowed in failure.reason


def test_check_reports_every_missing_field() -> None:
    failures = PangolinTcpProvider().check({}, {}).failures
    assert {f.property for f in failures} == {
        "apiUrl",
        "orgId",
        "siteId",
        "name",
        "proxyPort",
        "targetIp",
        "targetPort",
    }
    assert all("is required" in f.reason for f in failures)


@pytest.mark.parametrize("unknown", [UNKNOWN, unknown()], ids=["sentinel", "Unknown"])
def test_check_lets_unknowns_through_in_preview(unknown: object) -> None:
    # The provider server hands check an Unknown instance (keep_unknowns), e.g. a new Service's nodePort.
    news = {**VALID, "proxyPort": unknown, "targetPort": unknown, "apiUrl": unknown}
    result = PangolinTcpProvider().check({}, news)
    assert result.failures == []
    assert (result.inputs["proxyPort"], result.inputs["targetPort"], result.inputs["apiUrl"]) == (unknown,) * 3
    assert PangolinTcpProvider().diff("5", _state(), result.inputs).changes is True


@pytest.mark.parametrize("host", ["10.0.0.7", "fd00::7", "node-1.cluster.local", "localhost"])
def test_check_accepts_addresses_and_hostnames(host: str) -> None:
    assert PangolinTcpProvider().check({}, {**VALID, "targetIp": host}).failures == []


def test_diff_ignores_provider_outputs_and_float_noise() -> None:
    olds = {**_state(proxyPort=40001.0, siteId=3.0), "__provider": "old-pickle"}
    news = {**PangolinTcpProvider().check({}, VALID).inputs, "__provider": "new-pickle"}
    result = PangolinTcpProvider().diff("5", olds, news)
    assert result.changes is False


@pytest.mark.parametrize("key", ["name", "enabled", "siteId", "targetIp", "targetPort"])
def test_diff_updates_in_place(key: str) -> None:
    new_value = {"name": "other", "enabled": False, "targetIp": "10.0.0.8"}.get(key, 4)
    news = {**PangolinTcpProvider().check({}, VALID).inputs, key: new_value}
    result = PangolinTcpProvider().diff("5", _state(), news)
    assert (result.changes, result.replaces) == (True, [])


@pytest.mark.parametrize(
    ("key", "value"),
    [("protocol", "udp"), ("orgId", "other"), ("apiUrl", "https://other.example.com/v1"), ("proxyPort", 40002)],
)
def test_diff_replaces_what_pangolin_cannot_change_or_a_new_claim_deleting_first(key: str, value: str) -> None:
    news = {**PangolinTcpProvider().check({}, VALID).inputs, key: value}
    result = PangolinTcpProvider().diff("5", _state(), news)
    assert (result.changes, result.replaces, result.delete_before_replace) == (True, [key], True)


def test_diff_replaces_to_enable_again_since_that_claims_the_port_anew() -> None:
    news = PangolinTcpProvider().check({}, VALID).inputs
    result = PangolinTcpProvider().diff("5", _state(enabled=False), news)
    assert (result.changes, result.replaces, result.delete_before_replace) == (True, ["enabled"], True)


def test_diff_counts_unknown_as_changed() -> None:
    news = {**PangolinTcpProvider().check({}, VALID).inputs, "proxyPort": UNKNOWN}
    assert PangolinTcpProvider().diff("5", _state(), news).changes is True


def test_diff_ignores_adopt_resource_id() -> None:
    news = {**PangolinTcpProvider().check({}, VALID).inputs, "adoptResourceId": 5}
    assert PangolinTcpProvider().diff("5", _state(), news).changes is False


def test_pickle_round_trip_never_carries_the_key() -> None:
    policy = HttpPolicy(read_timeout=3.0)
    provider = configure(PangolinTcpProvider(policy=policy), KEY)
    serialized = serialize_provider(provider)
    raw = base64.b64decode(serialized)
    for fragment in (KEY, KEY.split(".")[1], KEY.split(".")[1][:16]):
        assert fragment.encode() not in raw
    restored = dill.loads(raw)  # noqa: S301 - the pickle we just made
    assert type(restored) is PangolinTcpProvider
    assert restored._api_key is None and restored._policy == policy
    assert provider._api_key == KEY  # pickling did not unconfigure the original
    assert serialize_provider(restored) == serialized  # deterministic: no spurious __provider diffs


def test_the_default_provider_pickles_to_its_class_name_only() -> None:
    # Stored twice per instance (inputs and outputs) and rewritten at every checkpoint: the defaults live on the
    # class, so the pickle carries no copy of them.
    serialized = serialize_provider(PangolinTcpProvider())
    assert len(serialized) <= 100, len(serialized)
    restored = dill.loads(base64.b64decode(serialized))  # noqa: S301 - the pickle we just made
    assert (restored._policy, restored._dialect) == (DEFAULT_POLICY, "auto")
    assert len(serialize_provider(PortCheckProvider())) <= 100


def test_resource_type_token_and_secret_flag() -> None:
    assert PangolinTcpResource._resource_type_name == "dynamic/pangolin:TcpResource"
    assert PangolinTcpProvider.serialize_as_secret_always is False


def test_resource_registers_camel_case_props_and_exposes_snake_case_outputs() -> None:
    recorder = RecordingMocks()
    pulumi.runtime.set_mocks(recorder, project="ssh-gateway", stack="test", preview=False)
    args = PangolinTcpResourceArgs(
        api_url="https://pangolin.example.com/v1",
        org_id="acme",
        site_id=3,
        name="ssh-gpu-1",
        proxy_port=40001,
        target_ip="10.0.0.7",
        target_port=30022,
    )

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def check() -> pulumi.Output[Any]:
        resource = PangolinTcpResource("ssh-gpu-1", args)

        def verify(values: list[Any]) -> None:
            [registered] = recorder.registered
            assert registered.typ == "pulumi-python:dynamic/pangolin:TcpResource"
            assert {k: v for k, v in registered.inputs.items() if k != "__provider"} == {
                "apiUrl": "https://pangolin.example.com/v1",
                "orgId": "acme",
                "siteId": 3,
                "name": "ssh-gpu-1",
                "protocol": "tcp",
                "proxyPort": 40001,
                "enabled": True,
                "targetIp": "10.0.0.7",
                "targetPort": 30022,
            }
            assert values == [7, 9, "calm-otter", 40001]

        return pulumi.Output.all(resource.resource_id, resource.target_id, resource.nice_id, resource.proxy_port).apply(
            verify
        )

    check()


def test_check_keeps_adopt_resource_id_of_a_resource_that_exists() -> None:
    # The program's listing finds every resource of the stack, its own included: no change once it exists.
    provider = PangolinTcpProvider()
    created = provider.check({}, {**VALID, "adoptResourceId": 5}).inputs
    assert created["adoptResourceId"] == 5
    olds = provider.check({}, VALID).inputs
    assert provider.check(olds, {**VALID, "adoptResourceId": 5}).inputs["adoptResourceId"] is None
