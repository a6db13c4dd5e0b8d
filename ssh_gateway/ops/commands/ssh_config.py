"""`ssh-gateway ssh-config`: the stacks' Host blocks and known_hosts lines in ~/.ssh, by
ssh_gateway/ops/tools/ssh_files.py (`write_ssh_config`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

from ssh_gateway.ops.command import Command, add_ambient
from ssh_gateway.ops.exit_codes import ExitCode

__all__ = ["COMMAND"]


def _run(args: argparse.Namespace) -> int:
    from ssh_gateway.ops.tools.ssh_files import write_ssh_config

    return write_ssh_config(
        [str(s) for s in args.stack],
        outputs_file=args.outputs,
        ambient=bool(args.ambient),
        write=bool(args.write),
        include=bool(args.include),
        remove=bool(args.remove),
        json_output=bool(args.json),
    )


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", action="append", required=True, help="a stack to write (repeatable)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write the files (default: show the diff only)")
    mode.add_argument("--dry-run", action="store_true", help="show the diff, write nothing (the default)")
    parser.add_argument("--include", action="store_true", help="one file per stack under ~/.ssh/config.d/")
    parser.add_argument("--remove", action="store_true", help="remove the stacks' sections, files and known_hosts")
    parser.add_argument("--outputs", type=Path, help="the stack's `pulumi stack output --json`, for other backends")
    add_ambient(parser)
    parser.add_argument("--json", action="store_true", help="the plan (files, changed, diff) as JSON")


COMMAND: Final = Command(
    name="ssh-config",
    summary="write the stacks' Host blocks and known_hosts lines into ~/.ssh (a managed section)",
    description="Reads each stack's sshConfig and knownHosts outputs and writes them between "
    "`# >>> ssh-gateway STACK >>>` and `# <<< ssh-gateway STACK <<<` at the top of ~/.ssh/config (or, with "
    "--include, to ~/.ssh/config.d/ssh-gateway-STACK plus one Include line), the known_hosts lines to "
    "~/.ssh/known_hosts.d/ssh-gateway-STACK. Shows the diff first; writes only with --write; never changes a "
    "line outside its sections; a second run changes nothing. Refuses options that would run commands on "
    "this machine (LocalCommand, KnownHostsCommand, Match exec, a ProxyCommand ssh-gateway does not generate).",
    examples=[
        "ssh-gateway ssh-config --stack dev                     # the diff only (a dry run)",
        "ssh-gateway ssh-config --stack dev --stack prod --write",
        "ssh-gateway ssh-config --stack dev --include --write   # ~/.ssh/config.d/ssh-gateway-dev",
        "ssh-gateway ssh-config --stack dev --remove --write    # take the stack out again",
        "ssh-gateway ssh-config --ambient --stack prod-a --stack prod-b --write   # shards on a shared backend",
        "pulumi stack output --json -s dev > out.json && ssh-gateway ssh-config --stack dev --outputs out.json",
    ],
    codes={
        ExitCode.OK: "written, already up to date (says so), or the dry run's diff shown",
        ExitCode.CANNOT_RUN: "a stack's outputs cannot be read (no such stack, not deployed), or bad arguments",
        ExitCode.REFUSED: "refused, nothing written: an option that would run a command on this machine, a Host "
        "pattern, a host alias of two stacks, or a managed section whose markers were edited by hand",
    },
    run=_run,
    arguments=_arguments,
)
