"""The reconciler installed in the local cluster as docs/reconciler.md tells a platform team, on the real node.

`in_cluster_stack` is step 1's stack config: a discovery stack with no kubeconfig (the pod's service account is
the cluster), its status in `STATUS_NAMESPACE`, Pangolin reached at the node's relay. `install_reconciler` runs
steps 2 to 5: the image into the node's containerd, an overlay of `overlays/from-pods` (reconciler_overlay.py),
the namespace and the backend's Secret (Azurite, through its relay), `kubectl apply -k`. The tests and
`scripts/demo-cluster` share them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from ssh_gateway.local.azurite import Azurite
from ssh_gateway.local.control_plane import ControlPlane
from ssh_gateway.local.kubectl import run as kubectl
from ssh_gateway.local.kubelet_node import TAINT, KubeletNode
from ssh_gateway.local.reconciler_image import image_archive
from ssh_gateway.local.reconciler_overlay import OverlayChoice, write_overlay

__all__ = [
    "STATUS_NAMESPACE",
    "Pangolin",
    "in_cluster_stack",
    "install_reconciler",
    "uninstall_reconciler",
]

STATUS_NAMESPACE = "ssh-gateway"
"""The base's namespace: the reconciler's, and the stacks' status ConfigMaps'."""


class Pangolin(Protocol):
    """The Pangolin API the stack uses, on this machine's loopback (the emulator's handle is one)."""

    @property
    def url(self) -> str: ...
    @property
    def org_id(self) -> str: ...
    @property
    def site_id(self) -> int: ...


BACKEND_SECRET = "ssh-gateway-reconciler-backend"  # noqa: S105 - a Secret's name, not a secret


def in_cluster_stack(
    node: KubeletNode, pangolin: Pangolin, namespace: str, *, port_range: str, host_template: str
) -> dict[str, Any]:
    """A `from: pods` stack's config for the reconciler in the cluster, selecting `namespace`."""
    url = f"http://{node.expose(urlsplit(pangolin.url).port or 80)}{urlsplit(pangolin.url).path}"
    return {
        "ssh-gateway:pangolin": {"url": url, "orgId": pangolin.org_id, "siteId": pangolin.site_id},
        "ssh-gateway:ports": {"range": port_range},
        "ssh-gateway:gateway": {"hostTemplate": host_template},
        "ssh-gateway:firewall": {"enabled": False},
        "ssh-gateway:kubernetes": {"namespace": namespace, "nodeIp": node.node_port_address},
        "ssh-gateway:discovery": {
            "from": "pods",
            "namespaces": [namespace],
            "selector": {"ssh-gateway.io/expose": "true"},
            "nameLabel": "ssh-gateway.io/instance",
            "statusNamespace": STATUS_NAMESPACE,
            "gracePeriod": 3600,
        },
    }


def install_reconciler(
    node: KubeletNode,
    kube: ControlPlane,
    azurite: Azurite,
    *,
    stack_file: Path,
    namespace: str,
    passphrase: str,
    work: Path,
) -> Path:
    """Steps 2 to 5 of docs/reconciler.md for one stack selecting `namespace`; returns the applied overlay."""
    archive, tag = image_archive(work)
    node.load_image(archive)
    choice = OverlayChoice(
        tag=tag, stack_files=(stack_file,), namespace=namespace, node_name=node.name, toleration=TAINT
    )
    overlay = write_overlay(work / "overlay", choice)
    relay = node.expose(azurite.port).split(":")[0]
    secret = {
        "PULUMI_BACKEND_URL": azurite.backend_url.replace("domain=127.0.0.1:", f"domain={relay}:"),
        "AZURE_STORAGE_ACCOUNT": azurite.env()["AZURE_STORAGE_ACCOUNT"],
        "AZURE_STORAGE_KEY": azurite.env()["AZURE_STORAGE_KEY"],
        "PULUMI_CONFIG_PASSPHRASE": passphrase,
    }
    kubectl(["create", "namespace", STATUS_NAMESPACE], kube.kubeconfig)
    literals = [f"--from-literal={key}={value}" for key, value in secret.items()]
    kubectl(["-n", STATUS_NAMESPACE, "create", "secret", "generic", BACKEND_SECRET, *literals], kube.kubeconfig)
    kubectl(["apply", "-k", str(overlay), "--server-side", "--dry-run=server"], kube.kubeconfig)
    kubectl(["apply", "-k", str(overlay), "--server-side"], kube.kubeconfig)
    return overlay


def uninstall_reconciler(node: KubeletNode, kube: ControlPlane, overlay: Path) -> None:
    """The replicas killed at once (no `up` may outlast the caller), then what the overlay made, deleted."""
    with kube.client() as api:
        replicas = api.get(f"/api/v1/namespaces/{STATUS_NAMESPACE}/pods").raise_for_status().json()["items"]
    for replica in replicas:
        node.kill_pod(STATUS_NAMESPACE, replica["metadata"]["name"])
    kubectl(["delete", "-k", str(overlay), "--wait=false"], kube.kubeconfig)
    with kube.client() as api:
        api.delete(f"/api/v1/namespaces/{STATUS_NAMESPACE}/pods?gracePeriodSeconds=0")
