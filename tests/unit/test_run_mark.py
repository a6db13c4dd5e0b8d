"""The processes of one `ssh-gateway up`, found by the mark in their environment (ssh_gateway/plumbing/run_mark.py):
what pulumi leaves is ended after the `up`, and a killed `up`'s by the next `recover` or `up`, never another's."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssh_gateway.plumbing import run_mark
from ssh_gateway.plumbing.run_mark import RUN_MARK_ENV, RunMark, end_leftovers, end_orphans, marked_processes

pytestmark = pytest.mark.unit

# A plugin as the engine leaves it: it serves forever, and this one ignores SIGTERM too.
STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(600)"
)


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for child in started:
        child.kill()
        child.wait()


def plugin(spawned: list[subprocess.Popen[str]], mark: RunMark) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", STUBBORN],
        env={**os.environ, RUN_MARK_ENV: mark.value},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    spawned.append(child)
    return child


def test_a_mark_names_its_process_its_stack_and_its_work_tree(tmp_path: Path) -> None:
    mark = RunMark.of_this_process("prod-a", tmp_path)
    assert mark.owner == os.getpid() and mark.owner_alive()
    assert RunMark.parse(mark.value) == mark
    assert RunMark.parse("12:x:prod:/w") is None and RunMark.parse("garbage") is None
    assert not RunMark(owner=mark.owner, started=mark.started + 1, stack="s", work_dir="/w").owner_alive()


def test_what_pulumi_left_is_ended_even_a_process_that_ignores_sigterm(
    spawned: list[subprocess.Popen[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_mark, "GRACE_SECONDS", 0.3)
    mark = RunMark.of_this_process("prod-a", tmp_path)
    other = RunMark.of_this_process("prod-b", tmp_path)
    ours, theirs = plugin(spawned, mark), plugin(spawned, other)
    assert {(ours.pid, mark), (theirs.pid, other)} <= set(marked_processes())
    assert end_leftovers(mark) == 1
    assert ours.wait(timeout=5) == -9  # SIGKILL after the grace
    assert theirs.poll() is None  # another run's: untouched


def test_a_killed_ups_orphans_are_ended_a_live_ups_processes_are_not(
    spawned: list[subprocess.Popen[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_mark, "GRACE_SECONDS", 0.3)
    alive = RunMark.of_this_process("prod-a", tmp_path)
    dead = RunMark(owner=alive.owner, started=alive.started - 1, stack="prod-a", work_dir=alive.work_dir)
    elsewhere = RunMark(owner=dead.owner, started=dead.started, stack="prod-a", work_dir="/another/checkout")
    running, orphan, foreign = plugin(spawned, alive), plugin(spawned, dead), plugin(spawned, elsewhere)
    assert end_orphans("prod-a", tmp_path) == 1
    assert orphan.wait(timeout=5) == -9
    assert running.poll() is None and foreign.poll() is None
