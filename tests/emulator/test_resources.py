"""Raw resources: dialects, strict bodies, shapes, update, delete (contract §2, Addendum 3, 7, 8)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from pangolin_emulator.harness import EmulatorHandle

from .conftest import Start, api, create_raw, next_port

pytestmark = pytest.mark.provider


def _put(emu: EmulatorHandle, body: object) -> httpx.Response:
    with api(emu) as client:
        return client.put(f"/org/{emu.org_id}/resource", json=body)


def _error(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["message"]


def test_122_new_dialect_create_and_get_shapes(emu122: EmulatorHandle) -> None:
    port = next_port()
    response = _put(emu122, {"name": "pg", "mode": "tcp", "proxyPort": port})
    assert response.status_code == 201
    body = response.json()
    assert body["message"] == "Non-http resource created successfully"
    data = body["data"]
    assert (data["mode"], data["proxyPort"], data["enabled"], data["orgId"]) == ("tcp", port, True, "acme")
    assert "http" not in data and "protocol" not in data
    assert (data["sso"], data["emailWhitelistEnabled"], data["applyRules"]) == (None, None, None)
    assert isinstance(data["defaultResourcePolicyId"], int)
    adjective, animal = data["niceId"].split("-", 1)
    assert adjective and animal
    with api(emu122) as client:
        fetched = client.get(f"/resource/{data['resourceId']}").json()
    assert fetched["message"] == "Resource retrieved successfully"
    assert (fetched["data"]["sso"], fetched["data"]["emailWhitelistEnabled"]) == (True, False)


def test_122_accepts_the_legacy_dialect(emu122: EmulatorHandle) -> None:
    response = _put(emu122, {"name": "legacy", "http": False, "protocol": "udp", "proxyPort": next_port()})
    assert response.status_code == 201
    assert response.json()["data"]["mode"] == "udp"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"name": "pg", "mode": "tcp", "proxyPort": 15432, "sso": True},
            'Validation error: Unrecognized key: "sso"',
        ),
        (
            {"name": "pg", "mode": "tcp", "proxyPort": 70000},
            'Validation error: Too big: expected number to be <=65535 at "proxyPort"',
        ),
        (
            {"name": "", "mode": "tcp", "proxyPort": 0},
            'Validation error: Too small: expected string to have >=1 characters at "name"; '
            'Too small: expected number to be >=1 at "proxyPort"',
        ),
        (
            {"name": "pg", "mode": "tcp"},
            'Validation error: Invalid input: expected string, received undefined at "domainId"',
        ),
        (
            {"name": "pg", "mode": "tcp", "proxyPort": "15432"},
            'Validation error: Invalid input: expected string, received undefined at "domainId"; '
            'Unrecognized key: "proxyPort"',
        ),
        ({"name": "pg", "http": False, "proxyPort": 1}, "Validation error: Raw resources are not allowed"),
        (
            {"name": "pg", "http": True, "protocol": "udp", "proxyPort": 1},
            "Invalid deprecated http/protocol combination",
        ),
        (
            {"name": "pg", "mode": "ssh", "proxyPort": 1},
            'Validation error: Invalid option: expected one of "tcp"|"udp" at "mode"',
        ),
    ],
)
def test_122_create_validation_messages(emu122: EmulatorHandle, body: dict[str, object], message: str) -> None:
    assert _error(_put(emu122, body)) == (400, message)


def test_118_legacy_dialect_shape(emu118: EmulatorHandle) -> None:
    port = next_port()
    response = _put(emu118, {"name": "pg", "http": False, "protocol": "tcp", "proxyPort": port})
    assert response.status_code == 201
    data = response.json()["data"]
    assert (data["http"], data["protocol"], data["proxyPort"], data["sso"]) == (False, "tcp", port, True)
    assert "mode" not in data and "defaultResourcePolicyId" not in data


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"name": "pg", "mode": "tcp", "proxyPort": 15432}, "http field is required"),
        (
            {"name": "pg", "http": False, "protocol": "tcp", "mode": "tcp", "proxyPort": 1},
            'Validation error: Unrecognized key: "mode"',
        ),
        (
            {"name": "pg", "http": False, "protocol": "tcp", "proxyPort": 1, "enabled": True, "siteId": 1},
            'Validation error: Unrecognized keys: "enabled", "siteId"',
        ),
    ],
)
def test_118_rejects_the_new_dialect(emu118: EmulatorHandle, body: dict[str, object], message: str) -> None:
    assert _error(_put(emu118, body)) == (400, message)


def test_missing_content_type(emu122: EmulatorHandle) -> None:
    with api(emu122) as client:
        create = client.put(f"/org/{emu122.org_id}/resource", content=b'{"name":"x","mode":"tcp","proxyPort":1}')
        assert _error(create) == (500, "An error occurred")
        rid = create_raw(client, emu122.org_id, "ct", next_port())["resourceId"]
        update = client.post(f"/resource/{rid}", content=b'{"name":"y"}')
        assert _error(update) == (400, "Validation error: Invalid input: expected object, received undefined")


@pytest.mark.parametrize("emu_name", ["emu118", "emu122"])
def test_raw_update_is_a_strict_subset(emu_name: str, request: pytest.FixtureRequest) -> None:
    emu: EmulatorHandle = request.getfixturevalue(emu_name)
    with api(emu) as client:
        created = client.put(
            f"/org/{emu.org_id}/resource",
            json={"name": "up", "http": False, "protocol": "tcp", "proxyPort": next_port()},
        ).json()["data"]
        rid = created["resourceId"]
        assert _error(client.post(f"/resource/{rid}", json={"sso": False})) == (
            400,
            'Validation error: Unrecognized key: "sso"',
        )
        assert _error(client.post(f"/resource/{rid}", json={"mode": "udp"})) == (
            400,
            'Validation error: Unrecognized key: "mode"',
        )
        assert _error(client.post(f"/resource/{rid}", json={})) == (
            400,
            "Validation error: At least one field must be provided for update",
        )
        new_port = next_port()
        updated = client.post(f"/resource/{rid}", json={"name": "renamed", "proxyPort": new_port, "enabled": False})
        assert updated.status_code == 200
        assert updated.json()["message"] == "Non-http Resource updated successfully"
        assert (updated.json()["data"]["name"], updated.json()["data"]["proxyPort"]) == ("renamed", new_port)
        assert client.get(f"/resource/{rid}").json()["data"]["enabled"] is False


def test_nice_id_update_and_conflict(emu122: EmulatorHandle) -> None:
    with api(emu122) as client:
        first = create_raw(client, emu122.org_id, "n1", next_port())
        second = create_raw(client, emu122.org_id, "n2", next_port())
        assert first["niceId"] != second["niceId"]
        clash = client.post(f"/resource/{second['resourceId']}", json={"niceId": first["niceId"]})
        assert _error(clash) == (409, f'A resource with niceId "{first["niceId"]}" already exists')
        assert client.post(f"/resource/{second['resourceId']}", json={"niceId": "my-own-id"}).status_code == 200


def test_duplicate_ports_are_accepted_and_reported(start: Start) -> None:
    emu = start()
    port, other = next_port(), next_port()
    with api(emu) as client:
        a = create_raw(client, emu.org_id, "a", port)
        b = create_raw(client, emu.org_id, "b", port)
        c = create_raw(client, emu.org_id, "c", other)
        udp = client.put(f"/org/{emu.org_id}/resource", json={"name": "u", "mode": "udp", "proxyPort": other})
        assert udp.status_code == 201
        assert emu.doubly_bound_ports() == {port: [a["resourceId"], b["resourceId"]]}
        assert client.post(f"/resource/{c['resourceId']}", json={"proxyPort": port}).status_code == 200
        assert emu.doubly_bound_ports() == {port: [a["resourceId"], b["resourceId"], c["resourceId"]]}
        client.post(f"/resource/{a['resourceId']}", json={"enabled": False})
        assert emu.doubly_bound_ports() == {port: [b["resourceId"], c["resourceId"]]}


def test_delete_cascades_targets_and_repeats_404(emu122: EmulatorHandle) -> None:
    with api(emu122) as client:
        rid = create_raw(client, emu122.org_id, "del", next_port())["resourceId"]
        target = client.put(f"/resource/{rid}/target", json={"siteId": emu122.site_id, "ip": "127.0.0.1", "port": 5432})
        tid = target.json()["data"]["targetId"]
        deleted = client.delete(f"/resource/{rid}").json()
        assert (deleted["data"], deleted["message"], deleted["status"]) == (
            None,
            "Resource deleted successfully",
            200,
        )
        assert _error(client.delete(f"/resource/{rid}")) == (404, f"Resource with ID {rid} not found")
        assert _error(client.get(f"/target/{tid}")) == (404, f"Target with ID {tid} not found")


@pytest.mark.parametrize("version", ["1.18.4", "1.22.0"])
def test_raw_resources_disabled(start: Start, tmp_path: Path, version: str) -> None:
    state_dir = tmp_path / "flag"
    first = start(state_dir=state_dir, version=version)
    with api(first) as client:
        legacy = {"name": "kept", "http": False, "protocol": "tcp", "proxyPort": next_port()}
        rid = client.put("/org/acme/resource", json=legacy).json()["data"]["resourceId"]
    first.stop()
    emu = start(state_dir=state_dir, version=version, allow_raw_resources=False)
    with api(emu) as client:
        # Answered before the body is looked at, even for an invalid body.
        invalid = {"name": "x", "http": False, "protocol": "tcp", "proxyPort": 99999, "sso": True}
        assert _error(client.put(f"/org/{emu.org_id}/resource", json=invalid)) == (
            400,
            "Raw resources are not allowed",
        )
        port_change = client.post(f"/resource/{rid}", json={"proxyPort": next_port()})
        assert _error(port_change) == (400, "Validation error: Cannot update proxyPort")
        assert client.post(f"/resource/{rid}", json={"name": "renamed", "enabled": False}).status_code == 200


def test_public_resource_alias_only_from_121(emu122: EmulatorHandle, emu118: EmulatorHandle) -> None:
    with api(emu122) as client:
        created = client.put(
            f"/org/{emu122.org_id}/public-resource",
            json={"name": "alias", "mode": "tcp", "proxyPort": next_port()},
        )
        assert created.status_code == 201
        assert client.get(f"/public-resource/{created.json()['data']['resourceId']}").status_code == 200
    with api(emu118) as client:
        assert client.get(f"/org/{emu118.org_id}/public-resources").status_code == 404


def test_resource_names(emu122: EmulatorHandle) -> None:
    with api(emu122) as client:
        created = create_raw(client, emu122.org_id, "named", next_port())
        names = client.get(f"/org/{emu122.org_id}/resource-names").json()["data"]["resources"]
    assert {"resourceId": created["resourceId"], "name": "named", "niceId": created["niceId"]} in names
