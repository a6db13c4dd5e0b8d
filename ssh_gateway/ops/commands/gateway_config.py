"""`ssh-gateway gateway-config`: ssh_gateway/ops/tools/gateway_files.py (`write_gateway_config`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

from ssh_gateway.ops.command import Command
from ssh_gateway.ops.exit_codes import ExitCode

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", action="append", required=True, help="a stack to include (repeatable)")
    parser.add_argument("--write", type=Path, metavar="DIR", help="write the files into DIR (default: diff only)")
    parser.add_argument("--dir", type=Path, default=Path(), help="the directory the dry run compares with (./)")
    parser.add_argument(
        "--outputs",
        type=Path,
        action="append",
        help="a stack's `pulumi stack output --json`, for other backends (one per --stack, in order)",
    )
    parser.add_argument("--json", action="store_true", help="the files and what was written, as JSON")


def _run(args: argparse.Namespace) -> int:
    from ssh_gateway.ops.tools.gateway_files import write_gateway_config

    return write_gateway_config(
        [str(s) for s in args.stack],
        outputs_files=args.outputs or (),
        write_dir=args.write,
        compare_dir=args.dir,
        json_output=bool(args.json),
    )


COMMAND: Final = Command(
    name="gateway-config",
    summary="write the gateway host's files (Traefik entry points, Gerbil ports) from the stacks' outputs",
    description="Reads each stack's gateway output (traefikEntryPoints, gerbilPublishedPorts, gerbilConnectPort) "
    "and writes traefik-entrypoints.yml (Traefik's static entry points, to merge into its static configuration) and "
    "docker-compose.gerbil-ports.yml (the gerbil service's ports, a Compose override for Pangolin's "
    "docker-compose.yml), for all the stacks merged, connect ports included. Pangolin creates neither "
    "(fosrl/pangolin #375, #821): written once per range, they let every later instance work with no restart. "
    "Shows the diff first; writes only with --write DIR; a second run changes nothing.",
    examples=[
        "ssh-gateway gateway-config --stack dev                         # the diff against ./ (a dry run)",
        "ssh-gateway gateway-config --stack dev --stack prod --write /opt/pangolin/ssh-gateway",
    ],
    codes={
        ExitCode.OK: "written, already up to date (says so), or the dry run's diff shown",
        ExitCode.CANNOT_RUN: "a stack's outputs cannot be read (no such stack, not deployed), or bad arguments",
        ExitCode.REFUSED: "refused, nothing written: two stacks claim one port",
    },
    run=_run,
    arguments=_arguments,
)
