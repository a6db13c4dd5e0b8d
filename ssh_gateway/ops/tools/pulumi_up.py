"""`ssh-gateway up --stack S`: `pulumi up`, with the checkpoint written once at the end when the stack is new.

The file backend (and Azure Blob, S3) rewrites the whole checkpoint after every step, several times per instance,
so a first `up` of N instances writes ~7N checkpoints of up to N instances each: quadratic (docs/scaling.md).
`PULUMI_SKIP_CHECKPOINTS=true` writes it once, at the end: a first `up` of 1000 in about 20 s instead of a quarter
of an hour (benchmarks/platform.py). Its price is that a run that dies leaves the stack without a record of what it
made. This command takes that price only where it is paid back by `ssh-gateway recover`: on a **first** `up` (the
state holds no resource yet), whose every create is adoptable — a Pangolin resource by its name, the rest by
recover's import. Every later `up` (the daily change: a few creates, updates and deletes on a stack that exists)
keeps the engine's checkpoints, so a killed one loses nothing. The preview that tells a first `up` (what it would
create) takes the `up`'s policy packs and is that `up`'s only preview.

When a run dies either way, the path is the same: `ssh-gateway recover --stack S`, then `ssh-gateway up
--stack S` again.

Exit codes (`up_outcome.py` maps pulumi's): 0 the update succeeded, 1 it failed, 2 it cannot run (no toolchain,
no such stack), 3 the program or a provider refused the stack before anything was written (an invalid config, one
of Azure's limits, a missing NSG, an exhausted range), 130 interrupted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ssh_gateway.core.log_events import JSON_LOG_ENV, Log, LogEvent, json_log
from ssh_gateway.core.refusal_note import REFUSAL_FILE_ENV, noted_refusals
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.ops.recovery.adopt import planned_creates, skip_checkpoints_is_recoverable
from ssh_gateway.plumbing.pulumi_cli import PulumiFailed, run_pulumi
from ssh_gateway.plumbing.run_mark import RUN_MARK_ENV, RunMark, end_leftovers, end_orphans
from ssh_gateway.plumbing.toolchain import REPO, ToolchainMissing, pulumi_env

from .up_outcome import error_messages, up_outcome

__all__ = [
    "SKIP_CHECKPOINTS",
    "decision_preview_arguments",
    "first_up_env",
    "holds_resources",
    "run_up",
    "up",
]

SKIP_CHECKPOINTS: Final = {"PULUMI_SKIP_CHECKPOINTS": "true"}
"""What a first `up` adds to pulumi's environment."""


# Records that every stack holds besides what the program makes: the stack itself and the default providers.
_NOT_MADE: Final = ("pulumi:pulumi:Stack", "pulumi:providers:")


def holds_resources(deployment: Mapping[str, Any]) -> bool:
    """Whether a `pulumi stack export` holds anything the program made (or began to make: a pending create)."""
    inner = deployment.get("deployment") or {}
    made = [r for r in inner.get("resources") or [] if not str(r.get("type", "")).startswith(_NOT_MADE)]
    return bool(made or inner.get("pending_operations"))


def first_up_env(deployment: Mapping[str, Any], planned_types: Callable[[], Iterable[str]]) -> dict[str, str]:
    """The environment an `up` of this exported stack adds: `SKIP_CHECKPOINTS` on a first `up` whose planned
    creates (`planned_types`, asked only then) `recover` can all adopt after a lost run, else nothing."""
    if holds_resources(deployment):
        return {}
    recoverable = skip_checkpoints_is_recoverable(planned_types(), stack_has_resources=False)
    return dict(SKIP_CHECKPOINTS) if recoverable else {}


# `pulumi up` flags (after `--`) that change what a preview checks: the decision preview takes them too.
_CHECKED_WITH: Final = ("--policy-pack", "--policy-pack-config")
# Flags that change only how the update shows itself or how many steps run at once, with a value or without.
_SHOWN_WITH: Final = ("--color", "--parallel", "-p")
_SHOWN: Final = ("--diff", "--suppress-progress", "--suppress-outputs", "--non-interactive", "--skip-preview")


def decision_preview_arguments(extra: Sequence[str]) -> list[str] | None:
    """What of `extra` (the `pulumi up` flags) the preview that decides a first `up` must take, so that it checks
    what the update will (the policy packs); None when `extra` holds a flag not known here (a `--target`, say):
    then the update keeps its own preview."""
    taken: list[str] = []
    args = iter(extra)
    for arg in args:
        flag, with_value, _ = arg.partition("=")
        if flag in _CHECKED_WITH:
            taken += [arg] if with_value else [arg, next(args, "")]
        elif flag in _SHOWN_WITH:
            if not with_value:
                next(args, None)
        elif flag not in _SHOWN:
            return None
    return taken


def planned_create_types(
    stack: str, work_dir: Path, env: Mapping[str, str], preview_arguments: Sequence[str] = ()
) -> list[str]:
    """The types of the creates a preview plans (what a lost first `up` could leave behind)."""
    shown = run_pulumi(["preview", "--json", "--stack", stack, *preview_arguments], work_dir=work_dir, env=env)
    planned = planned_creates(json.loads(shown or "{}"))
    return [p.type for p in planned.values() if p.op == "create"]


def _export(stack: str, work_dir: Path, env: Mapping[str, str]) -> dict[str, Any]:
    shown = run_pulumi(["stack", "export", "--stack", stack], work_dir=work_dir, env=env)
    exported: dict[str, Any] = json.loads(shown or "{}")
    return exported


def _no_log(_event: LogEvent, **_fields: Any) -> None:
    pass


def up(
    stack: str, extra: Sequence[str] = (), *, ambient: bool = False, work_dir: Path = REPO, log: Log = _no_log
) -> int:
    """`pulumi up --yes --stack STACK [extra]`, checkpoints skipped on a first `up`; the exit code as
    `up_outcome` maps pulumi's (3 for a refusal), its hint printed last. `ambient`: the pulumi on PATH with the
    environment's backend and secrets (CI), not the offline toolchain. `log`: where its phases go (the
    reconciler's JSON log)."""
    mark = RunMark.of_this_process(stack, work_dir)
    orphans = end_orphans(stack, work_dir)  # of an `up` killed before: they hold ports and memory, and serve no one
    if orphans:
        print(f"up {stack}: ended {orphans} processes a killed up of this stack left running", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="ssh-gateway-up-") as scratch:
        refusals, event_log = Path(scratch) / "refusals", Path(scratch) / "events.jsonl"
        base = dict(os.environ) if ambient else pulumi_env()
        env = {**base, REFUSAL_FILE_ENV: str(refusals), RUN_MARK_ENV: mark.value}
        try:
            code = _pulumi_up(stack, extra, env=env, work_dir=work_dir, log=log, event_log=event_log)
        except PulumiFailed as exc:  # the export, or a first up's decision preview
            print(f"up: {exc}", file=sys.stderr)
            code = exc.code
        finally:  # a pulumi that died (or a Ctrl-C) leaves its plugins: none may outlive the `up`
            left = end_leftovers(mark)
            if left:
                print(f"up {stack}: ended {left} processes its pulumi left running (its plugins)", file=sys.stderr)
        outcome = up_outcome(stack, code, refusals=noted_refusals(refusals), errors=error_messages(event_log))
    if outcome.hint is not None:
        print(outcome.hint, file=sys.stderr)
    return outcome.code


def _pulumi_up(
    stack: str, extra: Sequence[str], *, env: dict[str, str], work_dir: Path, log: Log, event_log: Path
) -> int:
    """The export, a first up's decision preview, then `pulumi up`; pulumi's exit code."""
    shared = decision_preview_arguments(extra)
    began = time.monotonic()
    exported = _export(stack, work_dir, env)
    log(LogEvent.STACK_EXPORT, stack=stack, seconds=round(time.monotonic() - began, 2))
    added = first_up_env(exported, lambda: planned_create_types(stack, work_dir, env, shared or ()))
    if added:
        print(
            f"up {stack}: a first up; the checkpoint is written once, at the end (PULUMI_SKIP_CHECKPOINTS). "
            f"If it dies: ssh-gateway recover --stack {stack}, then ssh-gateway up --stack {stack}",
            file=sys.stderr,
        )
    # The decision preview of a first up checked what the update will (the same program, config and policy
    # packs): pulumi up's own preview would run the whole program again first, a third of a first up of 1000.
    previewed = not holds_resources(exported)  # `first_up_env` previews exactly then
    once = ["--skip-preview"] if previewed and shared is not None and "--skip-preview" not in extra else []
    # The run's errors, for the hint (`up_outcome`); a caller's own --event-log wins. pulumi offers the flag behind
    # PULUMI_DEBUG_COMMANDS, which the Automation API sets for the same flag; it adds nothing else to an `up`.
    events = [] if any(a.partition("=")[0] == "--event-log" for a in extra) else ["--event-log", str(event_log)]
    argv = ["pulumi", "up", "--yes", "--stack", stack, "--non-interactive", *once, *events, *extra]
    log(LogEvent.PULUMI_UP_START, stack=stack)
    began = time.monotonic()
    run_env = {**env, **added, "PULUMI_DEBUG_COMMANDS": "true"}
    done = subprocess.run(argv, cwd=work_dir, env=run_env, check=False)  # noqa: S603
    log(LogEvent.PULUMI_UP, stack=stack, seconds=round(time.monotonic() - began, 2), code=done.returncode)
    return done.returncode


def run_up(stack: str, extra: Sequence[str] = (), *, ambient: bool = False) -> int:
    """`ssh-gateway up`: `up`, its phases in the JSON log when JSON_LOG_ENV is set (the reconciler's steps); its
    exit code, CANNOT_RUN when pulumi cannot run."""
    try:
        log = json_log() if os.environ.get(JSON_LOG_ENV) else _no_log
        return up(stack, extra, ambient=ambient, log=log)
    except ToolchainMissing as exc:
        print(f"up: {exc}", file=sys.stderr)
        return ExitCode.CANNOT_RUN
