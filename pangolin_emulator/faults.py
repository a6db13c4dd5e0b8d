"""Seeded fault injection for `/v1` calls.

A fault is drawn before the request is authenticated or handled. Kinds:

- "500": `500 "An error occurred"` envelope; the request is not applied.
- "429": `429` envelope with `Retry-After: 1` (what a rate-limiting proxy in front would send;
  Pangolin's integration API itself has no limiter); not applied.
- "timeout": sleep `delay` seconds, then `500` without applying the request, so a client
  with a shorter read timeout sees a timeout and one with a longer one sees a 500.
- "reset": close the connection with an RST and no response; not applied.
- "timeout-after-write": the request IS applied (authenticated, validated and handled as
  usual, so a create commits its row), then the connection is held `delay` seconds and reset
  without an answer. This is the ambiguous case a real server behind a proxy produces when the
  answer is lost after the write: the client cannot tell from the wire whether it happened.
  It is opt-in (not in DEFAULT_FAULT_KINDS), because it breaks the "a faulted request never
  changes state" promise of the other kinds.
- "slow": sleep `delay` seconds, then handle and answer the request as usual: a slow, healthy server
  (for tests that need an operation to take a while without failing it). Opt-in too.

The same seed, kinds and sequence of requests give the same faults.
"""

from __future__ import annotations

import random
import threading
from dataclasses import asdict, dataclass

__all__ = [
    "AFTER_HANDLER_KINDS",
    "DEFAULT_FAULT_KINDS",
    "LATENCY_KINDS",
    "FaultConfig",
    "FaultInjector",
    "parse_kinds",
]

DEFAULT_FAULT_KINDS = ("500", "429", "timeout", "reset")
"""The kinds that never change state: the default set."""
AFTER_HANDLER_KINDS = ("timeout-after-write",)
"""Kinds that run the handler first and then withhold its answer."""
LATENCY_KINDS = ("slow",)
"""Kinds that only delay a request, which is then handled and answered as usual."""
FAULT_KINDS = (*DEFAULT_FAULT_KINDS, *AFTER_HANDLER_KINDS, *LATENCY_KINDS)


def parse_kinds(text: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    kinds = tuple(k.strip() for k in (text.split(",") if isinstance(text, str) else text) if k.strip())
    unknown = [k for k in kinds if k not in FAULT_KINDS]
    if unknown or not kinds:
        raise ValueError(f"fault kinds must be a non-empty subset of {', '.join(FAULT_KINDS)}; got {kinds}")
    return kinds


@dataclass(frozen=True)
class FaultConfig:
    rate: float = 0.0
    """Share of `/v1` calls (health route excluded) that get a fault, 0..1."""
    seed: int = 0
    kinds: tuple[str, ...] = DEFAULT_FAULT_KINDS
    delay: float = 3.0
    """Seconds a "timeout", "timeout-after-write" or "slow" fault holds the request."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault rate must be within 0..1; got {self.rate}")
        if self.delay < 0:
            raise ValueError(f"fault delay must be >= 0 seconds; got {self.delay}")
        parse_kinds(self.kinds)


class FaultInjector:
    """Thread-safe: draws happen in request order under a lock."""

    def __init__(self, config: FaultConfig) -> None:
        self._lock = threading.Lock()
        self._config = config
        self._rng = random.Random(config.seed)  # noqa: S311 - reproducible test faults, not crypto

    def configure(self, config: FaultConfig) -> None:
        """Replace the settings and restart the random sequence from the new seed."""
        with self._lock:
            self._config = config
            self._rng = random.Random(config.seed)  # noqa: S311

    @property
    def config(self) -> FaultConfig:
        return self._config

    def draw(self) -> str | None:
        """The fault for the next call, or None."""
        with self._lock:
            if self._config.rate <= 0:
                return None
            roll = self._rng.random()
            kind = self._rng.choice(self._config.kinds)
            return kind if roll < self._config.rate else None

    def snapshot(self) -> dict[str, object]:
        data = asdict(self._config)
        data["kinds"] = list(self._config.kinds)
        return data
