"""The reconciler's Prometheus series, per stack (label `stack`), in a registry of its own (docs/reconciler.md).

A registry per reconciler, not prometheus-client's global one: two reconcilers in one test process (or a test's
fake) never share a series, and /metrics shows only these (no process or GC collectors that a pod's cAdvisor
already covers).
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from ssh_gateway.core.discovery_records import State, StatusReport

__all__ = ["PREFIX", "Outcome", "ReconcilerMetrics"]

PREFIX: Final = "ssh_gateway_reconcile"

UP_BUCKETS: Final = (1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0)
"""Seconds: an `up` of a few changes takes 5-10 s, a first `up` of 1000 instances about 20 s (docs/scaling.md); the
top buckets are the kubernetes provider's 10-minute await and the health rule's bound (health.py)."""


class Outcome:
    """The `outcome` label of `ups_total`."""

    SUCCEEDED: Final = "succeeded"
    FAILED: Final = "failed"
    COVERED: Final = "covered"
    """No `up` ran: another replica's, started after these changes, succeeded."""


class ReconcilerMetrics:
    """Every series of one reconciler; `exposition()` is the body of /metrics."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r, s = self.registry, ["stack"]
        self.ups = Counter(
            f"{PREFIX}_ups", "Passes by outcome: the up's, or covered by another replica's", [*s, "outcome"], registry=r
        )
        self.up_seconds = Histogram(
            f"{PREFIX}_up_duration_seconds", "How long each `ssh-gateway up` took", s, buckets=UP_BUCKETS, registry=r
        )
        self.waiting = Gauge(f"{PREFIX}_changes_waiting", "Changes marked and not yet handed to an up", s, registry=r)
        self.last_success = Gauge(
            f"{PREFIX}_last_success_timestamp_seconds",
            "When the last pass succeeded (its up, or another replica's that covered it), seconds since the epoch",
            s,
            registry=r,
        )
        self.watch_restarts = Counter(
            f"{PREFIX}_watch_restarts", "Listings again after a watch failed or its version expired", s, registry=r
        )
        self.instances = Gauge(
            f"{PREFIX}_instances", "Discovered instances by state, as the last run left them", [*s, "state"], registry=r
        )
        self.refused = Gauge(f"{PREFIX}_refused_objects", "Selected objects the last run refused", s, registry=r)
        self.free_ports = Gauge(f"{PREFIX}_free_ports", "Ports of ports.range free after the last run", s, registry=r)
        self.lease_held = Gauge(f"{PREFIX}_lease_held", "1 while this replica holds the stack's Lease", s, registry=r)

    def stack(self, stack: str) -> None:
        """Shows the stack's series from the start, at zero (a counter that appears only at its first increment
        hides the first one from `rate()`)."""
        for outcome in (Outcome.SUCCEEDED, Outcome.FAILED, Outcome.COVERED):
            self.ups.labels(stack, outcome)
        self.watch_restarts.labels(stack)
        self.waiting.labels(stack).set(0)
        self.lease_held.labels(stack).set(0)

    def status(self, stack: str, report: StatusReport) -> None:
        """The gauges that the stack's status ConfigMap gives, after a pass."""
        counts = dict.fromkeys(State, 0)
        for instance in report.instances:
            counts[instance.state] += 1
        for state, count in counts.items():
            self.instances.labels(stack, state.value).set(count)
        self.refused.labels(stack).set(len(report.refusals) + report.unlisted)
        if report.free_ports is not None:
            self.free_ports.labels(stack).set(report.free_ports)

    def exposition(self) -> bytes:
        """The Prometheus text format of every series."""
        return generate_latest(self.registry)
