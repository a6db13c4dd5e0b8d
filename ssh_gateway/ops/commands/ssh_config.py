"""`ssh-gateway ssh-config`: the stacks' Host blocks and known_hosts lines in ~/.ssh, by
ssh_gateway/ops/ssh_config.py."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Final

from ssh_gateway.ops.command import Command, add_ambient, say_error
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.ops.stack_outputs import outputs_of

__all__ = ["COMMAND"]


def _run(args: argparse.Namespace) -> int:
    # Here, not at the top: the settings' types load pydantic, and `ssh-gateway --help` need not wait for it.
    from ssh_gateway.core.outputs import parse_stack_outputs
    from ssh_gateway.ops import ssh_config

    if args.outputs is not None and len(args.stack) != 1:
        say_error("--outputs holds one stack's outputs: give exactly one --stack with it")
        return ExitCode.CANNOT_RUN
    home = Path.home()  # $HOME, which the tests point at a temporary directory
    stacks: dict[str, ssh_config.StackSsh | None] = {}
    for stack in args.stack:
        if args.remove:
            stacks[stack] = None
            continue
        try:
            outputs = outputs_of(stack, args.outputs, ambient=args.ambient)
        except (ValueError, OSError) as exc:
            say_error(f"cannot read the outputs of stack {stack}: {exc}")
            return ExitCode.CANNOT_RUN
        try:
            read = parse_stack_outputs(outputs)
        except (KeyError, TypeError, ValueError) as exc:
            say_error(f"cannot read the outputs of stack {stack}: not the outputs ssh-gateway writes ({exc!r})")
            return ExitCode.CANNOT_RUN
        if not read.has_ssh_config:
            say_error(f"stack {stack} has no sshConfig output: run `pulumi up` on it first")
            return ExitCode.CANNOT_RUN
        stacks[stack] = ssh_config.StackSsh(read.ssh_config, read.known_hosts)
    try:
        plan = ssh_config.plan(home, stacks, include=args.include)
        ssh = shutil.which("ssh")
        if ssh is not None:  # without an ssh client here, nothing would read the file anyway
            ssh_config.verify_with_ssh(plan, ssh)
    except ssh_config.SshConfigError as exc:
        say_error(str(exc))
        return ExitCode.REFUSED
    changes, changed = plan.changes, plan.changed
    shown = [_home_relative(c.path, home) for c in changes]
    written = ssh_config.apply(changed) if args.write else []
    if args.json:
        report = {
            "stacks": list(stacks),
            "layout": "include" if args.include else "section",
            "written": bool(written),
            "files": [
                {
                    "path": str(c.path),
                    "changed": c.changed,
                    "removed": c.after is None,
                    "diff": ssh_config.render_diff([c], home),
                }
                for c in changes
            ],
        }
        print(json.dumps(report, indent=2))
        return ExitCode.OK
    sys.stdout.write(ssh_config.render_diff(changed, home))
    names = ", ".join(args.stack)
    if not changed:
        print(f"no change: the ssh config of stack(s) {names} is up to date ({', '.join(shown)})")
    elif written:
        removed = {c.path for c in changed if c.after is None}
        wrote = ", ".join(_home_relative(p, home) for p in written if p not in removed)
        gone = ", ".join(_home_relative(p, home) for p in written if p in removed)
        done = "; ".join(part for part in (wrote and f"wrote {wrote}", gone and f"removed {gone}") if part)
        print(f"{done} (stack(s) {names})")
    else:
        print(f"dry run: {len(changed)} file(s) would change; run again with --write to apply")
    return ExitCode.OK


def _home_relative(path: Path, home: Path) -> str:
    try:
        return "~/" + str(path.relative_to(home))
    except ValueError:
        return str(path)


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
