"""The program's one read of the Pangolin org per run: every raw resource and the port it binds."""

from __future__ import annotations

from collections.abc import Iterable

from ssh_gateway.core.org import Binding, OrgView

from .client import PangolinClient
from .models import Resource

__all__ = ["org_view", "read_org"]


def read_org(api_url: str, org_id: str, api_key: str) -> OrgView:
    """Lists the org's resources (all pages) and keeps the raw TCP/UDP ones; read-only, so preview-safe."""
    with PangolinClient(api_url, api_key) as client:
        return org_view(client.list_all_resources(org_id))


def org_view(resources: Iterable[Resource]) -> OrgView:
    """The raw TCP/UDP resources of a listing, as bindings."""
    return OrgView(
        tuple(
            Binding(port=r.proxyPort, resource_id=r.resourceId, name=r.name, protocol=r.raw_protocol, enabled=r.enabled)
            for r in resources
            if r.proxyPort is not None and r.raw_protocol is not None
        )
    )
