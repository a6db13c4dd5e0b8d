"""What the Pangolin org held when this run began, as seen by the one listing the allocator makes.

Every dynamic resource of a stack runs in one `pulumi-python` plugin process per run, and the port
allocator's `check` always runs before any instance's `create` (instances take their ports from it). Its
listing, recorded here, lets `create` find a resource that an interrupted earlier run made - same name,
yet not in the stack's state, or `create` would not be called - and adopt it instead of making a twin on
the same port, without a listing per create. Names identify the stack and the instance, so a match is
this stack's own leftover; the adoption is announced, never silent.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from .models import Resource

_lock = threading.Lock()
_ids_by_org: dict[tuple[str, str], dict[str, int]] = {}


def record(api_url: str, org_id: str, resources: Iterable[Resource]) -> None:
    """Remembers the org's resources by name (a name held twice keeps the lowest id)."""
    ids: dict[str, int] = {}
    for resource in sorted(resources, key=lambda r: r.resourceId):
        ids.setdefault(resource.name, resource.resourceId)
    with _lock:
        _ids_by_org[(api_url.rstrip("/"), org_id)] = ids


def resource_named(api_url: str, org_id: str, name: str) -> int | None:
    """The id of a resource called `name` when the run began, if the allocator listed the org."""
    with _lock:
        return _ids_by_org.get((api_url.rstrip("/"), org_id), {}).get(name)
