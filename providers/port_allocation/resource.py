"""`PortAllocation`: the stack's table of public ports, one resource per stack."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi.dynamic

from providers.sdk_patches import unwrap_batch_setitems
from ssh_gateway.core.names import ALLOCATION_KIND, ALLOCATION_MODULE
from ssh_gateway.core.org import Binding
from ssh_gateway.core.ports import PortRange

from .provider import PortAllocationProvider

__all__ = ["PortAllocation", "PortAllocationArgs"]


@dataclass(frozen=True, kw_only=True)
class PortAllocationArgs:
    """What the table is computed from."""

    instances: Sequence[str]
    """Every instance that needs a port."""

    port_range: PortRange
    """The range to allocate from."""

    pins: Mapping[str, int] = field(default_factory=dict)
    """Instances whose port is fixed in config."""

    reserved: Sequence[int] = ()
    """Ports never handed out."""

    held: Mapping[int, Sequence[Binding]] = field(default_factory=dict)
    """Ports of the range bound in the Pangolin org -> the resources binding each."""

    owner_prefix: str = ""
    """Prefix of this stack's Pangolin resource names; any other name on a port makes it foreign."""


class PortAllocation(pulumi.dynamic.Resource, module=ALLOCATION_MODULE, name=ALLOCATION_KIND):
    """Type token `pulumi-python:dynamic/ssh-gateway:PortAllocation`; `ports` is known at preview."""

    ports: pulumi.Output[dict[str, int]]
    """Instance name -> public port."""
    released: pulumi.Output[list[int]]
    """Ports freed by removed instances, least recently released first (reused last)."""

    def __init__(self, name: str, args: PortAllocationArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        props = {
            "instances": sorted(args.instances),
            "start": args.port_range.start,
            "end": args.port_range.end,
            "pins": dict(sorted(args.pins.items())),
            "reserved": sorted(args.reserved),
            # Property keys must be strings; `check` reads the ports back as ints and drops this.
            "held": {
                str(port): [
                    {"id": b.resource_id, "name": b.name, "protocol": b.protocol, "enabled": b.enabled}
                    for b in bindings
                ]
                for port, bindings in sorted(args.held.items())
            },
            "ownerPrefix": args.owner_prefix,
            # Computed by the provider's check from the previous table.
            "ports": None,
            "released": None,
        }
        unwrap_batch_setitems()
        super().__init__(PortAllocationProvider(), name, props, opts)
