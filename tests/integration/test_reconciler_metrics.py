"""The reconciler as a platform team runs it, against the real kube-apiserver and the Pangolin emulator: the real
CLI with `--metrics-address` serves every series of docs/reconciler.md on /metrics, and its probes; a refused
Service carries a Kubernetes Event naming the annotation and its value, which the next resync counts instead of
repeating; and the Event recorder's cost, in API calls and seconds, for a pass of many refused objects."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.discovery_records import ObjectRef
from ssh_gateway.core.names import DiscoverFrom
from ssh_gateway.kube import api_client
from ssh_gateway.local.control_plane import ControlPlane
from ssh_gateway.ops.reconcile.events import REFUSED, REPORTING_CONTROLLER, EventRecorder, Occurrence

from .conftest import StackFactory
from .reliability import kill_tree, start_in_session
from .test_cluster_instances import config, create, platform_service
from .test_reconciler_up import RECONCILE, events

pytestmark = pytest.mark.integration

SERIES = (
    "ssh_gateway_reconcile_ups_total",
    "ssh_gateway_reconcile_up_duration_seconds_bucket",
    "ssh_gateway_reconcile_changes_waiting",
    "ssh_gateway_reconcile_last_success_timestamp_seconds",
    "ssh_gateway_reconcile_watch_restarts_total",
    "ssh_gateway_reconcile_instances",
    "ssh_gateway_reconcile_refused_objects",
    "ssh_gateway_reconcile_free_ports",
    "ssh_gateway_reconcile_lease_held",
)


def eventually(what: str, check: Callable[[], Any], timeout: float, log: Path) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f}s; log:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)
    return found


def samples(text: str, stack: str) -> dict[str, float]:
    """`name{labels}` -> value, for the stack's series."""
    found = {}
    for line in text.splitlines():
        if line.startswith("ssh_gateway_reconcile_") and f'stack="{stack}"' in line:
            key, value = line.rsplit(" ", 1)
            found[key.replace(f'stack="{stack}"', "").replace("{,", "{").replace(",}", "}").replace("{}", "")] = float(
                value
            )
    return found


def refused_events(kube: ControlPlane, namespace: str, name: str) -> list[dict[str, Any]]:
    with kube.client() as api:
        answer = api.get(
            f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", params={"fieldSelector": f"regarding.name={name}"}
        )
    answer.raise_for_status()
    return [e for e in answer.json()["items"] if e["reason"] == "Refused" and ours(e)]


def ours(event: dict[str, Any]) -> bool:
    """An Event of the reconciler's (the tests' cluster runs controllers that write their own)."""
    return event.get("reportingController", event.get("reportingComponent")) == REPORTING_CONTROLLER


def test_a_running_reconciler_serves_its_series_and_probes_and_a_refused_service_carries_one_counted_event(
    kube: ControlPlane, kube_namespace: str, emulator: EmulatorHandle, make_stack: StackFactory, tmp_path: Path
) -> None:
    ns = kube_namespace
    create(kube, ns, "services", platform_service("alice", 30401))
    create(kube, ns, "services", platform_service("eve", 30402, {"ssh-gateway.io/user": "ro ot"}))
    stack = make_stack(config(emulator, kube, ns))
    log = tmp_path / "reconcile.log"
    argv = [*RECONCILE, stack.name, "--metrics-address", "127.0.0.1:0", "--resync", "4", "--identity", "it-0"]
    following = start_in_session(argv, log)
    try:
        start = eventually("start line", lambda: [e for e in events(log.read_text()) if e["event"] == "start"], 60, log)
        http = httpx.Client(base_url=f"http://{start[0]['metrics']}", timeout=5.0)
        eventually("readiness", lambda: http.get("/readyz").status_code == 200, 60, log)

        def ups() -> list[dict[str, Any]]:
            return [e for e in events(log.read_text()) if e["event"] == "up"]

        eventually("two passes", lambda: len(ups()) >= 2, 240, log)
        assert [e["code"] for e in ups()] == [0] * len(ups()), log.read_text()[-3000:]
        assert http.get("/healthz").text == "ok\n"
        found = samples(http.get("/metrics").text, stack.name)
        for series in SERIES:
            assert any(k.startswith(series) for k in found), (series, found)
        assert found['ssh_gateway_reconcile_ups_total{outcome="succeeded"}'] >= 2
        assert found['ssh_gateway_reconcile_ups_total{outcome="failed"}'] == 0
        assert found["ssh_gateway_reconcile_up_duration_seconds_count"] >= 2
        assert found["ssh_gateway_reconcile_last_success_timestamp_seconds"] > time.time() - 300
        assert found['ssh_gateway_reconcile_instances{state="present"}'] == 1
        assert found['ssh_gateway_reconcile_instances{state="held"}'] == 0
        assert found["ssh_gateway_reconcile_refused_objects"] == 1
        assert found["ssh_gateway_reconcile_free_ports"] == 20 - 1  # the tests' 40000-40019, alice's port taken
        assert found["ssh_gateway_reconcile_watch_restarts_total"] == 0
        assert found["ssh_gateway_reconcile_lease_held"] in (0, 1)
        assert found["ssh_gateway_reconcile_changes_waiting"] >= 0

        # What `kubectl describe service ssh-eve` shows: one Event, naming the annotation and its value, counted.
        (event,) = refused_events(kube, ns, "ssh-eve")
        assert event["type"] == "Warning" and event["reportingController"] == REPORTING_CONTROLLER
        assert event["reportingInstance"] == "it-0"
        assert f'service {ns}/ssh-eve: ssh-gateway.io/user = "ro ot": String should match pattern' in event["note"]
        with kube.client() as api:
            uid = api.get(f"/api/v1/namespaces/{ns}/services/ssh-eve").json()["metadata"]["uid"]
            selector = f"involvedObject.name=ssh-eve,involvedObject.kind=Service,involvedObject.uid={uid}"
            described = api.get(f"/api/v1/namespaces/{ns}/events", params={"fieldSelector": selector}).json()
        assert [e["reason"] for e in described["items"] if ours(e)] == ["Refused"]
        count = (event.get("series") or {}).get("count", 1)
        passes = len(ups())
        eventually("a resync more", lambda: len(ups()) > passes, 120, log)
        (again,) = refused_events(kube, ns, "ssh-eve")
        assert again["metadata"]["name"] == event["metadata"]["name"]
        assert again["series"]["count"] > count >= 1, (event, again)
        assert refused_events(kube, ns, "ssh-alice") == []
        with kube.client() as api:
            items = api.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events").json()["items"]
        assert [e["reason"] for e in items if e["regarding"]["name"] == "ssh-alice" and ours(e)] == ["EndpointWritten"]
        http.close()
    finally:
        kill_tree(following)


def test_the_event_recorder_counts_a_resync_in_one_patch_per_object_and_adds_no_event(
    kube: ControlPlane, kube_namespace: str
) -> None:
    """The cost of Events per pass, measured: N refused objects are N creates once, then N patches per pass."""
    ns, n = kube_namespace, 50
    logged: list[tuple[str, dict[str, Any]]] = []
    recorder = EventRecorder(
        api_client(str(kube.kubeconfig), None), stack="it", instance="it-0", log=lambda e, **f: logged.append((e, f))
    )
    found = [
        Occurrence(
            obj=ObjectRef(kind=DiscoverFrom.PODS, namespace=ns, name=f"gpu-{i}", uid=f"uid-{i}"),
            what=REFUSED,
            note=f'pod {ns}/gpu-{i}: ssh-gateway.io/user = "ro ot": not a user name',
        )
        for i in range(n)
    ]
    took = []
    for _ in range(3):
        began = time.monotonic()
        recorder.record(found)
        took.append(time.monotonic() - began)
    assert recorder.calls == 3 * n and logged == []
    with kube.client() as api:
        items = [e for e in api.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events").json()["items"] if ours(e)]
    assert len(items) == n
    assert {e["series"]["count"] for e in items} == {3}
    print(json.dumps({"objects": n, "seconds_per_pass": [round(t, 3) for t in took]}))
