"""What the Pangolin org holds, as far as allocation and adoption care: which raw resource binds which port.

The program lists the org once per run (`providers.pangolin.org.read_org`) and hands what it found on as
data: to the port allocator (ports that others hold) and to each instance's Pangolin resource (a resource of
its name that an interrupted run left behind, to adopt instead of twinning).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["Binding", "OrgView", "foreign_ports"]


@dataclass(frozen=True, kw_only=True, order=True)
class Binding:
    """One raw TCP/UDP resource of the org and the public port it binds."""

    port: int
    """Its `proxyPort`."""
    resource_id: int
    """Pangolin's id of the resource."""
    name: str
    """Its name; this project's names are `<project>/<stack>/<instance>`."""
    protocol: str
    """`tcp` or `udp`."""


@dataclass(frozen=True)
class OrgView:
    """The org's raw resources when this run began."""

    bindings: tuple[Binding, ...] = ()

    def leftover(self, name: str, protocol: str) -> int | None:
        """The lowest id of a resource called `name` with `protocol`: what a create may adopt, if anything.

        A resource of another protocol is never adopted: it is what a replacement (tcp -> udp) deletes.
        """
        ids = [b.resource_id for b in self.bindings if b.name == name and b.protocol == protocol]
        return min(ids) if ids else None

    def held_in(self, ports: Iterable[int]) -> dict[int, list[str]]:
        """Port -> names of the resources binding it, for the given ports only (what the allocator needs)."""
        wanted = set(ports)
        held: dict[int, list[str]] = {}
        for binding in sorted(self.bindings):
            if binding.port in wanted:
                held.setdefault(binding.port, []).append(f"{binding.resource_id}:{binding.name}")
        return held


def foreign_ports(held: Mapping[int, Iterable[str]], owners: Mapping[int, str]) -> dict[int, str]:
    """Ports bound by a resource other than the one this stack names for the port's owner.

    `held` maps a port to `"<id>:<name>"` of each resource binding it; `owners` maps a port to the Pangolin
    name of the instance that holds it in the stack's table. A leftover of this stack (an instance removed
    while Pangolin was unreachable) counts as foreign too, so its port is never handed on while still bound.
    """
    foreign: dict[int, str] = {}
    for port, entries in held.items():
        for entry in entries:
            resource_id, _, name = entry.partition(":")
            if owners.get(port) != name:
                foreign[port] = f"Pangolin resource {resource_id} {name!r}"
                break
    return foreign
