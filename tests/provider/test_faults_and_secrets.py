"""Injected faults (500, 429, timeouts, resets) and where the API key must never show up."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from providers.pangolin import PangolinClient, PangolinTcpProvider, PangolinValidationError

from .conftest import FAST, configure, inputs, next_port, unique_name

if TYPE_CHECKING:
    from pangolin_emulator.harness import EmulatorHandle

pytestmark = pytest.mark.provider


def test_idempotent_calls_succeed_through_faults(client: PangolinClient, emulator: EmulatorHandle) -> None:
    made = [
        client.create_resource(emulator.org_id, name=unique_name("f"), protocol="tcp", proxy_port=next_port())
        for _ in range(4)
    ]
    targets = [client.create_target(r.resourceId, site_id=emulator.site_id, ip="10.0.0.1", port=22) for r in made]
    emulator.set_faults(0.3, seed=7)

    for resource in made:
        assert client.get_resource(resource.resourceId).name == resource.name
        assert [t.targetId for t in client.list_targets(resource.resourceId)] != []
    assert {r.resourceId for r in made} <= {r.resourceId for r in client.list_all_resources(emulator.org_id)}
    port = next_port()
    assert client.update_resource(made[0].resourceId, proxy_port=port).proxyPort == port
    assert client.update_target(targets[0].targetId, site_id=emulator.site_id, ip="10.0.0.2", port=23).port == 23
    for resource in made:
        client.delete_resource(resource.resourceId)

    emulator.set_faults(0.0)
    assert not {r.resourceId for r in made} & {r.resourceId for r in client.list_all_resources(emulator.org_id)}


_PUT_RESOURCE = "PUT /v1/org/{orgId}/resource"
_PUT_TARGET = "PUT /v1/resource/{resourceId}/target"


def _creates_under_faults(
    provider: PangolinTcpProvider, emulator: EmulatorHandle, kinds: tuple[str, ...], *, seed: int, delay: float
) -> dict[str, str]:
    """Ten or more creates with 30% of the calls faulted, until both creates (resource and target) were faulted
    (the draws depend on how many pages each claim's listing takes, so on what the org holds); every one must
    succeed.
    Name -> resource id."""
    provider.create(inputs(emulator))  # learn the dialect without faults
    emulator.reset_counters()
    emulator.set_faults(0.3, seed=seed, kinds=kinds, delay=delay)
    made: dict[str, str] = {}
    while len(made) < 10 or (len(made) < 40 and not _both_creates_faulted(emulator, kinds)):
        props = inputs(emulator)
        made[props["name"]] = provider.create(props).id
    emulator.set_faults(0.0)
    return made


def _both_creates_faulted(emulator: EmulatorHandle, kinds: tuple[str, ...]) -> bool:
    """Both creates were faulted, and a resource create lost its answer after the write if that kind is on."""
    hits = emulator.fault_counters_by_route_and_kind()
    after_write = "timeout-after-write" not in kinds or hits.get(_PUT_RESOURCE, {}).get("timeout-after-write", 0) > 0
    return after_write and all(sum(hits.get(route, {}).values()) > 0 for route in (_PUT_RESOURCE, _PUT_TARGET))


def _assert_one_each(emulator: EmulatorHandle, made: dict[str, str]) -> None:
    """Exactly one resource per name, the one create returned, with exactly one target: no twins."""
    state = emulator.state()
    for name, resource_id in made.items():
        ids = [r["resourceId"] for r in state["resources"] if r["name"] == name]
        assert ids == [int(resource_id)], f"{name}: resources {ids}, create returned {resource_id}"
        targets = [t for t in state["targets"] if t["resourceId"] == int(resource_id)]
        assert len(targets) == 1, f"{name}: {len(targets)} targets"
    assert emulator.doubly_bound_ports() == {}


# `timeout` holds a call for `delay` and then answers 500; `timeout-after-write` applies it, holds it and resets
# the connection. 1.5 s is longer than FAST's 1 s read timeout, so the client itself times out there.
@pytest.mark.parametrize(
    ("kinds", "delay"),
    [
        (("timeout-after-write",), 0.1),
        (("timeout-after-write",), 1.5),
        (("500",), 0.0),
        (("429",), 0.0),
        (("reset",), 0.0),
        (("timeout",), 0.1),
        (("500", "429", "timeout", "reset", "timeout-after-write"), 0.1),
    ],
    ids=["after-write", "after-write-client-timeout", "500", "429", "reset", "timeout", "all"],
)
def test_creates_under_faults_make_exactly_one_resource_and_target_each(
    provider: PangolinTcpProvider, emulator: EmulatorHandle, kinds: tuple[str, ...], delay: float
) -> None:
    made = _creates_under_faults(provider, emulator, kinds, seed=11, delay=delay)

    _assert_one_each(emulator, made)
    hits = emulator.fault_counters_by_route_and_kind()
    assert sum(hits.get(_PUT_RESOURCE, {}).values()) > 0, "no resource create was faulted"
    assert sum(hits.get(_PUT_TARGET, {}).values()) > 0, "no target create was faulted"
    if "timeout-after-write" in kinds:
        # Those creates were applied and never answered: each was found by one lookup, not made twice.
        lost = hits[_PUT_RESOURCE].get("timeout-after-write", 0)
        assert lost > 0
        # Each lost answer was looked up (a search of the org by name) before the create was sent again.
        assert emulator.counters().get("GET /v1/org/{orgId}/resources", 0) >= lost


def test_a_lost_create_on_1_15_is_found_by_listing_the_org(start_emulator: Callable[..., EmulatorHandle]) -> None:
    # 1.15 has no `query`: it ignores it and answers every resource by limit/offset.
    server = start_emulator(version="1.15.0")
    provider = configure(PangolinTcpProvider(**FAST), server.api_key)
    for _ in range(3):
        provider.create(inputs(server))
    made = _creates_under_faults(provider, server, ("timeout-after-write",), seed=5, delay=0.1)

    _assert_one_each(server, made)
    assert server.fault_counters_by_route_and_kind()[_PUT_RESOURCE]["timeout-after-write"] > 0


def test_the_key_never_reaches_errors_logs_or_output(
    emulator: EmulatorHandle,
    client: PangolinClient,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = emulator.api_key.split(".", 1)[1]
    provider = configure(PangolinTcpProvider(**FAST), emulator.api_key)
    wrong_key = emulator.api_key.split(".")[0] + "." + secret[::-1]
    errors: list[BaseException] = []

    def expect_error(action: object) -> None:
        try:
            action()  # type: ignore[operator]
        except Exception as exc:
            errors.append(exc)
        else:
            pytest.fail("expected an error")

    state = provider.create(inputs(emulator)).outs
    assert state is not None
    expect_error(lambda: provider.create(inputs(emulator, siteId=987654)))
    expect_error(lambda: provider.update("987654", state, {**state, "name": "renamed"}))
    expect_error(lambda: configure(PangolinTcpProvider(**FAST), wrong_key).read(str(state["resourceId"]), state))
    expect_error(lambda: provider.read("1", {**state, "apiUrl": "http://127.0.0.1:9/v1"}))
    expect_error(lambda: provider.create(inputs(emulator, proxyPort=70000)))
    emulator.set_faults(1.0, seed=3, kinds=("500",))
    expect_error(lambda: provider.create(inputs(emulator)))
    emulator.set_faults(0.0)

    assert len(errors) == 6
    out, err = capsys.readouterr()
    for text in [*("".join(traceback.format_exception(e)) for e in errors), out, err, caplog.text]:
        assert secret not in text
        assert secret[::-1] not in text
        assert "Bearer" not in text


def test_proxy_port_update_with_raw_resources_disabled(tmp_path: Path) -> None:
    # The provider moves a resource by replacing it (a new claim), but the client's update can still send a port.
    from pangolin_emulator.harness import running_emulator

    state_dir = tmp_path / "pangolin"
    with running_emulator(state_dir, version="1.22.0") as server:
        provider = configure(PangolinTcpProvider(**FAST), server.api_key)
        state = provider.create(inputs(server)).outs
    assert state is not None
    with (
        running_emulator(state_dir, version="1.22.0", allow_raw_resources=False) as server,
        PangolinClient(server.url, server.api_key, **FAST) as client,
        pytest.raises(PangolinValidationError) as raised,
    ):
        client.update_resource(int(state["resourceId"]), proxy_port=next_port())
    assert "Cannot update proxyPort" in str(raised.value)
    assert "flags.allow_raw_resources: true" in str(raised.value)
