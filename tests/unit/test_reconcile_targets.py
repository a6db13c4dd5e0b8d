"""`ssh-gateway reconcile`'s reading of a stack file: what it watches and where its Lease lives, and a stack it
cannot follow refused with one line (exit 3), before it touches a cluster."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from ssh_gateway.core.names import DiscoverFrom
from ssh_gateway.ops.cli import COMMANDS
from ssh_gateway.ops.cli import main as ssh_gateway
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.ops.reconcile.reconciler import TargetError, stack_target
from ssh_gateway.ops.reconcile.step_processes import subprocess_steps

pytestmark = pytest.mark.unit

BASE: dict[str, Any] = {
    "ssh-gateway:pangolin": {"url": "https://pangolin.example.test/v1", "orgId": "org", "siteId": 1},
    "ssh-gateway:ports": {"range": "40000-40019"},
    "ssh-gateway:gateway": {"hostTemplate": "ssh-{instance}.example.test"},
    "ssh-gateway:firewall": {"enabled": False},
    "ssh-gateway:kubernetes": {"namespace": "gpu-dev", "context": "prod"},
}
DISCOVERY = {"from": "pods", "namespaces": ["gpu-users", "gpu-staff"], "selector": {"ssh-gateway.io/expose": "true"}}


def project(tmp_path: Path, stack: str, config: dict[str, Any]) -> Path:
    (tmp_path / "Pulumi.yaml").write_text("name: ssh-gateway\nstackConfigDir: stacks\n")
    (tmp_path / "stacks").mkdir(exist_ok=True)
    (tmp_path / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}))
    return tmp_path


def test_a_stack_file_gives_the_selection_and_where_the_lease_lives(tmp_path: Path) -> None:
    work = project(tmp_path, "prod-a", {**BASE, "ssh-gateway:discovery": DISCOVERY})
    target = stack_target("prod-a", work)
    assert (target.kind, target.namespaces, dict(target.selector)) == (
        DiscoverFrom.PODS,
        ("gpu-users", "gpu-staff"),
        {"ssh-gateway.io/expose": "true"},
    )
    assert (target.status_namespace, target.context, target.project) == ("gpu-dev", "prod", "ssh-gateway")
    moved = project(tmp_path, "prod-b", {**BASE, "ssh-gateway:discovery": {**DISCOVERY, "statusNamespace": "gw"}})
    assert stack_target("prod-b", moved).status_namespace == "gw"


@pytest.mark.parametrize(
    ("stack", "config", "says"),
    [
        ("plain", BASE, "has no ssh-gateway:discovery section, so there is nothing to watch"),
        ("Prod_A", {**BASE, "ssh-gateway:discovery": DISCOVERY}, "'ssh-gateway-reconcile-Prod_A' is not a DNS name"),
        ("bad", {**BASE, "ssh-gateway:discovery": {**DISCOVERY, "from": "pod"}}, "ssh-gateway:discovery.from"),
    ],
)
def test_a_stack_it_cannot_follow_is_refused_in_one_line(
    tmp_path: Path, stack: str, config: dict[str, Any], says: str
) -> None:
    with pytest.raises(TargetError) as refused:
        stack_target(stack, project(tmp_path, stack, config))
    assert says in str(refused.value)
    assert str(refused.value).startswith(f"stack {stack}: ")


def test_the_command_refuses_a_stack_without_a_file_with_exit_3_and_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert ssh_gateway(["reconcile", "--once", "--stack", "no-such-stack-for-reconcile"]) == ExitCode.REFUSED
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "reconcile: stack no-such-stack-for-reconcile: cannot read" in err, err


def test_each_step_runs_the_command_it_names(tmp_path: Path) -> None:
    """The reconciler runs each step as `python -m ssh_gateway.ops <action>`: the project's own command, with its
    arguments."""
    runs: list[list[str]] = []

    def fake_run(argv: list[str], **_kwargs: Any) -> Any:
        runs.append(argv)
        return type("Done", (), {"returncode": 0})()

    step = subprocess_steps(ambient=True, skip_preview=True, work_dir=tmp_path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess, "run", fake_run)
        assert step("recover", "prod-a", ["--gone-host", "pod-1"]) == 0
        assert step("up", "prod-a", []) == 0
    assert [argv[1:] for argv in runs] == [
        ["-m", "ssh_gateway.ops", "recover", "--stack", "prod-a", "--gone-host", "pod-1", "--ambient"],
        ["-m", "ssh_gateway.ops", "up", "--stack", "prod-a", "--ambient", "--", "--skip-preview"],
    ]
    assert {"recover", "up"} <= {command.name for command in COMMANDS}


def test_at_most_parallel_steps_run_at_once_across_the_stacks(tmp_path: Path) -> None:
    """Each `up` is a pulumi engine with its program and providers: a reconciler of many shards runs a few at once,
    the others wait their turn (and all of them run)."""
    running, most, lock = 0, 0, threading.Lock()
    release = threading.Event()

    def fake_run(argv: list[str], **_kwargs: Any) -> Any:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(5)
        with lock:
            running -= 1
        return type("Done", (), {"returncode": 0})()

    step = subprocess_steps(ambient=True, skip_preview=False, parallel=2, work_dir=tmp_path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess, "run", fake_run)
        threads = [threading.Thread(target=step, args=("up", f"shard-{n}", [])) for n in range(6)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 5
        while running < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # the four others have had time to start, had nothing held them
        assert (running, most) == (2, 2)
        release.set()
        for thread in threads:
            thread.join(5)
    assert most == 2 and running == 0
