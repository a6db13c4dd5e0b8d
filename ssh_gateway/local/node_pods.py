"""Instance pods on the real node, as a platform runs them: the instance image loaded into the node, and a user's
pod (its authorized-keys ConfigMap, the pod on the node's pool) created. The tests, scripts/demo-cluster and the
benchmark share it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ssh_gateway.core.settings import Discovery
from ssh_gateway.local.instance_image import build_instance_image
from ssh_gateway.local.instance_pod import IMAGE_NAME, authorized_keys_manifest, pod_manifest
from ssh_gateway.local.kubelet_node import TAINT, KubeletNode

__all__ = ["create_instance_pod", "load_instance_image", "pod_ready"]


def load_instance_image(node: KubeletNode, work: Path) -> str:
    """scripts/build-instance-image (cached by content), imported into the node; the pods' image reference."""
    archive = work / "instance.tar"
    image = f"{IMAGE_NAME}:{build_instance_image(archive).rsplit(':', 1)[1]}"
    node.load_image(archive)
    return image


def create_instance_pod(
    node: KubeletNode, *, instance: str, namespace: str, image: str, discovery: Discovery, keys: Sequence[str]
) -> dict[str, Any]:
    """The user's keys in a ConfigMap, then the instance's pod on the real node (its toleration, and a
    nodeSelector: the platform's choice of the pool where pods run, the others being kwok's); returns the pod."""
    pod = pod_manifest(
        instance=instance,
        namespace=namespace,
        image=image,
        discovery=discovery,
        tolerations=[{**TAINT, "operator": "Equal"}],
    )
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node.name}
    config_map = authorized_keys_manifest(instance=instance, namespace=namespace, keys=keys)
    with node.plane.client() as api:
        api.post(f"/api/v1/namespaces/{namespace}/configmaps", json=config_map).raise_for_status()
        api.post(f"/api/v1/namespaces/{namespace}/pods", json=pod).raise_for_status()
    return pod


def pod_ready(pod: dict[str, Any] | None) -> bool:
    """Whether the pod (as read from the API) reports Ready."""
    conditions = (pod or {}).get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
