"""Two owners on one port: the lowest resource id wins (`ssh_gateway.core.org`).

Before binding, `PortAllocation.check` moves an instance whose port an older resource of someone else owns and
refuses a pin on such a port; while binding, a create claims its port before it adds the target, and a create
that lost deletes its resource, which never served; after binding, the port check (the backstop) disables any
of the stack's younger resources that serve a port anyway and fails naming both owners; the next update moves
it (a replacement: a new claim).
"""

from __future__ import annotations

import concurrent.futures
import random
import re
from typing import TYPE_CHECKING, Any

import pytest
from pulumi.dynamic import Config, ConfigureRequest

from providers.pangolin import PangolinClient, PangolinConflict, PangolinTcpProvider
from providers.pangolin.port_check import CONNECT_KEY, PortCheckProvider
from providers.port_allocation.provider import PortAllocationProvider

from .conftest import FAST, configure, inputs, lists, next_port, writes

if TYPE_CHECKING:
    from pangolin_emulator.harness import EmulatorHandle

pytestmark = pytest.mark.provider

PREFIX = "ssh-gateway/d/"


def _entry(resource_id: int, name: str, *, enabled: bool = True, protocol: str = "tcp") -> dict[str, Any]:
    return {"id": resource_id, "name": name, "protocol": protocol, "enabled": enabled}


def _check(previous: dict[str, int], held: dict[int, list[dict[str, Any]]], **news: Any) -> Any:
    """`PortAllocationProvider.check` on range 40000-40009 with `previous` as the last table."""
    olds = {"ports": previous, "released": []} if previous else {}
    props = {
        "instances": sorted(previous) or ["a"],
        "start": 40000,
        "end": 40009,
        "pins": {},
        "reserved": [],
        "ownerPrefix": PREFIX,
        "held": {str(port): entries for port, entries in held.items()},
        **news,
    }
    return PortAllocationProvider().check(olds, props)


def test_an_instance_whose_port_an_older_resource_owns_moves_to_a_free_one() -> None:
    held = {40000: [_entry(10, "ssh-gateway/c/c-04"), _entry(28, PREFIX + "a", enabled=False)]}
    result = _check({"a": 40000, "b": 40001}, held, instances=["a", "b"])

    assert result.failures == []
    assert result.inputs["ports"] == {"a": 40002, "b": 40001}
    assert "held" not in result.inputs


def test_an_instance_whose_own_resource_is_older_keeps_its_port() -> None:
    held = {40000: [_entry(5, PREFIX + "a"), _entry(28, "ssh-gateway/c/c-04")]}
    result = _check({"a": 40000}, held)

    assert result.failures == []
    assert result.inputs["ports"] == {"a": 40000}


@pytest.mark.parametrize(
    "other",
    [_entry(3, "ssh-gateway/c/c-04", enabled=False), _entry(3, "ssh-gateway/c/c-04", protocol="udp")],
    ids=["disabled", "udp"],
)
def test_a_resource_that_serves_nothing_on_the_port_takes_it_from_no_one(other: dict[str, Any]) -> None:
    result = _check({"a": 40000}, {40000: [other]})

    assert result.failures == []
    assert result.inputs["ports"] == {"a": 40000}
    # ... but a new instance does not take a port that anyone holds.
    fresh = _check({"a": 40001}, {40000: [other]}, instances=["a", "b"])
    assert fresh.inputs["ports"] == {"a": 40001, "b": 40002}


def test_a_pin_on_a_port_an_older_resource_owns_fails_before_binding_naming_both() -> None:
    held = {40003: [_entry(10, "ssh-gateway/c/c-04")]}
    result = _check({"a": 40000}, held, pins={"a": 40003})

    [failure] = result.failures
    assert failure.reason == (
        "ssh-gateway:instances[a].port = 40003 is bound by Pangolin resource 10 'ssh-gateway/c/c-04', which this "
        "stack does not own; pin another port or free it in Pangolin"
    )


def _port_check(emulator: EmulatorHandle) -> PortCheckProvider:
    provider = PortCheckProvider(**FAST)
    provider.configure(ConfigureRequest(Config({"pangolin:apiKey": emulator.api_key}, "ssh-gateway")))
    return provider


def _make(provider: PangolinTcpProvider, emulator: EmulatorHandle, name: str, port: int) -> int:
    return int(provider.create(inputs(emulator, name=name, proxyPort=port)).id)


def _bind(client: PangolinClient, emulator: EmulatorHandle, name: str, port: int) -> int:
    """A resource and its target made without a claim (another tool, or an older ssh-gateway), so it serves
    `port` whoever else does."""
    resource = client.create_resource(emulator.org_id, name=name, protocol="tcp", proxy_port=port)
    client.create_target(resource.resourceId, site_id=emulator.site_id, ip="10.0.0.9", port=22)
    return resource.resourceId


def _served(emulator: EmulatorHandle, port: int) -> list[int]:
    """The resources that Traefik would route on `port`: enabled, with an enabled target."""
    state = emulator.state()
    targeted = {t["resourceId"] for t in state["targets"] if t["enabled"]}
    return [
        r["resourceId"]
        for r in state["resources"]
        if r["proxyPort"] == port and r["enabled"] and r["resourceId"] in targeted
    ]


def test_a_create_that_loses_its_port_deletes_its_resource_having_never_served(
    provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle
) -> None:
    port = next_port()
    older = _make(provider, emulator, "ssh-gateway/c/c-04", port)
    emulator.reset_counters()

    with pytest.raises(PangolinConflict) as raised:
        _make(provider, emulator, PREFIX + "a", port)

    message = str(raised.value)
    assert message.startswith(f"port {port} was claimed by Pangolin resource {older} 'ssh-gateway/c/c-04' first"), (
        message
    )
    assert message.endswith("Run `pulumi up` again: it moves the instance to a free port")
    assert client.find_resources(emulator.org_id, PREFIX + "a", "tcp") == []
    assert _served(emulator, port) == [older]
    # The loser's writes: its create and its delete; no target was ever added.
    assert writes(emulator.counters()) == {"PUT /v1/org/{orgId}/resource": 1, "DELETE /v1/resource/{resourceId}": 1}


def test_two_runs_creating_on_the_same_ports_at_once_serve_each_port_once(emulator: EmulatorHandle) -> None:
    # Two runs (two providers, so two ledgers) of 4 calls each, as the engine runs them, creating on the same
    # ports in a shuffled order: their ids interleave, so each ledger must read the other's resources below its
    # own before deciding. Each port goes to the lower id, the other create fails and leaves nothing.
    ports = [next_port() for _ in range(16)]
    runs = [configure(PangolinTcpProvider(**FAST), emulator.api_key) for _ in "cd"]
    jobs = [(run, f"ssh-gateway/{side}/i-{port}", port) for port in ports for run, side in zip(runs, "cd", strict=True)]
    random.Random(7).shuffle(jobs)  # noqa: S311 - a fixed test order, not a secret

    def create(job: tuple[PangolinTcpProvider, str, int]) -> int | None:
        run, name, port = job
        try:
            return int(run.create(inputs(emulator, name=name, proxyPort=port)).id)
        except PangolinConflict:
            return None

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        made = list(pool.map(create, jobs))

    for port in ports:
        won = [resource_id for (_, _, p), resource_id in zip(jobs, made, strict=True) if p == port and resource_id]
        assert len(won) == 1, f"port {port}: won by {won}"
        assert _served(emulator, port) == won
    assert emulator.doubly_bound_ports() == {}


def test_an_older_create_still_without_its_target_wins_the_port(
    provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle
) -> None:
    # Another run's create, between its two writes: it claimed the port first, so it keeps it.
    port = next_port()
    pending = client.create_resource(emulator.org_id, name="ssh-gateway/c/c-05", protocol="tcp", proxy_port=port)
    with pytest.raises(PangolinConflict):
        _make(provider, emulator, PREFIX + "a", port)
    assert client.find_resources(emulator.org_id, PREFIX + "a", "tcp") == []
    # A disabled resource claims nothing: the create wins over it.
    client.update_resource(pending.resourceId, enabled=False)
    mine = _make(provider, emulator, PREFIX + "a", port)
    assert _served(emulator, port) == [mine]


def test_the_port_check_disables_a_younger_resource_serving_anyway_and_names_both_owners(
    provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle
) -> None:
    port, other_port = next_port(), next_port()
    older = _make(provider, emulator, "ssh-gateway/c/c-04", port)
    younger = _bind(client, emulator, PREFIX + "a", port)
    _make(provider, emulator, PREFIX + "b", other_port)
    assert emulator.doubly_bound_ports() == {port: [older, younger]}
    check = _port_check(emulator)
    props = {
        "apiUrl": emulator.url,
        "orgId": emulator.org_id,
        "ownerPrefix": PREFIX,
        "ports": {"a": port, "b": other_port},
    }
    emulator.reset_counters()

    with pytest.raises(PangolinConflict) as raised:
        check.create(props)

    counters = emulator.counters()
    message = str(raised.value)
    assert f"port {port}: Pangolin resource {older} 'ssh-gateway/c/c-04' (older, keeps it)" in message
    assert f"this stack's Pangolin resource {younger} '{PREFIX}a' (disabled)" in message
    assert re.search(r"Run `pulumi up` again: it moves 'a' to free ports$", message)
    assert emulator.doubly_bound_ports() == {}
    assert client.get_resource(younger).enabled is False
    assert client.get_resource(older).enabled is True
    # One listing for the whole stack (a page per 100 resources of the org) and one write per loser.
    pages = -(-len(client.list_all_resources(emulator.org_id)) // 100)
    assert lists(counters) == {"GET /v1/org/{orgId}/resources": pages}
    assert writes(counters) == {"POST /v1/resource/{resourceId}": 1}

    # The other owner's check finds nothing to do: its resource is the older.
    emulator.reset_counters()
    check.create({**props, "ownerPrefix": "ssh-gateway/c/", "ports": {"c-04": port}})
    assert writes(emulator.counters()) == {}

    # The next run moves the loser: a replacement (delete, then create on the new port: a new claim).
    state = {**inputs(emulator, name=PREFIX + "a", proxyPort=port), "resourceId": younger, "targetId": 0}
    moved = next_port()
    assert provider.diff(str(younger), state, {**state, "proxyPort": moved}).replaces == ["proxyPort"]
    provider.delete(str(younger), state)
    replaced = _make(provider, emulator, PREFIX + "a", moved)
    live = client.get_resource(replaced)
    assert (live.proxyPort, live.enabled) == (moved, True)
    check.update("port-check", props, {**props, "ports": {"a": moved, "b": other_port}})
    assert emulator.doubly_bound_ports() == {}


def test_the_port_check_covers_the_connect_entry_whose_port_is_not_moved(
    provider: PangolinTcpProvider, client: PangolinClient, emulator: EmulatorHandle
) -> None:
    port, other_port = next_port(), next_port()
    older = _make(provider, emulator, "team-b/postgres", port)
    entry = _bind(client, emulator, PREFIX + CONNECT_KEY, port)  # the stack's CONNECT entry, `<prefix>@connect`
    _make(provider, emulator, PREFIX + "a", other_port)
    props = {
        "apiUrl": emulator.url,
        "orgId": emulator.org_id,
        "ownerPrefix": PREFIX,
        "ports": {"a": other_port, CONNECT_KEY: port},
    }

    with pytest.raises(PangolinConflict) as raised:
        _port_check(emulator).create(props)

    message = str(raised.value)
    assert f"this stack's Pangolin resource {entry} '{PREFIX}@connect' (disabled)" in message
    # Nothing to move (the port is config, not allocated): the fix is another connect.public.port.
    assert "moves" not in message
    assert message.endswith(
        "choose another ssh-gateway:connect.public.port (the CONNECT entry's port is not allocated)"
    )
    assert emulator.doubly_bound_ports() == {}
    assert (client.get_resource(entry).enabled, client.get_resource(older).enabled) == (False, True)


def test_the_port_check_lists_nothing_for_a_stack_without_instances(emulator: EmulatorHandle) -> None:
    _port_check(emulator).create({"apiUrl": emulator.url, "orgId": emulator.org_id, "ownerPrefix": PREFIX, "ports": {}})
    assert emulator.counters() == {}


def test_the_port_check_runs_when_ports_change_only() -> None:
    olds = {"apiUrl": "https://p.example/v1", "orgId": "acme", "ownerPrefix": PREFIX, "ports": {"a": 40000}}
    check = PortCheckProvider()
    assert not check.diff("port-check", olds, dict(olds)).changes
    assert check.diff("port-check", olds, {**olds, "ports": {"a": 40001}}).changes
    assert check.diff("port-check", olds, {**olds, "ports": {"a": 40000, "b": 40001}}).changes
