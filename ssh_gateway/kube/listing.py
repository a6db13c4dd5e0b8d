"""Complete paged listings of the selected pods or Services.

A listing is read in pages (`limit`/`continue`), one namespace after the other, and is returned only once the
last page of every namespace is in: an error on any page (forbidden, a timeout, a 5xx, a 410 when the continue
token expired between pages, a page without `metadata` or `items`) is a `KubeError`, never a shorter list.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import urllib3
from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException

from ssh_gateway.core.cluster import ClusterObject, Listing, ServicePort, selector_text
from ssh_gateway.core.names import DiscoverFrom

from .client import REQUEST_TIMEOUT
from .errors import KubeError, api_problem

__all__ = ["PAGE_SIZE", "collect_pages", "decoded_page", "ended", "list_selected"]

PAGE_SIZE: Final = 500
"""Objects per page: the API server's own default for kubectl (`--chunk-size`)."""

_GONE: Final = 410

Page = Mapping[str, Any]
Fetch = Callable[[str | None], Page]
"""One page of a listing, from its continue token (None: the first page)."""


def collect_pages(fetch: Fetch, what: str) -> tuple[list[Mapping[str, Any]], str]:
    """Every item of a paged listing and its resourceVersion, following `continue` to the last page."""
    items: list[Mapping[str, Any]] = []
    version = ""
    token: str | None = None
    seen: set[str] = set()
    while True:
        try:
            page = fetch(token)
        except ApiException as exc:
            if exc.status == _GONE and token is not None:
                raise KubeError(
                    f"cannot list {what}: the listing expired between two pages (410 Gone); nothing is taken from "
                    "its first pages, the next run lists again"
                ) from None
            raise KubeError(f"cannot list {what}: {api_problem(exc)}") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeError(f"cannot list {what}: {type(exc).__name__}: {exc}") from None
        metadata, page_items = page.get("metadata"), page.get("items")
        if not isinstance(metadata, Mapping) or not isinstance(page_items, list):
            raise KubeError(f"cannot list {what}: a page came without metadata or items, so the listing is incomplete")
        items.extend(page_items)
        version = version or str(metadata.get("resourceVersion") or "")
        token = metadata.get("continue") or None
        if token is None:
            return items, version
        if token in seen:
            raise KubeError(f"cannot list {what}: the API server repeated a continue token")
        seen.add(token)


def list_selected(
    api: ApiClient, kind: DiscoverFrom, namespaces: Iterable[str], selector: Mapping[str, str]
) -> Listing:
    """Every `kind` object carrying `selector`'s labels in each of `namespaces`, complete or a `KubeError`; those
    that have ended (`ended`) are left out."""
    core = CoreV1Api(api)
    labels = selector_text(selector)
    objects: list[ClusterObject] = []
    versions: dict[str, str] = {}
    for namespace in namespaces:

        def fetch(token: str | None, namespace: str = namespace) -> Page:
            method = core.list_namespaced_service if kind is DiscoverFrom.SERVICES else core.list_namespaced_pod
            response: Any = method(
                namespace,
                label_selector=labels,
                limit=PAGE_SIZE,
                _continue=token,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
            return decoded_page(response.data)

        what = f"{kind.value} in namespace {namespace} with labels {labels}"
        items, versions[namespace] = collect_pages(fetch, what)
        objects.extend(_record(kind, item, what) for item in items if not ended(item))
    return Listing(objects=tuple(objects), resource_versions=versions)


def decoded_page(data: bytes) -> Page:
    try:
        page = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        page = None
    # Not a mapping: `collect_pages` finds no metadata and refuses the page.
    return page if isinstance(page, Mapping) else {}


def ended(item: Mapping[str, Any]) -> bool:
    """An object that will not run again counts as gone, so its instance's grace period starts: one being deleted
    (a lost node's evicted pods stay Terminating until the node answers, which it may never do) and a pod that
    has finished (Succeeded or Failed, kept until someone deletes it)."""
    meta, status = item.get("metadata"), item.get("status")
    if isinstance(meta, Mapping) and meta.get("deletionTimestamp"):
        return True
    return isinstance(status, Mapping) and status.get("phase") in ("Succeeded", "Failed")


def _record(kind: DiscoverFrom, item: Mapping[str, Any], what: str) -> ClusterObject:
    """An item as a plain record; one without a name, namespace or uid is a broken listing."""
    meta = item.get("metadata")
    if not isinstance(meta, Mapping) or not all(isinstance(meta.get(k), str) for k in ("name", "namespace", "uid")):
        raise KubeError(f"cannot list {what}: an item came without metadata.name, namespace or uid")
    found = item.get("spec")
    spec: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    ports: tuple[ServicePort, ...] = ()
    if kind is DiscoverFrom.SERVICES:
        ports = tuple(
            ServicePort(name=p.get("name"), port=int(p["port"]), node_port=p.get("nodePort"))
            for p in spec.get("ports") or ()
            if isinstance(p, Mapping) and isinstance(p.get("port"), int)
        )
    return ClusterObject(
        kind=kind,
        namespace=meta["namespace"],
        name=meta["name"],
        uid=meta["uid"],
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        service_type=str(spec.get("type") or "ClusterIP") if kind is DiscoverFrom.SERVICES else None,
        ports=ports,
    )
