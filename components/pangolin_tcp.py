"""The Pangolin raw TCP resource in front of a public port (an instance's own, or the CONNECT port)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from providers.pangolin import PangolinTcpResource, PangolinTcpResourceArgs

__all__ = ["PangolinTargetArgs", "pangolin_tcp"]


@dataclass(frozen=True, kw_only=True)
class PangolinTargetArgs:
    """The Pangolin side: where the API is and which site reaches the target."""

    api_url: str
    """Integration API base URL."""
    org_id: str
    """Org that owns the resource."""
    site_id: int
    """Newt (or local) site the target is reached through."""
    resource_name: str
    """Resource name, identifying the stack and the instance."""
    leftover_id: int | None = None
    """A resource of this name that the program's listing found: adopted on create instead of twinned."""


def pangolin_tcp(
    name: str,
    pangolin: PangolinTargetArgs,
    *,
    proxy_port: pulumi.Input[int],
    target_ip: pulumi.Input[str],
    target_port: pulumi.Input[int],
    opts: pulumi.ResourceOptions,
) -> PangolinTcpResource:
    """The resource that binds `proxy_port` on the gateway and forwards it through the site to the target."""
    return PangolinTcpResource(
        name,
        PangolinTcpResourceArgs(
            api_url=pangolin.api_url,
            org_id=pangolin.org_id,
            site_id=pangolin.site_id,
            name=pangolin.resource_name,
            proxy_port=proxy_port,
            target_ip=target_ip,
            target_port=target_port,
            adopt_resource_id=pangolin.leftover_id,
        ),
        opts,
    )
