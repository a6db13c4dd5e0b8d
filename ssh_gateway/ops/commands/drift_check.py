"""`ssh-gateway drift-check`: ssh_gateway/ops/tools/drift.py (`check_drift`)."""

from __future__ import annotations

import argparse
from typing import Final

from ssh_gateway.ops.command import Command, add_ambient
from ssh_gateway.ops.exit_codes import ExitCode

__all__ = ["COMMAND"]


def _run(args: argparse.Namespace) -> int:
    from ssh_gateway.ops.tools.drift import check_drift

    return check_drift(str(args.stack), ambient=bool(args.ambient))


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack")
    add_ambient(parser)


COMMAND: Final = Command(
    name="drift-check",
    summary="has anyone changed Pangolin, Kubernetes or the NSG by hand?",
    description="Runs `pulumi preview --refresh --expect-no-changes` and names each drifted resource, its "
    "instance and what differs (live → declared). CI reads the exit code; the text is for the job log.",
    examples=["ssh-gateway drift-check dev", "ssh-gateway drift-check --ambient prod   # in CI"],
    codes={
        ExitCode.OK: "no drift",
        ExitCode.FAILED: "drift: each drifted resource is named, with live → declared values",
        ExitCode.CANNOT_RUN: "the preview itself failed (its errors are printed)",
    },
    run=_run,
    arguments=_arguments,
)
