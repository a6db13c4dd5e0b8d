"""Tenants kept apart by name (ssh_gateway/core/discovery_names.py): which names a run looks up, and an object
whose instance needs a Service or host-key Secret that another owner's object holds is refused alone."""

from __future__ import annotations

import pytest

from ssh_gateway.core.cluster import ClusterObject, Listing, NamedObject
from ssh_gateway.core.discovery import discover
from ssh_gateway.core.discovery_names import names_to_check
from ssh_gateway.core.discovery_records import Outcome
from ssh_gateway.core.settings import Settings, parse_settings

from .test_discovery import NOW, STACK, pod, remember, run, service, stack
from .test_settings import raw

pytestmark = pytest.mark.unit

OURS = "ssh-gateway/dev"


def svc(name: str, ns: str = "gpu-users") -> NamedObject:
    return NamedObject(kind="Service", namespace=ns, name=f"ssh-{name}")


def secret(name: str, ns: str = "gpu-users") -> NamedObject:
    return NamedObject(kind="Secret", namespace=ns, name=f"ssh-{name}-host-key")


def decide(settings: Settings, *objects: ClusterObject, occupants: dict[NamedObject, str | None]) -> Outcome:
    listing = Listing(objects=objects, resource_versions={"gpu-users": "1"})
    return discover(
        listing=listing,
        memory={},
        others=[],
        settings=settings,
        stack=STACK,
        now=NOW,
        occupants=occupants,
        own_mark=OURS,
    )


def test_a_new_pods_service_and_secret_are_looked_up_a_served_ones_not() -> None:
    settings = stack()
    first = run(settings, pod("alice"))
    listing = Listing(objects=(pod("alice"), pod("bob")), resource_versions={})
    assert names_to_check(listing, remember(first), settings) == [svc("bob"), secret("bob")]
    # Served from another namespace: it would be a new one's there (and _owner refuses it anyway).
    moved = Listing(objects=(pod("alice", ns="other"),), resource_versions={})
    assert names_to_check(moved, remember(first), settings) == [svc("alice", "other"), secret("alice", "other")]


def test_services_the_platform_makes_need_only_their_secret_and_none_without_host_identity() -> None:
    from_services = stack(**{"from": "services"}, nameLabel=None)
    assert names_to_check(Listing(objects=(service("carol"),), resource_versions={}), {}, from_services) == [
        secret("carol")
    ]
    settings = parse_settings(
        raw(
            discovery={"from": "pods", "namespaces": ["gpu-users"], "selector": {"a": "b"}, "nameLabel": "n"},
            hostIdentity={"enabled": False},
        )
    )
    listed = pod("dave")
    listed = type(listed)(
        kind=listed.kind, namespace="gpu-users", name="dave-0", uid="u", labels={"a": "b", "n": "dave"}
    )
    assert names_to_check(Listing(objects=(listed,), resource_versions={}), {}, settings) == [svc("dave")]


def test_a_foreign_service_refuses_that_pod_alone_and_the_other_tenant_converges() -> None:
    outcome = decide(stack(), pod("alice"), pod("okay"), occupants={svc("alice"): None})
    assert [f.instance.name for f in outcome.instances] == ["okay"]
    [refusal] = outcome.refusals
    assert refusal.line == (
        "pod gpu-users/alice-0: Service gpu-users/ssh-alice exists and is not this stack's (not made by an "
        "ssh-gateway stack: no ssh-gateway/stack annotation), and this instance needs its own Service of that name: "
        "remove or rename that Service, or give the instance another name"
    )


def test_another_stacks_secret_refuses_the_object_naming_that_stack() -> None:
    outcome = decide(stack(), pod("alice"), occupants={secret("alice"): "ssh-gateway/prod"})
    assert outcome.instances == ()
    [refusal] = outcome.refusals
    assert "Secret gpu-users/ssh-alice-host-key exists and is not this stack's (stack ssh-gateway/prod's)" in (
        refusal.line
    )


def test_the_stacks_own_objects_are_no_obstacle_nor_a_secret_a_pinned_host_key_never_makes() -> None:
    own = decide(stack(), pod("alice"), occupants={svc("alice"): OURS, secret("alice"): OURS})
    assert [f.instance.name for f in own.instances] == ["alice"] and own.refusals == ()
    pinned_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
    pinned = decide(stack(), pod("alice", hostKey=pinned_key), occupants={secret("alice"): None})
    assert [f.instance.name for f in pinned.instances] == ["alice"] and pinned.refusals == ()
