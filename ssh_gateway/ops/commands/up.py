"""`ssh-gateway up`: ssh_gateway/ops/tools/pulumi_up.py (`run_up`)."""

from __future__ import annotations

import argparse
from typing import Final

from ssh_gateway.ops.command import Command, add_ambient
from ssh_gateway.ops.exit_codes import ExitCode

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", required=True, help="the stack to update")
    add_ambient(parser)
    parser.add_argument("extra", nargs=argparse.REMAINDER, help="more `pulumi up` arguments, after `--`")


def _run(args: argparse.Namespace) -> int:
    from ssh_gateway.ops.tools.pulumi_up import run_up

    return run_up(str(args.stack), [a for a in args.extra if a != "--"], ambient=bool(args.ambient))


COMMAND: Final = Command(
    name="up",
    summary="pulumi up; a first up writes its checkpoint once, at the end",
    description="`pulumi up --yes` of a stack. On a first up (nothing in state yet) the checkpoint is written once, "
    "at the end, instead of after every step (PULUMI_SKIP_CHECKPOINTS): linear instead of quadratic in the "
    "instances. If a run dies: `ssh-gateway recover`, then `ssh-gateway up` again.",
    examples=(
        "ssh-gateway up --stack dev",
        "ssh-gateway up --ambient --stack prod-a   # CI: its backend, its CLI",
        "ssh-gateway up --stack dev -- --parallel 16",
    ),
    codes={
        ExitCode.OK: "the update succeeded",
        ExitCode.FAILED: "pulumi up failed; the last line says what to do (after Azure's SecurityRuleConflict: up "
        "again; if it was interrupted: recover, then up)",
        ExitCode.CANNOT_RUN: "cannot run: no toolchain, no such stack, pulumi's own usage or login error",
        ExitCode.REFUSED: "refused, nothing written: the config, one of Azure's limits, a missing NSG, an exhausted "
        "range (the error names it; the same at every up until it is changed)",
        ExitCode.INTERRUPTED: "interrupted (Ctrl-C, or pulumi cancelled)",
    },
    run=_run,
    arguments=_arguments,
)
