"""The objects already holding names the stack would create (`core/discovery_names.py`): a metadata-only get by
name of each, so the reader sees an object's annotations (its stack mark) and never a Secret's data.

Gets by name, not a listing: the stack needs `get` on Services and Secrets in its tenants' namespaces anyway (its
kubernetes provider reads what it made), while listing Secrets would let it read every Secret there. Only the
instances the stack does not serve yet are asked about, so a steady stack asks nothing, and a burst of new pods
one get per object, a few at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import urllib3
from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException

from ssh_gateway.core.cluster import NamedObject, Occupants
from ssh_gateway.core.names import STACK_MARK

from .client import REQUEST_TIMEOUT
from .errors import KubeError, api_problem
from .listing import decoded_page

__all__ = ["read_occupants"]

METADATA_ONLY: Final = {"Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"}
"""The API server answers an object's metadata alone (Kubernetes' PartialObjectMetadata, GA since 1.15)."""
AT_ONCE: Final = 8
"""Gets in flight together: a first `up` of 650 new pods asks 1,300 names."""

_NOT_FOUND: Final = 404
_Marked = tuple[NamedObject, str | None]


def read_occupants(api: ApiClient, names: Sequence[NamedObject]) -> Occupants:
    """Each of `names` that exists, with its stack mark (None: it has none); a `KubeError` when one cannot be read
    (anything but "not found"): an object that may be in the way is never taken for one that is not."""
    core = CoreV1Api(api)
    with ThreadPoolExecutor(max_workers=AT_ONCE, thread_name_prefix="occupants") as pool:
        found = list(pool.map(lambda named: _get(core, named), names))
    return dict(f for f in found if f is not None)


def _get(core: CoreV1Api, named: NamedObject) -> _Marked | None:
    read = core.read_namespaced_service if named.kind == "Service" else core.read_namespaced_secret
    try:
        response: Any = read(
            named.name,
            named.namespace,
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT,
            _headers=METADATA_ONLY,
        )
    except ApiException as exc:
        if exc.status == _NOT_FOUND:
            return None
        raise KubeError(f"cannot read {named.ref}: {api_problem(exc)}") from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise KubeError(f"cannot read {named.ref}: {type(exc).__name__}: {exc}") from None
    meta = decoded_page(response.data).get("metadata")
    if not isinstance(meta, Mapping):
        raise KubeError(f"cannot read {named.ref}: the answer has no metadata")
    annotations = meta.get("annotations") or {}
    mark = annotations.get(STACK_MARK) if isinstance(annotations, Mapping) else None
    return named, str(mark) if mark is not None else None
