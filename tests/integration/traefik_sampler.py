"""Samples a real Traefik's TCP routers in a thread while something else runs: which entry points ever held two."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from types import TracebackType

from ssh_gateway.local.traefik import TraefikError, TraefikProcess

__all__ = ["RouterSampler"]


@dataclass
class RouterSampler:
    """`with RouterSampler(traefik) as sampler: ...`; then `sampler.doubles` maps each entry point that held two or
    more routers at one sample to those routers, and `samples` counts the samples taken."""

    traefik: TraefikProcess
    period: float = 0.1
    samples: int = 0
    doubles: dict[str, set[str]] = field(default_factory=dict)
    missed: int = 0
    most: int = 0
    """The most routers any sample held."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.is_set():
            held: dict[str, set[str]] = {}
            try:
                routers = self.traefik.tcp_routers()
            except TraefikError:  # an API answer lost under load is a missed sample, not a finding
                self.missed += 1
                continue
            for router in routers:
                for entry_point in router["entryPoints"]:
                    held.setdefault(entry_point, set()).add(str(router["name"]))
            for entry_point, names in held.items():
                if len(names) > 1:
                    self.doubles.setdefault(entry_point, set()).update(names)
            self.samples += 1
            self.most = max(self.most, len(routers))
            time.sleep(self.period)

    def __enter__(self) -> RouterSampler:
        self._thread = threading.Thread(target=self._run, name="traefik-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
