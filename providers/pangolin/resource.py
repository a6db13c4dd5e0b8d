"""`PangolinTcpResource`: a public raw TCP/UDP port on Pangolin, forwarded to one target."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import pulumi
import pulumi.dynamic

from providers.sdk_patches import unwrap_batch_setitems
from ssh_gateway.core.names import PANGOLIN_KIND, PANGOLIN_MODULE

from .provider import PangolinTcpProvider

__all__ = ["PangolinTcpResource", "PangolinTcpResourceArgs"]


@dataclass(frozen=True, kw_only=True)
class PangolinTcpResourceArgs:
    """What one `PangolinTcpResource` exposes and where it forwards to."""

    api_url: pulumi.Input[str]
    """Base URL of Pangolin's Integration API, e.g. `https://api.example.com/v1`."""

    org_id: pulumi.Input[str]
    """The Pangolin org that owns the resource. Changing it replaces the resource."""

    site_id: pulumi.Input[int]
    """The site (Newt, WireGuard or local) through which the target is reached."""

    name: pulumi.Input[str]
    """The resource's name in Pangolin, 1 to 255 characters."""

    proxy_port: pulumi.Input[int]
    """The public port on the Pangolin host (1..65535); Pangolin never picks one itself."""

    target_ip: pulumi.Input[str]
    """IPv4/IPv6 address or hostname of the target, as seen from the site."""

    target_port: pulumi.Input[int]
    """The target's port (1..65535)."""

    protocol: pulumi.Input[str] = "tcp"
    """`"tcp"` or `"udp"`. Pangolin cannot change it in place, so changing it replaces the resource."""

    enabled: pulumi.Input[bool] = True
    """Whether Pangolin routes the port."""

    adopt_resource_id: pulumi.Input[int] | None = None
    """A resource of this name and protocol that the program's listing of the org found (an interrupted run's
    leftover): `create` adopts it instead of making a twin. Not part of the diff."""


# Pangolin's camelCase property names, as stored in state, and the Python attribute of each.
_ATTRIBUTES: Final = {
    "apiUrl": "api_url",
    "orgId": "org_id",
    "siteId": "site_id",
    "name": "name",
    "protocol": "protocol",
    "proxyPort": "proxy_port",
    "enabled": "enabled",
    "targetIp": "target_ip",
    "targetPort": "target_port",
    "adoptResourceId": "adopt_resource_id",
    "resourceId": "resource_id",
    "targetId": "target_id",
    "niceId": "nice_id",
}
_PROPERTIES: Final = {attribute: prop for prop, attribute in _ATTRIBUTES.items()}


class PangolinTcpResource(pulumi.dynamic.Resource, module=PANGOLIN_MODULE, name=PANGOLIN_KIND):
    """A raw TCP/UDP Pangolin resource on `proxy_port` with a single target.

    Type token `pulumi-python:dynamic/pangolin:TcpResource`. The API key is read by the provider
    from the stack secret `pangolin:apiKey` (or `PANGOLIN_API_KEY`), never from these args.
    """

    api_url: pulumi.Output[str]
    org_id: pulumi.Output[str]
    site_id: pulumi.Output[int]
    name: pulumi.Output[str]
    protocol: pulumi.Output[str]
    proxy_port: pulumi.Output[int]
    enabled: pulumi.Output[bool]
    target_ip: pulumi.Output[str]
    target_port: pulumi.Output[int]
    adopt_resource_id: pulumi.Output[int | None]
    resource_id: pulumi.Output[int]
    """Pangolin's id of the resource (also the Pulumi id, as a string)."""
    target_id: pulumi.Output[int]
    """Pangolin's id of the target."""
    nice_id: pulumi.Output[str]
    """Pangolin's random `adjective-animal` name for the resource."""

    def __init__(
        self,
        resource_name: str,
        args: PangolinTcpResourceArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props: dict[str, Any] = {
            "api_url": args.api_url,
            "org_id": args.org_id,
            "site_id": args.site_id,
            "name": args.name,
            "protocol": args.protocol,
            "proxy_port": args.proxy_port,
            "enabled": args.enabled,
            "target_ip": args.target_ip,
            "target_port": args.target_port,
            "adopt_resource_id": args.adopt_resource_id,
            # Output-only: None here so that the engine resolves them onto the attributes above.
            "resource_id": None,
            "target_id": None,
            "nice_id": None,
        }
        unwrap_batch_setitems()
        super().__init__(PangolinTcpProvider(), resource_name, props, opts)

    # The SDK names attributes after the props' keys and resolves the engine's outputs through
    # `translate_output_property`; the engine, state and `preview --diff` see Pangolin's camelCase.
    def translate_input_property(self, prop: str) -> str:
        """snake_case attribute -> camelCase property."""
        return _PROPERTIES.get(prop, prop)

    def translate_output_property(self, prop: str) -> str:
        """camelCase property -> snake_case attribute."""
        return _ATTRIBUTES.get(prop, prop)
