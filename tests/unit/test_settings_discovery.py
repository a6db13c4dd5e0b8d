"""`ssh-gateway:discovery`: the section that selects instances from the cluster; bad values fail before anything
is registered, one line each naming the key, the value and what is allowed."""

from __future__ import annotations

from typing import Any

import pytest

from ssh_gateway.core.connect import ConnectGateway
from ssh_gateway.core.names import DiscoverFrom
from ssh_gateway.core.settings import Discovery, NodePortInstance, parse_settings
from ssh_gateway.core.targets import StaticTarget

from .test_settings import error, raw

pytestmark = pytest.mark.unit


def discovery(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"from": "pods", "namespaces": ["gpu-users"], "selector": {"ssh-gateway.io/expose": "true"}}
    base.update(overrides)
    return base


def test_a_stack_without_discovery_has_none() -> None:
    settings = parse_settings(raw())
    assert settings.discovery is None
    assert not settings.needs_kubernetes()  # only a static instance: no cluster at all, as before


def test_the_section_parses_with_its_defaults() -> None:
    settings = parse_settings(raw(discovery=discovery(), kubernetes={"namespace": "ssh"}))
    found = settings.discovery
    assert isinstance(found, Discovery)
    assert found.from_ is DiscoverFrom.PODS
    assert found.namespaces == ("gpu-users",)
    assert found.selector == {"ssh-gateway.io/expose": "true"}
    assert (found.name_label, found.grace_period, found.max_removals) == (None, 600, 5)
    assert settings.status_namespace == "ssh"  # default: kubernetes.namespace
    assert settings.needs_kubernetes()  # the status ConfigMap


def test_every_key_is_read() -> None:
    settings = parse_settings(
        raw(
            discovery=discovery(
                **{
                    "from": "services",
                    "namespaces": ["a", "b"],
                    "nameLabel": "ssh-gateway.io/instance",
                    "gracePeriod": 0,
                    "maxRemovals": 0,
                    "statusNamespace": "ssh-gateway",
                }
            )
        )
    )
    found = settings.discovery
    assert found is not None and found.from_ is DiscoverFrom.SERVICES
    assert (found.name_label, found.grace_period, found.max_removals) == ("ssh-gateway.io/instance", 0, 0)
    assert settings.status_namespace == "ssh-gateway"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"from": "pod"}, "ssh-gateway:discovery.from = \"pod\": Input should be 'services' or 'pods'"),
        ({"namespaces": []}, "ssh-gateway:discovery.namespaces = []: is empty: list at least one namespace"),
        ({"namespaces": ["a", "a"]}, 'ssh-gateway:discovery.namespaces = ["a", "a"]: lists a twice'),
        ({"namespaces": ["Gpu"]}, "ssh-gateway:discovery.namespaces[0] = \"Gpu\": 'Gpu' is not a DNS label"),
        ({"selector": {}}, "ssh-gateway:discovery.selector = {}: is empty: give at least one label"),
        ({"selector": {"bad key": "x"}}, "selector key 'bad key' is not a Kubernetes label key"),
        (
            {"nameLabel": "no spaces"},
            "ssh-gateway:discovery.nameLabel = \"no spaces\": 'no spaces' is not a Kubernetes",
        ),
        ({"gracePeriod": -1}, "ssh-gateway:discovery.gracePeriod = -1: Input should be greater than or equal to 0"),
        ({"maxRemovals": -1}, "ssh-gateway:discovery.maxRemovals = -1: Input should be greater than or equal to 0"),
        ({"maxRemoval": 3}, "ssh-gateway:discovery.maxRemoval: unknown key; did you mean 'maxRemovals'?"),
        ({"statusNamespace": "A_B"}, "ssh-gateway:discovery.statusNamespace = \"A_B\": 'A_B' is not a DNS label"),
    ],
)
def test_a_bad_value_names_the_key_the_value_and_what_is_allowed(overrides: dict[str, Any], expected: str) -> None:
    assert expected in error(discovery=discovery(**overrides))


def test_from_is_required() -> None:
    section = discovery()
    del section["from"]
    assert "ssh-gateway:discovery.from: required, but not set" in error(discovery=section)


def test_discovery_needs_a_live_cluster_not_rendered_yaml() -> None:
    message = error(discovery=discovery(), kubernetes={"renderDir": "out"})
    assert "ssh-gateway:discovery: lists instances from a live cluster" in message
    assert "kubernetes.renderDir" in message


def test_an_instance_namespace_moves_its_service_and_secret_and_defaults_to_the_stacks() -> None:
    settings = parse_settings(
        raw(
            kubernetes={"namespace": "ssh", "nodeIp": "10.0.0.4"},
            instances=[
                {"name": "a"},
                {"name": "b", "namespace": "team-b"},
                {"name": "c", "target": "static", "staticHost": "h", "staticPort": 22},
                {"name": "d", "target": "static", "staticHost": "h", "staticPort": 22, "namespace": "team-d"},
            ],
        )
    )
    a, b, c, d = settings.instances
    assert isinstance(a, NodePortInstance) and isinstance(b, NodePortInstance)
    target_a, target_b = settings.target_of(a), settings.target_of(b)
    assert not isinstance(target_a, StaticTarget) and target_a.service.namespace == "ssh"
    assert not isinstance(target_b, StaticTarget) and target_b.service.namespace == "team-b"
    # A static target delivers its host-key Secret only where it names a namespace.
    assert not settings.delivers_secret(c) and settings.delivers_secret(d)
    assert settings.namespace_of(d) == "team-d"


def test_a_created_istio_gateway_serves_the_namespaces_discovery_selects_in() -> None:
    connect = {"gateway": {"createGateway": True}, "public": {"port": 40443}}
    alone = parse_settings(raw(kubernetes={"namespace": "ssh"}, connect=connect))
    with_discovery = parse_settings(raw(kubernetes={"namespace": "ssh"}, connect=connect, discovery=discovery()))
    hosts = []
    for settings in (alone, with_discovery):
        gateway = settings.connect_gateway()
        assert isinstance(gateway, ConnectGateway) and gateway.server is not None
        hosts.append(gateway.server.hosts)
    assert hosts == [("*.ssh.svc.cluster.local",), ("*.ssh.svc.cluster.local", "*.gpu-users.svc.cluster.local")]
