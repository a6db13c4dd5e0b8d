"""Counters, persistence across restarts and seeded faults (the emulator's own features)."""

from __future__ import annotations

import httpx
import pytest

from pangolin_emulator.harness import EmulatorHandle

from .conftest import Start, api, create_raw, next_port

pytestmark = pytest.mark.provider


def test_counters_by_route_template(start: Start) -> None:
    emu = start()
    emu.reset_counters()
    with api(emu) as client:
        rid = create_raw(client, emu.org_id, "c", next_port())["resourceId"]
        client.get(f"/resource/{rid}")
        client.get(f"/resource/{rid}")
        client.get("/resource/abc")  # a 404 still reached routing
        client.get("/xyz")  # no route template: not counted
    counters = emu.counters()
    assert counters["PUT /v1/org/{orgId}/resource"] == 1
    assert counters["GET /v1/resource/{resourceId}"] == 3
    assert not any("xyz" in route for route in counters)
    emu.reset_counters()
    assert emu.counters() == {}


def test_restart_keeps_state_and_ids_keep_increasing(start: Start) -> None:
    emu = start()
    port = int(emu.url.split(":")[2].split("/")[0])
    with api(emu) as client:
        kept = create_raw(client, emu.org_id, "kept", next_port())
        gone = create_raw(client, emu.org_id, "gone", next_port())
        client.delete(f"/resource/{gone['resourceId']}")
    emu.restart()
    assert int(emu.url.split(":")[2].split("/")[0]) == port
    with api(emu) as client:
        assert client.get(f"/resource/{kept['resourceId']}").json()["data"]["niceId"] == kept["niceId"]
        again = create_raw(client, emu.org_id, "again", next_port())
    assert again["resourceId"] > gone["resourceId"]
    assert [r["name"] for r in emu.state()["resources"]] == ["kept", "again"]


def _run_workload(emu: EmulatorHandle, requests: int) -> list[str]:
    """Create resources one by one; record what each call got."""
    outcomes = []
    with httpx.Client(base_url=emu.url, headers={"Authorization": f"Bearer {emu.api_key}"}, timeout=5) as client:
        for index in range(requests):
            try:
                response = client.put(
                    f"/org/{emu.org_id}/resource",
                    json={"name": f"f{index}", "mode": "tcp", "proxyPort": next_port()},
                )
            except httpx.TransportError:
                outcomes.append("reset")
                continue
            outcomes.append(str(response.status_code))
            if response.status_code == 429:
                assert response.headers["Retry-After"] == "1"
    return outcomes


def test_faults_are_reproducible_and_never_change_state(start: Start) -> None:
    emu = start()
    kinds = ("500", "429", "reset")
    emu.set_faults(0.5, seed=7, kinds=kinds)
    first = _run_workload(emu, 30)
    emu.set_faults(0.5, seed=7, kinds=kinds)
    second = _run_workload(emu, 30)
    assert first == second
    assert {"500", "429", "reset", "201"} <= set(first)
    created = first.count("201") + second.count("201")
    assert len(emu.state()["resources"]) == created
    route = "PUT /v1/org/{orgId}/resource"
    assert emu.counters()[route] == 60
    assert emu.fault_counters()[route] == 60 - created
    emu.set_faults(0.0)
    assert _run_workload(emu, 3) == ["201"] * 3


def test_timeout_fault_sleeps_then_answers_500(start: Start) -> None:
    emu = start(fault_rate=1.0)
    httpx.post(
        f"{emu.url.removesuffix('/v1')}/__emulator/faults",
        json={"rate": 1.0, "seed": 1, "kinds": ["timeout"], "delay": 0.3},
    ).raise_for_status()
    with api(emu) as client:
        response = client.put(f"/org/{emu.org_id}/resource", json={"name": "t", "mode": "tcp", "proxyPort": 1})
        assert (response.status_code, response.json()["message"]) == (500, "An error occurred")
        assert response.elapsed.total_seconds() >= 0.3
        with pytest.raises(httpx.ReadTimeout):
            client.get(f"/org/{emu.org_id}/resources", timeout=0.1)
    assert emu.state()["resources"] == []
    assert httpx.get(f"{emu.url}/").status_code == 200  # the health route is never faulted
