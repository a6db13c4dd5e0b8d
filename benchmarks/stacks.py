"""The stacks a benchmark drives: this project's program or a floor, through the Automation API and the real CLI.

Each measured stack runs with the same environment the tools and tests get (`pulumi_env()`), plus what a
measurement adds (e.g. `PULUMI_DIY_BACKEND_RETAIN_CHECKPOINTS` to count checkpoint writes). A stack is thrown
away with `pulumi stack rm --force` rather than destroyed: its resources live only in a throw-away emulator,
and a destroy of 1000 instances would cost as long as their `up`.
"""

from __future__ import annotations

import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle, running_emulator
from ssh_gateway.ops.shared.automation import stack_file, state_file
from ssh_gateway.plumbing.toolchain import REPO, pulumi_env, pulumi_root

FLOOR = REPO / "benchmarks" / "floor"
FIRST_PORT = 20000
"""Every benchmark range starts here: below Linux's ephemeral ports, so the program warns about nothing."""


HOST_IDENTITY_OFF: Final = {"ssh-gateway:hostIdentity": {"enabled": False}}
"""Config added to `program_config` to issue no host keys: what an instance costs without its `SshHostKey`."""


HOST_TEMPLATE: Final = "ssh-{instance}.bench.test"


def log(message: str) -> None:
    """A benchmark's progress, on stderr (stdout is its result)."""
    print(f"... {message}", file=sys.stderr, flush=True)


@contextmanager
def emulator(tmp: Path, name: str) -> Iterator[EmulatorHandle]:
    """A fresh emulator per measured program: empty org, counters that count one stack only."""
    with running_emulator(tmp / name) as handle:
        yield handle


def instance_names(count: int, first: int = 0) -> list[str]:
    """`i00000`, `i00001`, ...: unique over every shard of a run when each shard starts at its own `first`."""
    return [f"i{n:05d}" for n in range(first, first + count)]


def program_config(
    emulator: EmulatorHandle, names: list[str], *, ports: tuple[int, int] | None = None
) -> dict[str, Any]:
    """This project's config for static instances `names` on `emulator`; `ports` (first, last) defaults to
    twice as many ports as instances from `FIRST_PORT`."""
    first, last = ports or _default_ports(len(names))
    return {
        "ssh-gateway:pangolin": {"url": emulator.url, "orgId": emulator.org_id, "siteId": emulator.site_id},
        "ssh-gateway:ports": {"range": f"{first}-{last}"},
        "ssh-gateway:gateway": {"hostTemplate": HOST_TEMPLATE},
        "ssh-gateway:firewall": {"enabled": False},
        "ssh-gateway:instances": _static_instances(names),
    }


def _default_ports(count: int) -> tuple[int, int]:
    return FIRST_PORT, FIRST_PORT + max(2 * count, 20) - 1


def _static_instances(names: list[str]) -> list[dict[str, Any]]:
    return [{"name": name, "target": "static", "staticHost": "127.0.0.1", "staticPort": 2222} for name in names]


def floor_config(count: int, shape: str) -> dict[str, Any]:
    """A floor's config: `shape` is `bare` or `graph` (benchmarks/floor/__main__.py). The graph gets the
    instances, range and host template `program_config` gives the project (its state records the config too)."""
    config: dict[str, Any] = {"ssh-gateway-floor:count": count, "ssh-gateway-floor:shape": shape}
    if shape == "graph":
        first, last = _default_ports(count)
        config |= {
            "ssh-gateway-floor:instances": _static_instances(instance_names(count)),
            "ssh-gateway-floor:ports": f"{first}-{last}",
            "ssh-gateway-floor:hostTemplate": HOST_TEMPLATE,
        }
    return config


class _FlaggedCommand(auto.PulumiCommand):
    """The pinned CLI with global flags added to every command (e.g. `--disable-integrity-checking`, which has
    no environment variable)."""

    def __init__(self, flags: tuple[str, ...]) -> None:
        super().__init__(root=str(pulumi_root()))
        self._flags = list(flags)

    def run(self, args: list[str], *rest: Any, **kwargs: Any) -> auto.CommandResult:
        return super().run([*self._flags, *args], *rest, **kwargs)


@dataclass(frozen=True)
class Clock:
    """Wall time, and CPU time of every process the operation ran (the CLI, the program, the providers)."""

    wall: float
    cpu: float


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def clocked(action: Callable[[], object]) -> Clock:
    """Runs `action`; CPU is that of the child processes waited for meanwhile (not thread-safe across two)."""
    cpu, wall = _children_cpu(), time.perf_counter()
    action()
    return Clock(wall=time.perf_counter() - wall, cpu=_children_cpu() - cpu)


@dataclass
class Options:
    """How the CLI runs: extra environment and global flags."""

    env: Mapping[str, str] = field(default_factory=dict)
    flags: tuple[str, ...] = ()


@dataclass
class Bench:
    """One stack under measurement."""

    stack: auto.Stack
    work_dir: Path

    def timed_up(self, on_event: Callable[[auto.EngineEvent], None] | None = None) -> Clock:
        return clocked(lambda: self.stack.up(on_event=on_event))

    def timed_preview(self, repeat: int = 3) -> Clock:
        """The median of `repeat` previews (wall and CPU each)."""
        clocks = [clocked(self.stack.preview) for _ in range(repeat)]
        return Clock(wall=statistics.median(c.wall for c in clocks), cpu=statistics.median(c.cpu for c in clocks))

    def state_bytes(self) -> int:
        """Size of the stack's checkpoint file as the backend stores it."""
        path = state_file(self.stack)
        variants = (path, path.with_name(f"{path.name}.gz"), path.with_name(f"{path.name}.zst"))
        return next(p for p in variants if p.exists()).stat().st_size

    def checkpoint_writes(self) -> int:
        """Checkpoints written so far, when the stack runs with `PULUMI_DIY_BACKEND_RETAIN_CHECKPOINTS`."""
        path = state_file(self.stack)
        return sum(1 for p in path.parent.glob(f"{path.name}*.*") if p.name.rsplit(".", 1)[-1].isdigit())

    def discard(self) -> None:
        """Removes the stack and its config without destroying its (throw-away) resources, and the copies of
        its checkpoint that `stack rm` leaves behind (`.bak`) or that a measurement retained."""
        self.stack.workspace.remove_stack(self.stack.name, force=True)
        stack_file(self.stack.name, self.work_dir).unlink(missing_ok=True)
        for leftover in state_file(self.stack).parent.glob(f"{self.stack.name}.json*"):
            leftover.unlink()


def open_bench(
    name: str,
    config: Mapping[str, Any],
    *,
    work_dir: Path = REPO,
    secrets: Mapping[str, str] | None = None,
    options: Options | None = None,
) -> Bench:
    """A new stack `name` of the project at `work_dir` with `config` (its file written as a person would)."""
    options = options or Options()
    path = stack_file(name, work_dir)
    path.write_text(yaml.safe_dump({"config": dict(config)}, sort_keys=False))
    workspace = auto.LocalWorkspaceOptions(
        work_dir=str(work_dir),
        env_vars={**pulumi_env(), **options.env},
        pulumi_command=_FlaggedCommand(options.flags),
    )
    stack = auto.create_or_select_stack(name, work_dir=str(work_dir), opts=workspace)
    for key, value in (secrets or {}).items():
        stack.set_config(key, auto.ConfigValue(value, secret=True))
    return Bench(stack, work_dir)


def open_program(
    name: str, emulator: EmulatorHandle, config: Mapping[str, Any], options: Options | None = None
) -> Bench:
    """A stack of this project against `emulator`."""
    return open_bench(name, config, secrets={"pangolin:apiKey": emulator.api_key}, options=options)


def open_floor(name: str, count: int, shape: str, options: Options | None = None) -> Bench:
    """A floor stack of `count` instances of `shape`."""
    return open_bench(name, floor_config(count, shape), work_dir=FLOOR, options=options)
