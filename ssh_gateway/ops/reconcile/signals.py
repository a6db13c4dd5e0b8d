"""What a stack's watch and worker report as they go: one object per stack that feeds both the metrics and the
health rule, so neither the watch nor the worker knows of Prometheus or probes."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ssh_gateway.core.discovery_records import StatusReport

from .health import Health, StackHealth
from .metrics import Outcome, ReconcilerMetrics

__all__ = ["StackSignals"]


class StackSignals:
    """One stack's series and signs of life."""

    def __init__(
        self,
        stack: str,
        *,
        metrics: ReconcilerMetrics | None = None,
        health: Health | None = None,
        namespaces: Sequence[str] = (),
        lease_known: Callable[[], bool] = lambda: True,
    ) -> None:
        """`namespaces`: those its watch follows (none with `--once`). Without `metrics` and `health` (a test of
        the worker alone), a registry and a rule of its own."""
        self.stack = stack
        self.metrics = metrics or ReconcilerMetrics()
        self.health: StackHealth = (health or Health()).stack(stack, namespaces, lease_known)
        self.metrics.stack(stack)

    # --- the watch ---------------------------------------------------------------------------------------------

    def delivered(self, namespace: str, *, listing: bool = False) -> None:
        self.health.delivered(namespace, listing=listing)

    def watch_restarted(self) -> None:
        self.metrics.watch_restarts.labels(self.stack).inc()

    # --- the worker --------------------------------------------------------------------------------------------

    def waiting(self, count: int) -> None:
        self.metrics.waiting.labels(self.stack).set(count)

    def lease(self, *, held: bool) -> None:
        self.metrics.lease_held.labels(self.stack).set(1 if held else 0)

    def pass_began(self) -> None:
        self.health.pass_began()

    def pass_ended(self) -> None:
        self.health.pass_ended()

    def up_ended(self, code: int, seconds: float) -> None:
        self.metrics.up_seconds.labels(self.stack).observe(seconds)
        self.metrics.ups.labels(self.stack, Outcome.SUCCEEDED if code == 0 else Outcome.FAILED).inc()
        if code == 0:
            self.metrics.last_success.labels(self.stack).set(time.time())

    def covered(self) -> None:
        self.metrics.ups.labels(self.stack, Outcome.COVERED).inc()
        self.metrics.last_success.labels(self.stack).set(time.time())

    def status(self, report: StatusReport) -> None:
        self.metrics.status(self.stack, report)
