"""Every row of the platform-scale goals (issue 19) in one run, through the real CLI against the Pangolin emulator.

    .venv/bin/python -m benchmarks.platform            # N = 100 and 1000, 4 shards of 250
    .venv/bin/python -m benchmarks.platform --quick    # N = 30 and 300, 4 shards of 75 (for development)

Every `up` is the platform's: `ssh-gateway up` as a process of its own, as CI runs it, timed whole. So a first
`up` pays for the preview that decides it (`ssh_gateway.ops.tools.pulumi_up.first_up_env`) and writes its
checkpoint once, at the end; every later one (the +1) writes one after each step.
`--checkpoints` adds, for comparison, first `up`s of both sizes that write every step's checkpoint (what a
plain `pulumi up` does). Ratios are taken within the run. Static instances, host identity on (the default).

- first `up` of the large N vs of the small N, one stack each;
- one more instance on a stack of each size: the median of `--plus` `up`s at the small N, one at the large;
- state bytes per instance: the slope of the compact checkpoint between 10 and 20 instances
  (`benchmarks.state_parts`, so the stack's fixed resources drop out);
- the large N as 4 shards at once, each its own `ssh-gateway up` process against one emulator, wall until
  the last ends, vs the first `up` of the small N;
- kill -9 of a first `up` of 300 (30 with `--quick`) with an NSG rule per instance (the Azure stand-in) at 3
  points, each on a fresh stack, then `ssh-gateway recover` and `ssh-gateway up`: what is left behind, counted
  by the procedure the CI test runs (`tests/integration/skip_checkpoints_kill.py`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ssh_gateway.ops.tools.pulumi_up import SKIP_CHECKPOINTS
from ssh_gateway.plumbing.toolchain import REPO, pulumi_env
from tests.integration.fake_azure import FakeAzure, fake_azure_native
from tests.integration.skip_checkpoints_kill import FIREWALL_CONFIG, KILL_POINTS, KillTrial, kill_first_up

from . import state_parts
from .stacks import (
    FIRST_PORT,
    FLOOR,
    Clock,
    Options,
    clocked,
    emulator,
    floor_config,
    instance_names,
    log,
    open_bench,
    open_floor,
    open_program,
    program_config,
)


def ssh_gateway_up(stack: str, log: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`ssh-gateway up --ambient --stack STACK` started as its own process, its output to `log` (pipes read one
    after the other could fill and stall one of several)."""
    return subprocess.Popen(  # noqa: S603 - this interpreter, the project's own module
        [sys.executable, "-m", "ssh_gateway.ops", "up", "--ambient", "--stack", stack],
        cwd=REPO,
        env={**pulumi_env(), **(env or {})},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )


def _timed_ssh_gateway_up(stack: str, log: Path, env: Mapping[str, str] | None = None) -> Clock:
    def run() -> None:
        if ssh_gateway_up(stack, log, env).wait() != 0:
            raise RuntimeError(f"ssh-gateway up --stack {stack} failed: {log.read_text()[-2000:]}")

    return clocked(run)


@dataclass(frozen=True)
class Size:
    """One stack of N instances: its first `up`, then +1s."""

    count: int
    first_up: Clock
    plus_one: Clock
    """A +1 by `ssh-gateway up`: `pulumi up --yes`, whose own preview runs first."""
    plus_one_unpreviewed: Clock
    """A +1 by `pulumi up --skip-preview` (the Automation API's): the update alone."""
    skipped_checkpoints: bool
    state_bytes: int
    plus_ones: int


def _median(clocks: list[Clock]) -> Clock:
    return Clock(wall=statistics.median(c.wall for c in clocks), cpu=statistics.median(c.cpu for c in clocks))


def size_timing(tmp: Path, count: int, plus: int) -> Size:
    log(f"N={count}: first up as `ssh-gateway up` runs it, then {plus} x +1")
    name = f"bench-platform-{count}"
    with emulator(tmp, name) as emu:
        bench = open_program(name, emu, program_config(emu, instance_names(count)))
        try:
            first = _timed_ssh_gateway_up(name, tmp / f"{name}.log")
            skipped = "PULUMI_SKIP_CHECKPOINTS" in (tmp / f"{name}.log").read_text()
            size = bench.state_bytes()
            clocks: list[Clock] = []
            unpreviewed: list[Clock] = []
            # The same range as the first `up` (twice the instances), so only the new instance changes.
            ports = (FIRST_PORT, FIRST_PORT + max(2 * count, 20) - 1)
            for extra in range(1, 2 * plus + 1):
                # The stack file rewritten with one more instance, as a person (or `instances add`) does.
                grown = open_program(name, emu, program_config(emu, instance_names(count + extra), ports=ports))
                if extra % 2:
                    clocks.append(_timed_ssh_gateway_up(name, tmp / f"{name}-{extra}.log"))
                else:
                    unpreviewed.append(grown.timed_up())
            return Size(count, first, _median(clocks), _median(unpreviewed), skipped, size, plus)
        finally:
            bench.discard()


def floor_plus_one(count: int) -> Clock:
    """A +1 (the update alone) on the same-graph floor of `count` (`benchmarks/floor`: this program's resource
    graph for static instances, with providers that do nothing): what the engine and the SDK alone cost for it."""
    log(f"N={count}: +1 on the same-graph floor")
    name = f"bench-platform-floor-{count}"
    first = floor_config(count, "graph")
    bench = open_floor(name, count, "graph", Options(env=SKIP_CHECKPOINTS))
    try:
        bench.stack.up()
        grown = {**floor_config(count + 1, "graph"), "ssh-gateway-floor:ports": first["ssh-gateway-floor:ports"]}
        return open_bench(name, grown, work_dir=FLOOR).timed_up()
    finally:
        bench.discard()


def checkpointed_up(tmp: Path, count: int) -> Clock:
    """A first `up` that writes every step's checkpoint (a plain `pulumi up`), for comparison."""
    log(f"N={count}: first up with a checkpoint after every step (plain pulumi up)")
    name = f"bench-platform-plain-{count}"
    with emulator(tmp, name) as emu:
        bench = open_program(name, emu, program_config(emu, instance_names(count)), Options())
        try:
            return bench.timed_up()
        finally:
            bench.discard()


@dataclass(frozen=True)
class ShardProcesses:
    clock: Clock
    slowest: float
    ports_bound_twice: int
    backend: str
    plus_one: Clock
    """One more instance on the first shard afterwards, by `ssh-gateway up` on the same backend."""


@contextmanager
def shared_backend(tmp: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """Azure Blob through Azurite (`ssh_gateway.local.azurite`) when the bootstrap installed it, else the file
    backend: (its name, the environment that points pulumi at it)."""
    try:
        from ssh_gateway.local.azurite import running_azurite
        from ssh_gateway.plumbing.toolchain import ToolchainMissing, toolchain_binary

        toolchain_binary("SSH_GATEWAY_AZURITE_BLOB")
    except (ImportError, ToolchainMissing) as exc:
        log(f"no Azurite ({exc}): the shards run on the file backend")
        yield "file", {}
        return
    with running_azurite(tmp / "azurite") as azurite:
        yield "Azurite (Azure Blob)", azurite.env()


def shard_processes_timing(tmp: Path, total: int, shards: int) -> ShardProcesses:
    """`total` instances as `shards` stacks of one emulator, each with its own port sub-range and names, each
    `up` by its own `ssh-gateway up` process on the shared backend, all started at once; the wall time until
    the last one ends."""
    per_shard = total // shards
    log(f"{shards} shards of {per_shard}: one `ssh-gateway up` process each, at once")
    with emulator(tmp, "shards") as emu, shared_backend(tmp) as (backend, backend_env):
        benches = []
        for k in range(shards):
            first = FIRST_PORT + k * 2 * per_shard
            config = program_config(
                emu, instance_names(per_shard, k * per_shard), ports=(first, first + 2 * per_shard - 1)
            )
            benches.append(open_program(f"bench-platform-shard-{k}", emu, config, Options(env=backend_env)))
        try:
            durations: list[float] = []

            def all_at_once() -> None:
                started = time.perf_counter()
                logs = [tmp / f"shard-{k}.log" for k in range(len(benches))]
                processes = [
                    ssh_gateway_up(bench.stack.name, log, backend_env) for bench, log in zip(benches, logs, strict=True)
                ]
                failures = []
                for process, log in zip(processes, logs, strict=True):
                    process.wait()
                    durations.append(time.perf_counter() - started)
                    if process.returncode != 0:
                        failures.append(log.read_text().strip().splitlines()[-5:])
                if failures:
                    raise RuntimeError(f"{len(failures)} shard(s) failed: {failures}")

            clock = clocked(all_at_once)
            bound_twice = len(emu.doubly_bound_ports())
            log(f"a shard of {per_shard}: +1")
            ports = (FIRST_PORT, FIRST_PORT + 2 * per_shard - 1)
            grown = program_config(emu, instance_names(per_shard + 1), ports=ports)
            open_program(benches[0].stack.name, emu, grown, Options(env=backend_env))
            plus_one = _timed_ssh_gateway_up(benches[0].stack.name, tmp / "shard-0-plus-one.log", backend_env)
            return ShardProcesses(clock, max(durations), bound_twice, backend, plus_one)
        finally:
            for bench in benches:
                bench.discard()


def kill_trials(tmp: Path, count: int) -> list[KillTrial]:
    """A first `up` of `count` killed at each of `KILL_POINTS`, a fresh stack, emulator and stand-in each."""
    trials = []
    for share in KILL_POINTS:
        log(f"N={count}: first up killed at {share:.0%} of its creates, then recover and up")
        name = f"bench-platform-kill-{share * 100:.0f}"
        logs = tmp / name
        logs.mkdir()
        azure = FakeAzure()
        with emulator(tmp, name) as emu, fake_azure_native(azure) as debug:
            env = {"PULUMI_DEBUG_PROVIDERS": debug}
            config = {**program_config(emu, instance_names(count)), **FIREWALL_CONFIG}
            bench = open_program(name, emu, config, Options(env=env))
            try:
                trials.append(kill_first_up(emu, azure, bench.stack, instance_names(count), share, logs, env=env))
            finally:
                bench.discard()
        log(trials[-1].summary())
    return trials


def _kill_row(trials: list[KillTrial]) -> str:
    def total(count: Callable[[KillTrial], int]) -> int:
        return sum(count(t) for t in trials)

    orphans = total(lambda t: len(t.pangolin.orphans) + len(t.rules.orphans) + len(t.kube.orphans))
    failed = [f"{t.share:.0%}" for t in trials if not t.clean]
    return (
        f"**{orphans}** orphans, **{total(lambda t: len(t.pangolin.twins))}** twins, "
        f"**{total(lambda t: t.pangolin.pending)}** pending, "
        f"**{total(lambda t: len(t.pangolin.doubly_bound))}** ports bound twice, "
        f"{total(lambda t: len(t.moved))} ports moved; preview clean "
        f"{sum(t.preview_clean for t in trials)}/{len(trials)}; "
        f"{total(lambda t: len(t.pangolin.missing) + len(t.rules.missing) + len(t.rules.wrong_port))} instances "
        f"not served or not opened" + (f"; NOT clean at {', '.join(failed)}" if failed else "")
    )


def state_per_instance() -> float:
    log("state bytes per instance: first ups of 10 and 20 (untimed)")
    return state_parts.measure_program("host identity on", {}, 10)["total"]


# --- the report ---------------------------------------------------------------------------------------------


def _x(value: float) -> str:
    return f"{value:.1f}x"


def _ratio(a: Clock, b: Clock) -> str:
    return f"**{_x(a.wall / b.wall)}** (CPU {_x(a.cpu / b.cpu)})"


def report(results: dict[str, Any], shards: int) -> str:
    small: Size = results["small"]
    large: Size = results["large"]
    sharded: ShardProcesses = results["shards"]
    plain = results.get("checkpointed")
    kills: list[KillTrial] = results["kill"]
    floor_small, floor_large = results["floor_plus_one"]
    plain_note = ""
    if plain:
        plain_small, plain_large = plain
        plain_note = (
            f"; with every step's checkpoint {_ratio(plain_large, plain_small)} "
            f"({plain_large.wall:.0f} s against {large.first_up.wall:.0f} s)"
        )
    rows = [
        (
            f"first `up` of {large.count} vs first `up` of {small.count}, one stack",
            f"{_ratio(large.first_up, small.first_up)}{plain_note}",
            "≤ 12x",
        ),
        (
            f"one more instance on a stack of {large.count} vs on a stack of {small.count}",
            f"{_ratio(large.plus_one, small.plus_one)} ({large.plus_one.wall:.1f} s / {small.plus_one.wall:.1f} s); "
            f"the update alone (`--skip-preview`) {_ratio(large.plus_one_unpreviewed, small.plus_one_unpreviewed)} "
            f"({large.plus_one_unpreviewed.wall:.1f} s / {small.plus_one_unpreviewed.wall:.1f} s); "
            f"the same-graph floor's update alone {_ratio(floor_large, floor_small)} "
            f"({floor_large.wall:.1f} s / {floor_small.wall:.1f} s)",
            "≤ 3x",
        ),
        (
            "state bytes per instance (static instances, host identity on)",
            f"**{results['state_per_instance']:.0f}**",
            "≤ 2500",
        ),
        (
            f"{large.count} as {shards} shards of {large.count // shards}, concurrent, separate processes, "
            f"{sharded.backend} backend, wall vs `up` of {small.count}",
            f"{_ratio(sharded.clock, small.first_up)}; {sharded.ports_bound_twice} ports bound twice",
            "≤ 8x",
        ),
        (
            f"kill -9 during a first `up` of {kills[0].planned // 2} at {len(kills)} points → `recover`, `up`",
            _kill_row(kills),
            "0 orphans, twins, pending, ports bound twice; preview clean",
        ),
    ]
    lines = ["| figure | measured | goal |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    lines += ["", "| operation | wall s | CPU s |", "|---|---|---|"]

    def row(label: str, clock: Clock) -> None:
        lines.append(f"| {label} | {clock.wall:.1f} | {clock.cpu:.1f} |")

    for size in (small, large):
        how = "checkpoint once, at the end" if size.skipped_checkpoints else "a checkpoint after every step"
        row(f"N={size.count}: first `up` ({how}; state {size.state_bytes / 1e6:.2f} MB)", size.first_up)
        row(f"N={size.count}: +1, `ssh-gateway up` (median of {size.plus_ones})", size.plus_one)
        row(f"N={size.count}: +1, `pulumi up --skip-preview` (median of {size.plus_ones})", size.plus_one_unpreviewed)
    for size, clock in ((small, floor_small), (large, floor_large)):
        row(f"N={size.count}: +1 on the same-graph floor, `pulumi up --skip-preview`", clock)
    if plain:
        for count, clock in zip((small.count, large.count), plain, strict=True):
            row(f"N={count}: first `up`, a checkpoint after every step", clock)
    row(
        f"{shards} shards of {large.count // shards} at once (slowest {sharded.slowest:.1f} s)",
        sharded.clock,
    )
    row(f"a shard of {large.count // shards}: +1, `ssh-gateway up` (Azurite when installed)", sharded.plus_one)
    lines += ["", *(f"- {trial.summary()}" for trial in kills)]
    return "\n".join(lines)


def _plain(value: Any) -> Any:
    return asdict(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 30 and 300 instead of 100 and 1000")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--plus", type=int, default=3, help="+1 `up`s at the small N (their median)")
    parser.add_argument("--checkpoints", action="store_true", help="also first `up`s with every checkpoint")
    parser.add_argument("--json", type=Path, help="also write the raw figures to this file")
    parser.add_argument("--kill-size", type=int, help="instances of the killed first `up`s (default 300, 30 quick)")
    args = parser.parse_args()
    small, large = (30, 300) if args.quick else (100, 1000)
    started = time.perf_counter()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        results["state_per_instance"] = state_per_instance()
        results["small"] = size_timing(tmp, small, args.plus)
        results["large"] = size_timing(tmp, large, 1)
        results["floor_plus_one"] = (floor_plus_one(small), floor_plus_one(large))
        if args.checkpoints:
            results["checkpointed"] = (checkpointed_up(tmp, small), checkpointed_up(tmp, large))
        results["shards"] = shard_processes_timing(tmp, large, args.shards)
        results["kill"] = kill_trials(tmp, args.kill_size or (30 if args.quick else 300))
    print(report(results, args.shards))
    print(f"\n(run took {time.perf_counter() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=_plain))


if __name__ == "__main__":
    main()
