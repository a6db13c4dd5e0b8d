"""`PangolinClient` against the emulator: dialects, pagination, error mapping, sites and domains."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from providers.pangolin import (
    PangolinAuthError,
    PangolinClient,
    PangolinNotFound,
    PangolinTransportError,
    PangolinValidationError,
)

from .conftest import FAST, count, next_port, unique_name

if TYPE_CHECKING:
    from pangolin_emulator.harness import EmulatorHandle

pytestmark = pytest.mark.provider


def _make(client: PangolinClient, org_id: str, count: int, prefix: str) -> set[int]:
    return {
        client.create_resource(org_id, name=f"{prefix}-{i:02}", protocol="tcp", proxy_port=next_port()).resourceId
        for i in range(count)
    }


def test_lists_every_resource_across_pages(emulator: EmulatorHandle) -> None:
    with PangolinClient(emulator.url, emulator.api_key, page_size=7, **FAST) as client:
        made = _make(client, emulator.org_id, 23, unique_name("page"))
        emulator.reset_counters()
        listed = {r.resourceId for r in client.list_all_resources(emulator.org_id)}
    assert made <= listed
    assert count(emulator, "GET /v1/org/{orgId}/resources") == -(-len(listed) // 7)


def test_default_page_size_lists_more_than_twenty(client: PangolinClient, emulator: EmulatorHandle) -> None:
    made = _make(client, emulator.org_id, 21, unique_name("many"))
    listed = client.list_all_resources(emulator.org_id)
    assert made <= {r.resourceId for r in listed}
    assert len({r.resourceId for r in listed}) == len(listed)


def test_lists_by_offset_on_1_15(start_emulator: Callable[..., EmulatorHandle]) -> None:
    old = start_emulator(version="1.15.0")
    with PangolinClient(old.url, old.api_key, **FAST) as client:
        made = _make(client, old.org_id, 25, "old")
        listed = client.list_all_resources(old.org_id)
    assert {r.resourceId for r in listed} == made


def test_lists_targets_by_limit_and_offset(emulator: EmulatorHandle) -> None:
    with PangolinClient(emulator.url, emulator.api_key, page_size=2, **FAST) as client:
        resource = client.create_resource(emulator.org_id, name=unique_name(), protocol="tcp", proxy_port=next_port())
        made = {
            client.create_target(resource.resourceId, site_id=emulator.site_id, ip="10.0.0.1", port=port).targetId
            for port in (22, 23, 24, 25, 26)
        }
        listed = client.list_targets(resource.resourceId)
    assert {t.targetId for t in listed} == made
    assert all(t.siteId == emulator.site_id and t.ip == "10.0.0.1" for t in listed)


def test_reads_both_response_shapes(client: PangolinClient, emulator: EmulatorHandle, version: str) -> None:
    created = client.create_resource(emulator.org_id, name=unique_name(), protocol="udp", proxy_port=next_port())
    fetched = client.get_resource(created.resourceId)
    listed = next(r for r in client.list_all_resources(emulator.org_id) if r.resourceId == created.resourceId)
    for resource in (created, fetched, listed):
        assert resource.raw_protocol == "udp"
        assert resource.proxyPort == created.proxyPort
    if version == "1.18.4":
        assert (fetched.http, fetched.protocol, fetched.mode) == (False, "udp", None)
    else:
        assert (fetched.http, fetched.mode) == (None, "udp")


def test_auto_dialect_falls_back_to_legacy_on_1_18_once(
    start_emulator: Callable[..., EmulatorHandle], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Forget what earlier tests learned: a stopped emulator's port may be reused.
    monkeypatch.setattr("providers.pangolin.client._learned_dialects", {})
    server = start_emulator(version="1.18.4")
    with PangolinClient(server.url, server.api_key, **FAST) as client:
        client.create_resource(server.org_id, name="first", protocol="tcp", proxy_port=next_port())
        assert count(server, "PUT /v1/org/{orgId}/resource") == 2  # `mode` refused, legacy accepted
        server.reset_counters()
    with PangolinClient(server.url, server.api_key, **FAST) as client:  # remembered per base URL
        client.create_resource(server.org_id, name="second", protocol="tcp", proxy_port=next_port())
    assert count(server, "PUT /v1/org/{orgId}/resource") == 1


def test_explicit_dialects(emulator: EmulatorHandle, version: str) -> None:
    with PangolinClient(emulator.url, emulator.api_key, dialect="legacy", **FAST) as client:
        legacy = client.create_resource(emulator.org_id, name=unique_name(), protocol="tcp", proxy_port=next_port())
    assert legacy.raw_protocol == "tcp"
    with PangolinClient(emulator.url, emulator.api_key, dialect="mode", **FAST) as client:
        if version == "1.18.4":
            with pytest.raises(PangolinValidationError, match="http field is required"):
                client.create_resource(emulator.org_id, name=unique_name(), protocol="tcp", proxy_port=next_port())
        else:
            created = client.create_resource(
                emulator.org_id, name=unique_name(), protocol="tcp", proxy_port=next_port()
            )
            assert created.mode == "tcp"


def test_update_sends_only_what_changes(client: PangolinClient, emulator: EmulatorHandle) -> None:
    created = client.create_resource(emulator.org_id, name=unique_name(), protocol="tcp", proxy_port=next_port())
    port = next_port()
    updated = client.update_resource(created.resourceId, proxy_port=port)
    assert (updated.name, updated.proxyPort, updated.enabled) == (created.name, port, True)
    disabled = client.update_resource(created.resourceId, enabled=False)
    assert (disabled.proxyPort, disabled.enabled) == (port, False)


def test_errors_map_onto_the_tree(client: PangolinClient, emulator: EmulatorHandle) -> None:
    with pytest.raises(PangolinNotFound) as missing:
        client.get_resource(987654)
    assert missing.value.status == 404
    assert missing.value.call == "GET /resource/{resourceId}"
    assert "987654" in (missing.value.server_message or "")
    assert "GET /resource/{resourceId}" in str(missing.value)

    created = client.create_resource(emulator.org_id, name=unique_name(), protocol="tcp", proxy_port=next_port())
    client.delete_resource(created.resourceId)
    with pytest.raises(PangolinNotFound, match=f"Resource with ID {created.resourceId} not found"):
        client.delete_resource(created.resourceId)

    with pytest.raises(PangolinNotFound):
        client.create_target(created.resourceId, site_id=emulator.site_id, ip="10.0.0.1", port=22)


def test_wrong_key_is_an_auth_error_without_the_key(emulator: EmulatorHandle) -> None:
    key_id = emulator.api_key.split(".")[0]
    wrong = f"{key_id}.{'x' * 40}"
    with PangolinClient(emulator.url, wrong, **FAST) as client, pytest.raises(PangolinAuthError) as raised:
        client.get_resource(1)
    assert raised.value.status == 401
    assert wrong not in str(raised.value) and "x" * 40 not in repr(raised.value.args)


def test_unreachable_server_is_a_transport_error(emulator: EmulatorHandle) -> None:
    with (
        PangolinClient("http://127.0.0.1:9/v1", emulator.api_key, **FAST) as client,
        pytest.raises(PangolinTransportError) as raised,
    ):
        client.get_resource(1)
    assert raised.value.status is None
    assert emulator.api_key not in str(raised.value)
