"""The doctor's Pangolin layer against the emulator: one GET of the resource and one of its targets."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from providers.pangolin import PangolinClient
from ssh_gateway.ops.doctor import Check, Endpoint
from ssh_gateway.ops.doctor.pangolin import check_pangolin

from .conftest import next_port, unique_name

if TYPE_CHECKING:
    from pangolin_emulator.harness import EmulatorHandle

pytestmark = pytest.mark.provider

Made = tuple[Endpoint, int, int]


@pytest.fixture
def made(client: PangolinClient, emulator: EmulatorHandle) -> Made:
    """A resource with one target, and the endpoint the stack's outputs would describe for it."""
    name, port = unique_name(), next_port()
    resource = client.create_resource(emulator.org_id, name=name, protocol="tcp", proxy_port=port)
    target = client.create_target(resource.resourceId, site_id=emulator.site_id, ip="10.0.0.5", port=2222)
    endpoint = Endpoint(
        instance="gpu-01",
        host="127.0.0.1",
        port=port,
        user="root",
        resource_id=resource.resourceId,
        pinned_key=None,
        expected_name=name,
    )
    return endpoint, resource.resourceId, target.targetId


def check(emulator: EmulatorHandle, endpoint: Endpoint, key: str | None = None) -> Check:
    return check_pangolin(endpoint, emulator.url, key or emulator.api_key, 2.0)


def test_matching_resource_and_target(emulator: EmulatorHandle, made: Made) -> None:
    endpoint, rid, _ = made
    found = check(emulator, endpoint)
    assert (found.status, found.detail) == (
        "ok",
        f"resource {rid} tcp :{endpoint.port} -> 10.0.0.5:2222 (site {emulator.site_id}), enabled",
    )


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda c, rid, tid: c.delete_resource(rid), "Pangolin resource {rid} does not exist"),
        (lambda c, rid, tid: c.update_resource(rid, enabled=False), "Pangolin resource {rid} is disabled"),
        (lambda c, rid, tid: c.update_resource(rid, proxy_port=next_port()), "the stack says {port}"),
        (lambda c, rid, tid: c.update_resource(rid, name="other"), "is named 'other', not '{name}'"),
        (lambda c, rid, tid: c.delete_target(tid), "has no target: nothing is behind port {port}"),
    ],
)
def test_pangolin_problems(
    client: PangolinClient,
    emulator: EmulatorHandle,
    made: Made,
    change: Callable[[PangolinClient, int, int], object],
    problem: str,
) -> None:
    endpoint, rid, tid = made
    change(client, rid, tid)
    found = check(emulator, endpoint)
    assert found.status == "fail"
    assert problem.format(rid=rid, port=endpoint.port, name=endpoint.expected_name) in found.detail
    assert "pulumi" in found.fix


def test_refused_key_is_a_warning_not_a_verdict(emulator: EmulatorHandle, made: Made) -> None:
    wrong = emulator.api_key.split(".")[0] + ".wrongsecretwrongsecretwrongsecretwrong"
    found = check(emulator, made[0], wrong)
    assert found.status == "warn" and "API key was refused" in found.detail
    assert "wrongsecret" not in found.detail


def test_no_key_is_a_warning(emulator: EmulatorHandle, made: Made) -> None:
    found = check_pangolin(made[0], emulator.url, None, 1.0)
    assert found.status == "warn" and "no API key" in found.detail
