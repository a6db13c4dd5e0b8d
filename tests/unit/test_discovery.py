"""Instances discovered from the cluster, decided by pure logic (ssh_gateway/core/discovery*.py): annotations
validated by the instance models, tenants kept apart, the grace period, the guard and the status it writes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from ssh_gateway.core.cluster import ClusterObject, Listing, ServicePort, StatusMap
from ssh_gateway.core.connect import proxytunnel_command
from ssh_gateway.core.discovery import discover
from ssh_gateway.core.discovery_records import Outcome, Remembered, Selection, State
from ssh_gateway.core.discovery_status import (
    ENDPOINT_ROOM,
    STATUS_MAX_BYTES,
    StatusError,
    next_expiry,
    next_status,
    read_memory,
    read_report,
    read_selections,
)
from ssh_gateway.core.firewall import Cidrs
from ssh_gateway.core.names import STATUS_KEY_MAX, STATUS_UNLISTED_KEY, DiscoverFrom, ssh_alias, status_refused_key
from ssh_gateway.core.outputs import connect_endpoint, port_endpoint
from ssh_gateway.core.settings import (
    ClusterIpInstance,
    ConnectServiceInstance,
    NodePortInstance,
    Settings,
    StaticInstance,
    parse_settings,
)

from .test_settings import raw

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 3, 10, 0, 0, tzinfo=UTC)
STACK = "ssh-gateway.dev"
EXPOSE = {"ssh-gateway.io/expose": "true"}


def stack(**section: Any) -> Settings:
    discovery = {
        "from": "pods",
        "namespaces": ["gpu-users"],
        "selector": EXPOSE,
        "nameLabel": "ssh-gateway.io/instance",
    }
    discovery.update(section)
    return parse_settings(raw(discovery=discovery, kubernetes={"nodeIp": "10.0.0.4"}))


def pod(name: str, *, ns: str = "gpu-users", uid: str | None = None, **annotations: str) -> ClusterObject:
    return ClusterObject(
        kind=DiscoverFrom.PODS,
        namespace=ns,
        name=f"{name}-0",
        uid=uid or f"uid-{name}",
        labels={**EXPOSE, "ssh-gateway.io/instance": name},
        annotations={f"ssh-gateway.io/{k}": v for k, v in annotations.items()},
    )


def service(name: str, kind: str = "NodePort", node_port: int | None = 30022) -> ClusterObject:
    return ClusterObject(
        kind=DiscoverFrom.SERVICES,
        namespace="gpu-users",
        name=f"ssh-{name}",
        uid=f"uid-{name}",
        labels=dict(EXPOSE),
        service_type=kind,
        ports=(ServicePort(name="ssh", port=22, node_port=node_port),),
    )


def run(
    settings: Settings,
    *objects: ClusterObject,
    memory: dict[str, Remembered] | None = None,
    others: list[Selection] | None = None,
    now: datetime = NOW,
) -> Outcome:
    listing = Listing(objects=objects, resource_versions={"gpu-users": "1"})
    return discover(listing=listing, memory=memory or {}, others=others or [], settings=settings, stack=STACK, now=now)


def remember(outcome: Outcome) -> dict[str, Remembered]:
    """What the next run reads back from the status this run writes."""
    data = next_status(outcome, {})
    return read_memory(StatusMap(namespace="default", name="ssh-gateway-status-dev", stack=STACK, data=data))


def test_a_labelled_pod_becomes_an_instance_in_its_namespace_behind_its_own_service() -> None:
    outcome = run(stack(), pod("alice", user="alice", sourceCidrs="203.0.113.0/24, 198.51.100.7/32"))
    (found,) = outcome.instances
    inst = found.instance
    assert isinstance(inst, NodePortInstance)
    assert (inst.name, inst.namespace, inst.user) == ("alice", "gpu-users", "alice")
    assert inst.selector == {**EXPOSE, "ssh-gateway.io/instance": "alice"}
    assert isinstance(inst.source_cidrs, Cidrs) and inst.source_cidrs.networks == (
        "203.0.113.0/24",
        "198.51.100.7/32",
    )
    assert found.state is State.PRESENT and not outcome.refusals


def test_a_pod_without_node_ip_is_reached_at_its_services_cluster_name() -> None:
    settings = parse_settings(
        raw(
            discovery={
                "from": "pods",
                "namespaces": ["gpu-users"],
                "selector": EXPOSE,
                "nameLabel": "ssh-gateway.io/instance",
            }
        )
    )
    (found,) = run(settings, pod("bob")).instances
    assert isinstance(found.instance, ClusterIpInstance)


def test_a_platform_service_is_the_target_and_is_not_owned() -> None:
    settings = stack(**{"from": "services", "nameLabel": None})
    outcome = run(settings, service("carol"), service("dave", "ClusterIP", None))
    carol, dave = outcome.instances
    assert isinstance(carol.instance, StaticInstance) and isinstance(dave.instance, StaticInstance)
    assert (carol.instance.name, carol.instance.static_host, carol.instance.static_port) == ("carol", "10.0.0.4", 30022)
    assert (dave.instance.static_host, dave.instance.static_port) == ("ssh-dave.gpu-users.svc.cluster.local", 22)
    # Static, so no Service of the stack's; the namespace puts the host-key Secret beside the platform's Service.
    assert carol.instance.namespace == "gpu-users" and settings.delivers_secret(carol.instance)


def test_a_bad_annotation_refuses_that_pod_alone_naming_key_value_and_what_is_allowed() -> None:
    outcome = run(stack(), pod("alice"), pod("eve", user="ro ot"), pod("frank", port="99999"))
    assert [f.instance.name for f in outcome.instances] == ["alice"]
    lines = [r.line for r in outcome.refusals]
    assert lines[0].startswith('pod gpu-users/eve-0: ssh-gateway.io/user = "ro ot": String should match pattern')
    assert lines[1].startswith('pod gpu-users/frank-0: ssh-gateway.io/port = "99999": Input should be less than')


def test_a_long_value_or_object_name_cannot_blow_up_the_line_or_the_status_key() -> None:
    long_pod = ClusterObject(
        kind=DiscoverFrom.PODS,
        namespace="gpu-users",
        name="p" * 253,
        uid="u",
        labels={**EXPOSE, "ssh-gateway.io/instance": "alice"},
        annotations={"ssh-gateway.io/user": "x" * 100_000},
    )
    outcome = run(stack(), long_pod)
    (refusal,) = outcome.refusals
    assert len(refusal.line) < 800 and "(100000 characters)" in refusal.line
    (key,) = [k for k in next_status(outcome, {}) if k.startswith("refused.")]
    assert len(key) == STATUS_KEY_MAX and key.startswith("refused.gpu-users.ppp") and key.endswith(".json")
    assert status_refused_key("gpu-users", "p" * 252 + "q") != key


def test_an_unknown_annotation_is_refused_with_what_was_meant() -> None:
    outcome = run(stack(), pod("alice", **{"sourceCidr": "0.0.0.0/0"}))
    (refusal,) = outcome.refusals
    assert refusal.line.startswith(
        'pod gpu-users/alice-0: ssh-gateway.io/sourceCidr = "0.0.0.0/0": unknown annotation; did you mean '
        "'ssh-gateway.io/sourceCidrs'? allowed: ssh-gateway.io/user,"
    )
    assert not outcome.instances


def test_an_instance_keeps_its_accepted_spec_while_its_annotation_is_invalid() -> None:
    settings = stack()
    first = run(settings, pod("alice", user="alice"))
    later = run(settings, pod("alice", user="not valid!"), memory=remember(first))
    (found,) = later.instances
    assert found.state is State.KEPT and found.instance.user == "alice"
    assert found.annotations == {"ssh-gateway.io/user": "alice"}
    assert later.refusals[0].key == "ssh-gateway.io/user"


def test_a_gone_pod_keeps_its_instance_for_the_grace_period_then_goes() -> None:
    settings = stack(gracePeriod=600)
    first = run(settings, pod("alice"), pod("bob"))
    gone = run(settings, pod("alice"), memory=remember(first))
    bob = next(f for f in gone.instances if f.instance.name == "bob")
    assert bob.state is State.MISSING and bob.missing_since == NOW
    # Still gone 9 minutes later: kept, since when it went unchanged.
    later = run(settings, pod("alice"), memory=remember(gone), now=NOW + timedelta(minutes=9))
    assert next(f for f in later.instances if f.instance.name == "bob").missing_since == NOW
    expired = run(settings, pod("alice"), memory=remember(later), now=NOW + timedelta(minutes=10))
    assert [f.instance.name for f in expired.instances] == ["alice"] and expired.removed == ("bob",)
    assert "instance.bob.json" not in next_status(expired, {})


def test_the_next_expiry_is_the_first_gone_instances_end_of_grace() -> None:
    settings = stack(gracePeriod=600)
    first = run(settings, pod("alice"), pod("bob"), pod("carol"))
    assert next_expiry(remember(first), 600) is None
    bob_gone = run(settings, pod("alice"), pod("carol"), memory=remember(first))
    both_gone = run(settings, pod("alice"), memory=remember(bob_gone), now=NOW + timedelta(minutes=3))
    assert next_expiry(remember(both_gone), 600) == NOW + timedelta(minutes=10)


def test_a_removal_the_guard_holds_back_sets_no_expiry_to_wake_for() -> None:
    settings = stack(gracePeriod=0, maxRemovals=0)
    first = run(settings, pod("alice"))
    held = run(settings, memory=remember(first), now=NOW + timedelta(minutes=1))
    assert held.held == ("alice",)
    # Its end is past, and a run then holds it again: only a person (maxRemovals) or the pod changes that.
    assert next_expiry(remember(held), 0) is None


def test_a_pod_back_within_the_grace_period_is_the_same_instance() -> None:
    settings = stack()
    first = run(settings, pod("alice", uid="one"))
    gone = run(settings, memory=remember(first))
    back = run(settings, pod("alice", uid="two"), memory=remember(gone), now=NOW + timedelta(minutes=5))
    (found,) = back.instances
    assert found.state is State.PRESENT and found.uid == "two" and found.missing_since is None
    assert found.instance == first.instances[0].instance


def test_the_guard_holds_every_removal_when_too_many_would_go_at_once() -> None:
    settings = stack(gracePeriod=0, maxRemovals=2)
    first = run(settings, pod("a"), pod("b"), pod("c"))
    nothing = run(settings, memory=remember(first))  # the selector matches nothing now
    assert nothing.removed == () and nothing.held == ("a", "b", "c")
    assert {f.state for f in nothing.instances} == {State.HELD}
    (warning,) = nothing.warnings()
    assert "holds back 3 removals (a, b, c), over ssh-gateway:discovery.maxRemovals 2" in warning
    assert json.loads(next_status(nothing, {})["held.json"]) == {"held": ["a", "b", "c"], "maxRemovals": 2}
    # Two at once are within the limit: they go.
    two = run(settings, pod("a"), memory=remember(first))
    assert two.removed == ("b", "c") and not two.held


def test_the_report_reads_back_states_refusals_held_removals_and_free_ports() -> None:
    settings = stack(gracePeriod=0, maxRemovals=1)
    first = run(settings, pod("a"), pod("b"), pod("c"))
    later = run(settings, pod("a", user="ro ot"), pod("eve", user="no way"), memory=remember(first))
    endpoint = {"host": "ssh-a.example.com", "port": 40001, "ssh": "ssh -p 40001 root@ssh-a.example.com"}
    data = next_status(later, {"a": endpoint}, ("40000-40099", 97))
    report = read_report(StatusMap(namespace="default", name="ssh-gateway-status-dev", stack=STACK, data=data))
    assert {i.name: i.state for i in report.instances} == {"a": State.KEPT, "b": State.HELD, "c": State.HELD}
    (a,) = [i for i in report.instances if i.name == "a"]
    assert a.endpoint == endpoint and (a.obj.kind, a.obj.name, a.obj.uid) == (DiscoverFrom.PODS, "a-0", "uid-a")
    # The refusal's line is the one the run warned with: an Event's note reuses it.
    assert sorted(r.line for r in report.refusals) == sorted(r.line for r in later.refusals)
    assert {r.obj.uid for r in report.refusals} == {"uid-a", "uid-eve"}
    assert (report.held, report.max_removals, report.free_ports, report.unlisted) == (("b", "c"), 1, 97, 0)
    broken = {**data, "instance.x.json": '{"object": {}}'}
    with pytest.raises(StatusError, match="holds an entry this program does not write"):
        read_report(StatusMap(namespace="default", name="s", stack=STACK, data=broken))


def test_a_name_in_the_file_wins_and_the_refusal_names_both() -> None:
    settings = stack()
    outcome = run(settings, pod("gpu-01"))  # raw()'s configured instance
    (refusal,) = outcome.refusals
    assert refusal.line == (
        "pod gpu-users/gpu-01-0: instance 'gpu-01' is also configured in ssh-gateway:instances, and the file's "
        "entry wins: rename one of the two"
    )


def test_an_object_two_stacks_select_is_refused_naming_the_stacks() -> None:
    other = Selection(stack="ssh-gateway.prod", kind=DiscoverFrom.PODS, namespaces=("gpu-users",), selector=EXPOSE)
    elsewhere = Selection(stack="x.y", kind=DiscoverFrom.PODS, namespaces=("other",), selector=EXPOSE)
    outcome = run(stack(), pod("alice"), others=[other, elsewhere])
    (refusal,) = outcome.refusals
    assert "selected by stacks ssh-gateway.dev and ssh-gateway.prod" in refusal.line
    assert not outcome.instances


def test_selections_are_read_from_other_stacks_status_only() -> None:
    mine = next_status(run(stack(), pod("alice")), {})
    statuses = [
        StatusMap(namespace="d", name="ssh-gateway-status-dev", stack=STACK, data=mine),
        StatusMap(namespace="d", name="ssh-gateway-status-prod", stack="ssh-gateway.prod", data=mine),
        StatusMap(namespace="d", name="ssh-gateway-status-bad", stack="bad", data={"selection.json": "{"}),
    ]
    (found,) = read_selections(statuses, STACK)
    assert found.stack == "ssh-gateway.prod" and found.selector == EXPOSE


def test_two_objects_of_one_name_newcomer_refused_the_known_one_kept() -> None:
    settings = stack(namespaces=["gpu-users", "team-b"])
    fresh = run(settings, pod("alice"), pod("alice", ns="team-b"))
    assert not fresh.instances and len(fresh.refusals) == 2
    first = run(settings, pod("alice"))
    later = run(settings, pod("alice"), pod("alice", ns="team-b"), memory=remember(first))
    (found,) = later.instances
    assert found.namespace == "gpu-users"
    assert later.refusals[0].line.startswith("pod team-b/alice-0: instance name 'alice' is also that of pod gpu-users")


def test_a_name_in_grace_stays_in_its_namespace_but_a_new_pod_there_takes_it() -> None:
    settings = stack(namespaces=["gpu-users", "team-b"])
    first = run(settings, pod("alice"))
    stranger = run(settings, pod("alice", ns="team-b", uid="other"), memory=remember(first))
    (kept,) = stranger.instances
    assert (kept.namespace, kept.state) == ("gpu-users", State.MISSING)
    assert stranger.refusals[0].line.startswith(
        "pod team-b/alice-0: instance name 'alice' belongs to pod gpu-users/alice-0, whose instance is kept"
    )
    replaced = ClusterObject(
        kind=DiscoverFrom.PODS,
        namespace="gpu-users",
        name="alice-7f9c",  # a Deployment's new pod, under another name
        uid="new",
        labels={**EXPOSE, "ssh-gateway.io/instance": "alice"},
    )
    back = run(settings, replaced, memory=remember(stranger))
    (found,) = back.instances
    assert (found.name, found.state, found.instance) == ("alice-7f9c", State.PRESENT, first.instances[0].instance)


def test_a_pod_no_label_selects_alone_is_refused() -> None:
    outcome = run(stack(nameLabel=None), pod("alice"))
    assert "no label selects this pod alone" in outcome.refusals[0].line


def test_a_pin_taken_by_another_instance_is_refused() -> None:
    settings = parse_settings(
        raw(
            discovery={
                "from": "pods",
                "namespaces": ["gpu-users"],
                "selector": EXPOSE,
                "nameLabel": "ssh-gateway.io/instance",
            },
            kubernetes={"nodeIp": "10.0.0.4"},
            instances=[{"name": "gpu-01", "target": "static", "staticHost": "h", "staticPort": 22, "port": 40001}],
        )
    )
    outcome = run(settings, pod("alice", port="40001"), pod("bob", port="50000"))
    assert [r.line for r in outcome.refusals] == [
        "pod gpu-users/alice-0: ssh-gateway.io/port = \"40001\": is pinned by instance 'gpu-01' already",
        'pod gpu-users/bob-0: ssh-gateway.io/port = "50000": is outside ssh-gateway:ports.range 40000-40019',
    ]


def test_a_pin_another_pangolin_resource_binds_is_refused_but_its_own_is_kept() -> None:
    listing = Listing(objects=(pod("alice", port="40005"), pod("bob", port="40006")), resource_versions={})
    bound = {40005: ["team-b/postgres"], 40006: ["ssh-gateway/dev/bob"]}
    outcome = discover(
        listing=listing,
        memory={},
        others=[],
        settings=stack(),
        stack=STACK,
        now=NOW,
        bound=bound,
        own_prefix="ssh-gateway/dev/",
    )
    assert [f.instance.name for f in outcome.instances] == ["bob"]
    assert outcome.refusals[0].line == (
        "pod gpu-users/alice-0: ssh-gateway.io/port = \"40005\": is bound by Pangolin resource 'team-b/postgres' "
        "already: pin a free port"
    )


def test_connect_routing_needs_the_stacks_connect_entry() -> None:
    outcome = run(stack(), pod("alice", routing="connect"))
    assert outcome.refusals[0].line == (
        'pod gpu-users/alice-0: ssh-gateway.io/routing = "connect": routing connect needs ssh-gateway:connect, which '
        "this stack has not"
    )


def test_a_connect_pod_gets_a_service_of_its_own_in_its_namespace() -> None:
    settings = parse_settings(
        raw(
            discovery={
                "from": "pods",
                "namespaces": ["gpu-users"],
                "selector": EXPOSE,
                "nameLabel": "ssh-gateway.io/instance",
            },
            connect={"public": {"via": "pangolin", "port": 40100}},
        )
    )
    (found,) = run(settings, pod("alice", routing="connect")).instances
    assert isinstance(found.instance, ConnectServiceInstance)
    assert settings.connect_instance(found.instance).authority == "ssh-alice.gpu-users.svc.cluster.local"


def test_the_status_records_selection_instances_with_endpoints_and_refusals() -> None:
    outcome = run(stack(), pod("alice"), pod("eve", user="ro ot"))
    data = next_status(outcome, {"alice": {"host": "ssh-alice.example.com", "port": 40003, "ssh": "ssh ..."}})
    assert sorted(data) == ["instance.alice.json", "refused.gpu-users.eve-0.json", "selection.json"]
    alice = json.loads(data["instance.alice.json"])
    assert alice["object"] == {"kind": "pods", "namespace": "gpu-users", "name": "alice-0"}
    assert alice["endpoint"]["port"] == 40003 and alice["missingSince"] is None
    assert json.loads(data["selection.json"]) == {
        "stack": STACK,
        "from": "pods",
        "namespaces": ["gpu-users"],
        "selector": EXPOSE,
    }
    assert "ssh-gateway.io/user" in json.loads(data["refused.gpu-users.eve-0.json"])["error"]


def test_a_status_entry_this_program_never_wrote_is_an_error_not_an_empty_memory() -> None:
    status = StatusMap(namespace="d", name="s", stack=STACK, data={"instance.alice.json": '{"uid": 1}'})
    with pytest.raises(StatusError, match=r"key instance\.alice\.json is not an instance entry"):
        read_memory(status)


names = st.sampled_from(["a", "b", "c", "d", "e", "f"])


@hypothesis_settings(max_examples=60, deadline=None)
@given(
    before=st.sets(names),
    after=st.sets(names),
    minutes=st.integers(min_value=0, max_value=30),
    grace=st.integers(min_value=0, max_value=20),
    limit=st.integers(min_value=0, max_value=6),
)
def test_removals_are_within_the_limit_or_none_and_no_instance_is_lost_silently(
    before: set[str], after: set[str], minutes: int, grace: int, limit: int
) -> None:
    settings = stack(gracePeriod=grace * 60, maxRemovals=limit)
    first = run(settings, *[pod(n) for n in sorted(before)])
    gone = run(settings, *[pod(n) for n in sorted(after)], memory=remember(first))
    later = run(settings, *[pod(n) for n in sorted(after)], memory=remember(gone), now=NOW + timedelta(minutes=minutes))
    kept = {f.instance.name for f in later.instances}
    removed = set(gone.removed) | set(later.removed)
    for one in (gone, later):
        assert len(one.removed) <= limit and not (one.removed and one.held)
    assert kept | removed == before | after  # every instance stays or is removed, by name
    assert removed <= before - after  # only what is gone from a complete listing
    assert not removed & kept
    if grace > 0:
        assert not gone.removed  # gone at NOW: nothing goes within the grace period
    if minutes < grace:
        assert not later.removed and not later.held


def _status_bytes(data: dict[str, str]) -> int:
    """A ConfigMap's size as Kubernetes counts it: every key and value, in bytes."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in data.items())


def _largest_port_endpoints(outcome: Outcome) -> dict[str, dict[str, object]]:
    """Each instance's endpoint as large as a port-mode endpoint gets: a 253-character host, a 32-character user."""
    host, user = "h" * 253, "u" * 32
    endpoint = port_endpoint(
        host=host, port=65535, user=user, ssh=f"ssh -p 65535 {user}@{host}", pangolin_resource_id=2**31 - 1
    )
    return {f.instance.name: endpoint for f in outcome.instances}


def test_an_endpoint_fits_the_room_its_entry_keeps_for_it() -> None:
    """ENDPOINT_ROOM holds the largest port-mode endpoint, and a connect-mode one with names of 120 characters
    (the ssh command as `ConnectSshInstance` makes it: ProxyCommand, HostKeyAlias, user@authority)."""
    (port_mode,) = _largest_port_endpoints(run(stack(), pod("alice"))).values()
    assert len(json.dumps(port_mode, sort_keys=True)) <= ENDPOINT_ROOM
    host, authority, user = "g" * 120, "a" * 120, "u" * 32
    alias = ssh_alias("i" * 63)
    ssh = f'ssh -o "ProxyCommand={proxytunnel_command(host, 65535)}" -o HostKeyAlias={alias} {user}@{authority}'
    connect_mode = connect_endpoint(
        host=host,
        port=65535,
        authority=authority,
        route=f"{'n' * 63}/{'f' * 100}",
        user=user,
        ssh=ssh,
        pangolin_resource_id=2**31 - 1,
    )
    assert len(json.dumps(connect_mode, sort_keys=True)) <= ENDPOINT_ROOM


def test_the_status_keeps_under_a_config_maps_limit_and_refuses_the_new_instances_past_it() -> None:
    settings = stack()
    pods = [pod(f"i{n:04d}", sourceCidrs="203.0.113.0/24,198.51.100.0/24") for n in range(900)]
    outcome = run(settings, *pods)
    kept = [f.instance.name for f in outcome.instances]
    assert 500 < len(kept) < 900 and kept == [f"i{n:04d}" for n in range(len(kept))]  # the first names, in order
    refused = outcome.refusals
    assert len(refused) == 900 - len(kept)
    assert refused[0].line == (
        f"pod gpu-users/i{len(kept):04d}-0: the stack's status ConfigMap has no room for instance "
        f"'i{len(kept):04d}': Kubernetes holds a ConfigMap to 1,048,576 bytes and the {len(kept)} instances it lists "
        "fill it; serve this object from another stack, a shard whose ssh-gateway:discovery takes it "
        "(docs/scaling.md)"
    )
    data = next_status(outcome, _largest_port_endpoints(outcome))
    assert _status_bytes(data) <= STATUS_MAX_BYTES
    assert outcome.unlisted == 0 and len([k for k in data if k.startswith("refused.")]) == len(refused)


def test_instances_the_stack_serves_stay_when_its_status_is_full_and_newcomers_wait() -> None:
    settings = stack()
    first = run(settings, *[pod(f"m{n:04d}") for n in range(900)])
    served = [f.instance.name for f in first.instances]
    # Newcomers whose names sort first: the served keep their place, the newcomers are refused.
    again = run(settings, *[pod(f"a{n:02d}") for n in range(20)], *[pod(n) for n in served], memory=remember(first))
    assert [f.instance.name for f in again.instances] == served
    assert {r.name for r in again.refusals} >= {f"a{n:02d}-0" for n in range(20)}
    assert _status_bytes(next_status(again, _largest_port_endpoints(again))) <= STATUS_MAX_BYTES


def test_refusals_past_the_room_are_counted_in_the_status_and_each_warned() -> None:
    settings = stack()
    bad = [pod(f"bad{n:05d}", user=f"no such user {n}") for n in range(5000)]
    outcome = run(settings, pod("alice"), *bad)
    assert [f.instance.name for f in outcome.instances] == ["alice"]
    data = next_status(outcome, _largest_port_endpoints(outcome))
    assert _status_bytes(data) <= STATUS_MAX_BYTES
    listed = [k for k in data if k.startswith("refused.")]
    assert outcome.unlisted > 0 and len(listed) + outcome.unlisted == 5000
    assert json.loads(data[STATUS_UNLISTED_KEY])["count"] == outcome.unlisted
    assert len(outcome.warnings()) == 5000  # the run's warnings name every refused object
    assert read_memory(StatusMap(namespace="default", name="s", stack=STACK, data=data)).keys() == {"alice"}
