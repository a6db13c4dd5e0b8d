"""Helpers of the reliability tests: audit a stack against Pangolin, run `pulumi up` as a process tree to kill,
time things with the emulator's counters, and show a measured line on the terminal."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.names import PANGOLIN_TYPE, owner_prefix
from ssh_gateway.plumbing.toolchain import REPO, pulumi_env

from .cli import run
from .sampler import Probe

if TYPE_CHECKING:  # only for `show`'s annotation: the benchmarks import this module without pytest
    import pytest

ALL_FAULTS = ("500", "429", "timeout", "reset", "timeout-after-write")
PUT_RESOURCE = "PUT /v1/org/{orgId}/resource"
LIST_RESOURCES = "GET /v1/org/{orgId}/resources"


@dataclass(frozen=True)
class Audit:
    """How a stack's state and Pangolin disagree; `clean` when they do not."""

    orphans: list[str]
    """`<id>:<name>` of resources named for the stack that its state does not hold."""
    twins: dict[str, list[int]]
    """Names held by more than one Pangolin resource -> their ids."""
    doubly_bound: dict[int, list[int]]
    """Ports bound by more than one resource (of any stack) -> the resources' ids."""
    missing: list[str]
    """Instances without a resource in state, or whose resource is gone from Pangolin, disabled, or has no target."""
    pending: int
    """Pending operations in the stack's state."""

    @property
    def clean(self) -> bool:
        return not (self.orphans or self.twins or self.doubly_bound or self.missing or self.pending)


def audit(emulator: EmulatorHandle, stack: auto.Stack, instances: list[str]) -> Audit:
    live = emulator.state()
    prefix = owner_prefix(stack.workspace.project_settings().name, stack.name)
    ours = [r for r in live["resources"] if str(r["name"]).startswith(prefix)]
    deployment = stack.export_stack().deployment or {}
    held = {
        str(r["outputs"]["name"]): int(r["outputs"]["resourceId"])
        for r in deployment.get("resources", [])
        if r["type"] == PANGOLIN_TYPE and r.get("outputs", {}).get("resourceId") is not None
    }
    by_name: dict[str, list[int]] = {}
    for resource in ours:
        by_name.setdefault(str(resource["name"]), []).append(int(resource["resourceId"]))
    targets = {int(t["resourceId"]) for t in live["targets"]}
    ids = {int(r["resourceId"]) for r in ours if r["enabled"]}
    return Audit(
        orphans=sorted(f"{r['resourceId']}:{r['name']}" for r in ours if int(r["resourceId"]) not in held.values()),
        twins={name: sorted(found) for name, found in by_name.items() if len(found) > 1},
        doubly_bound=emulator.doubly_bound_ports(),
        missing=sorted(
            name
            for name in instances
            if (rid := held.get(prefix + name)) is None or rid not in ids or rid not in targets
        ),
        pending=len(deployment.get("pending_operations") or []),
    )


def routed_twice(emulator: EmulatorHandle) -> Probe:
    """Ports that two enabled resources with an enabled target bind: two Traefik routers on one entry point."""
    return Probe("routed twice", lambda: str(found) if (found := emulator.doubly_routed_ports()) else None)


def claimed_twice(emulator: EmulatorHandle) -> Probe:
    """Ports that two enabled resources bind, a target or not: a contest in progress (not a fault by itself)."""
    return Probe("claimed twice", lambda: str(found) if (found := emulator.doubly_bound_ports()) else None)


def names_in(emulator: EmulatorHandle, stack: auto.Stack) -> int:
    """How many Pangolin resources are named for `stack`."""
    prefix = owner_prefix(stack.workspace.project_settings().name, stack.name)
    return sum(str(r["name"]).startswith(prefix) for r in emulator.state()["resources"])


def start_up(stack: auto.Stack, log: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`pulumi up` of `stack` (plus `extra` flags) in a session of its own, so that its whole process tree can be
    killed; `env` over the offline toolchain's (another backend, another PULUMI_HOME)."""
    argv = ["pulumi", "up", "--yes", "--skip-preview", "--non-interactive", "--stack", stack.name, *extra]
    return start_in_session(argv, log, env=env)


def start_in_session(argv: list[str], log: Path, *, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`argv` (e.g. `ssh-gateway up`) in a session of its own, its output to `log`: `kill_tree` then kills every
    process it starts; `env` over the offline toolchain's."""
    with log.open("wb") as out:
        return subprocess.Popen(
            argv,
            cwd=REPO,
            env={**pulumi_env(), **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _session_members(session: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            # fields[0] is the state, [3] the session id; a zombie is already dead.
            if int(fields[3]) == session and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def kill_tree(process: subprocess.Popen[bytes]) -> int:
    """SIGKILL every process of the `up`'s session: the CLI, the language host, the program and the provider
    plugins (the engine starts plugins in process groups of their own, so killing the group is not enough).
    Returns how many processes were killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + 10
    while members := _session_members(process.pid):
        assert time.monotonic() < deadline, f"processes {members} survive SIGKILL"
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    process.wait(timeout=10)
    return len(killed)


def wait_until(condition: Callable[[], bool], what: str, *, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Poll `condition` while `process` runs; fail naming `what` if the process ends or time runs out first."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"`pulumi up` ended (exit {process.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f}s"
        time.sleep(0.02)


def recover(stack: auto.Stack, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The recovery command, as a user runs it (`env` over the offline toolchain's, e.g. with `--ambient`)."""
    python = str(REPO / ".venv" / "bin" / "python")
    return run([python, "-m", "ssh_gateway.ops", "recover", "--stack", stack.name, *extra], env=env)


def show(config: pytest.Config, line: str) -> None:
    """Print a measured result on the terminal, even while pytest captures output."""
    capture = config.pluginmanager.get_plugin("capturemanager")
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if capture is not None and reporter is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)
