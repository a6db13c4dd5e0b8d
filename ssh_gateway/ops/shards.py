"""`ssh-gateway shards [--env E]... [--json]`: the stacks CI deploys, per environment, from stacks/.

The workflows' matrices come from here (`.github/workflows/up.yml`, `preview.yml`, `drift.yml`), run as
`python3 -m ssh_gateway.ops.shards --env prod --json` on a bare checkout: this module and the rule it applies
(ssh_gateway/core/shards.py) use the standard library only, so the listing job needs no bootstrap.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Final

from ssh_gateway.core.shards import ShardsError, deployed_stacks

from .command import Command
from .exit_codes import ExitCode

__all__ = ["COMMAND", "main"]

STACKS_DIR: Final = Path(__file__).resolve().parents[2] / "stacks"
"""The project's `stackConfigDir` (Pulumi.yaml)."""

_DESCRIPTION: Final = (
    "List the stacks CI deploys: every stacks/Pulumi.<stack>.yaml but local, each with its environment (the "
    "stack's name up to its first '-': prod-a, prod-b are the shards of prod). --json prints what a workflow's "
    "`matrix: include:` takes."
)
_EXAMPLES: Final = (
    "ssh-gateway shards",
    'ssh-gateway shards --env prod --json      # [{"environment": "prod", "stack": "prod-a"}, ...]',
)
_CODES: Final = {
    ExitCode.OK: "listed",
    ExitCode.CANNOT_RUN: "an --env that is not a name or has no stack file (named, with the ones there are)",
}


def _add_arguments(parser: argparse.ArgumentParser) -> None:
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
    description=_DESCRIPTION,
    examples=_EXAMPLES,
    codes=_CODES,
    run=_run,
    arguments=_add_arguments,
)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m ssh_gateway.ops.shards`; returns the exit code."""
    return COMMAND.main(argv, prog="python -m ssh_gateway.ops.shards")


if __name__ == "__main__":
    sys.exit(main())
