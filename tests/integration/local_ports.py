"""Free loopback ports for tests that run next to a live `scripts/demo` (39003, 2222, 40000-40019)."""

from __future__ import annotations

import random
import socket

__all__ = ["free_port_block"]


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_block(size: int, low: int = 41000, high: int = 59000) -> range:
    """`size` consecutive ports that nothing is bound to now, for a stack's `ports.range`."""
    rng = random.Random()  # noqa: S311 - spreading tests over ports, not security
    for _ in range(200):
        start = rng.randrange(low, high - size)
        if all(_bindable(p) for p in range(start, start + size)):
            return range(start, start + size)
    raise RuntimeError(f"no {size} consecutive free ports in {low}-{high}")
