"""Sample what a system shows, often, while something runs: a thread that calls a list of probes in turn.

A probe looks once and says what is wrong (`str`) or that all is well (`None`). The sampler calls every probe,
sleeps `interval`, and again, until it is stopped; it keeps each finding with the number of the sample it came
from. So a test asserts that something never happened at any sample, not only at the end: e.g. that no port was
routed twice while two `up`s contested it (the emulator's view here; a Traefik probe can join the list).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType

__all__ = ["Finding", "Probe", "Sampler"]


@dataclass(frozen=True)
class Probe:
    """One thing to look at each sample."""

    name: str
    look: Callable[[], str | None]
    """What is wrong now, or None."""


@dataclass(frozen=True)
class Finding:
    """What one probe found wrong at one sample."""

    probe: str
    sample: int
    """Which sample (0-based) it was found at."""
    what: str


@dataclass
class Sampler:
    """Use as a context manager around the run to watch; then read `samples`, `findings` and `errors`."""

    probes: Sequence[Probe]
    interval: float = 0.05
    samples: int = 0
    """Completed samples (each called every probe once)."""
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Probes that raised instead of answering (a probe that cannot look is a failure, not a pass)."""
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def __enter__(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _exc: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def found(self, probe: str) -> list[Finding]:
        """The findings of one probe."""
        return [f for f in self.findings if f.probe == probe]

    def _run(self) -> None:
        while not self._stop.is_set():
            for probe in self.probes:
                try:
                    what = probe.look()
                except Exception as exc:  # recorded: the test fails on it
                    self.errors.append(f"{probe.name}: {type(exc).__name__}: {exc}")
                    continue
                if what is not None:
                    self.findings.append(Finding(probe.name, self.samples, what))
            self.samples += 1
            time.sleep(self.interval)
