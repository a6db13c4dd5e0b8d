"""The instance image (scripts/build-instance-image, cached by content) run as a node runs the instance pod: runc with
containerd's capabilities, a network namespace of its own, and the volumes of `instance_pod.pod_manifest` laid out as
the kubelet writes them (`..data`, per-key symlinks, the volumes' modes), holding an instance's derived host key and
certificate and the user's public key. A real `ssh` that trusts only the stack's `@cert-authority` line logs in."""

from __future__ import annotations

import base64
import os
import secrets
import time
from pathlib import Path

import pytest

from ssh_gateway.core import host_identity as hi
from ssh_gateway.core.derived_identity import derive_identity
from ssh_gateway.core.names import host_key_secret_name, public_host
from ssh_gateway.core.settings import Discovery
from ssh_gateway.core.trust import principals
from ssh_gateway.local.instance_image import build_instance_image, kubelet_volumes, running_instance
from ssh_gateway.local.instance_pod import IMAGE_NAME, LOGIN_USER, authorized_keys_manifest, pod_manifest
from ssh_gateway.local.sshd import ensure_client_keypair

from .strict_ssh import GREETING, strict_ssh

pytestmark = pytest.mark.integration

INSTANCE = "gpu-alice"
NAMESPACE = "gpu-users"
TEMPLATE = "ssh-{instance}.example.test"
DISCOVERY = Discovery.model_validate(
    {
        "from": "pods",
        "namespaces": [NAMESPACE],
        "selector": {"ssh-gateway.io/expose": "true"},
        "nameLabel": "ssh-gateway.io/instance",
    }
)


@pytest.fixture(scope="module")
def image() -> str:
    assert os.geteuid() == 0, "the image is built and run as root (chroot, runc)"
    started = time.monotonic()
    built = build_instance_image()
    print(f"image {built} in {time.monotonic() - started:.1f} s")
    return built


def test_ssh_logs_in_with_only_the_ca_line(image: str, tmp_path: Path) -> None:
    client = ensure_client_keypair(tmp_path / "client" / "id_ed25519", "instance-image-test")
    stranger = ensure_client_keypair(tmp_path / "stranger" / "id_ed25519", "not-in-the-configmap")
    ca = hi.generate_key_pair()
    host = public_host(TEMPLATE, INSTANCE)
    identity = derive_identity(
        root=base64.b64encode(secrets.token_bytes(32)).decode(),
        ca_seed=hi.private_seed(ca.private_key),
        instance=INSTANCE,
        generation=1,
        principals=principals(TEMPLATE, INSTANCE),
        key_id=f"ssh-gateway/test/{INSTANCE}",
        valid_days=365,
        now=int(time.time()),
    )
    pod = pod_manifest(instance=INSTANCE, namespace=NAMESPACE, image=f"{IMAGE_NAME}:test", discovery=DISCOVERY)
    keys = authorized_keys_manifest(instance=INSTANCE, namespace=NAMESPACE, keys=[client.public_key])
    data = {
        host_key_secret_name(INSTANCE): hi.secret_files(
            private_key=identity.private_key, public_key=identity.public_key, certificate=identity.certificate
        ),
        keys["metadata"]["name"]: keys["data"],
    }
    volumes = kubelet_volumes(pod, data, tmp_path / "volumes")
    ca_line = hi.cert_authority_lines(hi.host_patterns(hi.instance_host_pattern(TEMPLATE)), [ca.public_key])
    started = time.monotonic()
    with running_instance(image, tmp_path, volumes=volumes) as sshd:
        listening = time.monotonic() - started
        result = strict_ssh(tmp_path / "ssh", client, ca_line, host=host, port=22, netns=sshd.netns)
        took = time.monotonic() - started - listening
        print(f"sshd listening {listening:.2f} s after unpacking began; ssh in {took:.2f} s")
        refused = strict_ssh(tmp_path / "ssh", stranger, ca_line, host=host, port=22, netns=sshd.netns)
        logged = sshd.logged()
    assert result.returncode == 0, f"{result.stderr}\nsshd:\n{logged}"
    assert result.stdout.strip() == GREETING
    assert f"Host '{host}' is known and matches the ED25519-CERT host certificate" in result.stderr
    assert f"Accepted publickey for {LOGIN_USER}" in logged
    # Only the ConfigMap's keys: another key is refused, after the same host check.
    assert refused.returncode == 255 and "Permission denied (publickey)" in refused.stderr, refused.stderr
