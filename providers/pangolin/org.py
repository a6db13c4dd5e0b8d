"""The program's one read of the Pangolin org per run: every raw resource and the port it binds."""

from __future__ import annotations

from ssh_gateway.core.org import Binding, OrgView

from .client import PangolinClient

__all__ = ["read_org"]


def read_org(api_url: str, org_id: str, api_key: str) -> OrgView:
    """Lists the org's resources (all pages) and keeps the raw TCP/UDP ones; read-only, so preview-safe."""
    with PangolinClient(api_url, api_key) as client:
        resources = client.list_all_resources(org_id)
    return OrgView(
        tuple(
            Binding(port=r.proxyPort, resource_id=r.resourceId, name=r.name, protocol=r.raw_protocol)
            for r in resources
            if r.proxyPort is not None and r.raw_protocol is not None
        )
    )
