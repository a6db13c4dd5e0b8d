"""Targets (contract §3, Addendum 5)."""

from __future__ import annotations

import httpx
import pytest

from pangolin_emulator.harness import EmulatorHandle

from .conftest import api, create_raw, next_port

pytestmark = pytest.mark.provider


def _error(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["message"]


@pytest.mark.parametrize("emu_name", ["emu118", "emu122"])
def test_target_lifecycle(emu_name: str, request: pytest.FixtureRequest) -> None:
    emu: EmulatorHandle = request.getfixturevalue(emu_name)
    with api(emu) as client:
        rid = client.put(
            f"/org/{emu.org_id}/resource",
            json={"name": "t", "http": False, "protocol": "tcp", "proxyPort": next_port()},
        ).json()["data"]["resourceId"]
        created = client.put(f"/resource/{rid}/target", json={"siteId": emu.site_id, "ip": "127.0.0.1", "port": 5432})
        assert created.status_code == 201
        assert created.json()["message"] == "Target created successfully"
        target = created.json()["data"]
        assert (target["resourceId"], target["siteId"], target["enabled"], target["internalPort"]) == (
            rid,
            emu.site_id,
            True,
            None,
        )
        tid = target["targetId"]
        assert client.get(f"/target/{tid}").json()["data"]["port"] == 5432
        only_port = client.post(f"/target/{tid}", json={"port": 6543})
        assert _error(only_port) == (
            400,
            'Validation error: Invalid input: expected number, received undefined at "siteId"; '
            'Invalid input: expected string, received undefined at "ip"',
        )
        updated = client.post(f"/target/{tid}", json={"siteId": emu.site_id, "ip": "localhost", "port": 6543})
        assert updated.status_code == 200
        assert (updated.json()["data"]["ip"], updated.json()["data"]["port"]) == ("localhost", 6543)
        assert isinstance(updated.json()["data"]["internalPort"], int)
        listed = client.get(f"/resource/{rid}/targets", params={"limit": 5}).json()["data"]
        assert listed["pagination"] == {"total": 1, "limit": 5, "offset": 0}
        assert listed["targets"][0]["targetId"] == tid
        deleted = client.delete(f"/target/{tid}").json()
        assert (deleted["data"], deleted["message"]) == (None, "Target deleted successfully")
        assert _error(client.delete(f"/target/{tid}")) == (404, f"Target with ID {tid} not found")


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (
            {"ip": "127.0.0.1", "port": 1},
            400,
            'Validation error: Invalid input: expected number, received undefined at "siteId"',
        ),
        ({"siteId": 99, "ip": "127.0.0.1", "port": 1}, 404, "Site with ID 99 not found"),
        ({"siteId": 1, "ip": "not a host!", "port": 1}, 400, 'Validation error: Invalid input at "ip"'),
        (
            {"siteId": 1, "ip": "127.0.0.1", "port": 70000},
            400,
            'Validation error: Too big: expected number to be <=65535 at "port"',
        ),
        (
            {"siteId": 1, "ip": "127.0.0.1", "port": 1, "sso": True},
            400,
            'Validation error: Unrecognized key: "sso"',
        ),
    ],
)
def test_target_create_validation(emu122: EmulatorHandle, body: dict[str, object], status: int, message: str) -> None:
    with api(emu122) as client:
        rid = create_raw(client, emu122.org_id, "tv", next_port())["resourceId"]
        assert _error(client.put(f"/resource/{rid}/target", json=body)) == (status, message)
