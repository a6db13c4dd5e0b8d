"""`PangolinTcpProvider` methods called directly, against the emulator (1.18.4 and 1.22.0)."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from providers.pangolin import (
    PangolinClient,
    PangolinError,
    PangolinNotFound,
    PangolinTcpProvider,
    PangolinValidationError,
)
from providers.pangolin.ledger import READ_ONE_BY_ONE_AT_MOST

from .conftest import FAST, configure, inputs, lists, next_port, unique_name, writes

if TYPE_CHECKING:
    from pangolin_emulator.harness import EmulatorHandle

pytestmark = pytest.mark.provider


def _names(client: PangolinClient, org_id: str) -> dict[str, int]:
    return {r.name: r.resourceId for r in client.list_all_resources(org_id)}


def test_a_new_provider_lists_the_org_once_to_claim_a_port(
    provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle
) -> None:
    for _ in range(READ_ONE_BY_ONE_AT_MOST + 1):  # more resources than a new ledger reads one by one
        client.create_resource(emulator.org_id, name=unique_name(), protocol="tcp", proxy_port=next_port())
    emulator.reset_counters()

    provider.create(inputs(emulator))

    listed = lists(emulator.counters())
    pages = -(-len(client.list_all_resources(emulator.org_id)) // 100)
    assert listed == {"GET /v1/org/{orgId}/resources": pages}


def test_a_create_is_two_writes_and_a_read_of_each_resource_made_since_the_last(
    provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle
) -> None:
    props = inputs(emulator)
    provider.create(inputs(emulator))  # learn the server's dialect and the org's resources first
    emulator.reset_counters()

    result = provider.create(props)

    counters = emulator.counters()
    assert writes(counters) == {"PUT /v1/org/{orgId}/resource": 1, "PUT /v1/resource/{resourceId}/target": 1}
    assert lists(counters) == {}
    # Two resources someone else made in between: each is read once, and none is listed.
    others = [
        client.create_resource(emulator.org_id, name=unique_name(), protocol="tcp", proxy_port=next_port())
        for _ in range(2)
    ]
    emulator.reset_counters()
    provider.create(inputs(emulator))
    reads = {route: n for route, n in emulator.counters().items() if route.startswith("GET ")}
    assert reads == {"GET /v1/resource/{resourceId}": len(others)}
    assert result.outs is not None
    assert result.outs == {
        **props,
        "resourceId": int(result.id),
        "targetId": result.outs["targetId"],
        "niceId": result.outs["niceId"],
    }
    live = client.get_resource(int(result.id))
    assert (live.name, live.proxyPort, live.enabled, live.raw_protocol) == (
        props["name"],
        props["proxyPort"],
        True,
        "tcp",
    )
    [target] = client.list_targets(int(result.id))
    assert (target.targetId, target.siteId, target.ip, target.port) == (
        result.outs["targetId"],
        emulator.site_id,
        "10.20.30.40",
        22,
    )


def test_create_disabled_adds_one_update(
    provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle
) -> None:
    result = provider.create(inputs(emulator, enabled=False, protocol="udp"))
    live = client.get_resource(int(result.id))
    assert (live.enabled, live.raw_protocol) == (False, "udp")


def test_update_in_place(provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle) -> None:
    olds = provider.create(inputs(emulator)).outs
    assert olds is not None
    resource_id = str(olds["resourceId"])
    news = {**olds, "name": unique_name("renamed")}
    emulator.reset_counters()

    outs = provider.update(resource_id, olds, news).outs

    assert writes(emulator.counters()) == {"POST /v1/resource/{resourceId}": 1}
    assert outs is not None
    assert (outs["proxyPort"], outs["name"], outs["targetId"]) == (
        olds["proxyPort"],
        news["name"],
        olds["targetId"],
    )
    assert set(outs) == set(olds)

    moved = {**outs, "targetIp": "10.9.9.9", "targetPort": 2222}
    emulator.reset_counters()
    outs2 = provider.update(resource_id, outs, moved).outs
    assert writes(emulator.counters()) == {"POST /v1/target/{targetId}": 1}
    assert outs2 == moved
    [target] = client.list_targets(int(resource_id))
    assert (target.ip, target.port) == ("10.9.9.9", 2222)
    live = client.get_resource(int(resource_id))
    assert (live.name, live.proxyPort) == (news["name"], olds["proxyPort"])


def test_update_recreates_a_target_deleted_out_of_band(
    provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle
) -> None:
    olds = provider.create(inputs(emulator)).outs
    assert olds is not None
    client.delete_target(olds["targetId"])
    outs = provider.update(str(olds["resourceId"]), olds, {**olds, "targetPort": 2200}).outs
    assert outs is not None
    [target] = client.list_targets(olds["resourceId"])
    assert (target.targetId, target.port) == (outs["targetId"], 2200)
    assert target.targetId != olds["targetId"]


def test_read_shows_out_of_band_drift_in_outputs_and_inputs(
    provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle
) -> None:
    state = provider.create(inputs(emulator)).outs
    assert state is not None
    drifted_port = next_port()
    client.update_resource(state["resourceId"], proxy_port=drifted_port, enabled=False)
    client.update_target(state["targetId"], site_id=emulator.site_id, ip="10.1.1.1", port=2022)
    # The engine hands numbers back as floats.
    as_floats = {k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in state.items()}

    read = provider.read(str(state["resourceId"]), as_floats)

    assert read.id == str(state["resourceId"])
    expected = {
        **state,
        "proxyPort": drifted_port,
        "enabled": False,
        "targetIp": "10.1.1.1",
        "targetPort": 2022,
    }
    assert read.outs == expected
    assert read.inputs == {k: v for k, v in expected.items() if k not in ("resourceId", "targetId", "niceId")}
    assert provider.diff(read.id, read.outs, {**read.inputs}).changes is False
    assert provider.diff(read.id, read.outs, state).changes is True


def test_read_of_a_deleted_resource_drops_it(
    provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle
) -> None:
    state = provider.create(inputs(emulator)).outs
    assert state is not None
    client.delete_resource(state["resourceId"])
    read = provider.read(str(state["resourceId"]), state)
    assert (read.id, read.outs) == ("", {})


def test_read_with_the_target_gone_asks_for_an_update(
    provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle
) -> None:
    state = provider.create(inputs(emulator)).outs
    assert state is not None
    client.delete_target(state["targetId"])
    read = provider.read(str(state["resourceId"]), state)
    assert read.outs is not None and read.outs["targetId"] is None
    assert provider.diff(str(state["resourceId"]), read.outs, read.inputs or {}).changes is True


def test_delete_twice_tolerates_404(
    provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle
) -> None:
    state = provider.create(inputs(emulator)).outs
    assert state is not None
    provider.delete(str(state["resourceId"]), state)
    provider.delete(str(state["resourceId"]), state)
    with pytest.raises(PangolinNotFound):
        client.get_resource(state["resourceId"])


def test_a_failed_target_deletes_the_new_resource(
    provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle
) -> None:
    props = inputs(emulator, siteId=987654)
    with pytest.raises(PangolinNotFound, match="987654"):
        provider.create(props)
    assert props["name"] not in _names(client, emulator.org_id)
    assert props["name"] not in str(emulator.state())


def test_adopts_a_resource_with_the_right_name(
    provider: PangolinTcpProvider,
    client: PangolinClient,
    emulator: EmulatorHandle,
    capsys: pytest.CaptureFixture[str],
) -> None:
    props = inputs(emulator)
    # A create killed between its two writes: the resource, on its port, without a target.
    orphan = client.create_resource(emulator.org_id, name=props["name"], protocol="tcp", proxy_port=props["proxyPort"])

    result = provider.create({**props, "adoptResourceId": float(orphan.resourceId)})

    assert result.id == str(orphan.resourceId)
    live = client.get_resource(orphan.resourceId)
    assert (live.proxyPort, live.enabled) == (props["proxyPort"], True)
    [target] = client.list_targets(orphan.resourceId)
    assert result.outs is not None and result.outs["targetId"] == target.targetId
    assert (target.ip, target.port) == (props["targetIp"], props["targetPort"])
    assert list(_names(client, emulator.org_id)).count(props["name"]) == 1
    assert f"adopted existing resource {orphan.resourceId}" in capsys.readouterr().err


def test_never_adopts_a_resource_of_another_name_or_protocol_and_creates_its_own(
    provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle
) -> None:
    # A hint the listing gave that no longer fits (renamed, or the tcp resource a tcp -> udp replacement deleted):
    # the stranger is left as it is, and the create makes this resource's own.
    props = inputs(emulator)
    stranger = client.create_resource(emulator.org_id, name="someone-else", protocol="tcp", proxy_port=next_port())
    udp = client.create_resource(emulator.org_id, name=props["name"], protocol="udp", proxy_port=next_port())
    for hint in (stranger.resourceId, udp.resourceId):
        made = provider.create({**props, "proxyPort": next_port(), "adoptResourceId": hint})
        assert made.id not in (str(stranger.resourceId), str(udp.resourceId))
    assert client.get_resource(stranger.resourceId).proxyPort == stranger.proxyPort  # untouched
    assert client.get_resource(udp.resourceId).proxyPort == udp.proxyPort


@pytest.mark.parametrize("moved", ["port", "disabled"])
def test_a_leftover_on_another_port_or_disabled_is_deleted_and_made_anew(
    moved: str, provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle
) -> None:
    # It claims nothing on the wanted port (a new claim is a new resource: its id must be younger than every
    # resource it could contest with), so it is not moved or enabled in place.
    props = inputs(emulator)
    port = next_port() if moved == "port" else props["proxyPort"]
    leftover = client.create_resource(emulator.org_id, name=props["name"], protocol="tcp", proxy_port=port)
    if moved == "disabled":
        client.update_resource(leftover.resourceId, enabled=False)

    made = provider.create({**props, "adoptResourceId": leftover.resourceId})

    assert int(made.id) > leftover.resourceId
    assert [r.resourceId for r in client.find_resources(emulator.org_id, props["name"], "tcp")] == [int(made.id)]
    live = client.get_resource(int(made.id))
    assert (live.proxyPort, live.enabled) == (props["proxyPort"], True)


def test_a_hint_whose_resource_is_gone_creates_a_new_one(
    provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle
) -> None:
    props = inputs(emulator)
    gone = client.create_resource(emulator.org_id, name=props["name"], protocol="tcp", proxy_port=next_port())
    client.delete_resource(gone.resourceId)
    made = provider.create({**props, "adoptResourceId": gone.resourceId})
    assert made.id != str(gone.resourceId)
    assert client.get_resource(int(made.id)).name == props["name"]


@pytest.mark.parametrize("server_version", ["1.18.4", "1.22.0"])
def test_raw_resources_disabled_tells_the_operator_what_to_set(
    server_version: str, start_emulator: Callable[..., EmulatorHandle]
) -> None:
    server = start_emulator(version=server_version, allow_raw_resources=False)
    provider = configure(PangolinTcpProvider(**FAST), server.api_key)
    with pytest.raises(PangolinValidationError) as raised:
        provider.create(inputs(server))
    message = str(raised.value)
    assert "Raw resources are not allowed" in message
    assert "flags.allow_raw_resources: true" in message and "config.yml" in message and "restart" in message
    assert server.api_key not in message


def test_four_concurrent_calls_share_one_provider(provider: PangolinTcpProvider, emulator: EmulatorHandle) -> None:
    provider.create(inputs(emulator))  # learn the dialect
    emulator.reset_counters()
    props = [inputs(emulator) for _ in range(8)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(provider.create, props))
    assert len({r.id for r in results}) == 8
    assert sum(writes(emulator.counters()).values()) == 16


def test_missing_api_key_names_both_places(emulator: EmulatorHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PANGOLIN_API_KEY", raising=False)
    with pytest.raises(PangolinError) as raised:
        PangolinTcpProvider(**FAST).create(inputs(emulator))
    assert "pangolin:apiKey" in str(raised.value) and "PANGOLIN_API_KEY" in str(raised.value)


def test_env_api_key_is_the_fallback(emulator: EmulatorHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PANGOLIN_API_KEY", emulator.api_key)
    assert PangolinTcpProvider(**FAST).create(inputs(emulator)).id
