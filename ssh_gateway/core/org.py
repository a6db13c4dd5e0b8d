"""What the Pangolin org holds, as far as allocation and adoption care: which raw resource binds which port,
and who owns a port that two resources bind.

The program lists the org once per run (`providers.pangolin.org.read_org`) and hands what it found on as
data: to the port allocator (ports that others hold, and the stack's ports it lost) and to each instance's
Pangolin resource (a resource of its name that an interrupted run left behind, to adopt instead of twinning).

**Who owns a contested port: the lowest resource id wins.** Pangolin accepts two resources on one port, and
two stacks (or two runs) sharing an org and a range can each create one between the other's listing and its
own creates; no API call can claim a port atomically. Among the enabled resources that bind one protocol and
port, the one with the lowest id owns it: it was created first, it is the one the gateway serves (the
emulator's data plane, like Traefik with one router per port, serves the lowest id), so the others never
served that port. Every party can apply the rule on its own from one listing, and they all agree:

- `contest` (at the start of a run, before anything is bound): an instance whose port in the stack's table is
  owned by an older resource of someone else has *lost* it, and the allocator moves it to a free port; an
  instance whose own resource is the older one keeps its port, the younger intruder being its owner's
  problem. New instances avoid every port anyone holds.
- `losers`, at each create (`providers.pangolin.provider`): the resource is made without its target (so it has
  no router and serves nothing), the resources with lower ids show whether an older enabled one claims its port
  (what the provider's ledger knows of them, from one listing and single reads), and only a winner gets its
  target; a loser is deleted again, never having served, and its create fails naming the
  owner; the next run's `contest` moves it. A later create gets a higher id and sees this one, so the decision
  holds. A resource keeps its claim only while it stays enabled on its port: a new port, or enabling again, is
  a replacement (a new claim, a new id).
- `losers` again, after the run's creates (`providers.pangolin.port_check`), as the backstop: one listing shows
  whether any of the stack's bindings is outranked anyway (e.g. a resource made by another tool); such a loser
  is disabled at once, and the run fails naming both owners.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Binding", "Conflict", "OrgView", "contest", "losers"]


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
    enabled: bool = True
    """A disabled resource holds its port but serves nothing on it."""

    def describe(self) -> str:
        return f"Pangolin resource {self.resource_id} {self.name!r}"


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

    def held_in(self, ports: Iterable[int]) -> dict[int, list[Binding]]:
        """Port -> the resources binding it, lowest id first, for the given ports only (what the allocator needs)."""
        wanted = set(ports)
        held: dict[int, list[Binding]] = {}
        for binding in sorted(self.bindings, key=lambda b: (b.port, b.resource_id)):
            if binding.port in wanted:
                held.setdefault(binding.port, []).append(binding)
        return held


@dataclass(frozen=True)
class Contest:
    """What the allocator must know about the ports others hold, decided by the lowest-id rule."""

    foreign: dict[int, str] = field(default_factory=dict)
    """Ports the stack must not hand out or pin -> the resource that holds them (a short description)."""
    lost: dict[int, str] = field(default_factory=dict)
    """Ports of the stack's table that an older resource of someone else owns -> that resource."""


def contest(held: Mapping[int, Sequence[Binding]], owners: Mapping[int, str], protocol: str = "tcp") -> Contest:
    """Apply the lowest-id rule to the ports the org holds.

    `held` maps a port to the resources binding it; `owners` maps a port the stack claims (from its table or a
    pin) to the Pangolin name of the instance that claims it. A port held by anyone but its owner's resource is
    foreign, unless the owner's own enabled resource on it is older than every other enabled one of the same
    protocol (the owner keeps it). A claimed, foreign port is lost when another enabled resource of the
    protocol binds it: the owner never served it (its resource is younger, disabled, or was never made). A
    leftover of this stack (an instance removed while Pangolin was unreachable) counts as someone else, so
    its port is never handed on while still bound.
    """
    result = Contest()
    for port, bindings in held.items():
        owner = owners.get(port)
        others = sorted((b for b in bindings if b.name != owner), key=lambda b: b.resource_id)
        if not others:
            continue
        if owner is None:
            result.foreign[port] = others[0].describe()
            continue
        rivals = [b for b in others if b.enabled and b.protocol == protocol]
        mine = [b.resource_id for b in bindings if b.name == owner and b.enabled and b.protocol == protocol]
        if not rivals or (mine and min(mine) < rivals[0].resource_id):
            continue  # nobody else serves it, or the owner's resource is the older: the port is the owner's
        result.foreign[port] = result.lost[port] = rivals[0].describe()
    return result


@dataclass(frozen=True, kw_only=True)
class Conflict:
    """One of the stack's resources sharing its port with an older one, which owns the port."""

    port: int
    loser: Binding
    """The stack's resource: younger, so it never served the port."""
    owner: Binding
    """The older resource that keeps the port."""


def losers(mine: Iterable[Binding], org: OrgView) -> list[Conflict]:
    """The stack's enabled resources that an older enabled resource of the same protocol and port outranks.

    `mine` are the stack's resources as one listing taken after they were made shows them, and `org` is that
    listing: it shows every resource created before any of them (Pangolin's ids grow with creation). Resources
    of the same name are one owner's (twins, which adoption settles), never each other's rivals.
    """
    conflicts: list[Conflict] = []
    for binding in mine:
        older = [
            b
            for b in org.bindings
            if b.port == binding.port
            and b.protocol == binding.protocol
            and b.enabled
            and b.resource_id < binding.resource_id
            and b.name != binding.name
        ]
        if older and binding.enabled:
            conflicts.append(Conflict(port=binding.port, loser=binding, owner=min(older, key=lambda b: b.resource_id)))
    return sorted(conflicts, key=lambda c: c.port)
