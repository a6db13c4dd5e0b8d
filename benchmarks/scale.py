"""Every figure of the scaling goals (issue 14) in one run, through the real CLI against the Pangolin emulator.

    .venv/bin/python -m benchmarks.scale            # N = 100 and 1000, 4 shards (~40 min on 2 cores)
    .venv/bin/python -m benchmarks.scale --quick    # N = 20 and 100, 4 shards (~2 min)

Ratios are taken within the run: the same operation on a floor made in this run, or the same operation at
another N. The floors (benchmarks/floor) have no-op providers: `bare` is one dynamic resource per instance,
`graph` is this project's resource graph for the benchmark's config (the port table, the host CA and the port
check; per instance a component with its Pangolin resource and host key, and its registered outputs; stack
outputs of the same sizes). The ratio to `graph` is what this project's code costs; the ratio to `bare` what
the structure costs besides. API calls come from the emulator's counters; engine steps and checkpoint writes per
instance from two small untimed `up`s (the slope between them, so the stack's fixed resources drop out).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.allocation import allocate
from ssh_gateway.core.ports import PortRange

from .stacks import (
    FIRST_PORT,
    HOST_IDENTITY_OFF,
    Bench,
    Clock,
    Options,
    clocked,
    emulator,
    instance_names,
    log,
    open_floor,
    open_program,
    program_config,
)

RETAIN = Options(env={"PULUMI_DIY_BACKEND_RETAIN_CHECKPOINTS": "true"})


@dataclass(frozen=True)
class ApiCalls:
    """Emulator calls made by one operation."""

    reads: int
    writes: int
    lists: int

    @classmethod
    def of(cls, counters: dict[str, int]) -> ApiCalls:
        reads = sum(n for route, n in counters.items() if route.startswith("GET "))
        lists = sum(n for route, n in counters.items() if route.startswith("GET ") and route.endswith(("s", "names")))
        return cls(reads=reads, writes=sum(counters.values()) - reads, lists=lists)

    def __str__(self) -> str:
        return f"{self.reads} reads ({self.lists} lists), {self.writes} writes"


@dataclass(frozen=True)
class Timing:
    """`up` from empty and the median no-op preview of one stack."""

    up: Clock
    preview: Clock
    state_bytes: int
    up_calls: ApiCalls | None = None
    preview_calls: ApiCalls | None = None


@dataclass(frozen=True)
class Slope:
    """Per-instance figures of a first `up`, from two sizes."""

    steps: float
    writes: float
    state_bytes: float


def measure(bench: Bench, emu: EmulatorHandle | None = None, previews: int = 3) -> Timing:
    """`up`, then `previews` no-op previews (their median), then the stack is thrown away."""
    try:
        if emu is not None:
            emu.reset_counters()
        up = bench.timed_up()
        up_calls = ApiCalls.of(emu.counters()) if emu is not None else None
        size = bench.state_bytes()
        if emu is not None:
            emu.reset_counters()
        preview = bench.timed_preview(previews)
        preview_calls = None
        if emu is not None:
            total = ApiCalls.of(emu.counters())
            preview_calls = ApiCalls(
                reads=total.reads // previews, writes=total.writes // previews, lists=total.lists // previews
            )
        return Timing(up, preview, size, up_calls, preview_calls)
    finally:
        bench.discard()


def program_timing(tmp: Path, count: int, previews: int = 3) -> Timing:
    log(f"this project, N={count}: up, {previews} no-op preview(s)")
    with emulator(tmp, f"program-{count}") as emu:
        bench = open_program(f"bench-{count}", emu, program_config(emu, instance_names(count)))
        return measure(bench, emu, previews)


def floor_timing(count: int, shape: str, previews: int = 3) -> Timing:
    log(f"{shape} floor, N={count}: up, {previews} no-op preview(s)")
    return measure(open_floor(f"bench-{shape}-{count}", count, shape), previews=previews)


def first_up_counts(open_stack: Callable[[int], Bench], count: int) -> tuple[int, int, int]:
    """(engine steps, checkpoint writes, state bytes) of the first `up` of `count` instances."""
    steps = 0

    def on_event(event: auto.EngineEvent) -> None:
        nonlocal steps
        if event.resource_pre_event is not None:
            steps += 1

    bench = open_stack(count)
    try:
        bench.timed_up(on_event)
        return steps, bench.checkpoint_writes(), bench.state_bytes()
    finally:
        bench.discard()


def slope(open_stack: Callable[[int], Bench], small: int = 10, large: int = 20) -> Slope:
    low, high = first_up_counts(open_stack, small), first_up_counts(open_stack, large)
    steps, writes, size = ((h - lo) / (large - small) for lo, h in zip(low, high, strict=True))
    return Slope(steps=steps, writes=writes, state_bytes=size)


def program_slope(tmp: Path, extra: dict[str, Any] | None = None, label: str = "") -> Slope:
    log(f"this project{label}: engine steps and checkpoint writes of a first up (N=10 and 20, untimed)")
    with emulator(tmp, f"program-slope{label.replace(' ', '-')}") as emu:
        return slope(
            lambda n: open_program(
                f"bench-steps-{n}", emu, {**program_config(emu, instance_names(n)), **(extra or {})}, RETAIN
            )
        )


def floor_slope() -> Slope:
    log("graph floor: engine steps and checkpoint writes of a first up (N=10 and 20, untimed)")
    return slope(lambda n: open_floor(f"bench-graph-steps-{n}", n, "graph", RETAIN))


@dataclass(frozen=True)
class Shards:
    """k shards of one Pangolin org, `up` at once."""

    clock: Clock
    slowest: float
    ports_bound_twice: int
    calls: ApiCalls


def shards_timing(tmp: Path, total: int, shards: int) -> Shards:
    """`total` instances as `shards` stacks of one emulator, each with its own port sub-range and names,
    all `up` at the same time from threads; the wall time until the last one ends."""
    per_shard = total // shards
    log(f"{shards} shards of {per_shard}: up at once")
    with emulator(tmp, "shards") as emu:
        benches = []
        for k in range(shards):
            first = FIRST_PORT + k * 2 * per_shard
            config = program_config(
                emu, instance_names(per_shard, k * per_shard), ports=(first, first + 2 * per_shard - 1)
            )
            benches.append(open_program(f"bench-shard-{k}", emu, config))
        try:
            emu.reset_counters()
            durations: list[float] = []
            failures: list[BaseException] = []

            def run(bench: Bench) -> None:
                start = time.perf_counter()
                try:
                    bench.stack.up()
                except BaseException as exc:  # reported below, after every shard has ended
                    failures.append(exc)
                durations.append(time.perf_counter() - start)

            def all_at_once() -> None:
                threads = [threading.Thread(target=run, args=(bench,)) for bench in benches]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()

            clock = clocked(all_at_once)
            if failures:
                raise failures[0]
            return Shards(clock, max(durations), len(emu.doubly_bound_ports()), ApiCalls.of(emu.counters()))
        finally:
            for bench in benches:
                bench.discard()


def allocator_ms(count: int = 10_000) -> float:
    names = instance_names(count)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        allocate(instances=names, port_range=PortRange(start=20000, end=39999))
        best = min(best, time.perf_counter() - start)
    return best * 1000


# --- the report ---------------------------------------------------------------------------------------------


def _x(value: float) -> str:
    return f"{value:.2f}x"


def _ratio(a: Clock, b: Clock) -> str:
    """Wall-time ratio (what the goals are about), then the CPU-time ratio (less shaken by other load)."""
    return f"{_x(a.wall / b.wall)} (CPU {_x(a.cpu / b.cpu)})"


def _kb(value: float) -> str:
    return f"{value / 1000:.2f} KB"


def report(results: dict[str, Any], small: int, large: int, shards: int) -> str:
    """The goal table, then the raw figures it is made of."""
    ours_s: Timing = results["program_small"]
    ours_l: Timing = results["program_large"]
    bare: Timing = results["bare_small"]
    graph: Timing = results["graph_small"]
    graph_l: Timing | None = results.get("graph_large")
    sharded: Shards = results["shards"]
    mine: Slope = results["program_slope"]
    mine_off: Slope = results["program_slope_off"]
    floor: Slope = results["floor_slope"]
    per_instance = (ours_l.state_bytes - ours_s.state_bytes) / (large - small)
    floor_per_instance = (graph_l.state_bytes - graph.state_bytes) / (large - small) if graph_l else None
    up_floor = f"; graph floor itself {_x(graph_l.up.wall / graph.up.wall)}" if graph_l else ""
    preview_floor = f"; graph floor itself {_x(graph_l.preview.wall / graph.preview.wall)}" if graph_l else ""
    rows = [
        (
            f"`up` of {small} vs the same-graph floor",
            f"{_ratio(ours_s.up, graph.up)}; vs the bare floor {_ratio(ours_s.up, bare.up)}",
            "≤ 1.25x",
        ),
        (
            f"no-op preview of {small} vs the same-graph floor",
            f"{_ratio(ours_s.preview, graph.preview)}; vs the bare floor {_ratio(ours_s.preview, bare.preview)}",
            "≤ 1.2x",
        ),
        (
            "state bytes per instance (static instances, host identity on: the default)",
            f"{_kb(per_instance)}; host identity off {_kb(mine_off.state_bytes)} (N=10 to 20); graph floor "
            f"{_kb(floor_per_instance) if floor_per_instance else 'not run'}",
            "≤ 2.5 KB",
        ),
        (
            "engine steps per instance (first `up`)",
            f"{mine.steps:.1f} steps, {mine.writes:.1f} checkpoint writes (host identity off: {mine_off.steps:.1f}, "
            f"{mine_off.writes:.1f}; graph floor: {floor.steps:.1f}, {floor.writes:.1f})",
            "—",
        ),
        (f"`up` of {large} fresh vs `up` of {small}", f"{_ratio(ours_l.up, ours_s.up)}{up_floor}", "≤ 20x"),
        (
            f"{large} as {shards} shards of {large // shards} at once vs `up` of {small}",
            f"{_ratio(sharded.clock, ours_s.up)}; {sharded.ports_bound_twice} ports bound twice",
            "≤ 8x",
        ),
        (
            f"no-op preview of {large} vs of {small}",
            f"{_ratio(ours_l.preview, ours_s.preview)}{preview_floor}",
            "≤ 10x",
        ),
    ]
    lines = ["| figure | measured | goal |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    lines += ["", "| operation | wall s | CPU s | state | API calls |", "|---|---|---|---|---|"]

    def row(label: str, clock: Clock, state: int | None = None, calls: ApiCalls | None = None) -> None:
        size = _kb(state) if state else ""
        lines.append(f"| {label} | {clock.wall:.1f} | {clock.cpu:.1f} | {size} | {calls or ''} |")

    measured = [
        (f"bare floor, N={small}", bare),
        (f"graph floor, N={small}", graph),
        (f"this project, N={small}", ours_s),
    ]
    if graph_l:
        measured.append((f"graph floor, N={large}", graph_l))
    measured.append((f"this project, N={large}", ours_l))
    for label, timing in measured:
        row(f"{label}: `up`", timing.up, timing.state_bytes, timing.up_calls)
        row(f"{label}: no-op preview", timing.preview, None, timing.preview_calls)
    row(
        f"{shards} shards of {large // shards}: `up` at once (slowest shard {sharded.slowest:.1f} s)",
        sharded.clock,
        None,
        sharded.calls,
    )
    lines += ["", f"allocator alone, 10 000 fresh instances: {results['allocator_ms']:.1f} ms (best of 5)"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 20 and 100 instead of 100 and 1000")
    parser.add_argument("--shards", type=int, default=4, help="how many stacks the large N is split into")
    parser.add_argument(
        "--no-large-floor", action="store_true", help="skip the graph floor at the large N (what limits the ratios)"
    )
    parser.add_argument("--json", type=Path, help="also write the raw figures to this file")
    args = parser.parse_args()
    small, large = (20, 100) if args.quick else (100, 1000)
    started = time.perf_counter()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        results["bare_small"] = floor_timing(small, "bare")
        results["graph_small"] = floor_timing(small, "graph")
        results["program_small"] = program_timing(tmp, small)
        results["program_slope"] = program_slope(tmp)
        results["program_slope_off"] = program_slope(tmp, HOST_IDENTITY_OFF, " with host identity off")
        results["floor_slope"] = floor_slope()
        # One preview at the large N: three would add minutes to a run whose ratios move by a few percent.
        results["program_large"] = program_timing(tmp, large, previews=1)
        if not args.no_large_floor:
            results["graph_large"] = floor_timing(large, "graph", previews=1)
        results["shards"] = shards_timing(tmp, large, args.shards)
    results["allocator_ms"] = allocator_ms()
    print(report(results, small, large, args.shards))
    print(f"\n(run took {time.perf_counter() - started:.0f} s)")
    if args.json:
        raw = {key: value if isinstance(value, float) else asdict(value) for key, value in results.items()}
        args.json.write_text(json.dumps(raw, indent=2))


if __name__ == "__main__":
    main()
