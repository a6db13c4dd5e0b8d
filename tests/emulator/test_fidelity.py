"""Where the emulator once differed from real 1.18.4 and 1.22.0 servers (issue 11, item 6).

Each test pins a status, a message or a key set that a replay against real servers observed, so
the emulator cannot drift back. Key sets are compared exactly, per version.
"""

from __future__ import annotations

import httpx
import pytest
import yaml

from pangolin_emulator.harness import EmulatorHandle

from .conftest import Start, api, next_port

pytestmark = pytest.mark.provider

VERSIONS = ["emu118", "emu122"]

_HC_KEYS = {
    "hcEnabled", "hcPath", "hcScheme", "hcMode", "hcHostname", "hcPort", "hcInterval", "hcUnhealthyInterval",
    "hcTimeout", "hcHeaders", "hcFollowRedirects", "hcMethod", "hcStatus", "hcHealth", "hcTlsServerName",
    "hcHealthyThreshold", "hcUnhealthyThreshold",
}  # fmt: skip
TARGET_LIST_KEYS_118 = {
    "targetId", "ip", "method", "port", "enabled", "resourceId", "siteId", "siteType", "siteName",
    "path", "pathMatchType", "rewritePath", "rewritePathType", "priority", *_HC_KEYS,
}  # fmt: skip
TARGET_LIST_KEYS_122 = TARGET_LIST_KEYS_118 | {"mode", "providerId"}
SITE_LIST_KEYS_118 = {
    "siteId", "niceId", "name", "pubKey", "megabytesIn", "megabytesOut", "orgName", "type", "address",
    "newtVersion", "exitNodeId", "exitNodeName", "exitNodeEndpoint", "remoteExitNodeId", "resourceCount",
    "status", "newtUpdateAvailable",
}  # fmt: skip
SITE_LIST_KEYS_122 = SITE_LIST_KEYS_118 | {"labels"}
NOT_IN_TARGET_LISTS = {"authToken", "internalPort", "name", "orgId", "targetHealthCheckId"}


def _emu(request: pytest.FixtureRequest, name: str) -> EmulatorHandle:
    emu: EmulatorHandle = request.getfixturevalue(name)
    return emu


def _with_target(emu: EmulatorHandle, client: httpx.Client, name: str) -> int:
    body = {"name": name, "http": False, "protocol": "tcp", "proxyPort": next_port()}
    rid = int(client.put(f"/org/{emu.org_id}/resource", json=body).json()["data"]["resourceId"])
    target = client.put(f"/resource/{rid}/target", json={"siteId": emu.site_id, "ip": "127.0.0.1", "port": 22})
    assert target.status_code == 201, target.text
    return rid


# --- GET /v1/openapi.json ------------------------------------------------------------------


@pytest.mark.parametrize("emu_name", VERSIONS)
def test_openapi_json_needs_no_key(emu_name: str, request: pytest.FixtureRequest) -> None:
    emu = _emu(request, emu_name)
    response = httpx.get(f"{emu.url}/openapi.json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    doc = response.json()
    assert (doc["openapi"], doc["servers"], doc["info"]["title"]) == (
        "3.0.0",
        [{"url": "/v1"}],
        "Pangolin Integration API",
    )
    # The document describes this server: the routes the tests below rely on, without the /v1 prefix.
    for path, method in [
        ("/org/{orgId}/resource", "put"),
        ("/org/{orgId}/resources", "get"),
        ("/resource/{resourceId}/targets", "get"),
        ("/org/{orgId}/sites", "get"),
        ("/orgs", "get"),
    ]:
        assert doc["paths"][path][method]["security"] == [{"Bearer Auth": []}]
    assert doc["paths"]["/openapi.json"]["get"]["security"] == []
    # A key is accepted too, and does not change the answer.
    with api(emu) as client:
        assert client.get("/openapi.json").json() == doc


def test_openapi_yaml_needs_no_key_and_parses(emu122: EmulatorHandle) -> None:
    response = httpx.get(f"{emu122.url}/openapi.yaml")
    assert response.status_code == 200
    assert yaml.safe_load(response.text) == httpx.get(f"{emu122.url}/openapi.json").json()


def test_openapi_documents_every_route_and_only_those(emu122: EmulatorHandle) -> None:
    """Each documented operation is served: with a key it never falls through to the HTML 404."""
    doc = httpx.get(f"{emu122.url}/openapi.json").json()
    with api(emu122, emu122.root_api_key) as client:
        for path, operations in doc["paths"].items():
            concrete = path.replace("{orgId}", emu122.org_id).replace("{domainId}", emu122.domain_id)
            concrete = concrete.replace("{resourceId}", "999999").replace("{targetId}", "999999")
            concrete = concrete.replace("{siteId}", "999999")
            for method in operations:
                response = client.request(method.upper(), concrete, json={})
                assert not response.headers["content-type"].startswith("text/html"), (method, path)
        assert client.get("/openapi.jsonx").headers["content-type"].startswith("text/html")


def test_openapi_is_not_there_before_117(start: Start) -> None:
    emu = start(version="1.16.0")
    anonymous = httpx.get(f"{emu.url}/openapi.json")
    assert (anonymous.status_code, anonymous.json()["message"]) == (401, "API key required")
    with api(emu) as client:
        assert "<pre>Cannot GET /v1/openapi.json</pre>" in client.get("/openapi.json").text


# --- GET /v1/orgs ----------------------------------------------------------------------------


@pytest.mark.parametrize("emu_name", VERSIONS)
def test_orgs_refuses_an_org_key(emu_name: str, request: pytest.FixtureRequest) -> None:
    emu = _emu(request, emu_name)
    with api(emu) as client:
        response = client.get("/orgs")
    assert response.status_code == 403
    assert response.json() == {
        "data": None,
        "success": False,
        "error": True,
        "message": "Key does not have root access",
        "status": 403,
        "stack": None,
    }
    anonymous = httpx.get(f"{emu.url}/orgs")
    assert (anonymous.status_code, anonymous.json()["message"]) == (401, "API key required")


@pytest.mark.parametrize("emu_name", VERSIONS)
def test_orgs_lists_for_a_root_key(emu_name: str, request: pytest.FixtureRequest) -> None:
    emu = _emu(request, emu_name)
    with api(emu, emu.root_api_key) as client:
        response = client.get("/orgs")
        body = response.json()
        assert (response.status_code, body["message"]) == (200, "Organizations retrieved successfully")
        assert set(body["data"]) == {"orgs", "pagination"}
        assert body["data"]["pagination"] == {"total": 1, "limit": 1000, "offset": 0}
        assert body["data"]["orgs"] == [{"orgId": emu.org_id, "name": emu.org_id}]
        window = client.get("/orgs", params={"limit": 1, "offset": 1}).json()["data"]
        assert window == {"orgs": [], "pagination": {"total": 1, "limit": 1, "offset": 1}}
        zero = client.get("/orgs", params={"limit": 0})
        assert (zero.status_code, zero.json()["message"]) == (
            400,
            'Validation error: Too small: expected number to be >0 at "limit"',
        )


def test_orgs_query_is_strict_from_120(emu122: EmulatorHandle, emu118: EmulatorHandle) -> None:
    with api(emu122, emu122.root_api_key) as client:
        strict = client.get("/orgs", params={"page": 1})
    assert (strict.status_code, strict.json()["message"]) == (400, 'Validation error: Unrecognized key: "page"')
    with api(emu118, emu118.root_api_key) as client:
        assert client.get("/orgs", params={"page": 1}).status_code == 200


# --- target list items -----------------------------------------------------------------------


@pytest.mark.parametrize(("emu_name", "keys"), [("emu118", TARGET_LIST_KEYS_118), ("emu122", TARGET_LIST_KEYS_122)])
def test_target_list_item_keys(emu_name: str, keys: set[str], request: pytest.FixtureRequest) -> None:
    emu = _emu(request, emu_name)
    with api(emu) as client:
        rid = _with_target(emu, client, "target-keys")
        (item,) = client.get(f"/resource/{rid}/targets").json()["data"]["targets"]
        single = client.get(f"/target/{item['targetId']}").json()["data"]
    assert set(item) == keys
    assert not NOT_IN_TARGET_LISTS & set(item)
    assert (item["siteName"], item["siteType"], item["siteId"]) == ("local1", "local", emu.site_id)
    # The single GET is the merged target + health-check row, which keeps those keys (contract §3).
    assert NOT_IN_TARGET_LISTS - {"authToken"} <= set(single)


# --- site objects ----------------------------------------------------------------------------


@pytest.mark.parametrize(("emu_name", "keys"), [("emu118", SITE_LIST_KEYS_118), ("emu122", SITE_LIST_KEYS_122)])
def test_site_list_item_keys(emu_name: str, keys: set[str], request: pytest.FixtureRequest) -> None:
    emu = _emu(request, emu_name)
    with api(emu) as client:
        (site,) = client.get(f"/org/{emu.org_id}/sites").json()["data"]["sites"]
    assert set(site) == keys
    assert "online" not in site and "subnet" not in site
    assert (site["status"], site["newtUpdateAvailable"], site["exitNodeName"], site["remoteExitNodeId"]) == (
        "approved",
        False,
        None,
        None,
    )
    if "labels" in keys:
        assert site["labels"] == []


@pytest.mark.parametrize("emu_name", VERSIONS)
def test_site_get_is_the_whole_row_with_status(emu_name: str, request: pytest.FixtureRequest) -> None:
    emu = _emu(request, emu_name)
    with api(emu) as client:
        site = client.get(f"/site/{emu.site_id}").json()["data"]
    assert site["status"] == "approved"
    assert (site["siteId"], site["orgId"], site["type"]) == (emu.site_id, emu.org_id, "local")
    # Joined list-only columns never appear on the row itself.
    assert not {"exitNodeName", "exitNodeEndpoint", "remoteExitNodeId", "newtUpdateAvailable", "labels"} & set(site)


# --- resource list items ---------------------------------------------------------------------


@pytest.mark.parametrize("emu_name", VERSIONS)
def test_resource_list_items_carry_sites(emu_name: str, request: pytest.FixtureRequest) -> None:
    emu = _emu(request, emu_name)
    with api(emu) as client:
        _with_target(emu, client, "with-sites")
        bare = {"name": "without-sites", "http": False, "protocol": "tcp", "proxyPort": next_port()}
        assert client.put(f"/org/{emu.org_id}/resource", json=bare).status_code == 201
        items = client.get(f"/org/{emu.org_id}/resources", params={"query": "-sites", "pageSize": 100}).json()
    by_name = {item["name"]: item for item in items["data"]["resources"]}
    assert by_name["with-sites"]["sites"] == [
        {"siteId": emu.site_id, "siteName": "local1", "siteNiceId": f"{emu.org_id}-local"}
    ]
    assert by_name["without-sites"]["sites"] == []
    assert ("labels" in by_name["with-sites"]) == (emu_name == "emu122")
