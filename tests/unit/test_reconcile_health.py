"""The reconciler's metrics and probes without a cluster: the health rule on a clock of its own, a real
`StackWatch` stalled by an API server that accepts the watch and never answers (/healthz then fails naming the
namespace), the series a pass leaves in /metrics, the Events a status calls for, and an Event that cannot be
written failing nothing."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException

from ssh_gateway.core.addresses import ListenAddress, parse_listen_address
from ssh_gateway.core.discovery_records import ObjectRef, ReportedInstance, ReportedRefusal, State, StatusReport
from ssh_gateway.core.names import DiscoverFrom
from ssh_gateway.ops.reconcile.after_pass import occurrences
from ssh_gateway.ops.reconcile.endpoint import EndpointError, MetricsEndpoint
from ssh_gateway.ops.reconcile.events import ENDPOINT_WRITTEN, REFUSED, REMOVAL_HELD, EventRecorder, Occurrence
from ssh_gateway.ops.reconcile.health import Health
from ssh_gateway.ops.reconcile.metrics import ReconcilerMetrics
from ssh_gateway.ops.reconcile.signals import StackSignals
from ssh_gateway.ops.reconcile.watch import StackWatch

pytestmark = pytest.mark.unit

ANY_PORT = ListenAddress(host="127.0.0.1", port=0)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextmanager
def serving(metrics: ReconcilerMetrics, health: Health) -> Iterator[httpx.Client]:
    endpoint = MetricsEndpoint(ANY_PORT, metrics, health)
    endpoint.start()
    try:
        with httpx.Client(base_url=f"http://{endpoint.address}", timeout=5.0) as client:
            yield client
    finally:
        endpoint.stop()


def test_health_fails_when_a_watch_is_silent_or_a_pass_runs_too_long_and_readiness_waits_for_listings() -> None:
    clock, lease = Clock(), {"known": False}
    health = Health(clock, watch_stale=300.0, up_stuck=1200.0)
    stack = health.stack("prod", ["a", "b"], lambda: lease["known"])
    assert health.problem() is None
    assert health.not_ready() == "stack prod: namespace a not listed yet"
    stack.delivered("a", listing=True)
    stack.delivered("b", listing=True)
    assert health.not_ready() == "stack prod: its Lease has not answered yet"
    lease["known"] = True
    assert health.not_ready() is None

    clock.now += 200.0
    stack.delivered("a")  # an event, or a bookmark: b is silent
    clock.now += 150.0
    assert health.problem() == "stack prod: the watch of namespace b has delivered nothing for 350 s (bound 300 s)"
    stack.delivered("b")
    assert health.problem() is None

    stack.pass_began()
    clock.now += 1201.0
    for namespace in ("a", "b"):
        stack.delivered(namespace)
    assert health.problem() == "stack prod: one pass has run for 1201 s (bound 1200 s)"
    stack.pass_ended()
    assert health.problem() is None
    # Without a watch (--once), only the pass is followed.
    assert Health(clock).stack("once", [], lambda: True).problem(1.0, 1.0) is None


class StalledApi(BaseHTTPRequestHandler):
    """An API server whose listing answers and whose watch is accepted, then never says a word."""

    release = threading.Event()

    def do_GET(self) -> None:  # the standard library's name
        if "watch=true" in self.path:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.flush()
            self.release.wait(60)
            return
        body = json.dumps({"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_healthz_fails_when_the_watch_is_stalled() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), StalledApi)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    configuration = Configuration()
    configuration.host = f"http://127.0.0.1:{server.server_address[1]}"
    metrics, health = ReconcilerMetrics(), Health(watch_stale=1.0)
    signals = StackSignals("prod", metrics=metrics, health=health, namespaces=["gpu-users"])
    watch = StackWatch(
        ApiClient(configuration),
        kind=DiscoverFrom.PODS,
        namespaces=("gpu-users",),
        selector={"ssh-gateway.io/expose": "true"},
        notify=lambda _reason: None,
        report=lambda _event, _fields: None,
        signals=signals,
    )
    try:
        with serving(metrics, health) as http:
            watch.start()
            deadline = time.monotonic() + 10
            while http.get("/readyz").status_code != 200:  # listed, and no Lease to wait for here
                assert time.monotonic() < deadline, http.get("/readyz").text
                time.sleep(0.05)
            assert http.get("/healthz").text == "ok\n"
            time.sleep(1.5)  # the watch is open, and silent
            answer = http.get("/healthz")
            assert answer.status_code == 500
            assert answer.text.startswith("stack prod: the watch of namespace gpu-users has delivered nothing for ")
            assert answer.text.endswith(" s (bound 1 s)\n") and answer.text.count("\n") == 1
            assert http.get("/nothing").status_code == 404
    finally:
        StalledApi.release.set()
        watch.stop()
        server.shutdown()
        server.server_close()


def report() -> StatusReport:
    def ref(name: str) -> ObjectRef:
        return ObjectRef(kind=DiscoverFrom.PODS, namespace="gpu-users", name=f"{name}-0", uid=f"uid-{name}")

    endpoint = {"host": "ssh-a.example.com", "port": 40001, "ssh": "ssh -p 40001 root@ssh-a.example.com"}
    return StatusReport(
        instances=(
            ReportedInstance(name="a", obj=ref("a"), state=State.PRESENT, endpoint=endpoint),
            ReportedInstance(name="b", obj=ref("b"), state=State.HELD, endpoint={}),
            ReportedInstance(name="c", obj=ref("c"), state=State.HELD, endpoint={}),
        ),
        refusals=(ReportedRefusal(obj=ref("eve"), key="ssh-gateway.io/user", line='pod gpu-users/eve-0: bad "x"'),),
        unlisted=2,
        held=("b", "c"),
        max_removals=1,
        free_ports=97,
    )


def test_a_pass_leaves_every_series_in_metrics() -> None:
    metrics, health = ReconcilerMetrics(), Health()
    signals = StackSignals("prod", metrics=metrics, health=health, namespaces=["gpu-users"])
    signals.waiting(3)
    signals.lease(held=True)
    signals.up_ended(0, 6.5)
    signals.up_ended(1, 2.0)
    signals.watch_restarted()
    signals.status(report())
    with serving(metrics, health) as http:
        answer = http.get("/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    lines = set(answer.text.splitlines())
    for line in (
        'ssh_gateway_reconcile_ups_total{outcome="succeeded",stack="prod"} 1.0',
        'ssh_gateway_reconcile_ups_total{outcome="failed",stack="prod"} 1.0',
        'ssh_gateway_reconcile_ups_total{outcome="covered",stack="prod"} 0.0',
        'ssh_gateway_reconcile_up_duration_seconds_count{stack="prod"} 2.0',
        'ssh_gateway_reconcile_up_duration_seconds_bucket{le="10.0",stack="prod"} 2.0',
        'ssh_gateway_reconcile_changes_waiting{stack="prod"} 3.0',
        'ssh_gateway_reconcile_watch_restarts_total{stack="prod"} 1.0',
        'ssh_gateway_reconcile_instances{stack="prod",state="present"} 1.0',
        'ssh_gateway_reconcile_instances{stack="prod",state="held"} 2.0',
        'ssh_gateway_reconcile_instances{stack="prod",state="missing"} 0.0',
        'ssh_gateway_reconcile_refused_objects{stack="prod"} 3.0',
        'ssh_gateway_reconcile_free_ports{stack="prod"} 97.0',
        'ssh_gateway_reconcile_lease_held{stack="prod"} 1.0',
    ):
        assert line in lines, line
    (success,) = [line for line in lines if line.startswith("ssh_gateway_reconcile_last_success_timestamp_seconds")]
    assert abs(float(success.split()[-1]) - time.time()) < 60
    # Two reconcilers in one process do not share a series (a registry each, not the global one).
    assert "ssh_gateway_reconcile_changes_waiting{" not in ReconcilerMetrics().exposition().decode()


def test_a_status_calls_for_an_event_per_refusal_and_held_instance_and_one_per_new_endpoint() -> None:
    found = occurrences(report(), {}, "ConfigMap ns/s")
    assert [(o.obj.name, o.what) for o in found] == [
        ("eve-0", REFUSED),
        ("b-0", REMOVAL_HELD),
        ("c-0", REMOVAL_HELD),
        ("a-0", ENDPOINT_WRITTEN),
    ]
    assert found[0].note == 'pod gpu-users/eve-0: bad "x"'  # the status's own line
    assert found[1].note.startswith("discovery holds back 2 removals (b, c), over ssh-gateway:discovery.maxRemovals 1")
    assert found[3].note == "instance a: endpoint written to ConfigMap ns/s: ssh -p 40001 root@ssh-a.example.com"
    # The same endpoint again is no news; an unknown baseline (unreadable at start) makes none.
    again = occurrences(report(), {"a": report().instances[0].endpoint}, "ConfigMap ns/s")
    assert ENDPOINT_WRITTEN not in [o.what for o in again]
    assert ENDPOINT_WRITTEN not in [o.what for o in occurrences(report(), None, "ConfigMap ns/s")]


class RefusingApi:
    def __init__(self) -> None:
        self.calls = 0

    def create_namespaced_event(self, *_args: Any, **_kwargs: Any) -> None:
        self.calls += 1
        raise ApiException(status=403, reason="Forbidden")


def test_an_event_that_cannot_be_written_is_logged_once_and_fails_nothing() -> None:
    logged: list[tuple[str, dict[str, Any]]] = []
    recorder = EventRecorder(
        ApiClient(Configuration()), stack="prod", instance="r-0", log=lambda e, **f: logged.append((e, f))
    )
    refusing = RefusingApi()
    recorder._api = refusing  # type: ignore[assignment] # the seam: an API server that says 403
    ref = ObjectRef(kind=DiscoverFrom.SERVICES, namespace="ns", name="ssh-eve", uid="u1")
    for _ in range(3):
        recorder.record([Occurrence(obj=ref, what=REFUSED, note="x"), Occurrence(obj=ref, what=REFUSED, note="y")])
    assert refusing.calls == 6
    assert logged == [("event-error", {"stack": "prod", "error": "403 Forbidden"})]


def test_a_metrics_address_is_parsed_once_and_a_taken_one_is_one_line() -> None:
    assert parse_listen_address(":9090") == ListenAddress(host="", port=9090)
    assert str(parse_listen_address("[::1]:9090")) == "[::1]:9090"
    with pytest.raises(ValueError, match=r"'9090' is not HOST:PORT such as 0\.0\.0\.0:9090"):
        parse_listen_address("9090")
    with pytest.raises(ValueError, match="'bad host' is not a host"):
        parse_listen_address("bad host:9090")
    taken = MetricsEndpoint(ANY_PORT, ReconcilerMetrics(), Health())
    try:
        with pytest.raises(EndpointError, match=rf"--metrics-address {taken.address}: cannot listen there: "):
            MetricsEndpoint(taken.address, ReconcilerMetrics(), Health())
    finally:
        taken.stop()
