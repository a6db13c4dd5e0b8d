"""The reconciler's watch, worker and lease against the real kube-apiserver, with a fake `up` that records when it
ran: a burst is batched into few `up`s, churn that does not matter runs none, an API server that goes away and
comes back is followed again, and two replicas of one stack never run two `up`s at once and lose nothing."""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient

from ssh_gateway.core.names import DiscoverFrom
from ssh_gateway.kube import api_client
from ssh_gateway.local.control_plane import ControlPlane, start_control_plane, stop_control_plane
from ssh_gateway.ops.reconcile.lease import LastUp, LeaseLost, StackLease
from ssh_gateway.ops.reconcile.reconciler import pod_gone
from ssh_gateway.ops.reconcile.watch import StackWatch
from ssh_gateway.ops.reconcile.worker import CLOCK_MARGIN, Action, StackWorker

SELECTOR = {"ssh-gateway.io/expose": "true"}


@dataclass
class Record:
    """What the fake runner and the log saw."""

    ups: list[tuple[float, float, str]] = field(default_factory=list)
    """(start, end, who) of each `up`, on the monotonic clock."""
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    calls: list[tuple[Action, tuple[str, ...]]] = field(default_factory=list)
    """Every step run: its action and arguments."""

    def runner(self, who: str, seconds: float) -> Callable[[Action, str, Sequence[str]], int]:
        def run(action: Action, _stack: str, arguments: Sequence[str]) -> int:
            with self.lock:
                self.calls.append((action, tuple(arguments)))
            if action == "up":
                start = time.monotonic()
                time.sleep(seconds)
                with self.lock:
                    self.ups.append((start, time.monotonic(), who))
            return 0

        return run

    def log(self, event: str, **fields: Any) -> None:
        with self.lock:
            self.events.append((event, fields))

    def reasons(self) -> list[str]:
        return [str(f.get("reason")) for e, f in self.events if e == "up"]


def wait_for(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def settle(record: Record, quiet: float = 3.0, timeout: float = 60.0) -> int:
    """Waits until no `up` has started or ended for `quiet` seconds; the number of `up`s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        count = len(record.ups)
        time.sleep(quiet)
        if len(record.ups) == count and not any(e == "up-start" for e, _ in record.events[-1:]):
            return count
    pytest.fail("the ups did not settle")


def pod(name: str, labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
        "spec": {"containers": [{"name": "sshd", "image": "example.invalid/sshd:1"}]},
    }


def client_of(plane: ControlPlane) -> ApiClient:
    return api_client(str(plane.kubeconfig), None)


@contextmanager
def following(
    api: ApiClient, namespace: str, record: Record, *, up_seconds: float = 0.5, lease: StackLease | None = None
) -> Iterator[StackWorker]:
    """A watch and a worker for one stack selecting `SELECTOR` pods in `namespace`, stopped afterwards."""
    worker = StackWorker(
        "it", run_step=record.runner("a", up_seconds), lease=lease, log=record.log, debounce=0.5, max_delay=2.0
    )
    watch = StackWatch(
        api,
        kind=DiscoverFrom.PODS,
        namespaces=(namespace,),
        selector=SELECTOR,
        notify=worker.mark,
        report=lambda event, fields: record.log(event, **fields),
    )
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,))
    watch.start()
    thread.start()
    try:
        wait_for("the first pass", lambda: len(record.ups) >= 1)
        yield worker
    finally:
        stop.set()
        watch.stop()
        thread.join(30)


def test_a_burst_is_a_few_ups_and_churn_that_does_not_matter_is_none(kube: ControlPlane, kube_namespace: str) -> None:
    record = Record()
    base = f"/api/v1/namespaces/{kube_namespace}/pods"
    with kube.client() as http, following(client_of(kube), kube_namespace, record, up_seconds=1.0):
        assert settle(record) == 1  # the first pass, at start
        for i in range(20):
            http.post(base, json=pod(f"gpu-{i}", SELECTOR)).raise_for_status()
        for i in range(3):
            http.post(base, json=pod(f"other-{i}", {"app": "jupyter"})).raise_for_status()
        burst = settle(record) - 1
        assert 1 <= burst <= 3, record.reasons()
        assert "added pod" in record.reasons()[1]

        # A pod's status, an annotation of someone else's, an unselected pod: none of them runs an up.
        patch = {"metadata": {"annotations": {"example.com/note": "x"}}}
        merge = {"Content-Type": "application/merge-patch+json"}
        http.patch(f"{base}/gpu-0", json=patch, headers=merge).raise_for_status()
        http.patch(f"{base}/gpu-1/status", json={"status": {"phase": "Running"}}, headers=merge).raise_for_status()
        http.delete(f"{base}/other-0").raise_for_status()
        assert settle(record) == 1 + burst

        # An annotation of ours, and two deletes: one more pass for the three.
        ours = {"metadata": {"annotations": {"ssh-gateway.io/user": "alice"}}}
        http.patch(f"{base}/gpu-2", json=ours, headers=merge).raise_for_status()
        http.delete(f"{base}/gpu-3").raise_for_status()
        http.delete(f"{base}/gpu-4").raise_for_status()
        assert settle(record) == 2 + burst, record.reasons()
        last = record.reasons()[-1]
        assert "changed pod" in last and "deleted pod" in last, last


def test_the_watch_follows_an_api_server_that_went_away_and_came_back(tmp_path: Path) -> None:
    plane = start_control_plane(tmp_path / "kube")
    try:
        namespace = f"it-{uuid.uuid4().hex[:8]}"
        plane.create_namespace(namespace)
        record = Record()
        with following(client_of(plane), namespace, record):
            assert settle(record, quiet=1.0) == 1
            # A crash: kube-apiserver's graceful stop would wait for the watch to drain (up to 15 s here).
            os.kill(plane.pids["kube-apiserver"], signal.SIGKILL)
            stop_control_plane(plane)
            wait_for("the watch to see it go", lambda: any(e == "watch-down" for e, _ in record.events))
            time.sleep(2.0)  # a few of the backoff's retries against a closed port
            plane = start_control_plane(
                plane.root, api_port=plane.api_port, etcd_port=plane.etcd_port, etcd_peer_port=plane.etcd_peer_port
            )
            wait_for("the watch to resume", lambda: any(e == "watch-resumed" for e, _ in record.events), 120)
            assert len(record.ups) == 1  # nothing ran while it was gone, nor for coming back unchanged
            with plane.client() as http:
                http.post(f"/api/v1/namespaces/{namespace}/pods", json=pod("gpu-0", SELECTOR)).raise_for_status()
            wait_for("an up for the new pod", lambda: len(record.ups) == 2)
            assert "added pod" in record.reasons()[-1]
    finally:
        stop_control_plane(plane, remove_data=True)


def test_two_replicas_of_one_stack_never_run_two_ups_at_once_and_lose_nothing(
    kube: ControlPlane, kube_namespace: str
) -> None:
    record = Record()
    stop = threading.Event()
    workers = []
    for who in ("a", "b"):
        lease = StackLease(
            client_of(kube), namespace=kube_namespace, name="ssh-gateway-reconcile-it", identity=who, stack_label="p.it"
        )
        workers.append(
            StackWorker(
                "it", run_step=record.runner(who, 1.5), lease=lease, log=record.log, debounce=0.2, max_delay=1.0
            )
        )
    threads = [threading.Thread(target=w.run, args=(stop,)) for w in workers]
    for thread in threads:
        thread.start()
    try:
        marks: list[float] = []
        for i in range(6):  # both replicas see each change, as two watches would
            time.sleep(0.9)
            marks.append(time.monotonic())
            for worker in workers:
                worker.mark(f"change {i}")
        settle(record, quiet=4.0)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    ups = sorted(record.ups)
    overlaps = [(a, b) for a, b in itertools.pairwise(ups) if b[0] < a[1]]
    assert overlaps == [], ups
    assert {who for *_, who in ups} <= {"a", "b"}
    assert ups[-1][0] > marks[-1], "the last change was not followed by an up"
    # A replica that waited skips an up the other's covered: fewer ups than the two replicas' passes.
    covered = [f for e, f in record.events if e == "up-covered"]
    assert covered, record.events
    assert len(ups) < 2 * 7, ups


def test_a_standby_takes_the_lease_once_its_holder_stops_renewing_and_never_while_it_renews(
    kube: ControlPlane, kube_namespace: str
) -> None:
    def lease(who: str) -> StackLease:
        name = "ssh-gateway-reconcile-it"
        return StackLease(
            client_of(kube), namespace=kube_namespace, name=name, identity=who, stack_label="p.it", seconds=3
        )

    dead, standby, third = lease("dead"), lease("standby"), lease("third")
    stop = threading.Event()
    assert dead.acquire(stop) is None  # taken, then never renewed nor released: a replica killed during its up
    waited: list[str] = []
    started = time.monotonic()
    standby.acquire(stop, waited.append)
    took = time.monotonic() - started
    assert waited == ["dead"]
    assert 3.0 <= took < 6.0, took  # the lease's 3 s unrenewed, on the standby's own clock
    with pytest.raises(LeaseLost):
        dead.renew()  # its holder, back from the dead, finds it taken

    # Renewed, it is never taken: a third replica waits past several lease durations in vain.
    renewing, given_up = threading.Event(), threading.Event()
    lost: list[str] = []
    standby.hold(renewing, lost.append)
    threading.Timer(7.0, given_up.set).start()
    with pytest.raises(LeaseLost, match="stopped while waiting"):
        third.acquire(given_up)
    renewing.set()
    assert lost == []
    standby.release(None)
    assert third.acquire(stop) is None  # released: taken at once


def taking_over(api: ApiClient, namespace: str, lease: StackLease, record: Record) -> StackWorker:
    """A worker under `lease` whose steps `record` counts, judging a dead holder gone as the reconciler does: its pod
    is gone from `namespace`."""
    return StackWorker(
        "it",
        run_step=record.runner(lease.identity, 0.1),
        lease=lease,
        log=record.log,
        host_gone=lambda host: pod_gone(api, namespace, host),
    )


def test_a_lease_taken_over_from_a_deleted_pod_clears_its_stack_lock_and_one_from_a_live_pod_does_not(
    kube: ControlPlane, kube_namespace: str
) -> None:
    api = client_of(kube)

    def lease(who: str) -> StackLease:
        name = f"ssh-gateway-reconcile-{who}-stack"
        return StackLease(api, namespace=kube_namespace, name=name, identity=who, stack_label="p.it", seconds=2)

    with kube.client() as http:  # the replica "alive-0" still exists as a pod; "deleted-0" does not
        http.post(f"/api/v1/namespaces/{kube_namespace}/pods", json=pod("alive-0", {})).raise_for_status()
    stop = threading.Event()
    for old, gone in (("deleted-0", True), ("alive-0", False)):
        dead = lease(old)
        dead.acquire(stop)  # an up of its own that succeeded, after the newcomer's change: recorded on the lease
        dead.release(LastUp(started=time.time(), code=0, holder=old))
        dead.acquire(stop)  # taken for an up, then never renewed: its replica died, or is cut off
        record = Record()
        newcomer = StackLease(
            api,
            namespace=kube_namespace,
            name=f"ssh-gateway-reconcile-{old}-stack",
            identity="new-0",
            stack_label="p.it",
            seconds=2,
        )
        taking_over(api, kube_namespace, newcomer, record).run_once(["change"], time.time() - 10.0, stop)
        assert newcomer.taken_from == old
        # Not covered by the last up recorded: the one its holder died in came after it, and left its lock.
        assert [e for e, _ in record.events if e == "up-covered"] == [], record.events
        assert [action for action, _ in record.calls] == ["recover", "up"], record.calls
        recover = [arguments for action, arguments in record.calls if action == "recover"]
        assert recover == [("--gone-host", old) if gone else ()], (old, record.calls)
        assert [f["holder_gone"] for e, f in record.events if e == "lease-taken-over"] == [gone]


def test_a_takeover_whose_taker_dies_before_its_up_names_both_dead_holders_to_recover(
    kube: ControlPlane, kube_namespace: str
) -> None:
    api = client_of(kube)

    def lease(who: str) -> StackLease:
        name = "ssh-gateway-reconcile-chain-stack"
        return StackLease(api, namespace=kube_namespace, name=name, identity=who, stack_label="p.it", seconds=2)

    stop = threading.Event()
    lease("first-0").acquire(stop)  # taken for an up, then never renewed: its replica died (its pod is gone)
    second = lease("second-0")
    second.acquire(stop)  # taken over once expired; this replica dies too, before its recover ran
    assert second.taken_from == "first-0"
    record = Record()
    third = lease("third-0")
    taking_over(api, kube_namespace, third, record).run_once(["change"], time.time() - 10.0, stop)
    assert third.taken_from == "second-0"
    # Both locks may be left (the first holder's, never cleared): both hosts are named, each because its pod is gone.
    recover = [arguments for action, arguments in record.calls if action == "recover"]
    assert recover == [("--gone-host", "first-0", "--gone-host", "second-0")], record.calls
    fourth = lease("fourth-0")  # the stack healed: the next holder inherits no dead holder
    fourth.acquire(stop)
    assert fourth.dead_holders == () and fourth.taken_from is None


def test_an_up_that_started_between_two_waiting_changes_does_not_cover_the_later_one(
    kube: ControlPlane, kube_namespace: str
) -> None:
    def lease(who: str) -> StackLease:
        name = "ssh-gateway-reconcile-two-changes"
        return StackLease(client_of(kube), namespace=kube_namespace, name=name, identity=who, stack_label="p.it")

    stop = threading.Event()
    other = lease("other")
    other.acquire(stop)
    record = Record()
    worker = StackWorker("it", run_step=record.runner("b", 0.1), lease=lease("b"), log=record.log, debounce=0.05)
    thread = threading.Thread(target=worker.run, args=(stop,))
    thread.start()
    try:
        wait_for("the start pass waiting", lambda: any(e == "lease-wait" for e, _ in record.events))
        worker.mark("alice")  # both wait for the next pass
        time.sleep(CLOCK_MARGIN + 0.5)
        other_started = time.time()  # the other replica's up, which saw alice, begins
        time.sleep(0.5)
        worker.mark("bob")  # after that up listed the cluster: only an up of this replica's sees bob
        other.release(LastUp(started=other_started, code=0, holder="other"))
        wait_for("a pass for bob", lambda: len(passes(record)) >= 2)
    finally:
        stop.set()
        thread.join(30)
    assert passes(record) == [("up-covered", "start"), ("up-start", "alice; bob")], record.events


def passes(record: Record) -> list[tuple[str, str]]:
    return [(str(e), str(f["reason"])) for e, f in record.events if e in ("up-start", "up-covered")]


def test_two_replicas_resync_once_a_period_between_them(kube: ControlPlane, kube_namespace: str) -> None:
    record = Record()
    stop = threading.Event()
    workers = [
        StackWorker(
            "it",
            run_step=record.runner(who, 0.2),
            lease=StackLease(
                client_of(kube),
                namespace=kube_namespace,
                name="ssh-gateway-reconcile-rs",
                identity=who,
                stack_label="p.it",
            ),
            log=record.log,
            resync=5.0,
        )
        for who in ("a", "b")
    ]
    threads = [threading.Thread(target=w.run, args=(stop,)) for w in workers]
    for thread in threads:
        thread.start()
    time.sleep(13.0)
    stop.set()
    for thread in threads:
        thread.join(30)
    resyncs = [who for *_, who in record.ups[2:]]  # after the two start passes
    covered = [f for e, f in record.events if e == "up-covered" and f["reason"] == "resync"]
    assert covered, record.events  # the replica whose resync came second found the other's up recent enough
    assert len(resyncs) <= 3, resyncs  # about one a period between them (13 s, 5 s), not one each
