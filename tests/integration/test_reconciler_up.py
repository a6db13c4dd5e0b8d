"""`ssh-gateway reconcile` end to end: the real CLI runs the real `ssh-gateway up` of a stack that discovers the
platform's Services on the real kube-apiserver, against the Pangolin emulator. A reconciler killed with -9 (its
whole process tree, as a lost pod's container) during an `up` is healed by the next start: `recover` first, then
the `up`, with no orphan, twin, port bound twice, missing instance or pending operation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.local.control_plane import ControlPlane
from ssh_gateway.plumbing.toolchain import REPO

from .cli import run
from .conftest import StackFactory
from .reliability import PUT_RESOURCE, audit, kill_tree, start_in_session, wait_until
from .test_cluster_instances import config, create, platform_service, status

pytestmark = pytest.mark.integration

SSH_GATEWAY = str(REPO / ".venv" / "bin" / "ssh-gateway")
# As the Deployment runs it: the program once per `up` instead of twice.
RECONCILE = [SSH_GATEWAY, "reconcile", "--skip-preview", "--stack"]


def events(text: str) -> list[dict[str, Any]]:
    """The reconciler's JSON log lines among the rest (pulumi's own output)."""
    found = []
    for line in text.splitlines():
        if line.startswith('{"ts"'):
            found.append(json.loads(line))
    return found


def test_a_reconciler_killed_during_an_up_is_healed_by_the_next_start(
    kube: ControlPlane, kube_namespace: str, emulator: EmulatorHandle, make_stack: StackFactory, tmp_path: Path
) -> None:
    ns = kube_namespace
    for i in range(2):
        create(kube, ns, "services", platform_service(f"u{i}", 30300 + i))
    stack = make_stack(config(emulator, kube, ns))

    once = run([*RECONCILE, stack.name, "--once"])
    assert once.returncode == 0, once.stderr[-3000:]
    steps = [(e["event"], e.get("code")) for e in events(once.stderr)]
    # The reconciler's own events, and between its up-start and up those of the `ssh-gateway up` it started.
    assert steps == [
        ("recover", 0),
        ("up-start", None),
        ("stack-export", None),
        ("pulumi-up-start", None),
        ("pulumi-up", 0),
        ("up", 0),
    ], steps
    assert sorted(k for k in status(kube, ns, stack) if k.startswith("instance.")) == [
        "instance.u0.json",
        "instance.u1.json",
    ]

    # Six more, and a reconciler killed (with every process it started) while their creates reach Pangolin.
    for i in range(2, 8):
        create(kube, ns, "services", platform_service(f"u{i}", 30300 + i))
    emulator.reset_counters()
    log = tmp_path / "reconcile.log"
    following = start_in_session([*RECONCILE, stack.name], log)
    wait_until(lambda: emulator.counters().get(PUT_RESOURCE, 0) >= 2, "2 creates", process=following, timeout=240)
    killed = kill_tree(following)
    assert killed >= 3  # the reconciler, its `ssh-gateway up`, pulumi and its plugins

    again = run([*RECONCILE, stack.name, "--once"])
    assert again.returncode == 0, again.stderr[-3000:]
    steps = [(e["event"], e.get("code")) for e in events(again.stderr)]
    assert ("recover", 0) in steps and steps[-1] == ("up", 0), steps
    took = {e["event"]: e.get("seconds") for e in events(once.stderr) + events(again.stderr) if "seconds" in e}
    names = [f"u{i}" for i in range(8)]
    found = audit(emulator, stack, names)
    assert found.clean, (found, took)
    written = status(kube, ns, stack)
    assert sorted(k for k in written if k.startswith("instance.")) == sorted(f"instance.{n}.json" for n in names)
