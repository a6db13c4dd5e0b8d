"""Where one instance's bytes of state go, part by part, with the host identity on and off.

    .venv/bin/python -m benchmarks.state_parts            # N = 10 and 20 static instances, each config

Two stacks per config (N and 2N, untimed) against one emulator, and two of the same-graph floor
(benchmarks/floor, no-op providers) beside them; every figure is the slope between them, so
the stack's fixed resources (the CA, the port check) drop out and what the port table and the stack outputs
add per instance stays in. Bytes are those of the checkpoint as the file backend stores it; a part is a
resource type's inputs, outputs, dependencies and the rest of its record, or one stack output.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from pangolin_emulator.harness import running_emulator
from ssh_gateway.ops.shared.automation import state_file

from .stacks import HOST_IDENTITY_OFF, Bench, instance_names, open_floor, open_program, program_config

CONFIGS: Final[dict[str, dict[str, Any]]] = {
    "host identity on": {},
    "host identity off": HOST_IDENTITY_OFF,
}
_PARTS: Final = ("inputs", "outputs", "dependencies", "rest")
_DEPENDENCIES: Final = ("dependencies", "propertyDependencies")


def _size(value: Any) -> int:
    # As the file backend writes the checkpoint: compact.
    return len(json.dumps(value, separators=(",", ":")))


def _type_name(token: str) -> str:
    return token.rsplit(":", 1)[-1]


def _resource_parts(resource: Mapping[str, Any]) -> Iterator[tuple[str, int]]:
    kind = _type_name(str(resource["type"]))
    if kind == "Stack":  # its outputs are counted one by one
        return
    for part in ("inputs", "outputs"):
        if part in resource:
            yield f"{kind} {part}", _size(resource[part])
    dependencies = {k: v for k, v in resource.items() if k in _DEPENDENCIES}
    if dependencies:
        yield f"{kind} dependencies", _size(dependencies)
    yield f"{kind} rest", _size({k: v for k, v in resource.items() if k not in ("inputs", "outputs", *_DEPENDENCIES)})


def parts(checkpoint: Mapping[str, Any]) -> Counter[str]:
    """Bytes by part of one checkpoint, and its total under `total`."""
    resources = checkpoint["checkpoint"]["latest"]["resources"]
    sizes: Counter[str] = Counter()
    for resource in resources:
        for part, size in _resource_parts(resource):
            sizes[part] += size
        if _type_name(str(resource["type"])) == "Stack":
            for key, value in resource.get("outputs", {}).items():
                sizes[f"stack output {key}"] += _size(value)
    sizes["total"] = _size(checkpoint)
    return sizes


def measure(name: str, open_stack: Callable[[int], Bench], small: int) -> dict[str, float]:
    """Bytes per instance by part, the slope between `small` and `2 * small` instances."""
    found: list[Counter[str]] = []
    for count in (small, 2 * small):
        print(f"... {name}: up of {count}", file=sys.stderr, flush=True)
        bench = open_stack(count)
        try:
            bench.stack.up()
            found.append(parts(json.loads(state_file(bench.stack).read_text())))
        finally:
            bench.discard()
    low, high = found
    return {part: (high[part] - low[part]) / small for part in sorted(high.keys() | low.keys())}


def measure_program(name: str, extra: Mapping[str, Any], small: int) -> dict[str, float]:
    """`measure` of this project with `extra` config, against an emulator of its own."""
    with tempfile.TemporaryDirectory() as tmp, running_emulator(Path(tmp)) as emu:
        return measure(
            name, lambda n: open_program(f"parts-{n}", emu, {**program_config(emu, instance_names(n)), **extra}), small
        )


def report(results: Mapping[str, Mapping[str, float]]) -> str:
    names = list(results)
    # Parts that do not grow with the instances (the CA, the stack's own record) are left out.
    rows = sorted({p for sizes in results.values() for p, size in sizes.items() if p != "total" and abs(size) >= 1})
    lines = [f"| part | {' | '.join(names)} |", "|---|" + "---|" * len(names)]
    for part in rows:
        lines.append(f"| {part} | {' | '.join(f'{results[n].get(part, 0):.0f}' for n in names)} |")
    totals = " | ".join(f"**{results[n]['total']:.0f}**" for n in names)
    lines.append(f"| **total per instance** | {totals} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10, help="the smaller stack's instances (the other has twice)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    results = {name: measure_program(name, extra, args.count) for name, extra in CONFIGS.items()}
    results["graph floor"] = measure("graph floor", lambda n: open_floor(f"parts-graph-{n}", n, "graph"), args.count)
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
