"""The file backend's options, measured: a first `up` and a no-op preview of N instances under each.

    .venv/bin/python -m benchmarks.backend_options              # N = 300, every option once
    .venv/bin/python -m benchmarks.backend_options --count 100 --rounds 2

Each option runs in its own stack against its own emulator, in rounds (every option once per round) so that
other load on the machine spreads over all of them. docs/scaling.md gives the results and each option's risk.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from pangolin_emulator.harness import running_emulator

from .stacks import Clock, Options, instance_names, open_program, program_config

OPTIONS: dict[str, Options] = {
    "defaults (scripts/pulumi.env)": Options(),
    "PULUMI_DIY_BACKEND_ZSTD": Options(env={"PULUMI_DIY_BACKEND_ZSTD": "true"}),
    "PULUMI_DIY_BACKEND_GZIP": Options(env={"PULUMI_DIY_BACKEND_GZIP": "true"}),
    "no checkpoint backups": Options(env={"PULUMI_DIY_BACKEND_DISABLE_CHECKPOINT_BACKUPS": "true"}),
    "--disable-integrity-checking": Options(flags=("--disable-integrity-checking",)),
    "ZSTD + --disable-integrity-checking": Options(
        env={"PULUMI_DIY_BACKEND_ZSTD": "true"}, flags=("--disable-integrity-checking",)
    ),
    "PULUMI_SKIP_CHECKPOINTS": Options(env={"PULUMI_SKIP_CHECKPOINTS": "true"}),
}


def measure(tmp: Path, label: str, options: Options, count: int, round_: int) -> tuple[Clock, Clock, int]:
    """(up, one no-op preview, checkpoint bytes) of `count` fresh instances with `options`."""
    with running_emulator(tmp / f"{round_}-{len(label)}-{abs(hash(label))}") as emulator:
        config = program_config(emulator, instance_names(count))
        bench = open_program(f"bench-options-{round_}", emulator, config, options)
        try:
            up = bench.timed_up()
            size = bench.state_bytes()
            return up, bench.timed_preview(repeat=1), size
        finally:
            bench.discard()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    results: dict[str, list[tuple[Clock, Clock, int]]] = {label: [] for label in OPTIONS}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for label, options in OPTIONS.items():
                print(f"... round {round_ + 1}: {label}", file=sys.stderr, flush=True)
                results[label].append(measure(Path(tmp), label, options, args.count, round_))
    base_cpu = statistics.median(up.cpu for up, _, _ in results[next(iter(OPTIONS))])
    print(f"N = {args.count}, median of {args.rounds} round(s)")
    print("| option | `up` wall s | `up` CPU s | CPU vs defaults | preview wall s | checkpoint |")
    print("|---|---|---|---|---|---|")
    for label, runs in results.items():
        up_wall = statistics.median(up.wall for up, _, _ in runs)
        up_cpu = statistics.median(up.cpu for up, _, _ in runs)
        preview = statistics.median(p.wall for _, p, _ in runs)
        size = statistics.median(s for _, _, s in runs)
        ratio = up_cpu / base_cpu
        print(f"| {label} | {up_wall:.1f} | {up_cpu:.1f} | {ratio:.2f}x | {preview:.1f} | {size / 1e6:.2f} MB |")


if __name__ == "__main__":
    main()
