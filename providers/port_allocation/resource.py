"""`PortAllocation`: the stack's table of public ports, one resource per stack."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi.dynamic

from providers.pickling import unwrap_batch_setitems

from .provider import PortAllocationProvider

__all__ = ["PortAllocation", "PortAllocationArgs"]


@dataclass(frozen=True, kw_only=True)
class PortAllocationArgs:
    """What the table is computed from."""

    instances: Sequence[str]
    """Every instance that needs a port."""

    port_range: str
    """The range to allocate from, `"start-end"` inclusive."""

    pins: Mapping[str, int] = field(default_factory=dict)
    """Instances whose port is fixed in config."""

    reserved: Sequence[int] = ()
    """Ports never handed out."""

    api_url: str | None = None
    """Pangolin's Integration API, listed once per run to find ports held by others (None: skip)."""

    org_id: str | None = None
    """The Pangolin org to list."""

    owner_prefix: str = ""
    """Prefix of this stack's Pangolin resource names; any other name on a port makes it foreign."""


class PortAllocation(pulumi.dynamic.Resource, module="ssh-gateway", name="PortAllocation"):
    """Type token `pulumi-python:dynamic/ssh-gateway:PortAllocation`; `ports` is known at preview."""

    ports: pulumi.Output[dict[str, int]]
    """Instance name -> public port."""
    released: pulumi.Output[list[int]]
    """Ports freed by removed instances, least recently released first (reused last)."""

    def __init__(self, name: str, args: PortAllocationArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        props = {
            "instances": sorted(args.instances),
            "range": args.port_range,
            "pins": dict(sorted(args.pins.items())),
            "reserved": sorted(args.reserved),
            "apiUrl": args.api_url,
            "orgId": args.org_id,
            "ownerPrefix": args.owner_prefix,
            # Computed by the provider's check from the previous table.
            "ports": None,
            "released": None,
        }
        unwrap_batch_setitems()
        super().__init__(PortAllocationProvider(), name, props, opts)
