"""The reconciler never spins (issue 36): `ssh-gateway reconcile` of a stack left in each state that no `up` can
change by itself, with nothing happening in the cluster for `QUIET` seconds, and its `up`s counted:

- held: the guard holds a removal (more than `maxRemovals`): no `up` until a person acts or the object is back;
- refused: every `up` is refused at preview (exit 3): logged once, no `up` until a change or the resync;
- failing: every `up` fails (Pangolin does not answer): tried again 2 s, 4 s, 8 s ... after, not hot and not left
  to the 600 s resync.

The real command, the real `ssh-gateway up`s it starts, the real kube-apiserver and the Pangolin emulator."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.local.control_plane import ControlPlane

from .conftest import StackFactory
from .reliability import kill_tree, show, start_in_session
from .test_cluster_instances import config, create, delete, platform_service, status
from .test_reconciler_up import RECONCILE, events

pytestmark = pytest.mark.integration

QUIET = 30.0
"""Seconds of quiet in which the `up`s are counted (reported per minute)."""


@contextmanager
def reconciling(stack: auto.Stack, log: Path) -> Iterator[Any]:
    process = start_in_session([*RECONCILE, stack.name], log)
    try:
        yield process
    finally:
        kill_tree(process)


def logged(log: Path) -> list[dict[str, Any]]:
    return events(log.read_text(errors="replace"))


def wait_for_ups(log: Path, count: int, process: Any, timeout: float = 240.0) -> list[dict[str, Any]]:
    """The first `count` `up` events of the log, once they are there."""
    deadline = time.monotonic() + timeout
    while len(ups := [e for e in logged(log) if e["event"] == "up"]) < count:
        assert process.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"no {count} ups within {timeout:.0f}s: {ups}"
        time.sleep(0.2)
    return ups[:count]


def at(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["ts"])


def ups_in_quiet(log: Path) -> tuple[list[dict[str, Any]], float]:
    """Waits `QUIET` seconds; the `up-start` events within them, and the period's start (seconds since the epoch)."""
    began = time.time()
    time.sleep(QUIET)
    started = [e for e in logged(log) if e["event"] == "up-start" and at(e).timestamp() >= began]
    return started, began


def test_held_removals_wake_nothing(
    kube: ControlPlane,
    kube_namespace: str,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    ns = kube_namespace
    create(kube, ns, "services", platform_service("held0", 30441))
    stack = make_stack(config(emulator, kube, ns, gracePeriod=0, maxRemovals=0))
    log = tmp_path / "reconcile.log"
    with reconciling(stack, log) as process:
        wait_for_ups(log, 1, process)
        delete(kube, ns, "services", "ssh-held0")  # gone, its grace over at once, and held by maxRemovals 0
        [_, held] = wait_for_ups(log, 2, process)
        assert held["code"] == 0, held
        assert status(kube, ns, stack)["held.json"] == {"held": ["held0"], "maxRemovals": 0}
        started, _ = ups_in_quiet(log)
    show(pytestconfig, f"held: {len(started) * 60 / QUIET:.0f} ups per quiet minute ({len(started)} in {QUIET:.0f} s)")
    assert started == [], started  # before: one `up` every ~10 s, each "grace expiry"


def test_a_refused_stack_is_named_once_and_not_retried(
    kube: ControlPlane,
    kube_namespace: str,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    ns = kube_namespace
    for i in range(2):
        create(kube, ns, "services", platform_service(f"refused{i}", 30411 + i))
    refused = config(emulator, kube, ns)
    refused["ssh-gateway:ports"] = {"range": "40000-40000"}  # two instances, one port: exhausted, at preview
    stack = make_stack(refused)
    log = tmp_path / "reconcile.log"
    with reconciling(stack, log) as process:
        [first] = wait_for_ups(log, 1, process)
        assert first["code"] == 3, first
        started, _ = ups_in_quiet(log)
    show(
        pytestconfig, f"refused: {len(started) * 60 / QUIET:.0f} ups per quiet minute ({len(started)} in {QUIET:.0f} s)"
    )
    assert started == [], started
    assert [e["event"] for e in logged(log) if e["event"] in ("up-refused", "up-retry")] == ["up-refused"]
    assert "is exhausted" in log.read_text()


def test_a_failing_stack_is_retried_with_doubling_delays(
    kube: ControlPlane,
    kube_namespace: str,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    ns = kube_namespace
    create(kube, ns, "services", platform_service("failing0", 30421))
    failing = config(emulator, kube, ns)
    failing["ssh-gateway:pangolin"] = {**failing["ssh-gateway:pangolin"], "url": "http://127.0.0.1:9/v1"}
    stack = make_stack(failing)
    log = tmp_path / "reconcile.log"
    with reconciling(stack, log) as process:
        [first] = wait_for_ups(log, 1, process)
        assert first["code"] == 1, first
        started, _ = ups_in_quiet(log)
        wait_for_ups(log, 4, process)  # three retries, however long each `up` (with its recover) takes here
    per_minute = len(started) * 60 / QUIET
    show(pytestconfig, f"failing: {per_minute:.0f} ups per quiet minute ({len(started)} in {QUIET:.0f} s)")
    found = logged(log)
    assert [e["seconds"] for e in found if e["event"] == "up-retry"][:3] == [2.0, 4.0, 8.0]
    assert [e["reason"] for e in found if e["event"] == "up-start"][:4] == ["start", "retry 1", "retry 2", "retry 3"]
    ended = [at(e) for e in found if e["event"] == "up"]
    # A retry begins with its recover, logged when it ends, with how long it took.
    tried = [at(e) - timedelta(seconds=e["seconds"]) for e in found if e["event"] == "recover"][1:]
    for end, next_try, delay in zip(ended, tried, (2.0, 4.0, 8.0), strict=False):
        assert (next_try - end).total_seconds() >= delay - 0.1, (end, next_try, delay)  # waited its delay
    assert 1 <= len(started) <= 4, started  # tried again, neither hot nor left to the resync
