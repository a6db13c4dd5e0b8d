"""Stacks on a real shared state backend: Azure Blob, served by Azurite (ssh_gateway/local/azurite.py), through the
real CLI. `up`, `preview` and the drift check on it; `recover` with the lock blobs a killed `up` leaves (a dead
process of this host: cleared; another host's: refused, exit 3); two "CI runners" (each its own PULUMI_HOME)
whose `up`s of one stack overlap; and k shards deployed at once from separate processes, merged into one ssh
config by `ssh-gateway ssh-config --ambient --stack …` and read back by the real `ssh -G`; and the up workflow's
deploy step (`ssh-gateway up --ambient` with the policy pack) as bash runs it, on a new stack and then again.

Every runner is a process environment: the offline toolchain's, with the backend's variables (`Azurite.env()`)
and a PULUMI_HOME of its own, as two CI jobs on two machines would have."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.local import azurite as azurite_module
from ssh_gateway.local.azurite import Azurite
from ssh_gateway.ops.shared.automation import open_stack, remove_stack, state_file, workspace_options
from ssh_gateway.plumbing.loopback import free_port
from ssh_gateway.plumbing.toolchain import REPO, pulumi_env

from .cli import pulumi, run
from .conftest import change_by_hand, stack_config, static_instance
from .reliability import PUT_RESOURCE, audit, kill_tree, recover, show, start_up, wait_until

pytestmark = pytest.mark.integration

SSH_GATEWAY = str(REPO / ".venv" / "bin" / "ssh-gateway")
PROJECT = "ssh-gateway"
LOCKED = "the stack is currently locked by 1 lock(s)"

SharedStackFactory = Callable[..., auto.Stack]


def runner(azurite: Azurite, home: Path) -> dict[str, str]:
    """One CI runner's environment on the shared backend: the backend's variables and a PULUMI_HOME of its own."""
    home.mkdir(parents=True, exist_ok=True)
    return {**azurite.env(), "PULUMI_HOME": str(home)}


def blobs(azurite: Azurite, prefix: str) -> list[str]:
    with azurite.container_client() as container:
        return sorted(blob.name for blob in container.list_blobs(name_starts_with=prefix))


def lock_prefix(stack: auto.Stack) -> str:
    return f".pulumi/locks/organization/{PROJECT}/{stack.name}/"


@pytest.fixture
def make_shared_stack(emulator: EmulatorHandle, azurite: Azurite, tmp_path: Path) -> Iterator[SharedStackFactory]:
    """Stacks on the Azurite backend, made by the runner `env` (default: a runner of their own); destroyed and
    removed afterwards."""
    made: list[auto.Stack] = []

    def make(config: dict[str, Any], *, env: dict[str, str] | None = None, name: str | None = None) -> auto.Stack:
        env = env or runner(azurite, tmp_path / f"home-{len(made)}")
        stack = open_stack(
            name or f"it-{uuid.uuid4().hex[:8]}", config, secrets={"pangolin:apiKey": emulator.api_key}, env=env
        )
        made.append(stack)
        return stack

    yield make
    for stack in made:
        try:
            stack.destroy()
        finally:
            remove_stack(stack)


# --- the local command ------------------------------------------------------------------------------------------


def test_local_backend_starts_azurite_the_pinned_cli_logs_in_and_it_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # In-process on a free port and a temporary directory: a local backend of the user's (10000) is left alone.
    monkeypatch.setattr(azurite_module, "BACKEND_ROOT", tmp_path / "local-backend")
    monkeypatch.setattr(azurite_module, "BACKEND_STATE", tmp_path / "local-backend" / "state.json")
    port = free_port()
    monkeypatch.setattr(azurite_module, "BACKEND_PORT", port)
    assert azurite_module.run("start") == 0
    try:
        started = capsys.readouterr().out
        url = f"azblob://pulumi-state?localemu=true&domain=127.0.0.1:{port}&protocol=http"
        assert f"export PULUMI_BACKEND_URL='{url}'" in started
        assert "export AZURE_STORAGE_ACCOUNT='devstoreaccount1'" in started
        env = {**Azurite.from_json((tmp_path / "local-backend" / "state.json").read_text()).env()}
        env["PULUMI_HOME"] = str(tmp_path / "home")
        env.pop("PULUMI_BACKEND_URL")  # `pulumi login URL` alone must reach it
        login = pulumi("login", url, env=env)
        assert login.returncode == 0, login.stderr
        assert f"Logged in to {os.uname().nodename} as" in login.stdout and url in login.stdout
        assert azurite_module.run("status") == 0
        assert "running, ready" in capsys.readouterr().out
    finally:
        assert azurite_module.run("stop") == 0
    assert azurite_module.run("status") == 3


# --- up, preview, the drift check -------------------------------------------------------------------------------


def test_up_preview_and_drift_check_on_azure_blob(
    emulator: EmulatorHandle, azurite: Azurite, make_shared_stack: SharedStackFactory, tmp_path: Path
) -> None:
    env = runner(azurite, tmp_path / "ci")
    stack = make_shared_stack(stack_config(emulator, [static_instance("a"), static_instance("b")]), env=env)
    ports = stack.up().outputs["allocations"].value
    assert sorted(ports) == ["a", "b"]

    # The state is a blob in the container, and nothing of it is in the checkout's file backend.
    assert f".pulumi/stacks/{PROJECT}/{stack.name}.json" in blobs(azurite, f".pulumi/stacks/{PROJECT}/")
    assert not state_file(stack).exists()
    assert blobs(azurite, lock_prefix(stack)) == []  # the up let go of its lock
    stack.preview(expect_no_changes=True)

    drift_check = [SSH_GATEWAY, "drift-check", "--ambient", stack.name]
    clean = run(drift_check, env=env)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.startswith(f"No drift in stack {stack.name}")
    change_by_hand(emulator, "b", proxyPort=40015)
    drifted = run(drift_check, env=env)
    assert drifted.returncode == 1, drifted.stdout + drifted.stderr
    assert "  - b-pangolin (pulumi-python:dynamic/pangolin:TcpResource, instance b): changed outside Pulumi" in (
        drifted.stdout
    )
    assert f"      proxyPort: 40015 → {ports['b']}" in drifted.stdout
    stack.up(refresh=True)
    assert run(drift_check, env=env).returncode == 0


# --- recover: the lock blobs of a killed up ---------------------------------------------------------------------


def test_recover_clears_a_dead_runs_lock_blob_and_refuses_another_hosts(
    emulator: EmulatorHandle, azurite: Azurite, make_shared_stack: SharedStackFactory, tmp_path: Path
) -> None:
    names = [f"i-{n:02d}" for n in range(12)]
    env = runner(azurite, tmp_path / "ci")
    stack = make_shared_stack(stack_config(emulator, [static_instance(n) for n in names]), env=env)
    emulator.set_faults(0.3, seed=4, kinds=("slow",), delay=0.3)  # a slow, healthy run, killed midway
    up = start_up(stack, tmp_path / "up.log", env=env)
    wait_until(lambda: emulator.counters().get(PUT_RESOURCE, 0) >= 4, "4 creates", process=up, timeout=180)
    kill_tree(up)
    emulator.set_faults(0.0)
    [ours] = blobs(azurite, lock_prefix(stack))
    with azurite.container_client() as container:
        held = json.loads(container.download_blob(ours).readall())
    assert (held["pid"], held["hostname"]) == (up.pid, os.uname().nodename)
    blocked = pulumi("up", "--yes", "--skip-preview", "--non-interactive", "--stack", stack.name, env=env)
    assert blocked.returncode != 0 and LOCKED in blocked.stderr, blocked.stderr

    # A second lock, of a runner on another machine: it cannot be checked from here, so nothing is touched.
    theirs = f"{lock_prefix(stack)}{uuid.uuid4()}.json"
    foreign = {"pid": 4242, "username": "runner", "hostname": "ci-runner-elsewhere", "timestamp": held["timestamp"]}
    with azurite.container_client() as container:
        container.upload_blob(theirs, json.dumps(foreign).encode())
    refused = recover(stack, "--ambient", env=env)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "locked by pid 4242 on host 'ci-runner-elsewhere', which cannot be checked from here" in refused.stderr
    assert "(nothing was changed)" in refused.stderr
    assert blobs(azurite, lock_prefix(stack)) == sorted([ours, theirs])
    assert audit(emulator, stack, names).pending > 0  # the pending creates are still there too

    # Once the operator knows that host is gone and names it (as `ssh-gateway reconcile` names a deleted pod whose
    # Lease it took over), recover clears its lock and the dead local one.
    recovered = recover(stack, "--ambient", "--json", "--gone-host", "ci-runner-elsewhere", env=env)
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    report = json.loads(recovered.stdout)
    assert "removed the lock of pid 4242 on ci-runner-elsewhere: that host is gone" in report["done"]
    assert f"removed the lock of pid {up.pid} on {os.uname().nodename}: that process is gone" in report["done"]
    assert blobs(azurite, lock_prefix(stack)) == []
    between = audit(emulator, stack, names)
    assert (between.pending, between.orphans, between.twins) == (0, [], {}), between

    stack.up()
    assert audit(emulator, stack, names).clean
    stack.preview(expect_no_changes=True)


# --- two CI runners, one stack ----------------------------------------------------------------------------------


def test_two_runners_overlapping_ups_of_one_stack_one_fails_on_the_lock_and_nothing_is_lost(
    emulator: EmulatorHandle,
    azurite: Azurite,
    make_shared_stack: SharedStackFactory,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    names = [f"r-{n:02d}" for n in range(10)]
    first, second = runner(azurite, tmp_path / "runner-1"), runner(azurite, tmp_path / "runner-2")
    stack = make_shared_stack(stack_config(emulator, [static_instance(n) for n in names]), env=first)
    emulator.set_faults(0.3, seed=7, kinds=("slow",), delay=0.3)  # long enough for the second to start inside it
    up = start_up(stack, tmp_path / "runner-1.log", env=first)
    wait_until(lambda: blobs(azurite, lock_prefix(stack)) != [], "runner 1's lock blob", process=up, timeout=120)

    loser = pulumi("up", "--yes", "--skip-preview", "--non-interactive", "--stack", stack.name, env=second)

    assert up.wait(timeout=600) == 0, (tmp_path / "runner-1.log").read_text()[-2000:]
    lines = loser.stderr.splitlines()
    at = next((n for n, line in enumerate(lines) if LOCKED in line), len(lines))
    error = lines[at].strip() if at < len(lines) else ""
    holder = lines[at + 1].strip() if at + 1 < len(lines) else ""
    show(pytestconfig, f"two runners: the second `up` failed (exit {loser.returncode}) with:\n  {error}\n  {holder}")
    assert loser.returncode != 0, loser.stdout
    assert error.startswith(f"error: {LOCKED}. Either wait for the other process(es) to end"), loser.stderr
    assert f"(pid {up.pid})" in loser.stderr  # it names who holds the lock
    emulator.set_faults(0.0)
    assert audit(emulator, stack, names).clean  # nothing lost, no twin, no orphan

    # The second runner's next `up` (its job re-run) converges: nothing left to do.
    again = auto.select_stack(stack.name, work_dir=str(REPO), opts=workspace_options(env=second))
    result = again.up()
    assert set(result.summary.resource_changes or {}) == {"same"}, result.summary.resource_changes
    assert audit(emulator, stack, names).clean


# --- k shards at once, one ssh config -----------------------------------------------------------------------------

SHARDS = {"a": 40200, "b": 40210, "c": 40220}
"""Each shard's sub-range start (10 ports each, disjoint), as docs/scaling.md lays them out."""


def test_three_shards_up_at_once_from_separate_processes_then_one_ssh_config(
    emulator: EmulatorHandle, azurite: Azurite, make_shared_stack: SharedStackFactory, tmp_path: Path
) -> None:
    stacks: dict[str, auto.Stack] = {}
    envs: dict[str, dict[str, str]] = {}
    for label, start in SHARDS.items():
        envs[label] = runner(azurite, tmp_path / f"runner-{label}")
        instances = [static_instance(f"{label}-{n}") for n in range(3)]
        config = stack_config(emulator, instances, port_range=f"{start}-{start + 9}")
        stacks[label] = make_shared_stack(config, env=envs[label])

    # One `pulumi up` process per shard, all at once, as a matrix's jobs run.
    ups = {label: start_up(stack, tmp_path / f"up-{label}.log", env=envs[label]) for label, stack in stacks.items()}
    running_together = False
    while any(up.poll() is None for up in ups.values()):
        running_together |= all(up.poll() is None for up in ups.values()) and all(
            blobs(azurite, lock_prefix(stack)) for stack in stacks.values()
        )
        time.sleep(0.1)
    for label, up in ups.items():
        assert up.wait(timeout=600) == 0, (tmp_path / f"up-{label}.log").read_text()[-2000:]
    assert running_together, "the shards' `up`s never held their locks at the same time"
    assert emulator.doubly_bound_ports() == {}

    # One ssh config for the user, merged from every shard's outputs on the shared backend.
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    merge = [SSH_GATEWAY, "ssh-config", "--ambient", "--write"]
    merge += [arg for stack in stacks.values() for arg in ("--stack", stack.name)]
    wrote = run(merge, env={**envs["a"], "HOME": str(home)})
    assert wrote.returncode == 0, wrote.stdout + wrote.stderr
    for label, stack in stacks.items():
        outputs = {key: value.value for key, value in stack.outputs().items()}
        allocations: dict[str, int] = outputs["allocations"]
        assert all(SHARDS[label] <= port <= SHARDS[label] + 9 for port in allocations.values()), allocations
        known_hosts = home / ".ssh" / "known_hosts.d" / f"ssh-gateway-{stack.name}"
        # The shard's CA line(s), as its knownHosts output has them, in the shard's own known_hosts file.
        assert set(outputs["knownHosts"].splitlines()) <= set(known_hosts.read_text().splitlines())
        for name, port in allocations.items():
            resolved = ssh_g(home, f"ssh-{name}")
            assert (resolved["hostname"], resolved["port"]) == (f"ssh-{name}.example.test", str(port))
            assert resolved["userknownhostsfile"] == str(known_hosts)


def ssh_g(home: Path, alias: str) -> dict[str, str]:
    """What the real ssh makes of the user's config for `alias` (`ssh -G`: parse only, no connection)."""
    done = subprocess.run(
        ["ssh", "-F", str(home / ".ssh" / "config"), "-G", alias], capture_output=True, text=True, check=True
    )
    return {key: value for key, _, value in (line.partition(" ") for line in done.stdout.splitlines())}


# --- the up workflow's step ------------------------------------------------------------------------------------


def test_the_up_jobs_step_deploys_a_new_shard_with_ssh_gateway_up_then_a_second_run_changes_nothing(
    emulator: EmulatorHandle, azurite: Azurite, make_shared_stack: SharedStackFactory, tmp_path: Path
) -> None:
    """`.github/workflows/up-stack.yml`'s `up` and summary steps, run by bash as a runner runs them (`shell: bash`,
    ssh-gateway on PATH, the job's environment), on a stack of the shared backend."""
    job = yaml.safe_load((REPO / ".github" / "workflows" / "up-stack.yml").read_text())["jobs"]["up"]
    [up_step] = [s for s in job["steps"] if s.get("id") == "up"]
    [summary_step] = [s for s in job["steps"] if s.get("name") == "Summary"]
    stack = make_shared_stack(stack_config(emulator, [static_instance("a"), static_instance("b")]))
    summary = tmp_path / "step-summary.md"
    env = {
        **runner(azurite, tmp_path / "ci"),
        "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{pulumi_env()['PATH']}",
        "STACK": stack.name,
        "RUNNER_TEMP": str(tmp_path),
        "GITHUB_STEP_SUMMARY": str(summary),
    }

    def step(run_text: str) -> subprocess.CompletedProcess[str]:
        return run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", run_text], env=env)

    first = step(up_step["run"])
    assert first.returncode == 0, first.stdout[-3000:]
    # A new stack of Pangolin resources only: recover heals a lost first up of it, so its checkpoint is written once.
    assert f"up {stack.name}: a first up; the checkpoint is written once, at the end" in first.stdout
    # Its decision preview took the policy pack, so pulumi up's own preview was skipped; the daily run keeps it.
    assert "Previewing update" not in first.stdout and "Updating (" in first.stdout, first.stdout[-3000:]
    assert "ssh-gateway-guardrails|local|policy" in first.stdout and "[mandatory]" not in first.stdout  # it gated
    assert sorted(stack.outputs()["allocations"].value) == ["a", "b"]
    assert blobs(azurite, lock_prefix(stack)) == []
    assert step(summary_step["run"]).returncode == 0
    # The update's own result (not its preview's, which the output has first): what changed, the packs, the time.
    shown = summary.read_text()
    assert re.match(rf"### ssh-gateway up: `{stack.name}`\n```\nResources:\n    \+ \d+ created\n", shown), shown
    assert shown.count("Resources:") == 1 and "ssh-gateway-guardrails" in shown and "\nDuration: " in shown

    second = step(up_step["run"])  # the daily run: a stack that exists keeps every checkpoint, and has nothing to do
    assert second.returncode == 0, second.stdout[-3000:]
    assert "a first up" not in second.stdout
    assert "Previewing update" in second.stdout
    assert "unchanged" in second.stdout.split("Resources:")[-1]
    stack.preview(expect_no_changes=True)
