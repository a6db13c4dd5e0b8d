"""The instance pod a platform runs (ssh_gateway/local/instance_pod.py): what the stack's `from: pods` discovery
makes of it, where its volumes go against the image's sshd_config, and its refusals."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from ssh_gateway.core.cluster import ClusterObject, Listing
from ssh_gateway.core.discovery import discover
from ssh_gateway.core.host_identity import MOUNT_DIR, sshd_config_lines
from ssh_gateway.core.names import DiscoverFrom, host_key_secret_name
from ssh_gateway.core.settings import Discovery, NodePortInstance, parse_settings
from ssh_gateway.local.instance_pod import (
    AUTHORIZED_KEYS_DIR,
    LOGIN_USER,
    SSH_PORT,
    authorized_keys_manifest,
    pod_manifest,
    sshd_config,
)

from .test_settings import raw

pytestmark = pytest.mark.unit

SECTION: dict[str, Any] = {
    "from": "pods",
    "namespaces": ["gpu-users"],
    "selector": {"ssh-gateway.io/expose": "true", "team": "ml"},
    "nameLabel": "ssh-gateway.io/instance",
}
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO0o5l3Ilcyw0DvnFQKx2ckGdvRrYIKz0mKN8Km0LO3O alice@laptop"


def pod(**section: Any) -> dict[str, Any]:
    discovery = Discovery.model_validate({**SECTION, **section})
    return pod_manifest(
        instance="gpu-alice", namespace="gpu-users", image="ssh-gateway-instance:0123", discovery=discovery
    )


def test_the_stacks_discovery_takes_the_pod_as_its_instance_with_a_service_that_selects_it() -> None:
    manifest = pod()
    meta = manifest["metadata"]
    settings = parse_settings(raw(discovery=SECTION, kubernetes={"nodeIp": "10.0.0.4"}))
    listed = ClusterObject(
        kind=DiscoverFrom.PODS,
        namespace=meta["namespace"],
        name=meta["name"],
        uid="uid-1",
        labels=meta["labels"],
        annotations=meta["annotations"],
    )
    outcome = discover(
        listing=Listing(objects=(listed,), resource_versions={"gpu-users": "1"}),
        memory={},
        others=[],
        settings=settings,
        stack="ssh-gateway.dev",
        now=datetime(2026, 12, 6, tzinfo=UTC),
    )
    assert not outcome.refusals
    (found,) = outcome.instances
    inst = found.instance
    assert isinstance(inst, NodePortInstance)
    assert (inst.name, inst.namespace, inst.user) == ("gpu-alice", "gpu-users", LOGIN_USER)
    assert inst.selector is not None and inst.selector.items() <= meta["labels"].items()
    (container,) = manifest["spec"]["containers"]
    assert [p["containerPort"] for p in container["ports"]] == [inst.pod_port] == [SSH_PORT]


def test_the_volumes_are_where_the_images_sshd_reads_them() -> None:
    manifest = pod()
    keys = authorized_keys_manifest(instance="gpu-alice", namespace="gpu-users", keys=[KEY])
    volumes = {v["name"]: v for v in manifest["spec"]["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in manifest["spec"]["containers"][0]["volumeMounts"]}
    assert mounts[MOUNT_DIR]["secret"] == {"secretName": host_key_secret_name("gpu-alice"), "defaultMode": 0o600}
    assert mounts[AUTHORIZED_KEYS_DIR]["configMap"]["name"] == keys["metadata"]["name"]
    assert keys["data"] == {LOGIN_USER: KEY + "\n"}
    config = sshd_config().splitlines()
    assert [line for line in config if line.startswith(("HostKey ", "HostCertificate "))] == sshd_config_lines()
    assert f"AuthorizedKeysCommand /bin/cat {AUTHORIZED_KEYS_DIR}/%u" in config
    assert "AuthorizedKeysFile none" in config


@pytest.mark.parametrize(
    ("section", "said"),
    [
        ({"from": "services", "nameLabel": None}, "discovery.from = 'services'"),
        ({"namespaces": ["other"]}, "namespace = 'gpu-users' is not one of discovery.namespaces ['other']"),
        ({"nameLabel": None}, "discovery.nameLabel is unset"),
    ],
)
def test_a_pod_the_discovery_would_not_take_is_refused_in_one_line(section: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError, match="^" + said.replace("[", r"\[").replace("]", r"\]")):
        pod(**section)


def test_keys_and_names_are_checked() -> None:
    with pytest.raises(ValueError, match=r"^keys = \[\]"):
        authorized_keys_manifest(instance="gpu-alice", namespace="gpu-users", keys=[])
    with pytest.raises(ValueError, match=r"^keys\[1\] = 'AAAA' is not one OpenSSH public key line"):
        authorized_keys_manifest(instance="gpu-alice", namespace="gpu-users", keys=[KEY, "AAAA"])
    with pytest.raises(ValueError, match="instance 'GPU_alice' is not a DNS label"):
        authorized_keys_manifest(instance="GPU_alice", namespace="gpu-users", keys=[KEY])


def test_tolerations_let_it_onto_a_tainted_node() -> None:
    toleration = {"key": "ssh-gateway.dev/real-node", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    manifest = pod_manifest(
        instance="gpu-alice",
        namespace="gpu-users",
        image="ssh-gateway.local/instance:0123",
        discovery=Discovery.model_validate(SECTION),
        tolerations=[toleration],
    )
    assert manifest["spec"]["tolerations"] == [toleration]
    assert pod()["spec"]["tolerations"] == []
