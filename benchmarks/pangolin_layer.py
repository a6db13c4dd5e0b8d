"""Benchmark of the Pangolin layer through the real CLI, against the emulator.

For each N: `pulumi up` (creating N instances) and a no-op `pulumi preview`, each as a ratio to the same
operation on a baseline stack of N dynamic resources that do nothing (benchmarks/baseline), run in this
same benchmark; API reads and writes per instance from the emulator's counters; and the allocator alone
for 10 000 instances. Run: .venv/bin/python benchmarks/pangolin_layer.py --sizes 10 100 1000
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pangolin_emulator.harness import EmulatorHandle, running_emulator
from ssh_gateway.core.allocation import allocate
from ssh_gateway.core.ports import PortRange
from ssh_gateway.ops.automation import open_stack, remove_stack
from ssh_gateway.ops.toolchain import REPO

BASELINE = REPO / "benchmarks" / "baseline"


def timed(action: Callable[[], Any]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def instances_config(emulator: EmulatorHandle, count: int) -> dict[str, Any]:
    return {
        "ssh-gateway:pangolin": {"url": emulator.url, "orgId": emulator.org_id, "siteId": emulator.site_id},
        "ssh-gateway:ports": {"range": f"40000-{40000 + max(count * 2, 20) - 1}"},
        "ssh-gateway:gateway": {"hostTemplate": "ssh-{instance}.bench.test"},
        "ssh-gateway:firewall": {"enabled": False},
        "ssh-gateway:instances": [
            {"name": f"i{n:05d}", "target": "static", "staticHost": "127.0.0.1", "staticPort": 2222}
            for n in range(count)
        ],
    }


def split_counts(counters: dict[str, int]) -> tuple[int, int, int]:
    """(reads, writes, list calls) from the emulator's per-route counters."""
    reads = sum(n for route, n in counters.items() if route.startswith("GET "))
    lists = sum(n for route, n in counters.items() if route.startswith("GET ") and route.endswith(("s", "names")))
    return reads, sum(counters.values()) - reads, lists


def baseline_times(count: int, *, wrap: bool) -> tuple[float, float]:
    """(up, median no-op preview) of N no-op dynamic resources, each in a component when `wrap`."""
    config = {"ssh-gateway-baseline:count": count, "ssh-gateway-baseline:wrap": wrap}
    stack = open_stack(f"bench-baseline-{count}", config, work_dir=BASELINE)
    try:
        return timed(stack.up), statistics.median(timed(stack.preview) for _ in range(3))
    finally:
        stack.destroy()
        remove_stack(stack)


def measure(count: int, emulator: EmulatorHandle) -> dict[str, float]:
    base_up, base_preview = baseline_times(count, wrap=False)
    wrapped_up, wrapped_preview = baseline_times(count, wrap=True)
    secrets = {"pangolin:apiKey": emulator.api_key}
    stack = open_stack(f"bench-{count}", instances_config(emulator, count), secrets=secrets)
    try:
        emulator.reset_counters()
        up = timed(stack.up)
        up_reads, up_writes, up_lists = split_counts(emulator.counters())
        emulator.reset_counters()
        preview = statistics.median(timed(stack.preview) for _ in range(3))
        pv_reads, pv_writes, _ = split_counts(emulator.counters())
    finally:
        stack.destroy()
        remove_stack(stack)
    return {
        "N": count,
        "up s": up,
        "up ratio": up / base_up,
        "preview s": preview,
        "preview ratio": preview / base_preview,
        "baseline up s": base_up,
        "baseline preview s": base_preview,
        # The same N no-op resources, each inside a component as our instances are: what the engine's
        # per-resource cost alone makes of two resources per instance.
        "up / wrapped": up / wrapped_up,
        "preview / wrapped": preview / wrapped_preview,
        "writes/instance (up)": up_writes / count,
        "reads/instance (up)": up_reads / count,
        "list calls (up)": up_lists,
        "reads (no-op preview)": pv_reads / 3,
        "writes (no-op preview)": pv_writes / 3,
    }


def allocator_ms(count: int = 10_000) -> float:
    names = [f"i{n:05d}" for n in range(count)]
    best = min(timed(lambda: allocate(instances=names, port_range=PortRange(start=20000, end=39999))) for _ in range(5))
    return best * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument(
        "--skip-checkpoints",
        action="store_true",
        help="set PULUMI_SKIP_CHECKPOINTS for every stack: the file backend then writes the state once per "
        "operation instead of once per step, which shows how much of `up` is checkpointing",
    )
    args = parser.parse_args()
    if args.skip_checkpoints:
        os.environ["PULUMI_SKIP_CHECKPOINTS"] = "true"
    rows = []
    with tempfile.TemporaryDirectory() as tmp, running_emulator(Path(tmp)) as emulator:
        for count in args.sizes:
            print(f"... N={count}", flush=True)
            rows.append(measure(count, emulator))
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(f"{row[k]:.2f}" if isinstance(row[k], float) else str(row[k]) for k in keys) + " |")
    by_n = {int(r["N"]): r for r in rows}
    if 100 in by_n and 1000 in by_n:
        print(f"preview N=1000 / N=100: {by_n[1000]['preview s'] / by_n[100]['preview s']:.2f}x")
    print(f"allocator, 10 000 fresh instances: {allocator_ms():.1f} ms (best of 5)")


if __name__ == "__main__":
    main()
