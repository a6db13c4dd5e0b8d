"""The pure port allocator: which public port each instance gets, run after run.

`allocate` takes the instance names, the configured range, pins, reserved ports, the ports other
Pangolin resources already bind ("foreign"), and the `AllocationState` the previous run returned;
it returns the next `AllocationState`. It has no Pulumi or Pangolin imports and no I/O, so the
provider's `check` can call it at preview time and tests can call it a million times.

Rules, in the order they are applied:

1. An instance listed now and present in the previous state keeps its port, unless it is pinned
   to another one: the pin wins and the old port is released.
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
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

__all__ = [
    "AZURE_PRIORITY_MAX",
    "AZURE_PRIORITY_MIN",
    "DEFAULT_PRIORITY_BASE",
    "AllocationError",
    "AllocationState",
    "PortRange",
    "allocate",
    "check_priorities",
    "nsg_priority",
]

_RANGE_KEY: Final = "ssh-gateway:ports.range"
_RESERVED_KEY: Final = "ssh-gateway:ports.reserved"
_PRIORITY_KEY: Final = "ssh-gateway:firewall.priorityBase"

AZURE_PRIORITY_MIN: Final = 100
"""Lowest priority Azure accepts on a network security group rule."""

AZURE_PRIORITY_MAX: Final = 4096
"""Highest priority Azure accepts on a network security group rule."""

DEFAULT_PRIORITY_BASE: Final = 1000
"""NSG priority of the range's first port, when `ssh-gateway:firewall.priorityBase` is not set."""


def _is_port(value: object) -> bool:
    # bool is an int subclass; `True` as a port is a config mistake, not port 1.
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


@dataclass(frozen=True, kw_only=True)
class PortRange:
    """An inclusive range of TCP ports, e.g. 40000-40099."""

    start: int
    """First port of the range, inclusive."""

    end: int
    """Last port of the range, inclusive."""

    def __post_init__(self) -> None:
        if not (_is_port(self.start) and _is_port(self.end) and self.start <= self.end):
            raise ValueError(
                f"port range start={self.start!r} end={self.end!r} is invalid: "
                f"need integers with 1 <= start <= end <= 65535; check {_RANGE_KEY}"
            )

    def __str__(self) -> str:
        return f"{self.start}-{self.end}"

    def __contains__(self, port: object) -> bool:
        return isinstance(port, int) and self.start <= port <= self.end

    @property
    def size(self) -> int:
        """How many ports the range holds."""
        return self.end - self.start + 1


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
    previous: AllocationState = _NO_PREVIOUS,
) -> AllocationState:
    """Give every instance a port, keeping the ports of the previous run.

    `pins` maps an instance to the port it must have; `reserved` are ports never to hand out;
    `foreign` maps ports bound in the Pangolin org by resources this stack does not own to a short
    description such as ``"Pangolin resource 12 'db-proxy'"``. The result depends only on the
    contents of the arguments, not on their order. Raises `AllocationError` listing every problem.
    """
    problems: list[str] = []
    rng = port_range
    names = sorted(instances)
    listed = set(names)
    if len(listed) != len(names):
        counts: dict[str, int] = {}
        for name in names:
            counts[name] = counts.get(name, 0) + 1
        problems.extend(
            f"instance '{name}' is listed {count} times; instance names must be unique"
            for name, count in counts.items()
            if count > 1
        )

    reserved_ports = {port for port in reserved if _is_port(port)}
    problems.extend(
        f"reserved port {port!r} is not a port number; {_RESERVED_KEY} takes integers 1-65535"
        for port in sorted((port for port in reserved if not _is_port(port)), key=repr)
    )
    # Reserved wins over foreign in the counts: a port that is both is reported once.
    foreign_ports = set(foreign) - reserved_ports

    # Each instance's claim on a port it must hold: its pin, else its previous port.
    pinned: dict[str, int] = {}
    claim_of: dict[str, int] = {}

    for name in sorted(pins):
        port = pins[name]
        if name not in listed:
            problems.append(
                f"pin {port!r} for instance '{name}', which is not in the instance list; "
                "remove the pin or add the instance"
            )
            continue
        if not _is_port(port):
            problems.append(f"pin {port!r} for instance '{name}' is not a port number (1-65535)")
            continue
        if port not in rng:
            problems.append(
                f"pin {port} for instance '{name}' is outside the range {rng}; "
                f"pin a port inside it or widen {_RANGE_KEY}"
            )
        if port in reserved_ports:
            problems.append(
                f"pin {port} for instance '{name}' is a reserved port; "
                f"pin another port or remove it from {_RESERVED_KEY}"
            )
        if port in foreign:
            problems.append(
                f"pin {port} for instance '{name}' is bound by {foreign[port]}, which this stack does not "
                "own; pin another port or free it in Pangolin"
            )
        pinned[name] = port
        claim_of[name] = port

    released_now: list[int] = []
    for name in sorted(previous.ports):
        port = previous.ports[name]
        if not _is_port(port):
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
        if port not in rng:
            problems.append(
                f"instance '{name}' holds port {port}, outside the range {rng}; "
                "widen the range back or pin the instance to a port inside it"
            )
        if port in reserved_ports:
            problems.append(
                f"reserved port {port} is allocated to instance '{name}'; "
                f"remove it from {_RESERVED_KEY} or move the instance with a pin"
            )
        if port in foreign:
            problems.append(
                f"instance '{name}' holds port {port}, which is also bound by {foreign[port]} outside this "
                "stack; free the port in Pangolin or move the instance with a pin"
            )
        claim_of[name] = port

    claimed = set(claim_of.values())
    claimants: dict[int, list[str]] = {}
    if len(claimed) != len(claim_of):  # rare: only then pay for grouping names by port
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

    # Newest release last; a port released again moves to the end (it was used more recently).
    history: list[int] = []
    seen: set[int] = set()
    for port in reversed((*previous.released, *released_now)):
        if port not in seen:
            seen.add(port)
            history.append(port)
    history.reverse()

    released = [port for port in history if port in rng and port not in claimed]
    blocked = claimed | seen | reserved_ports | foreign_ports
    never_used = itertools.filterfalse(blocked.__contains__, range(rng.start, rng.end + 1))
    reusable = (port for port in released if port not in reserved_ports and port not in foreign_ports)

    # New instances, in name order: never-used ports first (lowest first), then released ones.
    newcomers = [name for name in names if name not in claim_of]
    given = list(itertools.islice(never_used, len(newcomers)))
    reused = list(itertools.islice(reusable, len(newcomers) - len(given)))
    given += reused
    starved = newcomers[len(given) :]

    if starved:
        instance_word = "instance" if len(starved) == 1 else "instances"
        problems.append(
            f"range {rng} is exhausted: no free port for {instance_word} {_quoted(starved)} "
            f"({rng.size} ports, {sum(port in rng for port in reserved_ports)} reserved, "
            f"{sum(port in rng for port in foreign_ports)} bound by other Pangolin resources); "
            f"widen {_RANGE_KEY} or remove instances"
        )

    if problems:
        raise AllocationError(problems)
    ports = {**claim_of, **dict(zip(newcomers, given, strict=True))}
    reused_set = set(reused)
    return AllocationState(
        ports={name: ports[name] for name in names},
        released=tuple(port for port in released if port not in reused_set),
    )


def nsg_priority(port: int, port_range: PortRange, base: int = DEFAULT_PRIORITY_BASE) -> int:
    """The Azure NSG rule priority for `port`: `base` plus its offset in the range.

    A bijection on the range, so priorities are unique across instances and an instance's priority
    changes only when its port (or the range's start, or `base`) does.
    """
    if port not in port_range:
        raise ValueError(f"port {port} is outside the range {port_range}; no NSG priority for it")
    priority = base + (port - port_range.start)
    if priority < AZURE_PRIORITY_MIN:
        raise ValueError(
            f"priority {priority} for port {port} is outside Azure's {AZURE_PRIORITY_MIN}-"
            f"{AZURE_PRIORITY_MAX}; raise {_PRIORITY_KEY}"
        )
    if priority > AZURE_PRIORITY_MAX:
        raise ValueError(
            f"priority {priority} for port {port} is outside Azure's {AZURE_PRIORITY_MIN}-"
            f"{AZURE_PRIORITY_MAX}; lower {_PRIORITY_KEY} or narrow the range"
        )
    return priority


def check_priorities(port_range: PortRange, base: int = DEFAULT_PRIORITY_BASE) -> None:
    """Fail before any resource exists if some port of the range would get a priority Azure rejects."""
    first, last = base, base + port_range.size - 1
    if first >= AZURE_PRIORITY_MIN and last <= AZURE_PRIORITY_MAX:
        return
    if port_range.size > AZURE_PRIORITY_MAX - AZURE_PRIORITY_MIN + 1:
        hint = f"narrow {_RANGE_KEY} to at most {AZURE_PRIORITY_MAX - AZURE_PRIORITY_MIN + 1} ports"
    elif first < AZURE_PRIORITY_MIN:
        hint = f"raise {_PRIORITY_KEY} to at least {AZURE_PRIORITY_MIN}"
    else:
        hint = f"lower {_PRIORITY_KEY} to at most {AZURE_PRIORITY_MAX - port_range.size + 1} or narrow the range"
    raise ValueError(
        f"priorities {first}-{last} for ports {port_range} fall outside Azure's "
        f"{AZURE_PRIORITY_MIN}-{AZURE_PRIORITY_MAX} ({_PRIORITY_KEY}={base}); {hint}"
    )
