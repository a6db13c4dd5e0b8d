"""`ssh-gateway doctor`: ssh_gateway/ops/doctor/ (`check_stack`) on a stack's outputs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

from ssh_gateway.ops.command import Command
from ssh_gateway.ops.exit_codes import ExitCode

__all__ = ["COMMAND"]


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", required=True, help="the stack whose outputs to check, e.g. local")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=3.0,
        help="seconds for all of one instance's checks; instances run in parallel (default: %(default)s)",
    )
    parser.add_argument("--instance", action="append", metavar="NAME", help="check only this instance (repeatable)")
    parser.add_argument(
        "--traefik-api",
        metavar="URL",
        help="the gateway's Traefik API, e.g. http://127.0.0.1:8080/api: also name each entry point the stack "
        "needs (gateway.traefikEntryPoints) that Traefik lacks",
    )
    parser.add_argument(
        "--outputs",
        type=Path,
        help="the stack's `pulumi stack output --json`, for other backends (the API key: PANGOLIN_API_KEY)",
    )


def _run(args: argparse.Namespace) -> int:
    from ssh_gateway.ops.doctor.checkup import check_stack

    return check_stack(
        str(args.stack),
        outputs_file=args.outputs,
        instances=tuple(args.instance or ()),
        timeout=float(args.timeout),
        traefik_api=args.traefik_api,
        json_output=bool(args.json),
    )


COMMAND: Final = Command(
    name="doctor",
    summary="name the first broken layer of each instance's ssh path",
    description="Checks every instance of a stack along the path, dns, tcp, connect (a connect-mode instance), "
    "banner, hostidentity (an issued certificate) or hostkey (a pinned key), then Pangolin's own view, and names "
    "the first broken layer with its likely fix.",
    examples=[
        "ssh-gateway doctor --stack local",
        "ssh-gateway doctor --stack dev --instance gpu-alice --json",
        "pulumi stack output --json -s dev > out.json && ssh-gateway doctor --stack dev --outputs out.json",
    ],
    codes={
        ExitCode.OK: "every instance is healthy",
        ExitCode.FAILED: "an instance is broken (its first broken layer is named)",
        ExitCode.CANNOT_RUN: "no such stack, no outputs (run pulumi up), or bad arguments",
    },
    run=_run,
    arguments=_arguments,
)
