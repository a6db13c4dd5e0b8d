"""`ssh-gateway shards [--env E]... [--json]`: the stacks CI deploys, per environment, from stacks/, by the rule of
ssh_gateway/core/shards.py (`deployed_stacks`).

The workflows' matrices come from here (`.github/workflows/up.yml`, `preview.yml`, `drift.yml`), run as
`python3 -m ssh_gateway.ops shards --env prod --json` on a bare checkout: this module, the rule, and every
module `ssh-gateway` loads before it runs a command use the standard library only, so the listing job needs no
bootstrap.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Final

from ssh_gateway.core.shards import ShardsError, deployed_stacks
from ssh_gateway.ops.command import Command
from ssh_gateway.ops.exit_codes import ExitCode

__all__ = ["COMMAND"]

STACKS_DIR: Final = Path(__file__).resolve().parents[3] / "stacks"
"""The project's `stackConfigDir` (Pulumi.yaml)."""


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", action="append", default=[], metavar="ENV", help="only this environment (repeatable)")
    parser.add_argument("--json", action="store_true", help="a JSON list of {environment, stack}")
    parser.add_argument("--dir", type=Path, default=STACKS_DIR, help=argparse.SUPPRESS)  # the tests' own stacks/


def _run(args: argparse.Namespace) -> int:
    names = sorted(path.name for path in Path(args.dir).glob("Pulumi.*.yaml"))
    try:
        stacks = deployed_stacks(names, args.env)
    except ShardsError as exc:
        print(f"ssh-gateway shards: {exc}", file=sys.stderr)
        return ExitCode.CANNOT_RUN
    if args.json:
        print(json.dumps([asdict(s) for s in stacks], separators=(",", ":")))
    else:
        for s in stacks:
            print(f"{s.environment}\t{s.stack}")
    return ExitCode.OK


COMMAND: Final = Command(
    name="shards",
    summary="the stacks CI deploys, per environment (the workflows' matrices)",
    description="List the stacks CI deploys: every stacks/Pulumi.<stack>.yaml but local, each with its environment "
    "(the stack's name up to its first '-': prod-a, prod-b are the shards of prod). --json prints what a "
    "workflow's `matrix: include:` takes.",
    examples=(
        "ssh-gateway shards",
        'ssh-gateway shards --env prod --json      # [{"environment": "prod", "stack": "prod-a"}, ...]',
    ),
    codes={
        ExitCode.OK: "listed",
        ExitCode.CANNOT_RUN: "an --env that is not a name or has no stack file (named, with the ones there are)",
    },
    run=_run,
    arguments=_arguments,
)
