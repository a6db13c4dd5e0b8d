"""The test-only barrier (`pangolin_emulator.gate`) and the doubly-routed view: admin routes, not Pangolin's."""

from __future__ import annotations

import threading
import time

import httpx

from pangolin_emulator.harness import EmulatorHandle

from .conftest import Start, api, create_raw, next_port

LIST = "GET /v1/org/{orgId}/resources"


def _list_in_thread(emu: EmulatorHandle, answers: list[int]) -> threading.Thread:
    def call() -> None:
        with api(emu) as client:
            answers.append(client.get(f"/org/{emu.org_id}/resources").status_code)

    thread = threading.Thread(target=call)
    thread.start()
    return thread


def _until(condition: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_the_gate_holds_calls_of_its_route_until_both_parties_wait(start: Start) -> None:
    emu = start()
    emu.arm_gate(LIST, parties=2, timeout=30)
    answers: list[int] = []
    first = _list_in_thread(emu, answers)
    _until(lambda: emu.gate()["waiting"] == 1)
    with api(emu) as client:  # another route passes
        assert client.get(f"/org/{emu.org_id}/sites").status_code == 200
    time.sleep(0.2)
    assert answers == [] and first.is_alive()

    second = _list_in_thread(emu, answers)
    first.join(20)
    second.join(20)

    assert answers == [200, 200]
    assert emu.gate() == {"armed": None, "waiting": 0, "met": 1, "timedOut": 0}
    with api(emu) as client:  # disarmed once met
        assert client.get(f"/org/{emu.org_id}/resources").status_code == 200


def test_a_call_is_held_no_longer_than_the_timeout_and_disarming_releases(start: Start) -> None:
    emu = start()
    emu.arm_gate(LIST, parties=2, timeout=0.3)
    with api(emu) as client:
        assert client.get(f"/org/{emu.org_id}/resources").status_code == 200
    assert emu.gate()["timedOut"] == 1

    emu.arm_gate(LIST, parties=5, timeout=30)
    answers: list[int] = []
    held = _list_in_thread(emu, answers)
    _until(lambda: emu.gate()["waiting"] == 1)
    emu.disarm_gate()
    held.join(20)
    assert answers == [200]


def test_a_bad_gate_is_refused(start: Start) -> None:
    emu = start()
    response = httpx.post(f"{emu.admin_url}/gate", json={"route": LIST, "parties": 0}, timeout=10)
    assert response.status_code == 400 and "parties must be >= 1" in response.text


def test_doubly_routed_counts_only_resources_with_an_enabled_target(start: Start) -> None:
    emu = start()
    port = next_port()
    with api(emu) as client:
        routed = create_raw(client, emu.org_id, "a", port)
        client.put(
            f"/resource/{routed['resourceId']}/target", json={"siteId": emu.site_id, "ip": "10.0.0.1", "port": 22}
        )
        pending = create_raw(client, emu.org_id, "b", port)  # no target yet: no router
        assert emu.doubly_bound_ports() == {port: [routed["resourceId"], pending["resourceId"]]}
        assert emu.doubly_routed_ports() == {}

        target = client.put(
            f"/resource/{pending['resourceId']}/target",
            json={"siteId": emu.site_id, "ip": "10.0.0.2", "port": 22, "enabled": False},
        ).json()["data"]
        assert emu.doubly_routed_ports() == {}
        client.post(f"/target/{target['targetId']}", json={"siteId": emu.site_id, "ip": "10.0.0.2", "enabled": True})
        assert emu.doubly_routed_ports() == {port: [routed["resourceId"], pending["resourceId"]]}
