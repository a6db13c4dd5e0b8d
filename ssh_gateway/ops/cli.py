"""`ssh-gateway`: the operator's commands in one console script (`[project.scripts]` in pyproject.toml).

This module is the registry only. Each subcommand is one `Command` (ssh_gateway/ops/command.py): its --help, a
function adding its arguments, and a handler `(args) -> ExitCode` (ssh_gateway/ops/exit_codes.py) that imports
its tool when it runs and calls the tool's function with typed arguments. It is named `COMMAND` in a module of
its own under ssh_gateway/ops/commands/, named after it. A new subcommand is one such module plus its `COMMAND`
in `COMMANDS`. `python -m ssh_gateway.ops <command>` runs the same parser (the reconciler's steps, the tests).

argparse rather than click or typer: the standard library keeps the console script free of a new dependency (and
of its version skew with the Pulumi SDK's), and its parsers type-check under mypy --strict without plugins.

The modules imported here use the standard library only: `ssh-gateway --help` answers without the Pulumi SDK,
pydantic or httpx, and `python3 -S -m ssh_gateway.ops shards` runs on a bare checkout (the workflows' listing).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Final

from ssh_gateway.plumbing.toolchain import ToolchainMissing, other_backend_hint

from .command import Command, Handler, exit_codes, say_error
from .commands import (
    demo,
    demo_cluster,
    doctor,
    drift_check,
    gateway_config,
    host_identity,
    instances,
    local_backend,
    local_cluster,
    preview_summary,
    reconcile,
    recover,
    shards,
    ssh_config,
    up,
)
from .exit_codes import EXIT_CODES, ExitCode

__all__ = ["COMMANDS", "build_parser", "main"]

COMMANDS: Final[tuple[Command, ...]] = (
    demo.COMMAND,
    demo_cluster.COMMAND,
    doctor.COMMAND,
    drift_check.COMMAND,
    preview_summary.COMMAND,
    ssh_config.COMMAND,
    host_identity.COMMAND,
    gateway_config.COMMAND,
    instances.COMMAND,
    recover.COMMAND,
    up.COMMAND,
    reconcile.COMMAND,
    shards.COMMAND,
    local_cluster.COMMAND,
    local_backend.COMMAND,
)
"""Every subcommand, in the order --help lists them."""

_EXAMPLES: Final = """\
examples:
  scripts/demo                                   # a newcomer's first command (bootstraps, then `ssh-gateway demo`)
  ssh-gateway doctor --stack local
  ssh-gateway ssh-config --stack dev --write     # the stack's hosts in ~/.ssh/config
  ssh-gateway instances add gpu-dave --stack dev --user dave
  ssh-gateway <command> --help                   # each command's options, examples and exit codes
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ssh-gateway",
        description="Public ssh endpoints for GPU dev instances through Pangolin: the operator's commands.",
        epilog=_EXAMPLES + "\n" + exit_codes(EXIT_CODES),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(title="commands", metavar="<command>")
    for command in COMMANDS:
        command.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Handler | None = getattr(args, "run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return ExitCode.CANNOT_RUN
    try:
        code = run(args)
    except ToolchainMissing as exc:
        say_error(str(exc))
        return ExitCode.CANNOT_RUN
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    # A stack not found offline may well be on the backend the environment names: one place says so for every
    # command that takes --ambient (recover's "no stack ... in .pulumi-state/backend", pulumi's "no stack named").
    if code == ExitCode.CANNOT_RUN and getattr(args, "ambient", True) is False:
        hint = other_backend_hint(f"ssh-gateway {args.command_name}")
        if hint:
            say_error(hint)
    return code


if __name__ == "__main__":
    sys.exit(main())
