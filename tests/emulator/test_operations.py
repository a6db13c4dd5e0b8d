"""Counters, persistence across restarts and seeded faults (the emulator's own features)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from pangolin_emulator.harness import EmulatorHandle

from .conftest import Start, add_key, api, create_raw, next_port

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


def test_fault_counters_by_kind(start: Start) -> None:
    emu = start()
    kinds = ("500", "429", "reset")
    emu.set_faults(0.5, seed=11, kinds=kinds)
    outcomes = _run_workload(emu, 40)
    route = "PUT /v1/org/{orgId}/resource"
    by_kind = emu.fault_counters_by_kind()
    assert set(by_kind) == set(kinds)  # seed 11 draws every kind within 40 calls
    assert by_kind == {kind: outcomes.count(kind) for kind in kinds}
    assert emu.fault_counters_by_route_and_kind() == {route: by_kind}
    assert emu.fault_counters() == {route: sum(by_kind.values())}
    emu.reset_counters()
    assert (emu.fault_counters_by_kind(), emu.fault_counters_by_route_and_kind()) == ({}, {})


def test_faults_come_before_authentication(start: Start) -> None:
    emu = start()
    emu.set_faults(1.0, seed=1, kinds=("500",))
    anonymous = httpx.get(f"{emu.url}/org/{emu.org_id}/resources")
    assert (anonymous.status_code, anonymous.json()["message"]) == (500, "An error occurred")
    assert httpx.get(f"{emu.url}/openapi.json").status_code == 500  # public routes are faulted too
    assert emu.fault_counters_by_route_and_kind() == {
        "GET /v1/org/{orgId}/resources": {"500": 1},
        "GET /v1/openapi.json": {"500": 1},
    }


def test_the_default_kinds_never_apply_a_request(start: Start) -> None:
    emu = start()
    emu.set_faults(1.0, seed=3)
    assert "timeout-after-write" not in httpx.get(f"{emu.admin_url}/faults").json()["kinds"]
    bad = httpx.post(f"{emu.admin_url}/faults", json={"kinds": ["timeout-before-lunch"]})
    assert bad.status_code == 400 and "timeout-after-write" in bad.json()["error"]


def test_timeout_after_write_applies_the_create_and_never_answers(start: Start) -> None:
    emu = start()
    emu.set_faults(1.0, seed=5, kinds=("timeout-after-write",), delay=0.5)
    route = "PUT /v1/org/{orgId}/resource"
    with api(emu) as client:
        # A client whose read timeout is shorter than the hold sees a timeout...
        with pytest.raises(httpx.ReadTimeout):
            client.put(
                f"/org/{emu.org_id}/resource", json={"name": "ambiguous-1", "mode": "tcp", "proxyPort": 1}, timeout=0.2
            )
    with api(emu) as client:
        # ...and one that waits longer gets no answer at all.
        with pytest.raises(httpx.TransportError) as raised:
            client.put(f"/org/{emu.org_id}/resource", json={"name": "ambiguous-2", "mode": "tcp", "proxyPort": 2})
        assert not isinstance(raised.value, httpx.TimeoutException)
    emu.set_faults(0.0)
    # Both creates were applied: this is what a retry after the failure must find, not repeat.
    assert [(r["name"], r["proxyPort"]) for r in emu.state()["resources"]] == [("ambiguous-1", 1), ("ambiguous-2", 2)]
    assert emu.fault_counters_by_route_and_kind() == {route: {"timeout-after-write": 2}}
    with api(emu) as client:
        assert (
            client.get(f"/org/{emu.org_id}/resources", params={"query": "ambiguous"}).json()["data"]["pagination"][
                "total"
            ]
            == 2
        )


def test_slow_holds_a_request_then_handles_it_as_usual(start: Start) -> None:
    emu = start()
    emu.set_faults(1.0, seed=2, kinds=("slow",), delay=0.3)
    with api(emu) as client:
        response = client.put(f"/org/{emu.org_id}/resource", json={"name": "slow", "mode": "tcp", "proxyPort": 7})
        assert response.status_code == 201, response.text
        assert response.elapsed.total_seconds() >= 0.3
    emu.set_faults(0.0)
    assert [(r["name"], r["proxyPort"]) for r in emu.state()["resources"]] == [("slow", 7)]
    assert emu.fault_counters_by_route_and_kind() == {"PUT /v1/org/{orgId}/resource": {"slow": 1}}


def test_timeout_after_write_still_validates(start: Start) -> None:
    """The fault withholds whatever the handler answered; a rejected write changes nothing."""
    emu = start()
    emu.set_faults(1.0, kinds=("timeout-after-write",), delay=0.0)
    with api(emu) as client, pytest.raises(httpx.TransportError):
        client.put(f"/org/{emu.org_id}/resource", json={"name": "bad", "mode": "tcp", "proxyPort": 70000})
    emu.set_faults(0.0)
    assert emu.state()["resources"] == []


def test_harness_launches_with_the_after_write_kind_and_keeps_it_on_restart(start: Start) -> None:
    emu = start(fault_rate=1.0, fault_kinds=("timeout-after-write",), fault_delay=0.1)
    settings = httpx.get(f"{emu.admin_url}/faults").json()
    assert (settings["rate"], settings["kinds"], settings["delay"]) == (1.0, ["timeout-after-write"], 0.1)
    emu.set_faults(0.25, seed=9, kinds=("500", "timeout-after-write"), delay=0.2)
    emu.restart()
    settings = httpx.get(f"{emu.admin_url}/faults").json()
    assert (settings["rate"], settings["seed"], settings["kinds"], settings["delay"]) == (
        0.25,
        9,
        ["500", "timeout-after-write"],
        0.2,
    )


def test_public_and_root_routes_are_counted_by_template(start: Start) -> None:
    emu = start()
    emu.reset_counters()
    httpx.get(f"{emu.url}/openapi.json")
    httpx.get(f"{emu.url}/openapi.json/")  # Express's optional trailing slash: the same route
    with api(emu, emu.root_api_key) as client:
        client.get("/orgs")
    with api(emu) as client:
        client.get("/orgs")  # refused with 403, still counted
    assert emu.counters() == {"GET /v1/openapi.json": 2, "GET /v1/orgs": 2}


def test_doubly_bound_spans_orgs(start: Start, tmp_path: Path) -> None:
    """Ports are bound on the gateway host for every org, so the admin view looks across orgs."""
    emu = start(state_dir=tmp_path / "emu")
    add_key(tmp_path / "emu", "other", ())  # creates the org; the root key acts in it
    port = next_port()
    with api(emu) as client:
        mine = create_raw(client, emu.org_id, "mine", port)
    with api(emu, emu.root_api_key) as client:
        theirs = create_raw(client, "other", "theirs", port)
        assert client.get("/org/other/resources").json()["data"]["pagination"]["total"] == 1
    assert emu.doubly_bound_ports() == {port: [mine["resourceId"], theirs["resourceId"]]}
