"""The pod a platform runs for one instance, and the sshd_config of its image (scripts/build-instance-image).

The pod is what `ssh-gateway:discovery` with `from: pods` selects: the selector's labels and `nameLabel` naming the
instance. Its sshd serves the host key and certificate of the Secret `ssh-<instance>-host-key`, which the stack's
`up` makes once it has discovered the pod (the pod waits in ContainerCreating until then), mounted at `MOUNT_DIR`
with the two sshd_config lines of docs/host-identity.md. Users' public keys come from a ConfigMap
`ssh-<instance>-authorized-keys`, one key per login user (`root`: the only user of the image), mounted at
`AUTHORIZED_KEYS_DIR`.

Why sshd reads them with `AuthorizedKeysCommand` (cat, as `nobody`) rather than `AuthorizedKeysFile`: the
kubelet mounts a ConfigMap or Secret volume on a directory of mode 0777 (1777 for a Secret's tmpfs), and sshd's
`StrictModes` refuses an authorized keys file below a directory others can write, whoever owns the file. The
command's data is not checked that way (its program is), so StrictModes stays on for everything else, and a
changed ConfigMap is read at the next login. Host keys are not affected: sshd checks only the key file's own mode.

Pure: manifests as dicts, ready for `kubectl apply -f -` as JSON; nothing here talks to a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ssh_gateway.core.addresses import check_dns_label
from ssh_gateway.core.host_identity import MOUNT_DIR, sshd_config_lines
from ssh_gateway.core.names import DiscoverFrom, discovery_annotation, host_key_secret_name
from ssh_gateway.core.settings import Discovery

__all__ = [
    "AUTHORIZED_KEYS_DIR",
    "IMAGE_NAME",
    "LOGIN_USER",
    "SSH_PORT",
    "authorized_keys_manifest",
    "pod_manifest",
    "sshd_config",
]

IMAGE_NAME: Final = "ssh-gateway.local/instance"
"""The image's name, on a registry host nobody serves: a node has the image only if it was imported (a missing one
fails at once, ErrImagePull, rather than being pulled from elsewhere). Its tag is the hash of what makes it."""
LOGIN_USER: Final = "root"
"""The image's one login user (the instances' default `user`)."""
SSH_PORT: Final = 22
"""sshd's port in the pod (the default `podPort`, so no annotation is needed)."""
AUTHORIZED_KEYS_DIR: Final = "/etc/ssh/authorized-keys"
"""Where the ConfigMap of users' public keys is mounted: one file per login user."""
HOST_KEY_MODE: Final = 0o600
"""The host-key Secret volume's `defaultMode` (docs/host-identity.md): sshd refuses a key others can read."""
_KEYS_MODE: Final = 0o444
"""The authorized keys volume's `defaultMode`: read by `nobody`, who runs the AuthorizedKeysCommand."""


def sshd_config() -> str:
    """The image's /etc/ssh/sshd_config: the mounted host identity as the only host key, users' keys from the
    mounted ConfigMap, no passwords, no PAM (the image has no PAM modules)."""
    lines = [
        "# Written by scripts/build-instance-image from ssh_gateway/local/instance_pod.py.",
        f"Port {SSH_PORT}",
        *sshd_config_lines(MOUNT_DIR),
        "AuthorizedKeysFile none",
        f"AuthorizedKeysCommand /bin/cat {AUTHORIZED_KEYS_DIR}/%u",
        "AuthorizedKeysCommandUser nobody",
        "StrictModes yes",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "PrintMotd no",
        "PrintLastLog no",
        "X11Forwarding no",
        "Subsystem sftp /usr/lib/openssh/sftp-server",
    ]
    return "\n".join(lines) + "\n"


def authorized_keys_name(instance: str) -> str:
    """The instance's ConfigMap of users' public keys, e.g. `ssh-gpu-alice-authorized-keys`."""
    return f"ssh-{instance}-authorized-keys"


def authorized_keys_manifest(*, instance: str, namespace: str, keys: Sequence[str]) -> dict[str, Any]:
    """The ConfigMap holding `keys` (OpenSSH public key lines) for `LOGIN_USER`, in the pod's namespace."""
    check_dns_label(instance, what="instance")
    check_dns_label(namespace, what="namespace")
    if not keys:
        raise ValueError("keys = []: at least one public key, or nobody can log in")
    for index, key in enumerate(keys):
        if "\n" in key or len(key.split()) < 2:
            raise ValueError(
                f"keys[{index}] = {key[:40]!r} is not one OpenSSH public key line: 'TYPE BASE64 [COMMENT]'"
            )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": authorized_keys_name(instance), "namespace": namespace},
        "data": {LOGIN_USER: "".join(f"{key}\n" for key in keys)},
    }


def _labels(discovery: Discovery, instance: str, namespace: str) -> dict[str, str]:
    """The labels that make `discovery` select the pod as `instance`; or why it cannot."""
    if discovery.from_ is not DiscoverFrom.PODS:
        raise ValueError(f"discovery.from = {discovery.from_.value!r}: an instance pod is discovered with from: pods")
    if namespace not in discovery.namespaces:
        raise ValueError(f"namespace = {namespace!r} is not one of discovery.namespaces {list(discovery.namespaces)}")
    if discovery.name_label is None:
        raise ValueError(
            "discovery.nameLabel is unset: a pod outside a StatefulSet needs it, so that its Service selects it alone"
        )
    return {**discovery.selector, discovery.name_label: instance}


def pod_manifest(
    *,
    instance: str,
    namespace: str,
    image: str,
    discovery: Discovery,
    tolerations: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """The instance's pod: sshd of `image` on port 22, its host identity and users' keys mounted, labelled for
    `discovery`, with `tolerations` (e.g. of a tainted node). The Secret comes from the stack, the ConfigMap from
    `authorized_keys_manifest`."""
    check_dns_label(instance, what="instance")
    if not image or any(c.isspace() for c in image):
        raise ValueError(f"image = {image!r} is not an image reference such as {IMAGE_NAME}:<tag>")
    container = {
        "name": "sshd",
        "image": image,
        # A tag, never `latest`: an image imported into the node's containerd is used without a registry.
        "imagePullPolicy": "IfNotPresent",
        # No TCP probe: sshd logs each probe's bare connection as an error (kex_exchange_identification), and it
        # listens within a second of starting.
        "ports": [{"name": "ssh", "containerPort": SSH_PORT, "protocol": "TCP"}],
        "volumeMounts": [
            # Whole-volume mounts, not subPath: the kubelet then swaps in a re-issued certificate or new keys.
            {"name": "host-identity", "mountPath": MOUNT_DIR, "readOnly": True},
            {"name": "authorized-keys", "mountPath": AUTHORIZED_KEYS_DIR, "readOnly": True},
        ],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": instance,
            "namespace": namespace,
            "labels": _labels(discovery, instance, namespace),
            "annotations": {discovery_annotation("user"): LOGIN_USER},
        },
        "spec": {
            # Users log in as root: no credentials of the cluster's API within their reach.
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "tolerations": [dict(t) for t in tolerations],
            "containers": [container],
            "volumes": [
                {
                    "name": "host-identity",
                    "secret": {"secretName": host_key_secret_name(instance), "defaultMode": HOST_KEY_MODE},
                },
                {
                    "name": "authorized-keys",
                    "configMap": {"name": authorized_keys_name(instance), "defaultMode": _KEYS_MODE},
                },
            ],
        },
    }
