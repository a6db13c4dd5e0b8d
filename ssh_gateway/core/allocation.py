"""The pure port allocator: which public port each instance gets, run after run.

`allocate` takes the instance names, the configured range, pins, reserved ports, the ports other
Pangolin resources already bind ("foreign"), and the `AllocationState` the previous run returned;
it returns the next `AllocationState`. It has no Pulumi or Pangolin imports and no I/O, so the
provider's `check` can call it at preview time and tests can call it a million times.

Rules, in the order they are applied:

1. An instance listed now and present in the previous state keeps its port, unless it is pinned
   to another one (the pin wins and the old port is released), or the port is `lost`: an older
   Pangolin resource of someone else owns it (the lowest-id rule of `ssh_gateway.core.org`), so the
   instance never served it, releases it and takes a new port as in rule 4.
2. Pinned instances take their pins.
3. Instances in the previous state that are no longer listed release their ports. Released ports
   are appended to `released` in instance-name order, dropping earlier copies of the same port.
4. The remaining instances, in name order, take the lowest never-used free port of the range, and
   only when none is left the least recently released free port. Handing out never-used ports
   first means a port's new owner rarely inherits a stale `known_hosts` entry.
5. `released` keeps only ports inside the range that no instance holds.

Every problem is collected before anything is returned, and raised together as one
`AllocationError`, so a misconfigured stack is fixed in one round trip rather than one per run.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from .ports import PortRange, is_port

__all__ = ["AllocationError", "AllocationState", "allocate"]

_RANGE_KEY: Final = "ssh-gateway:ports.range"
_RESERVED_KEY: Final = "ssh-gateway:ports.reserved"


def _pin_key(name: str) -> str:
    """How the config spells an instance's pin, e.g. `ssh-gateway:instances[gpu-01].port`."""
    return f"ssh-gateway:instances[{name}].port"


_NO_PORTS: Final[Mapping[str, int]] = MappingProxyType({})
_NO_FOREIGN: Final[Mapping[int, str]] = MappingProxyType({})


@dataclass(frozen=True, kw_only=True)
class AllocationState:
    """What is kept in stack state between runs."""

    ports: Mapping[str, int]
    """Instance name -> its port. `allocate` returns it ordered by instance name."""

    released: tuple[int, ...]
    """Ports freed by removed instances, least recently released first."""


_NO_PREVIOUS: Final = AllocationState(ports=_NO_PORTS, released=())


class AllocationError(ValueError):
    """Every problem `allocate` found, not just the first: `problems` lists them, one per line in `str()`."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems: list[str] = list(problems)
        super().__init__("\n".join(self.problems))

    def __reduce__(self) -> tuple[type[AllocationError], tuple[list[str]]]:
        # The default reduce would call AllocationError(joined_message) and split it into characters.
        return (type(self), (self.problems,))


def _quoted(names: Iterable[str]) -> str:
    """'a' / 'a' and 'b' / 'a', 'b' and 'c' / 'a', 'b', 'c' and 4 more."""
    shown = [f"'{name}'" for name in names]
    if len(shown) > 3:
        return f"{', '.join(shown[:3])} and {len(shown) - 3} more"
    if len(shown) > 1:
        return f"{', '.join(shown[:-1])} and {shown[-1]}"
    return shown[0]


def allocate(
    *,
    instances: Collection[str],
    port_range: PortRange,
    pins: Mapping[str, int] = _NO_PORTS,
    reserved: Collection[int] = (),
    foreign: Mapping[int, str] = _NO_FOREIGN,
    lost: Mapping[int, str] = _NO_FOREIGN,
    previous: AllocationState = _NO_PREVIOUS,
) -> AllocationState:
    """Give every instance a port, keeping the ports of the previous run.

    `pins` maps an instance to the port it must have; `reserved` are ports never to hand out;
    `foreign` maps ports bound in the Pangolin org by resources this stack does not own to a short
    description such as ``"Pangolin resource 12 'db-proxy'"``; `lost` maps ports of the previous table
    that an older resource of someone else owns to that resource (they count as foreign too). The
    result depends only on the contents of the arguments, not on their order. Raises
    `AllocationError` listing every problem.
    """
    problems: list[str] = []
    names = sorted(instances)
    listed = set(names)
    problems.extend(_duplicate_names(names))
    reserved_ports = _reserved_ports(reserved, problems)
    # Reserved wins over foreign in the counts: a port that is both is reported once.
    foreign = {**foreign, **lost}
    taken = _Taken(port_range, reserved_ports, foreign)
    # Each instance's claim on a port it must hold: its pin, else its previous port.
    pinned = _pin_claims(pins, listed, taken, problems)
    claim_of, released_now = _kept_claims(previous, listed, pinned, lost, taken, problems)
    problems.extend(_clashes(claim_of, pinned))
    history, seen = _release_history((*previous.released, *released_now))
    claimed = set(claim_of.values())
    newcomers = [name for name in names if name not in claim_of]
    given, reused, released = _hand_out(newcomers, history, claimed, seen, taken)
    starved = newcomers[len(given) :]
    if starved:
        problems.append(_exhausted(starved, taken))
    if problems:
        raise AllocationError(problems)
    ports = {**claim_of, **dict(zip(newcomers, given, strict=True))}
    reused_set = set(reused)
    return AllocationState(
        ports={name: ports[name] for name in names},
        released=tuple(port for port in released if port not in reused_set),
    )


@dataclass(frozen=True)
class _Taken:
    """What limits the ports an instance may hold: the range, the reserved ports, the ports others bind."""

    rng: PortRange
    reserved: set[int]
    foreign: Mapping[int, str]

    @property
    def foreign_ports(self) -> set[int]:
        return set(self.foreign) - self.reserved


def _duplicate_names(names: list[str]) -> list[str]:
    """Phase 1: each instance name once."""
    if len(set(names)) == len(names):
        return []
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return [
        f"instance '{name}' is listed {count} times; instance names must be unique"
        for name, count in counts.items()
        if count > 1
    ]


def _reserved_ports(reserved: Collection[int], problems: list[str]) -> set[int]:
    """Phase 2: the reserved ports that are port numbers (the others are problems)."""
    problems.extend(
        f"reserved port {port!r} is not a port number; {_RESERVED_KEY} takes integers 1-65535"
        for port in sorted((port for port in reserved if not is_port(port)), key=repr)
    )
    return {port for port in reserved if is_port(port)}


def _pin_claims(pins: Mapping[str, int], listed: set[str], taken: _Taken, problems: list[str]) -> dict[str, int]:
    """Phase 3: each pinned instance's claim on its pin."""
    rng, foreign = taken.rng, taken.foreign
    pinned: dict[str, int] = {}
    for name in sorted(pins):
        port = pins[name]
        if name not in listed:
            problems.append(
                f"{_pin_key(name)} = {port!r} pins an instance that is not in ssh-gateway:instances; "
                "remove the pin or add the instance"
            )
            continue
        if not is_port(port):
            problems.append(f"{_pin_key(name)} = {port!r} is not a port number (1-65535)")
            continue
        if port not in rng:
            problems.append(
                f"{_pin_key(name)} = {port} is outside {_RANGE_KEY} {rng}; pin a port inside it or widen the range"
            )
        if port in taken.reserved:
            problems.append(f"{_pin_key(name)} = {port} is in {_RESERVED_KEY}; pin another port or unreserve it")
        if port in foreign:
            problems.append(
                f"{_pin_key(name)} = {port} is bound by {foreign[port]}, which this stack does not own; "
                "pin another port or free it in Pangolin"
            )
        pinned[name] = port
    return pinned


def _kept_claims(
    previous: AllocationState,
    listed: set[str],
    pinned: Mapping[str, int],
    lost: Mapping[int, str],
    taken: _Taken,
    problems: list[str],
) -> tuple[dict[str, int], list[int]]:
    """Phase 4: the pins, plus each other instance's claim on its previous port; and the ports released now
    (of instances gone, re-pinned, or whose port someone else's older resource holds)."""
    rng, foreign = taken.rng, taken.foreign
    claim_of = dict(pinned)
    released_now: list[int] = []
    for name in sorted(previous.ports):
        port = previous.ports[name]
        if not is_port(port):
            problems.append(
                f"the stack state holds {port!r} as the port of instance '{name}', which is not a port "
                "number; the state was not written by this allocator"
            )
            continue
        if name not in listed:
            released_now.append(port)
            continue
        if name in pinned:
            if pinned[name] != port:
                released_now.append(port)
            continue
        if port in lost:
            released_now.append(port)  # never served: the instance moves like a newcomer
            continue
        if port not in rng:
            problems.append(
                f"instance '{name}' holds port {port}, outside {_RANGE_KEY} {rng}; "
                f"widen the range back or set {_pin_key(name)} to a port inside it"
            )
        if port in taken.reserved:
            problems.append(
                f"{_RESERVED_KEY} has {port}, which instance '{name}' holds; "
                f"unreserve it or move the instance with {_pin_key(name)}"
            )
        if port in foreign:
            problems.append(
                f"instance '{name}' holds port {port}, which is also bound by {foreign[port]} outside this "
                f"stack; free the port in Pangolin or move the instance with {_pin_key(name)}"
            )
        claim_of[name] = port
    return claim_of, released_now


def _clashes(claim_of: Mapping[str, int], pinned: Mapping[str, int]) -> list[str]:
    """Phase 5: two claims on one port."""
    problems: list[str] = []
    if len(set(claim_of.values())) == len(claim_of):  # the common case: only a clash pays for grouping by port
        return problems
    claimants: dict[int, list[str]] = {}
    for name, port in claim_of.items():
        claimants.setdefault(port, []).append(name)
    for port, owners in sorted(claimants.items()):
        if len(owners) < 2:
            continue
        pins_here = sorted(name for name in owners if name in pinned)
        kept_here = sorted(name for name in owners if name not in pinned)
        if len(pins_here) > 1:
            problems.append(
                f"instances {_quoted(pins_here)} are pinned to the same port {port}; pin all but one of them elsewhere"
            )
        for pin_name in pins_here:
            for kept_name in kept_here:
                problems.append(
                    f"pin {port} for instance '{pin_name}' is held by instance '{kept_name}'; "
                    f"pin '{pin_name}' to another port or move '{kept_name}' with a pin"
                )
        if len(kept_here) > 1:
            problems.append(
                f"instances {_quoted(kept_here)} all hold port {port} in the stack state; "
                "move all but one of them with a pin"
            )
    return problems


def _release_history(releases: Sequence[int]) -> tuple[list[int], set[int]]:
    """Phase 6: the released ports, newest release last; a port released again moves to the end (it was used
    more recently). Also every port ever released."""
    history: list[int] = []
    seen: set[int] = set()
    for port in reversed(releases):
        if port not in seen:
            seen.add(port)
            history.append(port)
    history.reverse()
    return history, seen


def _hand_out(
    newcomers: list[str], history: list[int], claimed: set[int], seen: set[int], taken: _Taken
) -> tuple[list[int], list[int], list[int]]:
    """Phase 7: ports for the new instances, in name order: never-used ports first (lowest first), then released
    ones. Returns the ports given, those of them reused, and the released ports still free before reuse."""
    rng, foreign_ports = taken.rng, taken.foreign_ports
    released = [port for port in history if port in rng and port not in claimed]
    blocked = claimed | seen | taken.reserved | foreign_ports
    never_used = itertools.filterfalse(blocked.__contains__, range(rng.start, rng.end + 1))
    reusable = (port for port in released if port not in taken.reserved and port not in foreign_ports)
    given = list(itertools.islice(never_used, len(newcomers)))
    reused = list(itertools.islice(reusable, len(newcomers) - len(given)))
    return given + reused, reused, released


def _exhausted(starved: list[str], taken: _Taken) -> str:
    rng = taken.rng
    instance_word = "instance" if len(starved) == 1 else "instances"
    return (
        f"{_RANGE_KEY} {rng} is exhausted: no free port for {instance_word} {_quoted(starved)} "
        f"({rng.size} ports, {sum(port in rng for port in taken.reserved)} reserved, "
        f"{sum(port in rng for port in taken.foreign_ports)} bound by other Pangolin resources); "
        "widen the range or remove instances"
    )
