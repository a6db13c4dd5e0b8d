"""The stacks' status ConfigMaps: this stack's (its memory: accepted specs, `missingSince`, held removals) and
every stack's in the status namespace (their selections, for objects two stacks select).

An absent ConfigMap (404) is a complete answer: no memory yet. Any other failure is a `KubeError`: a memory
that cannot be read is never taken for an empty one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import urllib3
from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException

from ssh_gateway.core.cluster import StatusMap, selector_text
from ssh_gateway.core.names import MANAGED_BY, MANAGED_BY_LABEL, STACK_LABEL

from .client import REQUEST_TIMEOUT
from .errors import KubeError, api_problem
from .listing import collect_pages, decoded_page

__all__ = ["read_status", "read_statuses"]

_NOT_FOUND: Final = 404


def read_status(api: ApiClient, namespace: str, name: str) -> StatusMap | None:
    """The status ConfigMap `namespace/name`, or None when there is none (the stack's first run)."""
    try:
        response: Any = CoreV1Api(api).read_namespaced_config_map(
            name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
        )
    except ApiException as exc:
        if exc.status == _NOT_FOUND:
            return None
        raise KubeError(f"cannot read the status ConfigMap {namespace}/{name}: {api_problem(exc)}") from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise KubeError(f"cannot read the status ConfigMap {namespace}/{name}: {type(exc).__name__}: {exc}") from None
    status = _status(decoded_page(response.data))
    if status is None:
        raise KubeError(f"cannot read the status ConfigMap {namespace}/{name}: the answer is no ConfigMap")
    return status


def read_statuses(api: ApiClient, namespace: str) -> tuple[StatusMap, ...]:
    """Every stack's status ConfigMap in `namespace` (by `MANAGED_BY_LABEL` and `STACK_LABEL`), complete."""
    core = CoreV1Api(api)
    labels = f"{selector_text({MANAGED_BY_LABEL: MANAGED_BY})},{STACK_LABEL}"

    def fetch(token: str | None) -> Mapping[str, Any]:
        response: Any = core.list_namespaced_config_map(
            namespace,
            label_selector=labels,
            limit=100,
            _continue=token,
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT,
        )
        return decoded_page(response.data)

    items, _ = collect_pages(fetch, f"the status ConfigMaps in namespace {namespace}")
    found = [_status(item) for item in items]
    return tuple(s for s in found if s is not None)


def _status(item: Mapping[str, Any]) -> StatusMap | None:
    meta = item.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        return None
    labels = meta.get("labels") or {}
    data = item.get("data") or {}
    return StatusMap(
        namespace=str(meta.get("namespace", "")),
        name=meta["name"],
        stack=str(labels.get(STACK_LABEL, "")) if isinstance(labels, Mapping) else "",
        data={str(k): str(v) for k, v in data.items()} if isinstance(data, Mapping) else {},
    )
