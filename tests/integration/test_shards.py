"""Scale-out by stacks (docs/scaling.md): two shards of one Pangolin org, each with its own port sub-range and
instance names, `up` at the same time through the real CLI; then one ssh config and one known_hosts merged from
both shards' outputs, read back by the real `ssh -G` and `ssh-keygen -F`; and an instance added to one shard
leaves the other with nothing to do. On the way: each instance's resources keep one recorded frame in state.

The merge is done here from the stacks' outputs through the Automation API; `ssh-gateway ssh-config --stack A
--stack B` is the user's command for it."""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.names import instance_of

from .conftest import StackFactory, exported_resources, stack_config, static_instance

pytestmark = pytest.mark.integration

# Disjoint sub-ranges of one org: a shard's allocator never sees the other's ports as its own or as free.
SHARDS = {"a": (40100, 40109), "b": (40110, 40119)}


@dataclass
class Shard:
    stack: auto.Stack
    ports: range
    instances: list[dict[str, Any]]


def host_key(tmp_path: Path, name: str) -> str:
    """A fresh Ed25519 public host key, made by the real ssh-keygen."""
    key = tmp_path / f"{name}_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(key)], check=True)
    return key.with_suffix(".pub").read_text().strip()


def shard_config(emulator: EmulatorHandle, ports: range, instances: list[dict[str, Any]]) -> dict[str, Any]:
    return stack_config(emulator, instances, port_range=f"{ports[0]}-{ports[-1]}")


def timed_up(stack: auto.Stack) -> tuple[float, float, dict[str, Any]]:
    """(start, end, outputs) of one `up`."""
    start = time.monotonic()
    result = stack.up()
    return start, time.monotonic(), {key: value.value for key, value in result.outputs.items()}


def ssh_g(config: Path, alias: str) -> dict[str, str]:
    """What the real ssh client would use for `alias` with only `config` read (`ssh -G`)."""
    done = subprocess.run(["ssh", "-G", "-F", str(config), alias], capture_output=True, text=True, check=True)
    return dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)


def test_two_shards_up_at_once_then_one_ssh_config(
    emulator: EmulatorHandle, make_stack: StackFactory, tmp_path: Path
) -> None:
    shards: dict[str, Shard] = {}
    for label, (first, last) in SHARDS.items():
        ports = range(first, last + 1)
        names = [f"{label}-{n:02d}" for n in range(3)]
        instances = [static_instance(name, hostKey=host_key(tmp_path, name)) for name in names]
        shards[label] = Shard(make_stack(shard_config(emulator, ports, instances)), ports, instances)

    # Both `up`s at once: neither waits for the other (no shared lock, no shared state but the org).
    with ThreadPoolExecutor(max_workers=len(shards)) as pool:
        runs = dict(zip(shards, pool.map(lambda s: timed_up(s.stack), shards.values()), strict=True))
    starts, ends = [run[0] for run in runs.values()], [run[1] for run in runs.values()]
    assert max(starts) < min(ends), "the shards' `up`s did not overlap in time"

    # Each shard allocated inside its own sub-range; nothing in the org is bound twice.
    bound: list[int] = []
    for label, (_, _, outputs) in runs.items():
        allocations: dict[str, int] = outputs["allocations"]
        assert sorted(allocations) == [i["name"] for i in shards[label].instances]
        assert all(port in shards[label].ports for port in allocations.values()), allocations
        bound += allocations.values()
    assert len(bound) == len(set(bound)) == 6
    assert emulator.doubly_bound_ports() == {}
    assert sorted(r["proxyPort"] for r in emulator.state()["resources"]) == sorted(bound)

    # What a shard's state keeps per instance: no recorded stack, and as source position the program line that
    # declared the resource.
    for resource in exported_resources(shards["a"].stack):
        if instance_of(resource["urn"]) is not None:
            assert "stackTrace" not in resource, resource["urn"]
            assert resource["sourcePosition"].startswith("project:///components/"), resource["sourcePosition"]

    # One ssh config and one known_hosts for the user, merged from both shards' outputs.
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("".join(f"{run[2]['knownHosts']}\n" for run in runs.values()))
    config = tmp_path / "ssh_config"
    config.write_text("\n".join(run[2]["sshConfig"] for run in runs.values()))
    for label, (_, _, outputs) in runs.items():
        name = shards[label].instances[1]["name"]
        endpoint = outputs["endpoints"][name]
        resolved = ssh_g(config, f"ssh-{name}")
        assert resolved["hostname"] == endpoint["host"] == f"ssh-{name}.example.test"
        assert int(resolved["port"]) == endpoint["port"] == outputs["allocations"][name]
        found = subprocess.run(
            ["ssh-keygen", "-F", f"[{endpoint['host']}]:{endpoint['port']}", "-f", str(known_hosts)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert found.returncode == 0, f"no known_hosts line for {name}"
        assert shards[label].instances[1]["hostKey"].split()[1] in found.stdout

    # Adding an instance touches its own shard only: the other previews with nothing to do.
    grown = shards["a"]
    grown.instances.append(static_instance("a-03"))
    make_stack(shard_config(emulator, grown.ports, grown.instances), name=grown.stack.name)
    added = grown.stack.up()
    assert added.summary.resource_changes is not None
    # the component, its Pangolin resource and its host key
    assert added.summary.resource_changes.get(auto.OpType.CREATE) == 3
    assert added.outputs["allocations"].value["a-03"] in grown.ports
    untouched = shards["b"].stack.preview()
    assert set(untouched.change_summary) == {auto.OpType.SAME}, untouched.change_summary
    assert emulator.doubly_bound_ports() == {}
