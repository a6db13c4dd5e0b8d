"""A kubernetes client for the cluster the stack's kubernetes provider uses, found the way pulumi-kubernetes
finds it: `kubernetes.kubeconfig` is a path or a kubeconfig's contents, `kubernetes.context` picks a context;
without a kubeconfig, `$KUBECONFIG` (a list of paths), `~/.kube/config`, then the pod's service account."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final, cast

import yaml
from kubernetes.client import ApiClient, Configuration
from kubernetes.config import (
    ConfigException,
    load_incluster_config,
    new_client_from_config,
    new_client_from_config_dict,
)

from .errors import KubeError

__all__ = ["LEASE_REQUEST_TIMEOUT", "REQUEST_TIMEOUT", "api_client"]

REQUEST_TIMEOUT: Final = (5.0, 30.0)
"""Seconds to connect, and to wait for each response: one policy for every request of the reader. A listing page
of 500 objects answers in well under a second on a healthy API server; a stuck one fails the run instead of
hanging it."""
LEASE_REQUEST_TIMEOUT: Final = (5.0, 15.0)
"""The same for a Lease's read, create and renew (ssh_gateway/ops/reconcile/lease.py): half the lease's 30 s, so a
renew that hangs fails while the lease still holds, and the next try can still renew it."""

_IN_CLUSTER: Final = "KUBERNETES_SERVICE_HOST"


def api_client(kubeconfig: str | None, context: str | None) -> ApiClient:
    """A client for the stack's cluster; a `KubeError` when no kubeconfig (or context) can be loaded."""
    try:
        if kubeconfig is not None:
            return _from_setting(kubeconfig, context)
        default = os.environ.get("KUBECONFIG") or "~/.kube/config"
        found = any(Path(p).expanduser().is_file() for p in default.split(os.pathsep) if p)
        if not found and context is None and os.environ.get(_IN_CLUSTER):
            configuration = Configuration()
            load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            return ApiClient(configuration)
        if not found:
            raise KubeError(
                f"no kubeconfig at {default} and not in a pod: set ssh-gateway:kubernetes.kubeconfig, or $KUBECONFIG"
            )
        return _client(new_client_from_config(config_file=default, context=context, persist_config=False))  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, yaml.YAMLError) as exc:
        where = f" (context {context!r})" if context else ""
        raise KubeError(f"cannot load the kubeconfig{where}: {_one_line(str(exc))}") from None


def _from_setting(kubeconfig: str, context: str | None) -> ApiClient:
    path = Path(kubeconfig).expanduser()
    if path.is_file():
        return _client(new_client_from_config(config_file=str(path), context=context, persist_config=False))  # type: ignore[no-untyped-call]
    try:
        contents = yaml.safe_load(kubeconfig)
    except yaml.YAMLError:
        contents = None
    if not isinstance(contents, dict):
        # The value may be a kubeconfig's contents with a token in it: named only when it looks like a path.
        shown = f" {kubeconfig!r}" if "\n" not in kubeconfig and "{" not in kubeconfig else ""
        raise KubeError(
            f"ssh-gateway:kubernetes.kubeconfig{shown} is neither a file that exists nor a kubeconfig's contents"
        )
    return _client(new_client_from_config_dict(config_dict=contents, context=context, persist_config=False))  # type: ignore[no-untyped-call]


def _client(made: Any) -> ApiClient:
    # The library's config loaders are unannotated (kubernetes/config is not typed, its client is).
    return cast(ApiClient, made)


def _one_line(text: str) -> str:
    return " ".join(text.split())
