"""What the reconciler does with a stack's status ConfigMap after each pass: one read, for the gauges (instances
by state, refused objects, free ports), the Kubernetes Events on the objects, and the next grace expiry.

The status is what the `up` wrote (core/discovery_status.py owns its format), so the Events say what the run did,
in the run's own words: a refusal's note is the line the status carries. An endpoint's Event is for one this
process has not seen before (the status it read at start is the baseline), so a restart does not repeat them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.client import ApiClient

from ssh_gateway.core.discovery_records import StatusReport, held_line
from ssh_gateway.core.discovery_status import StatusError, next_expiry, read_memory, read_report
from ssh_gateway.core.log_events import Log, LogEvent
from ssh_gateway.kube import KubeError, read_status

from .events import ENDPOINT_WRITTEN, REFUSED, REMOVAL_HELD, EventRecorder, Occurrence
from .signals import StackSignals

__all__ = ["StatusFollower", "occurrences"]

Endpoints = Mapping[str, Mapping[str, Any]]


def occurrences(report: StatusReport, before: Endpoints | None, where: str) -> list[Occurrence]:
    """The Events a run's status calls for: each refused object, each held instance's object, and each endpoint
    that differs from `before` (none when `before` is unknown). `where` names the status ConfigMap."""
    found = [Occurrence(obj=r.obj, what=REFUSED, note=r.line) for r in report.refusals]
    by_name = {i.name: i for i in report.instances}
    if report.held:
        note = held_line(report.held, report.max_removals)
        found += [Occurrence(obj=by_name[n].obj, what=REMOVAL_HELD, note=note) for n in report.held if n in by_name]
    if before is None:
        return found
    for instance in report.instances:
        endpoint = instance.endpoint
        if endpoint and endpoint != before.get(instance.name):
            note = f"instance {instance.name}: endpoint written to {where}: {endpoint.get('ssh', '')}"
            found.append(Occurrence(obj=instance.obj, what=ENDPOINT_WRITTEN, note=note))
    return found


class StatusFollower:
    """Reads one stack's status after each pass (`after_pass`, the worker's hook)."""

    def __init__(
        self,
        api: ApiClient,
        *,
        namespace: str,
        name: str,
        grace_period: int,
        signals: StackSignals,
        events: EventRecorder | None,
        log: Log,
    ) -> None:
        self._api = api
        self._namespace, self._name = namespace, name
        self._grace_period = grace_period
        self._signals = signals
        self._events = events
        self._log = log
        self._endpoints: Endpoints | None = None

    def baseline(self) -> None:
        """Reads the status before the first pass: the gauges from the start, and the endpoints already written."""
        self._read(ran=False)

    def after_pass(self, ran: bool) -> float | None:
        """The gauges; with `ran` (this replica ran the `up`) the Events; the next grace expiry."""
        return self._read(ran=ran)

    def _read(self, *, ran: bool) -> float | None:
        where = f"{self._namespace}/{self._name}"
        try:
            status = read_status(self._api, self._namespace, self._name)
            if status is None:
                self._endpoints = {}  # no run has written it: no endpoint either
                return None
            report = read_report(status)
            at = next_expiry(read_memory(status), self._grace_period)
        except (KubeError, StatusError) as exc:
            self._log(LogEvent.STATUS_UNREAD, stack=self._signals.stack, error=str(exc))
            return None  # the resync covers the expiry
        self._signals.status(report)
        if ran and self._events is not None:
            self._events.record(occurrences(report, self._endpoints, f"ConfigMap {where}"))
        self._endpoints = {i.name: i.endpoint for i in report.instances}
        return None if at is None else at.timestamp()
