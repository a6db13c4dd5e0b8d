"""Auth, envelopes and routing (contract §1.2-§1.4, §8 items 2-3, Addendum 1, 2, 6)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from pangolin_emulator.auth import ORG_ACTIONS
from pangolin_emulator.harness import EmulatorHandle

from .conftest import Start, add_key, api, create_raw, next_port

pytestmark = pytest.mark.provider


def test_health_needs_no_key(emu122: EmulatorHandle) -> None:
    response = httpx.get(f"{emu122.url}/")
    assert response.status_code == 200
    assert response.json() == {"message": "Healthy"}


@pytest.mark.parametrize(
    ("header", "status", "message"),
    [
        (None, 401, "API key required"),
        ("Basic abc", 401, "API key required"),
        ("Bearer nosuchkey000000.secret", 401, "Invalid API key"),
    ],
)
def test_missing_or_unknown_key(emu122: EmulatorHandle, header: str | None, status: int, message: str) -> None:
    headers = {"Authorization": header} if header else {}
    response = httpx.get(f"{emu122.url}/org/acme/resources", headers=headers)
    assert response.status_code == status
    assert response.json() == {
        "data": None,
        "success": False,
        "error": True,
        "message": message,
        "status": status,
        "stack": None,
    }


def test_wrong_secret_and_missing_secret(emu122: EmulatorHandle) -> None:
    key_id = emu122.api_key.split(".")[0]
    wrong = httpx.get(f"{emu122.url}/org/acme/resources", headers={"Authorization": f"Bearer {key_id}.nope"})
    assert (wrong.status_code, wrong.json()["message"]) == (401, "Invalid API key")
    bare = httpx.get(f"{emu122.url}/org/acme/resources", headers={"Authorization": f"Bearer {key_id}"})
    assert (bare.status_code, bare.json()["message"]) == (500, "An error occurred checking API key")


def test_unknown_path_is_html_404_only_with_a_key(emu122: EmulatorHandle) -> None:
    with api(emu122) as client:
        response = client.get("/xyz")
        assert response.status_code == 404
        assert response.headers["content-type"].startswith("text/html")
        assert "<pre>Cannot GET /v1/xyz</pre>" in response.text
        # A known path with an unmounted method falls through the same way.
        assert "<pre>Cannot PATCH /v1/resource/1</pre>" in client.patch("/resource/1").text
    anonymous = httpx.get(f"{emu122.url}/xyz")
    assert (anonymous.status_code, anonymous.json()["message"]) == (401, "API key required")


def test_success_envelope(emu122: EmulatorHandle) -> None:
    with api(emu122) as client:
        body = client.get(f"/org/{emu122.org_id}/domains").json()
    assert set(body) == {"data", "success", "error", "message", "status"}
    assert (body["success"], body["error"], body["status"]) == (True, False, 200)


def test_nonexistent_org_is_403(emu122: EmulatorHandle) -> None:
    with api(emu122) as client:
        response = client.get("/org/nosuchorg/resources")
    assert (response.status_code, response.json()["message"]) == (
        403,
        "Key does not have access to this organization",
    )


def test_check_order_404_then_org_then_action_then_validation(start: Start, tmp_path: Path) -> None:
    emu = start(state_dir=tmp_path / "emu")
    with api(emu) as owner:
        resource = create_raw(owner, emu.org_id, "order", next_port())
    outsider = add_key(tmp_path / "emu", "other", ORG_ACTIONS)
    no_actions = add_key(tmp_path / "emu", emu.org_id, ())
    rid = resource["resourceId"]
    with api(emu, outsider) as client:
        missing = client.post("/resource/999999", json={"sso": False})
        assert (missing.status_code, missing.json()["message"]) == (404, "Resource with ID 999999 not found")
        foreign = client.post(f"/resource/{rid}", json={"sso": False})
        assert (foreign.status_code, foreign.json()["message"]) == (
            403,
            "Key does not have access to this organization",
        )
    with api(emu, no_actions) as client:
        denied = client.post(f"/resource/{rid}", json={"sso": False})
        assert (denied.status_code, denied.json()["message"]) == (
            403,
            "Key does not have permission perform this action",
        )
    with api(emu) as client:
        invalid = client.post(f"/resource/{rid}", json={"sso": False})
        assert (invalid.status_code, invalid.json()["message"]) == (
            400,
            'Validation error: Unrecognized key: "sso"',
        )


def test_root_key_passes_org_checks(emu122: EmulatorHandle) -> None:
    with api(emu122, emu122.root_api_key) as client:
        assert client.get(f"/org/{emu122.org_id}/resources").status_code == 200


def test_malformed_json_is_400(emu122: EmulatorHandle) -> None:
    with api(emu122) as client:
        response = client.put(
            f"/org/{emu122.org_id}/resource", content=b"{x", headers={"Content-Type": "application/json"}
        )
    assert (response.status_code, response.json()["message"]) == (
        400,
        "Expected property name or '}' in JSON at position 1",
    )


def test_non_numeric_resource_id(emu122: EmulatorHandle) -> None:
    with api(emu122) as client:
        response = client.get("/resource/abc")
    assert (response.status_code, response.json()["message"]) == (404, "Resource with ID abc not found")
