"""Lists and pagination by version (contract §2.6, §4, §8 item 8, Addendum 4 and 9)."""

from __future__ import annotations

import pytest

from pangolin_emulator.harness import EmulatorHandle

from .conftest import Start, api, create_raw, next_port

pytestmark = pytest.mark.provider


def _fill(emu: EmulatorHandle, count: int) -> list[dict[str, object]]:
    with api(emu) as client:
        body = {"name": "", "http": False, "protocol": "tcp", "proxyPort": 0}
        created = []
        # Reverse creation order so that name order differs from id order.
        for index in reversed(range(count)):
            body |= {"name": f"res-{index:02d}", "proxyPort": next_port()}
            response = client.put(f"/org/{emu.org_id}/resource", json=body)
            assert response.status_code == 201
            created.append(response.json()["data"])
        return created


def test_122_pages_of_20_by_name(start: Start) -> None:
    emu = start(version="1.22.0")
    _fill(emu, 25)
    with api(emu) as client:
        first = client.get(f"/org/{emu.org_id}/resources").json()["data"]
        assert first["pagination"] == {"total": 25, "pageSize": 20, "page": 1}
        assert [r["name"] for r in first["resources"]] == [f"res-{i:02d}" for i in range(20)]
        second = client.get(f"/org/{emu.org_id}/resources", params={"page": 2}).json()["data"]
        assert [r["name"] for r in second["resources"]] == [f"res-{i:02d}" for i in range(20, 25)]
        zero = client.get(f"/org/{emu.org_id}/resources", params={"page": 0, "pageSize": 0}).json()["data"]
        assert zero["pagination"] == {"total": 25, "pageSize": 20, "page": 0}
        assert len(zero["resources"]) == 20
        big = client.get(f"/org/{emu.org_id}/resources", params={"pageSize": 100}).json()["data"]
        assert len(big["resources"]) == 25
        desc = client.get(f"/org/{emu.org_id}/resources", params={"order": "desc", "pageSize": 1}).json()["data"]
        assert desc["resources"][0]["name"] == "res-24"


def test_122_strict_query(emu122: EmulatorHandle) -> None:
    with api(emu122) as client:
        one = client.get(f"/org/{emu122.org_id}/resources", params={"limit": 10})
        assert (one.status_code, one.json()["message"]) == (
            400,
            'Validation error: Unrecognized key: "limit"',
        )
        two = client.get(f"/org/{emu122.org_id}/sites", params={"limit": 10, "offset": 0})
        assert two.json()["message"] == 'Validation error: Unrecognized keys: "limit", "offset"'
        targets = client.get(
            f"/resource/{create_raw(client, 'acme', 'q', next_port())['resourceId']}/targets",
            params={"page": 1},
        )
        assert targets.json()["message"] == 'Validation error: Unrecognized key: "page"'


def test_118_ignores_unknown_query_keys(start: Start) -> None:
    emu = start(version="1.18.4")
    _fill(emu, 22)
    with api(emu) as client:
        data = client.get(f"/org/{emu.org_id}/resources", params={"limit": 1000, "offset": 0}).json()["data"]
    assert data["pagination"] == {"total": 22, "pageSize": 20, "page": 1}
    item = data["resources"][0]
    assert (item["http"], item["protocol"], item["sso"], item["whitelist"]) == (False, "tcp", True, False)
    assert "mode" not in item


def test_115_limit_offset(start: Start) -> None:
    emu = start(version="1.15.0")
    created = _fill(emu, 5)
    with api(emu) as client:
        all_of_them = client.get(f"/org/{emu.org_id}/resources").json()["data"]
        assert all_of_them["pagination"] == {"total": 5, "limit": 1000, "offset": 0}
        window = client.get(f"/org/{emu.org_id}/resources", params={"limit": 2, "offset": 1}).json()["data"]
    assert window["pagination"] == {"total": 5, "limit": 2, "offset": 1}
    assert [r["resourceId"] for r in window["resources"]] == [r["resourceId"] for r in created[1:3]]


def test_122_list_item_shape(emu122: EmulatorHandle) -> None:
    with api(emu122) as client:
        resource = create_raw(client, emu122.org_id, "shape-122", next_port())
        client.put(
            f"/resource/{resource['resourceId']}/target",
            json={"siteId": emu122.site_id, "ip": "127.0.0.1", "port": 5432},
        )
        items = client.get(f"/org/{emu122.org_id}/resources", params={"query": "shape-122"}).json()["data"]
    (item,) = items["resources"]
    assert (item["sso"], item["whitelist"], item["mode"]) == (1, 0, "tcp")
    (target,) = item["targets"]
    assert (target["ip"], target["port"], target["siteType"], target["siteId"]) == (
        "127.0.0.1",
        5432,
        "local",
        1,
    )
    assert item["sites"][0]["siteId"] == emu122.site_id
    assert item["labels"] == []


def test_sites_and_domains(emu122: EmulatorHandle, emu118: EmulatorHandle) -> None:
    for emu in (emu122, emu118):
        with api(emu) as client:
            sites = client.get(f"/org/{emu.org_id}/sites").json()["data"]
            assert sites["pagination"] == {"total": 1, "pageSize": 20, "page": 1}
            assert (sites["sites"][0]["siteId"], sites["sites"][0]["type"]) == (emu.site_id, "local")
            site = client.get(f"/site/{emu.site_id}").json()
            assert (site["message"], site["data"]["orgId"]) == ("Site retrieved successfully", emu.org_id)
            missing = client.get("/site/999")
            assert (missing.status_code, missing.json()["message"]) == (404, "Site with ID 999 not found")
            domains = client.get(f"/org/{emu.org_id}/domains", params={"limit": 10}).json()["data"]
            assert domains["pagination"] == {"total": 1, "limit": 10, "offset": 0}
            domain = domains["domains"][0]
            assert (domain["domainId"], domain["type"], domain["verified"]) == (
                emu.domain_id,
                "wildcard",
                True,
            )
            assert client.get(f"/org/{emu.org_id}/domain/{emu.domain_id}").status_code == 200


@pytest.mark.parametrize("version", ["1.18.4", "1.22.0"])
def test_query_is_a_case_insensitive_like_search(start: Start, version: str) -> None:
    """`query` is SQL `LIKE '%q%'` on name, niceId and fullDomain (see listing.search_pattern)."""
    emu = start(version=version)
    dialect: dict[str, object] = {"mode": "tcp"} if version == "1.22.0" else {"http": False, "protocol": "tcp"}
    with api(emu) as client:
        for name in ("gw/dev_box", "gw/devXbox", "GW/Other", "plain"):
            response = client.put(
                f"/org/{emu.org_id}/resource", json={"name": name, "proxyPort": next_port(), **dialect}
            )
            assert response.status_code == 201
        web: dict[str, object] = {"name": "web", "domainId": emu.domain_id, "subdomain": "shop-eu"}
        web |= {"mode": "http"} if version == "1.22.0" else {"http": True, "protocol": "tcp"}
        assert client.put(f"/org/{emu.org_id}/resource", json=web).status_code == 201

        def names(query: str) -> list[str]:
            data = client.get(f"/org/{emu.org_id}/resources", params={"query": query, "pageSize": 100}).json()["data"]
            return [item["name"] for item in data["resources"]]

        # Name order is byte order (SQLite's BINARY collation): "X" sorts before "_".
        assert names("gw/") == ["GW/Other", "gw/devXbox", "gw/dev_box"]  # substring, any case
        assert names("gw/dev_box") == ["gw/devXbox", "gw/dev_box"]  # `_` is a one-character wildcard
        assert names("gw%box") == ["gw/devXbox", "gw/dev_box"]  # `%` is a wildcard too
        assert names("SHOP-EU.example") == ["web"]  # fullDomain is searched
        plain = next(item for item in client.get(f"/org/{emu.org_id}/resources").json()["data"]["resources"])
        assert plain["name"] in names(plain["niceId"])  # niceId is searched
        assert len(names("")) == 5  # an empty query filters nothing
        assert names("nothing-like-this") == []


def test_122_filters_count_before_the_page(emu122: EmulatorHandle) -> None:
    """enabled, siteId and protocol keep rows before the page is cut: `total` counts what they keep."""
    emu = emu122
    tag = f"flt{next_port()}"
    with api(emu) as client:
        first = create_raw(client, emu.org_id, f"{tag}-a", next_port())
        off = create_raw(client, emu.org_id, f"{tag}-b", next_port())
        create_raw(client, emu.org_id, f"{tag}-c", next_port(), mode="udp")
        web = {"name": f"{tag}-web", "mode": "http", "domainId": emu.domain_id, "subdomain": tag}
        assert client.put(f"/org/{emu.org_id}/resource", json=web).status_code == 201
        assert client.post(f"/resource/{off['resourceId']}", json={"enabled": False}).status_code == 200
        target = {"siteId": emu.site_id, "ip": "127.0.0.1", "port": 22}
        assert client.put(f"/resource/{first['resourceId']}/target", json=target).status_code == 201

        def listed(**params: str | int) -> tuple[int, list[str]]:
            data = client.get(f"/org/{emu.org_id}/resources", params={"query": tag, **params}).json()["data"]
            return data["pagination"]["total"], [item["name"] for item in data["resources"]]

        assert listed(enabled="false") == (1, [f"{tag}-b"])
        assert listed(siteId=emu.site_id) == (1, [f"{tag}-a"])
        assert listed(protocol="tcp") == (2, [f"{tag}-a", f"{tag}-b"])
        assert listed(protocol="udp") == (1, [f"{tag}-c"])
        assert listed(protocol="https") == (1, [f"{tag}-web"])  # an http resource is created with ssl on
        assert listed(protocol="http") == (0, [])
        assert listed(protocol="tcp", order="desc", pageSize=1, page=2) == (2, [f"{tag}-a"])


def test_domain_query_is_strict_from_116(emu122: EmulatorHandle, emu118: EmulatorHandle) -> None:
    for emu in (emu122, emu118):
        with api(emu) as client:
            response = client.get(f"/org/{emu.org_id}/domains", params={"page": 1})
        assert (response.status_code, response.json()["message"]) == (400, 'Validation error: Unrecognized key: "page"')


@pytest.mark.parametrize(("version", "status"), [("1.19.9", 200), ("1.20.0", 400)])
def test_list_queries_turn_strict_at_120(start: Start, version: str, status: int) -> None:
    emu = start(version=version)
    with api(emu) as client:
        rid = create_raw(client, emu.org_id, "strict", next_port())["resourceId"]
        for path in (f"/org/{emu.org_id}/resources", f"/org/{emu.org_id}/sites", f"/resource/{rid}/targets"):
            assert client.get(path, params={"unknownKey": 1}).status_code == status, path
    with api(emu, emu.root_api_key) as client:
        assert client.get("/orgs", params={"unknownKey": 1}).status_code == status
