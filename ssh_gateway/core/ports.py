"""Public ports and inclusive port ranges: parsed once from config, then passed on as integers."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

__all__ = ["EPHEMERAL", "PORT_MAX", "PORT_MIN", "PortRange", "is_port"]

PORT_MIN: Final = 1
PORT_MAX: Final = 65535

_TEXT: Final = re.compile(r"\s*(\d+)\s*-\s*(\d+)\s*")


def is_port(value: object) -> bool:
    """Whether `value` is a TCP port number (a bool is an int subclass, but `True` is a mistake, not port 1)."""
    return isinstance(value, int) and not isinstance(value, bool) and PORT_MIN <= value <= PORT_MAX


@dataclass(frozen=True, kw_only=True)
class PortRange:
    """An inclusive range of TCP ports, e.g. 40000-40099."""

    start: int
    """First port of the range, inclusive."""

    end: int
    """Last port of the range, inclusive."""

    def __post_init__(self) -> None:
        if not (is_port(self.start) and is_port(self.end) and self.start <= self.end):
            raise ValueError(
                f"{self.start!r}-{self.end!r} is not a port range: need whole numbers with "
                f"{PORT_MIN} <= start <= end <= {PORT_MAX}"
            )

    @classmethod
    def parse(cls, text: object) -> PortRange:
        """`"40000-40099"` -> `PortRange(start=40000, end=40099)`; anything else is a `ValueError` naming it."""
        match = _TEXT.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise ValueError(f'{text!r} is not a range "start-end" such as "40000-40099"')
        return cls(start=int(match[1]), end=int(match[2]))

    def __str__(self) -> str:
        return f"{self.start}-{self.end}"

    def __contains__(self, port: object) -> bool:
        return isinstance(port, int) and self.start <= port <= self.end

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.end + 1))

    @property
    def size(self) -> int:
        """How many ports the range holds."""
        return self.end - self.start + 1

    def free(self, taken: Iterable[int]) -> int:
        """How many of its ports are not in `taken` (ports outside the range do not count)."""
        return self.size - len({port for port in taken if port in self})

    def overlaps(self, other: PortRange) -> bool:
        """Whether the two ranges share a port."""
        return self.start <= other.end and other.start <= self.end

    def covers(self, other: PortRange) -> bool:
        """Whether every port of `other` is in this range."""
        return self.start <= other.start and other.end <= self.end


EPHEMERAL: Final = PortRange(start=32768, end=60999)
"""Linux's default `net.ipv4.ip_local_port_range`: the gateway host's own outgoing connections take these
ports, so a published port in it can be taken by a client socket before Gerbil binds it."""
