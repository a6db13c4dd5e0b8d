"""A barrier on one route, for tests that need two clients' calls to meet (not part of Pangolin).

Armed with a route template and a number of parties, it holds each `/v1` call of that route until that many
are waiting, then lets them all go on at once and disarms itself. So two `pulumi up`s started together both list
the org before either creates anything, and contest the same ports for sure. A call is never held longer than
the gate's `timeout` (then it goes on alone): below a client's read timeout, so a gate left armed slows a
client down but never makes it resend.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["Gate", "GateConfig"]


@dataclass(frozen=True)
class GateConfig:
    route: str
    """The route template whose calls are held, e.g. `GET /v1/org/{orgId}/resources`."""
    parties: int = 2
    """How many calls must be waiting before all of them go on."""
    timeout: float = 20.0
    """The longest a call is held, in seconds."""

    def __post_init__(self) -> None:
        if self.parties < 1:
            raise ValueError(f"gate parties must be >= 1; got {self.parties}")
        if not 0 < self.timeout <= 60:
            raise ValueError(f"gate timeout must be within (0, 60] seconds; got {self.timeout}")


class Gate:
    """Thread-safe: every handler thread passes through `hold`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._config: GateConfig | None = None
        self._released = threading.Event()
        self._waiting = 0
        self._met = 0
        self._timed_out = 0

    def arm(self, config: GateConfig) -> None:
        with self._lock:
            self._config = config
            self._released = threading.Event()
            self._waiting = 0

    def disarm(self) -> None:
        """Let every held call go on, and hold no more."""
        with self._lock:
            self._config = None
            self._released.set()

    def hold(self, route: str) -> None:
        """Wait here if the gate is armed for `route`, until enough calls wait or the timeout passes."""
        with self._lock:
            config = self._config
            if config is None or config.route != route:
                return
            released = self._released
            self._waiting += 1
            if self._waiting >= config.parties:
                self._met += 1
                self._config = None  # disarmed: later calls pass
                released.set()
        if not released.wait(config.timeout):
            with self._lock:
                self._timed_out += 1

    def snapshot(self) -> dict[str, object]:
        with self._lock:
            config = self._config
            return {
                "armed": None if config is None else {"route": config.route, "parties": config.parties},
                "waiting": self._waiting if config is not None else 0,
                "met": self._met,
                "timedOut": self._timed_out,
            }
