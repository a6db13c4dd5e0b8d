"""`PortCheck`: the once-per-run check that none of the stack's Pangolin ports is bound twice."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi.dynamic

from providers.sdk_patches import unwrap_batch_setitems
from ssh_gateway.core.names import PANGOLIN_MODULE, PORT_CHECK_KIND

from .port_check import PortCheckProvider

__all__ = ["PortCheck", "PortCheckArgs"]


@dataclass(frozen=True, kw_only=True)
class PortCheckArgs:
    """The stack's Pangolin resources, by instance."""

    api_url: str
    """Integration API base URL."""
    org_id: str
    """The org the resources are in."""
    owner_prefix: str
    """Prefix of the stack's Pangolin resource names (`<project>/<stack>/`), to find its resources in the listing."""
    ports: pulumi.Input[Mapping[str, int]]
    """Instance -> its public port (the allocation's table, known at preview), and `@connect` -> the CONNECT
    entry's port when it goes through Pangolin."""


class PortCheck(pulumi.dynamic.Resource, module=PANGOLIN_MODULE, name=PORT_CHECK_KIND):
    """Type token `pulumi-python:dynamic/pangolin:PortCheck`; see `providers.pangolin.port_check`. It must depend on
    every Pangolin resource of the stack (`depends_on` them: the instances' and the CONNECT entry's), so that it runs
    after their creates."""

    def __init__(self, name: str, args: PortCheckArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        props: dict[str, Any] = {
            "api_url": args.api_url,
            "org_id": args.org_id,
            "owner_prefix": args.owner_prefix,
            "ports": args.ports,
        }
        unwrap_batch_setitems()
        super().__init__(PortCheckProvider(), name, props, opts)

    def translate_input_property(self, prop: str) -> str:
        """snake_case attribute -> camelCase property, as Pangolin spells it."""
        return {"api_url": "apiUrl", "org_id": "orgId", "owner_prefix": "ownerPrefix"}.get(prop, prop)
