"""The reconciler's per-stack worker without a cluster (no lease): changes during an `up` are one next `up`, a
grace expiry wakes it, and a step that cannot start is a failed `up` healed by `recover` on the next pass."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from ssh_gateway.ops.reconcile.worker import Action, StackWorker

pytestmark = pytest.mark.unit


class Steps:
    """A fake `ssh-gateway <action>`: records each call, an `up` takes `seconds`."""

    def __init__(self, seconds: float = 0.0, fail_first_up: bool = False) -> None:
        self.seconds = seconds
        self.fail_first_up = fail_first_up
        self.calls: list[Action] = []
        self.events: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, action: Action, _stack: str, _arguments: Sequence[str]) -> int:
        self.calls.append(action)
        if action == "up":
            if self.fail_first_up and self.calls.count("up") == 1:
                raise FileNotFoundError("pulumi")
            time.sleep(self.seconds)
        return 0

    def log(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))

    def ups(self) -> list[dict[str, Any]]:
        return [f for e, f in self.events if e == "up"]


def wait_for(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@contextmanager
def running(worker: StackWorker) -> Iterator[None]:
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,))
    thread.start()
    try:
        yield
    finally:
        stop.set()
        worker.notify()
        thread.join(10)


def test_changes_during_an_up_are_one_next_up() -> None:
    steps = Steps(seconds=1.0)
    worker = StackWorker("s", run_step=steps, lease=None, log=steps.log, debounce=0.1, max_delay=0.5)
    with running(worker):
        wait_for(lambda: steps.calls.count("up") == 1)  # the start pass is running
        for i in range(10):
            worker.mark(f"added pod ns/p{i}")
        wait_for(lambda: len(steps.ups()) == 2)
        time.sleep(0.5)
    assert [u["reason"] for u in steps.ups()] == [
        "start",
        "added pod ns/p0; added pod ns/p1; added pod ns/p2 (+7 more)",
    ]
    assert steps.calls == ["recover", "up", "up"]  # recover before the first up of the process only
    # Each change is logged when the watch delivers it (a pod's path is timed from it); the start pass is none.
    assert [f["reason"] for e, f in steps.events if e == "change"] == [f"added pod ns/p{i}" for i in range(10)]


def test_the_earliest_grace_expiry_wakes_the_worker() -> None:
    steps = Steps()
    expiries = iter([time.time() + 1.0])
    worker = StackWorker(
        "s", run_step=steps, lease=None, log=steps.log, debounce=0.1, after_pass=lambda _ran: next(expiries, None)
    )
    with running(worker):
        wait_for(lambda: len(steps.ups()) == 2, timeout=5.0)
    assert [u["reason"] for u in steps.ups()] == ["start", "grace expiry"]


def test_a_step_that_cannot_start_is_a_failed_up_and_the_next_pass_recovers_first() -> None:
    steps = Steps(fail_first_up=True)
    worker = StackWorker("s", run_step=steps, lease=None, log=steps.log, debounce=0.1)
    with running(worker):
        wait_for(lambda: len(steps.ups()) == 1)
        worker.mark("changed pod ns/p0")
        wait_for(lambda: len(steps.ups()) == 2)
    assert [u["code"] for u in steps.ups()] == [2, 0]
    assert [e for e, _ in steps.events if e == "step-error"] == ["step-error"]
    assert steps.calls == ["recover", "up", "recover", "up"]
    assert worker.codes == [2, 0]


class Codes(Steps):
    """Each `up` exits with the next of `codes` (then 0)."""

    def __init__(self, *codes: int) -> None:
        super().__init__()
        self.codes = iter(codes)
        self.times: list[float] = []

    def __call__(self, action: Action, stack: str, arguments: Sequence[str]) -> int:
        super().__call__(action, stack, arguments)
        if action != "up":
            return 0
        self.times.append(time.monotonic())
        return next(self.codes, 0)


def test_a_failed_up_is_tried_again_doubling_until_it_succeeds() -> None:
    steps = Codes(1, 1, 1, 0)
    worker = StackWorker("s", run_step=steps, lease=None, log=steps.log, debounce=0.05, retry=0.2, retry_cap=0.5)
    with running(worker):
        wait_for(lambda: len(steps.ups()) == 4)
        time.sleep(1.2)  # a success: no retry after it
    assert [u["reason"] for u in steps.ups()] == ["start", "retry 1", "retry 2", "retry 3"]
    gaps = [b - a for a, b in zip(steps.times, steps.times[1:], strict=False)]
    assert all(d <= gap < d + 0.15 for gap, d in zip(gaps, [0.2, 0.4, 0.5], strict=True)), gaps  # doubling, capped
    assert [f["seconds"] for e, f in steps.events if e == "up-retry"] == [0.2, 0.4, 0.5]
    assert steps.calls == ["recover", "up", "recover", "up", "recover", "up", "recover", "up"]


def test_a_refused_up_is_logged_once_and_waits_for_a_change() -> None:
    steps = Codes(3, 3)
    worker = StackWorker("s", run_step=steps, lease=None, log=steps.log, debounce=0.05, retry=0.1)
    with running(worker):
        wait_for(lambda: len(steps.ups()) == 1)
        time.sleep(1.0)  # quiet: no retry of a refusal
        assert len(steps.ups()) == 1
        worker.mark("changed pod ns/p0")
        wait_for(lambda: len(steps.ups()) == 2)
        time.sleep(0.5)
    assert [u["code"] for u in steps.ups()] == [3, 3]
    assert [e for e, _ in steps.events if e in ("up-refused", "up-retry")] == ["up-refused"]
    assert steps.calls == ["recover", "up", "up"]  # a refused `up` wrote nothing: nothing to recover


def test_a_grace_expiry_before_the_pass_began_wakes_nothing() -> None:
    # A pass that failed left the status as it was, with an end already past: its retry is due, not a spin.
    steps = Codes(3)
    worker = StackWorker(
        "s", run_step=steps, lease=None, log=steps.log, debounce=0.05, after_pass=lambda _ran: time.time() - 5.0
    )
    with running(worker):
        wait_for(lambda: len(steps.ups()) == 1)
        time.sleep(1.0)
    assert len(steps.ups()) == 1
