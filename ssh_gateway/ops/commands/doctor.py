"""`ssh-gateway doctor`: ssh_gateway/ops/doctor/, whose arguments it defines once (doctor/arguments.py)."""

from __future__ import annotations

import argparse
from typing import Final

from ssh_gateway.ops.command import Command
from ssh_gateway.ops.doctor.arguments import add_arguments
from ssh_gateway.ops.exit_codes import ExitCode

__all__ = ["COMMAND"]


def _run(args: argparse.Namespace) -> int:
    from ssh_gateway.ops.doctor.__main__ import run as doctor

    return doctor(args)


COMMAND: Final = Command(
    name="doctor",
    summary="name the first broken layer of each instance's ssh path",
    description="Checks every instance of a stack along the path, dns, tcp, banner, hostkey, then "
    "Pangolin's own view, and names the first broken layer with its likely fix.",
    examples=["ssh-gateway doctor --stack local", "ssh-gateway doctor --stack dev --instance gpu-alice --json"],
    codes={
        ExitCode.OK: "every instance is healthy",
        ExitCode.FAILED: "an instance is broken (its first broken layer is named)",
        ExitCode.CANNOT_RUN: "no such stack, no outputs (run pulumi up), or bad arguments",
    },
    run=_run,
    arguments=add_arguments,
)
