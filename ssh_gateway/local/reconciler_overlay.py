"""A platform team's overlay of deploy/reconciler/, made the way docs/reconciler.md tells it, for the tests' cluster.

`write_overlay` copies `overlays/from-pods`, sets the image's tag and the stacks, renames the selected namespace, and
adds what this cluster needs beyond the documented edits, each as a patch of the overlay's own (none changes the
base): the toleration and nodeSelector of the real node (ssh_gateway/local/kubelet_node.py), and the stack files
from a ConfigMap mounted over the image's, since the tests' stacks are made by the test, after the image was built
(in production they come with the image, reviewed in a pull request).

The copy lives outside the repository, so its references to the base and to `selected/pods` are made again from
where it is (kustomize takes no absolute path to a kustomization).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .kubectl import OVERLAYS

__all__ = ["OverlayChoice", "write_overlay"]

DEPLOY = OVERLAYS.parent
TEMPLATE = "from-pods"
TEMPLATE_NAMESPACE = "gpu-users"
STACK_FILES = "ssh-gateway-stack-files"


@dataclass(frozen=True, kw_only=True)
class OverlayChoice:
    """What a platform team decides in its overlay."""

    tag: str
    """The image's tag, as imported into the node (no registry: no `newName`)."""
    stack_files: tuple[Path, ...]
    """The stacks' `Pulumi.<stack>.yaml`, one `--stack` each."""
    namespace: str
    """The one namespace the stacks select."""
    node_name: str
    """The node the replicas run on, by its hostname label."""
    toleration: dict[str, str]
    """The node's taint, tolerated."""


def write_overlay(dest: Path, choice: OverlayChoice) -> Path:
    """The overlay in `dest` (which must not exist); returns it, for `kubectl apply -k`."""
    shutil.copytree(OVERLAYS / TEMPLATE, dest)
    shutil.move(dest / TEMPLATE_NAMESPACE, dest / choice.namespace)
    selected = dest / choice.namespace / "kustomization.yaml"
    selected.write_text(
        selected.read_text()
        .replace(f"namespace: {TEMPLATE_NAMESPACE}", f"namespace: {choice.namespace}")
        .replace("../../../selected/pods", _relative(DEPLOY / "selected" / "pods", selected.parent))
    )
    stacks = [f.name.removeprefix("Pulumi.").removesuffix(".yaml") for f in choice.stack_files]
    (dest / "stacks.yaml").write_text(
        yaml.safe_dump(
            [{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": f"--stack={s}"} for s in stacks]
        )
    )
    for stack_file in choice.stack_files:
        shutil.copy2(stack_file, dest / stack_file.name)
    (dest / "this-cluster.yaml").write_text(yaml.safe_dump(_deployment_patch(choice)))
    kustomization: dict[str, Any] = yaml.safe_load((dest / "kustomization.yaml").read_text())
    kustomization["resources"] = [_relative(DEPLOY / "base", dest), choice.namespace]
    kustomization["images"] = [{"name": "ssh-gateway-reconciler", "newTag": choice.tag}]
    kustomization["patches"].append({"path": "this-cluster.yaml"})
    kustomization["configMapGenerator"] = [
        {"name": STACK_FILES, "namespace": "ssh-gateway", "files": [f.name for f in choice.stack_files]}
    ]
    (dest / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    return dest


def _relative(target: Path, start: Path) -> str:
    """kustomize refuses an absolute path to another kustomization: the base reached from the copy, relatively."""
    return os.path.relpath(target, start)


def _deployment_patch(choice: OverlayChoice) -> dict[str, Any]:
    """The real node's toleration and nodeSelector; each stack file mounted where the image keeps its own."""
    mounts = [
        {"name": "stack-files", "mountPath": f"/opt/ssh-gateway/stacks/{f.name}", "subPath": f.name, "readOnly": True}
        for f in choice.stack_files
    ]
    spec = {
        "nodeSelector": {"kubernetes.io/hostname": choice.node_name},
        "tolerations": [{**choice.toleration, "operator": "Equal"}],
        "containers": [{"name": "reconciler", "volumeMounts": mounts}],
        "volumes": [{"name": "stack-files", "configMap": {"name": STACK_FILES}}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "ssh-gateway-reconciler", "namespace": "ssh-gateway"},
        "spec": {"template": {"spec": spec}},
    }
