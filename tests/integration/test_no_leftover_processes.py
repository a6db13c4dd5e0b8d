"""No process outlives its `up` (issue 36, point 4): the processes an `ssh-gateway up` starts (pulumi, the language
host, the program, the dynamic providers) are counted before and after an `up`, after an `up` killed as a lost CI
runner kills it (SIGKILL to its process group: pulumi with it, not the plugins, which the engine starts in groups
of their own), and after the `recover` that follows. The real command, the real CLI, the Pangolin emulator."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.plumbing.toolchain import REPO, pulumi_env

from .conftest import StackFactory, stack_config, static_instance
from .reliability import PUT_RESOURCE, show

pytestmark = pytest.mark.integration

SSH_GATEWAY = str(REPO / ".venv" / "bin" / "ssh-gateway")
TEST_MARK = "SSH_GATEWAY_TEST_PROCESSES"
"""Put into each command's environment here: every process it starts inherits it, orphans included."""


def descendants(mark: str) -> list[str]:
    """The command lines of every process that carries `mark` (started by this test's commands), orphans too."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if f"{TEST_MARK}={mark}".encode() in environ and state != "Z":
            found.append(cmdline.strip()[:160])
    return found


def command(mark: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**pulumi_env(), TEST_MARK: mark}
    return subprocess.run(
        [SSH_GATEWAY, *argv], cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def test_an_up_and_a_killed_ups_recover_leave_no_process(
    emulator: EmulatorHandle, make_stack: StackFactory, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    mark = uuid.uuid4().hex
    stack = make_stack(stack_config(emulator, [static_instance(f"a{i}") for i in range(3)]))
    before = descendants(mark)
    done = command(mark, "up", "--stack", stack.name)
    assert done.returncode == 0, done.stderr[-2000:]
    after_up = descendants(mark)

    # More instances, and the `up` killed while their creates reach Pangolin: its process group, as a runner's.
    instances = [static_instance(f"a{i}") for i in range(12)]
    stack.set_config("ssh-gateway:instances", auto.ConfigValue(json.dumps(instances)))
    emulator.reset_counters()
    log = tmp_path / "up.log"
    with log.open("wb") as out:
        killed = subprocess.Popen(
            [SSH_GATEWAY, "up", "--stack", stack.name],
            cwd=REPO,
            env={**pulumi_env(), TEST_MARK: mark},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 240
    while emulator.counters().get(PUT_RESOURCE, 0) < 1:
        assert killed.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.02)
    running = descendants(mark)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait(timeout=30)
    time.sleep(2.0)  # what dies with the engine has died by now
    after_kill = descendants(mark)

    recovered = command(mark, "recover", "--stack", stack.name)
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    after_recover = descendants(mark)
    again = command(mark, "up", "--stack", stack.name)
    assert again.returncode == 0, again.stderr[-2000:]
    after_again = descendants(mark)

    show(
        pytestconfig,
        f"processes: before {len(before)}, after an up {len(after_up)}, during the killed up {len(running)}, "
        f"left by the kill {len(after_kill)}, after recover {len(after_recover)}, after the next up "
        f"{len(after_again)}; left by the kill: {[_what(c) for c in after_kill]}",
    )
    assert before == [] and after_up == [], after_up
    assert len(running) >= 4, running  # the up, pulumi, the language host, the program (and providers)
    assert after_recover == [] and after_again == [], after_recover + after_again
    if after_kill:  # what the kill left is what recover ended, and said so
        assert "processes a killed `up` of this stack left running" in recovered.stdout + recovered.stderr


def _what(cmdline: str) -> str:
    """`langhost.py`, `pulumi.dynamic`, ...: what a process is, from its command line."""
    words = cmdline.split()
    named = [w for w in words if w.endswith((".py", "pulumi.dynamic", "-exec"))] or words[:1]
    return Path(named[0]).name
