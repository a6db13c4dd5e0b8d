"""Injected faults (500, 429, timeouts, resets) and where the API key must never show up."""

from __future__ import annotations

import logging
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from providers.pangolin import PangolinClient, PangolinError, PangolinTcpProvider, PangolinValidationError

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


def test_creates_under_faults_succeed_or_leave_nothing_behind(
    provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle
) -> None:
    provider.create(inputs(emulator))  # learn the dialect without faults
    emulator.set_faults(0.3, seed=11)
    outcomes: dict[str, str | None] = {}
    for _ in range(10):
        props = inputs(emulator)
        try:
            outcomes[props["name"]] = provider.create(props).id
        except PangolinError:
            outcomes[props["name"]] = None
    emulator.set_faults(0.0)

    live = {r.name: r.resourceId for r in client.list_all_resources(emulator.org_id)}
    for name, resource_id in outcomes.items():
        if resource_id is None:
            assert name not in live, f"{name} failed to create but left resource {live.get(name)} behind"
        else:
            assert live[name] == int(resource_id)
            assert len(client.list_targets(int(resource_id))) == 1
    assert None in outcomes.values(), "no create failed: the faults did not bite"
    assert any(outcomes.values()), "no create succeeded"


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
    expect_error(lambda: provider.update("987654", state, {**state, "proxyPort": next_port()}))
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
    from pangolin_emulator.harness import running_emulator

    state_dir = tmp_path / "pangolin"
    with running_emulator(state_dir, version="1.22.0") as server:
        provider = configure(PangolinTcpProvider(**FAST), server.api_key)
        state = provider.create(inputs(server)).outs
    assert state is not None
    with running_emulator(state_dir, version="1.22.0", allow_raw_resources=False) as server:
        provider = configure(PangolinTcpProvider(**FAST), server.api_key)
        news = {**state, "apiUrl": server.url, "proxyPort": next_port()}
        with pytest.raises(PangolinValidationError) as raised:
            provider.update(str(state["resourceId"]), {**state, "apiUrl": server.url}, news)
    assert "Cannot update proxyPort" in str(raised.value)
    assert "flags.allow_raw_resources: true" in str(raised.value)
