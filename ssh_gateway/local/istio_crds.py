"""Istio's CustomResourceDefinitions in a local API server, so a stack can create its EnvoyFilters for real.

The CRDs are Istio's own (`kubernetes/customresourcedefinitions.gen.yaml` of the Go module `istio.io/api`,
fetched and cached by scripts/bootstrap, path in .toolchain.env). kube-apiserver serves a CRD once its own
establishing controller marks it `Established`; no controller-manager is needed for that.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from ssh_gateway.plumbing.toolchain import toolchain_file

from .control_plane import ControlPlane, ControlPlaneError

__all__ = ["install_istio_crds", "istio_crds_file"]

ISTIO_CRDS_KEY = "SSH_GATEWAY_ISTIO_CRDS"
"""The .toolchain.env key of Istio's CRDs file."""
_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def istio_crds_file() -> Path:
    """Istio's CRDs as scripts/bootstrap cached them."""
    return toolchain_file(ISTIO_CRDS_KEY)


def _established(crd: dict[str, Any]) -> bool:
    conditions = crd.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def install_istio_crds(plane: ControlPlane, path: Path | None = None, timeout: float = 60.0) -> list[str]:
    """Creates every CRD of the file (one already there is left alone) and waits until each is served; returns
    their names. Raises ControlPlaneError when one is refused or not established in time."""
    documents = yaml.safe_load_all((path or istio_crds_file()).read_text())
    crds = [d for d in documents if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]
    names = [str(crd["metadata"]["name"]) for crd in crds]
    with plane.client() as api:
        for crd in crds:
            response = api.post(_CRDS, json=crd)
            if response.status_code != httpx.codes.CONFLICT and response.is_error:
                raise ControlPlaneError(
                    f"kube-apiserver refused the CRD {crd['metadata']['name']}: {response.status_code} {response.text}"
                )
        deadline = time.monotonic() + timeout
        waiting = list(names)
        while waiting:
            waiting = [name for name in waiting if not _established(api.get(f"{_CRDS}/{name}").json())]
            if waiting and time.monotonic() > deadline:
                raise ControlPlaneError(f"CRDs not established within {timeout:.0f}s: {', '.join(waiting)}")
            if waiting:
                time.sleep(0.2)
    return names
