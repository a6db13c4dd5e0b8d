"""The firewall at fleet scale (issue 30): the Measure table in one run, through the real CLI against the Pangolin
emulator and the Azure stand-in (`tests/integration/fake_azure.py`, which counts every write per NSG and refuses
what Azure refuses).

    .venv/bin/python -m benchmarks.firewall            # N = 1000; a fleet of 40 shards of 250 in one NSG
    .venv/bin/python -m benchmarks.firewall --quick    # N = 100; a fleet of 4 shards of 25 (for development)
    .venv/bin/python -m benchmarks.firewall --shards 8 --shard-size 250   # a smaller fleet

Static instances, port routing, firewall on, host identity on (the default). Every `up` is `ssh-gateway up`
(its own process, as CI runs it: a first `up` writes its checkpoint once, at the end).

- NSG writes (creates, updates, deletes the stand-in carried out) of a first `up` of N, a +1 and a removal, for
  each rule design (`firewall.rules: merged` and `perInstance`), each on a fresh NSG;
- the fleet: shards one after the other, each its own port sub-range, all in one NSG with the default
  `firewall.priorityBase` (each shard's rules take the first priorities free); the rules that NSG holds at the
  end, the writes per shard, the time per shard;
- a +1 in the fleet's last shard vs a +1 in a fleet of 100 (one stack), taken in turn (3 rounds, a removal
  between), wall time as the ratio of their medians within the run;
- a stack that would break each of Azure's limits (rules, priorities, addresses, name length), previewed
  against a seeded NSG: refused with one line naming the limit, and 0 writes.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ssh_gateway.core.firewall import AZURE_PRIORITY_MAX
from tests.integration.cli import pulumi
from tests.integration.fake_azure import FakeAzure, NsgWrites, fake_azure_native

from .platform import ssh_gateway_up
from .stacks import FIRST_PORT, Bench, Clock, Options, clocked, emulator, instance_names, log, open_program
from .stacks import program_config as base_config

RG, NSG = "rg-bench", "nsg-bench"
SOURCES = ["203.0.113.0/24"]


def program_config(
    emu: Any, names: list[str], *, rules: str, ports: tuple[int, int], **firewall: Any
) -> dict[str, Any]:
    """`benchmarks.stacks.program_config` with the firewall on, in the one NSG of the run (default priorityBase)."""
    fw = {"resourceGroup": RG, "nsgName": NSG, "sourceCidrs": SOURCES, "rules": rules}
    return {**base_config(emu, names, ports=ports), "ssh-gateway:firewall": {**fw, **firewall}}


def _ports(first: int, count: int) -> tuple[int, int]:
    """Twice as many ports as instances, as the platform benchmark gives."""
    return first, first + max(2 * count, 20) - 1


def _writes_since(azure: FakeAzure, before: NsgWrites) -> NsgWrites:
    now = azure.writes(RG, NSG)
    return NsgWrites(
        creates=now.creates - before.creates,
        updates=now.updates - before.updates,
        deletes=now.deletes - before.deletes,
        refused=now.refused - before.refused,
        contended=now.contended - before.contended,
    )


class UpRefused(RuntimeError):
    """An `up` that failed: its message is the run's first `error:` line."""


def _up(stack: str, log_file: Path, env: dict[str, str]) -> Clock:
    def run() -> None:
        if ssh_gateway_up(stack, log_file, env).wait() != 0:
            text = log_file.read_text()
            errors = [line.rsplit("error:", 1)[1].strip() for line in text.splitlines() if "error:" in line]
            raise UpRefused(errors[0] if errors else f"ssh-gateway up --stack {stack} failed: {text[-3000:]}")

    return clocked(run)


@dataclass(frozen=True)
class Design:
    """One rule design on one stack of N: the writes of its first `up`, a +1 and a removal."""

    rules: str
    count: int
    first: NsgWrites
    first_up: Clock
    plus_one: NsgWrites | str
    """The writes of a +1, or the line that refused it (one rule per instance: a 1,001st rule)."""
    removal: NsgWrites
    rules_held: int


def design_writes(tmp: Path, rules: str, count: int) -> Design:
    log(f"{rules}: first up of {count}, +1, then the removal of one instance")
    name = f"bench-firewall-{rules.lower()}-{count}"
    azure = FakeAzure()
    with emulator(tmp, name) as emu, fake_azure_native(azure) as debug:
        env = {"PULUMI_DEBUG_PROVIDERS": debug}
        ports = _ports(FIRST_PORT, count + 1)
        names = instance_names(count)
        bench = open_program(name, emu, program_config(emu, names, rules=rules, ports=ports), Options(env=env))
        try:
            before = azure.writes(RG, NSG)
            first_up = _up(name, tmp / f"{name}.log", env)
            first = _writes_since(azure, before)
            open_program(name, emu, program_config(emu, instance_names(count + 1), rules=rules, ports=ports))
            before = azure.writes(RG, NSG)
            plus: NsgWrites | str
            try:
                _up(name, tmp / f"{name}-plus.log", env)
                plus = _writes_since(azure, before)
            except UpRefused as refused:
                plus = f"refused at preview ({_writes_since(azure, before).accepted} writes): {refused}"
            grown = instance_names(count + 1) if isinstance(plus, NsgWrites) else names
            open_program(name, emu, program_config(emu, grown[1:], rules=rules, ports=ports))
            before = azure.writes(RG, NSG)
            _up(name, tmp / f"{name}-minus.log", env)
            removal = _writes_since(azure, before)
            return Design(rules, count, first, first_up, plus, removal, len(azure.rules(RG, NSG)))
        finally:
            bench.discard()


ROUNDS = 3
"""+1s measured in the fleet's last shard and in the baseline, taken in turn: the ratio is of their medians, so
load that comes and goes on a shared machine weighs on both."""


@dataclass
class Fleet:
    """Shards of one emulator, one NSG, `up` one after the other."""

    shards: int
    size: int
    first_ups: list[Clock] = field(default_factory=list)
    writes: list[NsgWrites] = field(default_factory=list)
    rules_held: int = 0
    addresses: int = 0
    plus_ones: list[Clock] = field(default_factory=list)
    """Each round's +1 in the last shard (a removal puts it back between rounds)."""
    plus_one_writes: NsgWrites = field(default_factory=NsgWrites)
    baseline_plus_ones: list[Clock] = field(default_factory=list)
    """Each round's +1 on a stack of 100 (its own emulator and NSG), the fleet's baseline."""

    @property
    def plus_one(self) -> Clock:
        return _median(self.plus_ones)

    @property
    def baseline_plus_one(self) -> Clock:
        return _median(self.baseline_plus_ones)


def _median(clocks: list[Clock]) -> Clock:
    return Clock(statistics.median(c.wall for c in clocks), statistics.median(c.cpu for c in clocks))


def _shard_config(emu: Any, k: int, size: int, extra: int = 0) -> dict[str, Any]:
    first = FIRST_PORT + k * 2 * size
    names = instance_names(size + extra, k * size)
    # Nothing per shard but its ports and names: its rules take the first priorities no other shard's hold.
    return program_config(emu, names, rules="merged", ports=(first, first + 2 * size - 1))


@dataclass(frozen=True)
class _Resizable:
    """A stack whose size a round changes: its config for `n` more instances, its `up`'s environment."""

    name: str
    emu: Any
    config: Callable[[int], dict[str, Any]]
    env: dict[str, str]

    def up_with(self, extra: int, log_file: Path) -> Clock:
        open_program(self.name, self.emu, self.config(extra))
        return _up(self.name, log_file, self.env)


def fleet_timing(tmp: Path, shards: int, size: int) -> Fleet:
    fleet = Fleet(shards, size)
    azure = FakeAzure()
    with ExitStack() as stack:
        emu = stack.enter_context(emulator(tmp, "fleet"))
        env = {"PULUMI_DEBUG_PROVIDERS": stack.enter_context(fake_azure_native(azure))}
        baseline = stack.enter_context(_baseline(tmp))
        benches: list[Bench] = []

        @stack.callback
        def discard() -> None:
            for bench in benches:
                bench.discard()

        for k in range(shards):
            name = f"bench-firewall-shard-{k:02d}"
            benches.append(open_program(name, emu, _shard_config(emu, k, size), Options(env=env)))
            before = azure.writes(RG, NSG)
            fleet.first_ups.append(_up(name, tmp / f"{name}.log", env))
            fleet.writes.append(_writes_since(azure, before))
            log(f"shard {k + 1}/{shards} of {size}: {fleet.first_ups[-1].wall:.0f} s, {fleet.writes[-1]}")
        held = azure.rules(RG, NSG)
        fleet.rules_held = len(held)
        fleet.addresses = sum(len(r.get("sourceAddressPrefixes") or []) or 1 for r in held.values())
        last = _Resizable(benches[-1].stack.name, emu, lambda n: _shard_config(emu, shards - 1, size, extra=n), env)
        for round_ in range(ROUNDS):
            log(f"round {round_ + 1}/{ROUNDS}: +1 in shard {shards}, +1 in a fleet of 100, then both back")
            before = azure.writes(RG, NSG)
            fleet.plus_ones.append(last.up_with(1, tmp / f"fleet-plus-{round_}.log"))
            if round_ == 0:
                fleet.plus_one_writes = _writes_since(azure, before)
            fleet.baseline_plus_ones.append(baseline.up_with(1, tmp / f"baseline-plus-{round_}.log"))
            last.up_with(0, tmp / f"fleet-minus-{round_}.log")
            baseline.up_with(0, tmp / f"baseline-minus-{round_}.log")
    return fleet


@contextmanager
def _baseline(tmp: Path) -> Iterator[_Resizable]:
    """A fleet of 100 (one stack), up, in an emulator and NSG of its own."""
    log("a fleet of 100 (one stack): the baseline")
    name = "bench-firewall-fleet-100"
    with emulator(tmp, name) as emu, fake_azure_native(FakeAzure()) as debug:
        env = {"PULUMI_DEBUG_PROVIDERS": debug}
        ports = _ports(FIRST_PORT, 101)

        def config(extra: int) -> dict[str, Any]:
            return program_config(emu, instance_names(100 + extra), rules="merged", ports=ports)

        bench = open_program(name, emu, config(0), Options(env=env))
        try:
            _up(name, tmp / f"{name}.log", env)
            yield _Resizable(name, emu, config, env)
        finally:
            bench.discard()


@dataclass(frozen=True)
class Refusal:
    limit: str
    refused: bool
    line: str
    writes: int


def _preview_error(stack: str, env: dict[str, str]) -> str:
    """The preview's one error line (the program's), or empty when it passed."""
    done = pulumi("preview", "--stack", stack, "--non-interactive", env=env)
    if done.returncode == 0:
        return ""
    lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip().startswith("error:")]
    return lines[0].removeprefix("error:").strip() if lines else (done.stdout + done.stderr).strip()[-300:]


def refusals(tmp: Path) -> list[Refusal]:
    """Each limit broken by a small stack against a seeded NSG; a preview each, then the NSG's write count."""
    cases: list[tuple[str, str, Callable[[FakeAzure], None], dict[str, Any], str]] = [
        ("1,000 rules", "perInstance", _seed_rules(998), {}, "bench-firewall-refuse-rules"),
        (
            "priorities",
            "merged",
            _seed_rules(AZURE_PRIORITY_MAX - 4090 + 1, first=4090),  # every priority from the stack's base on
            {"priorityBase": 4090},
            "bench-firewall-refuse-priority",
        ),
        (
            "4,000 addresses",
            "merged",
            _seed_addresses(3999),
            {"sourceCidrs": [*SOURCES, "198.51.100.0/24"]},
            "bench-firewall-refuse-addresses",
        ),
        ("80-character names", "merged", lambda _a: None, {}, "bench-firewall-refuse-" + "n" * 60),
    ]
    out = []
    for limit, rules, seed, firewall, name in cases:
        log(f"refusal at preview: {limit}")
        azure = FakeAzure()
        seed(azure)
        with emulator(tmp, name[:40]) as emu, fake_azure_native(azure) as debug:
            env = {"PULUMI_DEBUG_PROVIDERS": debug}
            config = program_config(emu, instance_names(3), rules=rules, ports=_ports(FIRST_PORT, 3), **firewall)
            bench = open_program(name, emu, config, Options(env=env))
            try:
                before = azure.writes(RG, NSG)
                line = _preview_error(name, env)
                writes = _writes_since(azure, before).accepted
                out.append(Refusal(limit, bool(line), line, writes))
            finally:
                bench.discard()
    return out


def _seed_rules(count: int, first: int = 200) -> Callable[[FakeAzure], None]:
    def seed(azure: FakeAzure) -> None:
        for n in range(count):
            azure.seed_rule(RG, NSG, f"other-{n}", _other_rule(first + n, ["10.0.0.0/8"]))

    return seed


def _seed_addresses(count: int) -> Callable[[FakeAzure], None]:
    def seed(azure: FakeAzure) -> None:
        prefixes = [f"10.{n // 250}.{n % 250}.0/24" for n in range(count)]
        azure.seed_rule(RG, NSG, "other-wide", _other_rule(300, prefixes))

    return seed


def _other_rule(priority: int, prefixes: list[str]) -> dict[str, Any]:
    return {
        "priority": priority,
        "direction": "Inbound",
        "access": "Allow",
        "protocol": "Tcp",
        "sourcePortRange": "*",
        "sourceAddressPrefixes": prefixes,
        "destinationAddressPrefix": "*",
        "destinationPortRange": "443",
        "description": "another tool's rule",
    }


# --- the report ---------------------------------------------------------------------------------------------


def _w(writes: NsgWrites | str) -> str:
    if isinstance(writes, str):
        return writes
    return f"**{writes.accepted}** ({writes.creates} created, {writes.updates} updated, {writes.deletes} deleted)"


def report(designs: list[Design], fleet: Fleet | None, refused: list[Refusal]) -> str:
    merged = next(d for d in designs if d.rules == "merged")
    per = next((d for d in designs if d.rules == "perInstance"), None)
    today = f"; `perInstance`: {_w(per.first)}" if per else ""
    rows = [
        (
            f"NSG writes for a first `up` of {merged.count} (one stack)",
            f"`merged`: {_w(merged.first)}{today}",
            "≤ 10 (today about 1,000)",
        ),
        (
            "NSG writes for a +1, and for a removal",
            f"`merged`: +1 {_w(merged.plus_one)}, removal {_w(merged.removal)}"
            + (f"; `perInstance`: +1 {_w(per.plus_one)}, removal {_w(per.removal)}" if per else ""),
            "≤ 2 each",
        ),
    ]
    if fleet is not None:
        total = fleet.shards * fleet.size
        rows += [
            (
                f"rules in the NSG for {total:,} instances in {fleet.shards} shards",
                f"**{fleet.rules_held}** (`merged`; {fleet.addresses} source addresses; `perInstance` would need "
                f"{total:,}, over Azure's 1,000)",
                "≤ 100 (today impossible: over 1,000)",
            ),
            (
                f"+1 in shard {fleet.shards} of a {total:,} fleet vs +1 in a fleet of 100",
                f"**{fleet.plus_one.wall / fleet.baseline_plus_one.wall:.1f}x** (medians of {ROUNDS}, taken in "
                f"turn: {fleet.plus_one.wall:.1f} s / {fleet.baseline_plus_one.wall:.1f} s; CPU "
                f"{fleet.plus_one.cpu / fleet.baseline_plus_one.cpu:.1f}x); its writes {_w(fleet.plus_one_writes)}",
                "≤ 2x",
            ),
        ]
    rows.append(
        (
            "a stack that would exceed any Azure limit",
            "; ".join(
                f"{r.limit}: {'refused at preview' if r.refused else '**NOT refused**'}, {r.writes} writes"
                for r in refused
            ),
            "refused at preview, 0 writes, naming the limit",
        )
    )
    lines = ["| figure | measured | goal |", "|---|---|---|", *(f"| {a} | {b} | {c} |" for a, b, c in rows)]
    lines += ["", "| operation | wall s | CPU s |", "|---|---|---|"]
    for d in designs:
        lines.append(f"| `{d.rules}`: first `up` of {d.count} | {d.first_up.wall:.1f} | {d.first_up.cpu:.1f} |")
    if fleet is not None:
        walls = [c.wall for c in fleet.first_ups]
        lines.append(
            f"| fleet: {fleet.shards} shards of {fleet.size}, one after the other (per shard: min {min(walls):.1f}, "
            f"max {max(walls):.1f}) | {sum(walls):.1f} | {sum(c.cpu for c in fleet.first_ups):.1f} |"
        )
        for label, clocks in (
            (f"fleet: +1 in shard {fleet.shards}", fleet.plus_ones),
            ("a fleet of 100: +1", fleet.baseline_plus_ones),
        ):
            each_wall = ", ".join(f"{c.wall:.1f}" for c in clocks)
            each_cpu = ", ".join(f"{c.cpu:.1f}" for c in clocks)
            lines.append(f"| {label}, each round | {each_wall} | {each_cpu} |")
        lines += ["", "Writes per shard: " + ", ".join(str(w.accepted) for w in fleet.writes) + "."]
    lines += ["", "Refusals, as the preview printed them:", ""]
    lines += [f"- {r.limit}: `{r.line}`" for r in refused]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 100, a fleet of 4 shards of 25")
    parser.add_argument("--count", type=int, help="N of the one-stack rows (default 1000, 100 quick)")
    parser.add_argument("--shards", type=int, help="shards of the fleet (default 40, 4 quick; 0: no fleet)")
    parser.add_argument("--shard-size", type=int, help="instances per shard (default 250, 25 quick)")
    parser.add_argument("--no-per-instance", action="store_true", help="skip the perInstance design's rows")
    args = parser.parse_args()
    count = args.count or (100 if args.quick else 1000)
    shards = args.shards if args.shards is not None else (4 if args.quick else 40)
    size = args.shard_size or (25 if args.quick else 250)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        refused = refusals(tmp)
        designs = [design_writes(tmp, "merged", count)]
        fleet = fleet_timing(tmp, shards, size) if shards else None
        if not args.no_per_instance:
            designs.append(design_writes(tmp, "perInstance", count))
    print(report(designs, fleet, refused))
    print(f"\n(run took {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
