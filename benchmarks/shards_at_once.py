"""Shards deployed together on one NSG (issue 36, point 4): N shards' first `up`s started at once, the failed ones
re-run together (as "re-run failed jobs" does), until every shard is done. Through the real CLI, against the
Pangolin emulator and the Azure stand-in (`tests/integration/fake_azure.py`, which refuses two inbound rules at
one priority with Azure's `SecurityRuleConflict`).

    .venv/bin/python -m benchmarks.shards_at_once --shards 10             # 10 first `up`s at once
    .venv/bin/python -m benchmarks.shards_at_once --shards 40 --parallel 20   # 40, at most 20 running at once

Each shard is its own `ssh-gateway up` process (as a CI job runs it), with a few static instances in its own slice
of one `gateway.publishedRange`, `firewall.rules: merged`, the default `priorityBase`, nothing else per shard.
With `--parallel` below `--shards`, a shard starts as soon as one before it ends, so the windows still overlap:
that bounds the machine's load, not the race. Printed: per round, the shards run, done and refused (and why), the
round's wall time; at the end the NSG's rules and their priorities, and how long one shard alone takes from its
NSG read to its rule's create (what a lock around the pick would hold for each shard).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.fake_azure import FakeAzure, Nsg, fake_azure_native

from .platform import ssh_gateway_up
from .stacks import FIRST_PORT, Bench, Options, emulator, instance_names, log, open_program, program_config

RG, NSG = "rg-at-once", "nsg-at-once"
SOURCES = ["203.0.113.0/24"]
SLICE = 20
"""Ports per shard: each shard's `ports.range` is its own slice of the published range."""
CONFLICT = "SecurityRuleConflict"


class TimedAzure(FakeAzure):
    """The stand-in, with the time of each NSG read and each rule create (the benchmark's view, not Azure's)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[float] = []
        self.created: dict[str, float] = {}

    def nsg(self, where: Nsg) -> dict[str, Any]:
        self.reads.append(time.monotonic())
        return super().nsg(where)

    def create(self, where: Nsg, name: str, properties: dict[str, Any]) -> str:
        arm_id = super().create(where, name, properties)
        self.created[name] = time.monotonic()
        return arm_id


def shard_config(emu: Any, k: int, shards: int, size: int) -> dict[str, Any]:
    """Shard `k`: `size` static instances in ports `FIRST_PORT + k * SLICE` on, merged rules, one NSG."""
    first = FIRST_PORT + k * SLICE
    published = f"{FIRST_PORT}-{FIRST_PORT + shards * SLICE - 1}"
    config = program_config(emu, instance_names(size, k * size), ports=(first, first + SLICE - 1))
    gateway = {**config["ssh-gateway:gateway"], "publishedRange": published}
    firewall = {"resourceGroup": RG, "nsgName": NSG, "sourceCidrs": SOURCES, "rules": "merged"}
    return {**config, "ssh-gateway:gateway": gateway, "ssh-gateway:firewall": firewall}


@dataclass
class Round:
    """One round: the shards it ran and how each ended."""

    ran: int
    done: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    """Refused by Azure's `SecurityRuleConflict`."""
    other: dict[str, str] = field(default_factory=dict)
    """Failed otherwise: the run's first error line."""
    wall: float = 0.0


def _first_error(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if "error:" in line]
    return lines[0] if lines else text.strip()[-300:]


def run_round(stacks: list[str], tmp: Path, number: int, parallel: int, env: dict[str, str]) -> Round:
    """Every stack's `ssh-gateway up`, at most `parallel` at once, each started as soon as a slot is free."""
    result = Round(ran=len(stacks))
    lock = threading.Lock()

    def up(stack: str) -> None:
        log_file = tmp / f"{stack}-round{number}.log"
        code = ssh_gateway_up(stack, log_file, env).wait()
        text = log_file.read_text()
        with lock:
            if code == 0:
                result.done.append(stack)
            elif CONFLICT in text:
                result.conflicts.append(stack)
            else:
                result.other[stack] = _first_error(text)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(up, stacks))
    result.wall = time.perf_counter() - started
    return result


def window_alone(tmp: Path, emu: Any, env: dict[str, str], azure: TimedAzure, shards: int, size: int) -> float:
    """Seconds from the NSG read to the rule's create of one shard `up` alone (the last read before it: the
    update's own program run)."""
    name = "bench-at-once-alone"
    bench = open_program(name, emu, shard_config(emu, shards, shards + 1, size), Options(env=env))
    try:
        before = len(azure.reads)
        if ssh_gateway_up(name, tmp / f"{name}.log", env).wait() != 0:
            raise RuntimeError(_first_error((tmp / f"{name}.log").read_text()))
        created = next(t for rule, t in azure.created.items() if f".{name}." in rule)
        return created - max(t for t in azure.reads[before:] if t <= created)
    finally:
        bench.discard()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=10, help="shards started at once (default 10)")
    parser.add_argument("--parallel", type=int, help="at most this many `up`s at once (default: every shard)")
    parser.add_argument("--size", type=int, default=2, help="static instances per shard (default 2)")
    parser.add_argument("--rounds", type=int, default=8, help="give up after this many rounds (default 8)")
    args = parser.parse_args()
    parallel = args.parallel or args.shards
    azure = TimedAzure()
    with tempfile.TemporaryDirectory() as tmp_name, emulator(Path(tmp_name), "at-once") as emu:
        tmp = Path(tmp_name)
        with fake_azure_native(azure) as debug:
            env = {"PULUMI_DEBUG_PROVIDERS": debug}
            names = [f"bench-at-once-{k:02d}" for k in range(args.shards)]
            benches: list[Bench] = [
                open_program(n, emu, shard_config(emu, k, args.shards, args.size), Options(env=env))
                for k, n in enumerate(names)
            ]
            try:
                rounds: list[Round] = []
                pending = names
                while pending and len(rounds) < args.rounds:
                    log(f"round {len(rounds) + 1}: {len(pending)} shards, at most {parallel} at once")
                    rounds.append(run_round(pending, tmp, len(rounds) + 1, parallel, env))
                    done = rounds[-1]
                    log(f"  {len(done.done)} done, {len(done.conflicts)} {CONFLICT}, {len(done.other)} other")
                    if done.other:
                        raise RuntimeError(f"an `up` failed otherwise: {done.other}")
                    pending = sorted(done.conflicts)
                rules = azure.rules(RG, NSG)
                window = window_alone(tmp, emu, env, azure, args.shards, args.size)
            finally:
                for bench in benches:
                    bench.discard()
    print(f"| {args.shards} shards, at most {parallel} at once | shards run | done | {CONFLICT} | wall s |")
    print("|---|---|---|---|---|")
    for n, r in enumerate(rounds, 1):
        print(f"| round {n} | {r.ran} | {len(r.done)} | {len(r.conflicts)} | {r.wall:.0f} |")
    priorities = sorted(int(r["priority"]) for r in rules.values())
    print(f"\nrounds until every shard was done: {len(rounds)}{'' if not pending else ' (NOT all done)'}")
    print(f"rules in the NSG: {len(rules)}, priorities {priorities}")
    print(f"one shard alone, from its NSG read to its rule's create: {window:.1f} s")


if __name__ == "__main__":
    main()
