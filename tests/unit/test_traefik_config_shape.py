"""The emulator's Traefik HTTP-provider payload, against the real 1.22.0 payload and the rules of
docs/pangolin-api.md §2.4.1 (shared/reference/pangolin-traefik-config.md)."""

from __future__ import annotations

from typing import Any

import pytest

from pangolin_emulator.traefik_config import sanitize, traefik_config

pytestmark = pytest.mark.unit


def resource(resource_id: int, name: str, port: int, *, mode: str = "tcp", enabled: bool = True) -> dict[str, Any]:
    return {"resourceId": resource_id, "name": name, "mode": mode, "proxyPort": port, "enabled": enabled}


def target(target_id: int, resource_id: int, ip: str, port: int, *, enabled: bool = True) -> dict[str, Any]:
    return {"targetId": target_id, "resourceId": resource_id, "ip": ip, "port": port, "enabled": enabled}


def test_the_observed_payload_of_three_raw_resources() -> None:
    # The org of the reference: two tcp targets, one udp target, one disabled resource (with a target).
    resources = [
        resource(39, "sample-ssh", 21350),
        resource(40, "sample-dns", 21351, mode="udp"),
        resource(41, "sample-off", 21352, enabled=False),
    ]
    targets = [
        target(1, 39, "10.0.0.7", 22),
        target(2, 39, "10.0.0.8", 2222),
        target(3, 40, "10.0.0.9", 53),
        target(4, 41, "10.0.0.10", 22),
    ]
    config = traefik_config(resources, targets)
    assert set(config) == {"tcp", "udp"}
    assert config["tcp"] == {
        "routers": {
            "39-sample-ssh-router": {
                "entryPoints": ["tcp-21350"],
                "service": "39-sample-ssh-service",
                "rule": "HostSNI(`*`)",
            }
        },
        "services": {
            "39-sample-ssh-service": {
                "loadBalancer": {"servers": [{"address": "10.0.0.7:22"}, {"address": "10.0.0.8:2222"}]}
            }
        },
    }
    assert config["udp"] == {
        "routers": {"40-sample-dns-router": {"entryPoints": ["udp-21351"], "service": "40-sample-dns-service"}},
        "services": {"40-sample-dns-service": {"loadBalancer": {"servers": [{"address": "10.0.0.9:53"}]}}},
    }


def test_disabled_targets_are_left_out_and_a_resource_without_one_has_no_router() -> None:
    resources = [resource(1, "one", 40001), resource(2, "two", 40002)]
    targets = [
        target(10, 1, "127.0.0.1", 2222, enabled=False),
        target(11, 1, "127.0.0.1", 2223),
        target(12, 2, "127.0.0.1", 2224, enabled=False),
    ]
    tcp = traefik_config(resources, targets)["tcp"]
    assert tcp["services"] == {"1-one-service": {"loadBalancer": {"servers": [{"address": "127.0.0.1:2223"}]}}}
    assert list(tcp["routers"]) == ["1-one-router"]
    # No target at all: nothing either, and no empty part (Traefik refuses a payload holding an empty map).
    assert traefik_config([resource(3, "three", 40003)], []) == {}


def test_servers_follow_the_target_ids_whatever_order_the_rows_come_in() -> None:
    targets = [target(7, 1, "10.0.0.3", 22), target(5, 1, "10.0.0.1", 22), target(6, 1, "10.0.0.2", 22)]
    servers = traefik_config([resource(1, "many", 40001)], targets)["tcp"]["services"]["1-many-service"]
    assert servers == {"loadBalancer": {"servers": [{"address": f"10.0.0.{i}:22"} for i in (1, 2, 3)]}}


def test_two_enabled_resources_on_one_port_give_two_routers_on_one_entry_point() -> None:
    resources = [resource(8, "winner", 40005), resource(9, "loser", 40005), resource(10, "off", 40005, enabled=False)]
    targets = [target(1, 8, "127.0.0.1", 2222), target(2, 9, "127.0.0.1", 2223), target(3, 10, "127.0.0.1", 2224)]
    routers = traefik_config(resources, targets)["tcp"]["routers"]
    assert {name: r["entryPoints"] for name, r in routers.items()} == {
        "8-winner-router": ["tcp-40005"],
        "9-loser-router": ["tcp-40005"],
    }
    assert {r["rule"] for r in routers.values()} == {"HostSNI(`*`)"}


def test_tcp_and_udp_on_the_same_port_are_different_entry_points() -> None:
    resources = [resource(1, "t", 40001), resource(2, "u", 40001, mode="udp")]
    config = traefik_config(resources, [target(1, 1, "127.0.0.1", 22), target(2, 2, "127.0.0.1", 53)])
    assert config["tcp"]["routers"]["1-t-router"]["entryPoints"] == ["tcp-40001"]
    assert config["udp"]["routers"]["2-u-router"] == {"entryPoints": ["udp-40001"], "service": "2-u-service"}


@pytest.mark.parametrize(
    ("name", "sanitized"),
    [
        ("ssh-gateway/dev/gpu-01", "ssh-gateway-dev-gpu-01"),
        ("ssh-gateway/dev/@connect", "ssh-gateway-dev-connect"),
        ("--a  b__c--", "a-b-c"),
        ("ÄÖ.ü", ""),
        # Cut at 50 first: the 51st character and beyond never count, even after collapsing.
        ("a" * 49 + "/b" + "c" * 10, "a" * 49),
        ("x" * 50 + "y", "x" * 50),
    ],
)
def test_names_are_sanitised_as_pangolin_does(name: str, sanitized: str) -> None:
    assert sanitize(name) == sanitized


def test_long_names_that_differ_after_fifty_characters_are_told_apart_by_the_id_only() -> None:
    stem = "ssh-gateway/a-project-with-a-long-name/production/"  # 50 characters
    resources = [resource(3, stem + "gpu-01", 40001), resource(4, stem + "gpu-02", 40002)]
    routers = traefik_config(resources, [target(1, 3, "127.0.0.1", 22), target(2, 4, "127.0.0.1", 22)])["tcp"]
    short = "ssh-gateway-a-project-with-a-long-name-production"
    assert sorted(routers["routers"]) == [f"3-{short}-router", f"4-{short}-router"]


def test_only_raw_resources_appear() -> None:
    assert traefik_config([resource(1, "web", 0, mode="http")], [target(1, 1, "127.0.0.1", 80)]) == {}
