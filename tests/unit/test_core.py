"""The domain core's small pieces: who owns a bound port, what a create may adopt, the API-key lookup order,
addresses, and finding an instance from a URN."""

from __future__ import annotations

import pytest

from ssh_gateway.core.addresses import check_host, check_http_url
from ssh_gateway.core.credentials import API_KEY_CONFIG, API_KEY_ENV, MissingApiKey, check_api_key, find_api_key
from ssh_gateway.core.firewall import (
    Cidrs,
    ServiceTag,
    connect_priority,
    opens_to_world,
    parse_sources,
    priority_band,
)
from ssh_gateway.core.names import (
    CONNECT_ENTRY_TYPE,
    CONNECT_INSTANCE_TYPE,
    ENVOY_FILTER_TYPE,
    connect_resource_name,
    entry_of,
    instance_of,
    urn_type,
)
from ssh_gateway.core.org import Binding, OrgView, contest
from ssh_gateway.core.ports import PortRange

pytestmark = pytest.mark.unit

KEY = "abcdefghijklmno.abcdefghijabcdefghijabcdefghijabcdefghij"
ORG = OrgView(
    (
        Binding(port=40001, resource_id=3, name="ssh-gateway/dev/a", protocol="tcp"),
        Binding(port=40002, resource_id=4, name="db-proxy", protocol="tcp"),
        Binding(port=40003, resource_id=9, name="ssh-gateway/dev/gone", protocol="tcp"),
        Binding(port=40004, resource_id=5, name="ssh-gateway/dev/b", protocol="udp"),
        Binding(port=40001, resource_id=2, name="ssh-gateway/dev/a", protocol="tcp"),
        Binding(port=50000, resource_id=6, name="elsewhere", protocol="tcp"),
    )
)


def test_held_lists_only_the_range_lowest_id_first() -> None:
    held = ORG.held_in(PortRange(start=40000, end=40009))
    assert {port: [b.resource_id for b in bindings] for port, bindings in held.items()} == {
        40001: [2, 3],
        40002: [4],
        40003: [9],
        40004: [5],
    }


def test_a_port_is_foreign_unless_bound_by_the_name_of_its_owner_in_the_table() -> None:
    held = ORG.held_in(PortRange(start=40000, end=40009))
    owners = {40001: "ssh-gateway/dev/a", 40004: "ssh-gateway/dev/b"}
    assert contest(held, owners, protocol="tcp").foreign == {
        40002: "Pangolin resource 4 'db-proxy'",  # someone else's
        40003: "Pangolin resource 9 'ssh-gateway/dev/gone'",  # this stack's leftover of a removed instance
    }


def test_a_leftover_is_adopted_only_with_the_same_name_and_protocol() -> None:
    assert ORG.leftover("ssh-gateway/dev/a", "tcp") == 2  # twins: the lowest id
    assert ORG.leftover("ssh-gateway/dev/b", "tcp") is None  # a replacement's deleted udp resource
    assert ORG.leftover("ssh-gateway/dev/c", "tcp") is None


def test_the_stack_secret_comes_before_the_environment() -> None:
    other = "zzzzzzzzzzzzzzz.zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"
    assert find_api_key({API_KEY_CONFIG: KEY}, {API_KEY_ENV: other}) == (KEY, API_KEY_CONFIG)
    assert find_api_key({}, {API_KEY_ENV: other}) == (other, API_KEY_ENV)
    with pytest.raises(MissingApiKey, match=f"{API_KEY_CONFIG}.*{API_KEY_ENV}"):
        find_api_key({}, {})


@pytest.mark.parametrize("bad", ["no-dot-here", "UPPER.secret", "id.", ".secret", "id.sec ret"])
def test_a_malformed_key_is_named_by_where_it_came_from_never_shown(bad: str) -> None:
    with pytest.raises(ValueError) as raised:
        check_api_key(bad, API_KEY_ENV)
    assert str(raised.value).startswith(f"{API_KEY_ENV} is not a Pangolin API key: expected <keyId>.<secret>")
    assert bad not in str(raised.value)


@pytest.mark.parametrize("good", ["10.0.0.4", "::1", "ssh.example.com", "localhost", "node-1"])
def test_hosts(good: str) -> None:
    assert check_host(good) == good


@pytest.mark.parametrize("bad", ["10.0.0.256", "1.2.3", "-x.example.com", "a..b", "ssh example.com", ""])
def test_not_hosts(bad: str) -> None:
    with pytest.raises(ValueError, match="neither an IP address"):
        check_host(bad)


def test_urls() -> None:
    assert check_http_url("https://api.example.com/v1/") == "https://api.example.com/v1"
    for bad in ("ftp://x/v1", "https:///v1", "https://user@/v1", "http://h:0/v1", "http://10.0.0.256/v1"):
        with pytest.raises(ValueError):
            check_http_url(bad)
    with pytest.raises(ValueError, match="carries credentials"):
        check_http_url("https://u:p@api.example.com/v1")


def test_sources_are_cidrs_or_one_service_tag() -> None:
    assert parse_sources(["203.0.113.0/24", "10.0.0.0/8"]) == Cidrs(("203.0.113.0/24", "10.0.0.0/8"))
    assert parse_sources(["Internet"]) == ServiceTag("Internet")
    with pytest.raises(ValueError, match="mixes the service tag"):
        parse_sources(["Internet", "10.0.0.0/8"])
    with pytest.raises(ValueError, match="is not a CIDR"):
        parse_sources(["10.0.0.1/8"])
    assert opens_to_world(["10.0.0.0/8", "0.0.0.0/0", "Internet", "*"]) == ["0.0.0.0/0", "Internet", "*"]


def test_instance_of_finds_the_component_and_its_children_only() -> None:
    stack = "urn:pulumi:dev::ssh-gateway::"
    assert instance_of(f"{stack}ssh-gateway:index:SshInstance::gpu-01") == "gpu-01"
    child = f"{stack}ssh-gateway:index:SshInstance$pulumi-python:dynamic/pangolin:TcpResource::gpu-01-pangolin"
    assert instance_of(child) == "gpu-01" and urn_type(child) == "pulumi-python:dynamic/pangolin:TcpResource"
    assert instance_of(f"{stack}ssh-gateway:index:SshInstance$kubernetes:core/v1:Service::gpu-0-service") == "gpu-0"
    assert instance_of(f"{stack}pulumi-python:dynamic/ssh-gateway:PortAllocation::ports") is None


def test_instance_of_knows_connect_mode_instances_and_not_the_entry() -> None:
    stack = "urn:pulumi:dev::ssh-gateway::"
    route = f"{stack}{CONNECT_INSTANCE_TYPE}${ENVOY_FILTER_TYPE}::gpu-07-route"
    assert instance_of(route) == "gpu-07" and urn_type(route) == ENVOY_FILTER_TYPE
    assert instance_of(f"{stack}{CONNECT_INSTANCE_TYPE}::gpu-07") == "gpu-07"
    entry_child = f"{stack}{CONNECT_ENTRY_TYPE}$pulumi-python:dynamic/pangolin:TcpResource::connect-pangolin"
    assert instance_of(entry_child) is None and entry_of(entry_child)
    assert not entry_of(route)
    # The entry's Pangolin name can never be an instance's: an instance name is a DNS label.
    assert connect_resource_name("ssh-gateway", "dev") == "ssh-gateway/dev/@connect"


@pytest.mark.parametrize(
    ("held", "taken", "block", "priority"),
    [
        (None, set(), range(0), 1000),  # a new rule, alone: priorityBase
        (None, {1000, 1001, 1003}, range(0), 1002),  # the first free from priorityBase
        (None, {1100}, range(1000, 1100), 1101),  # never one of the per-instance block's
        (1500, {1000}, range(1000, 1100), 1500),  # the one it holds stays
        (999, set(), range(0), 1000),  # below priorityBase (the old design's place): it moves
        (1042, set(), range(1000, 1100), 1100),  # inside the per-instance block: it moves
    ],
)
def test_the_connect_rule_keeps_its_priority_or_takes_the_first_free(
    held: int | None, taken: set[int], block: range, priority: int
) -> None:
    assert (
        connect_priority(priority_band(1000), held=held, taken=dict.fromkeys(taken, "other"), block=block) == priority
    )


def test_no_priority_left_for_the_connect_rule_is_named() -> None:
    with pytest.raises(
        ValueError,
        match=r"^no NSG priority is free for the CONNECT port's rule: ssh-gateway:firewall.priorityBase=100 leaves "
        r"100-4096, and other rules of the NSG or of this stack hold every one \(100 by this stack's per-instance "
        r"block, 101 by this stack's per-instance block, 102 by this stack's per-instance block and 3994 more\); lower",
    ):
        connect_priority(priority_band(100), taken={4096: "other"}, block=range(100, 4096))
