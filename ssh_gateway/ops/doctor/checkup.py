"""`python -m ssh_gateway.ops.doctor --stack NAME`: exit 0 when every instance is healthy, 1 when one is broken,
2 when the doctor cannot run (no such stack, no outputs)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence

from pulumi import automation as auto

from ssh_gateway.core.credentials import find_api_key
from ssh_gateway.core.outputs import parse_stack_outputs
from ssh_gateway.ops.automation import workspace_options
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.plumbing.toolchain import REPO, ToolchainMissing

from .arguments import add_arguments
from .diagnose import diagnose
from .model import endpoints_from_outputs
from .report import as_json, render
from .traefik import check_entry_points


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ssh_gateway.ops.doctor",
        description="Check every instance of a stack along the ssh path and name the first broken layer: "
        "dns, tcp, connect (connect-mode instances), banner, hostidentity, hostkey, pangolin.",
    )
    add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run(_parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """The doctor on parsed arguments (`add_arguments`): what `main` and `ssh-gateway doctor` run."""
    started = time.monotonic()
    try:
        stack = auto.select_stack(args.stack, work_dir=str(REPO), opts=workspace_options())
        outputs = {key: value.value for key, value in stack.outputs().items()}
    except (auto.StackNotFoundError, ToolchainMissing) as exc:
        print(f"doctor: cannot open stack {args.stack!r}: {exc}", file=sys.stderr)
        return ExitCode.CANNOT_RUN
    project = stack.workspace.project_settings().name
    endpoints = endpoints_from_outputs(outputs, project=project, stack=stack.name)
    if not endpoints:
        print(f"doctor: stack {args.stack!r} has no endpoints in its outputs: run pulumi up first", file=sys.stderr)
        return ExitCode.CANNOT_RUN
    if args.instance:
        unknown = sorted(set(args.instance) - {ep.instance for ep in endpoints})
        if unknown:
            print(f"doctor: stack {args.stack!r} has no instance {', '.join(unknown)}", file=sys.stderr)
            return ExitCode.CANNOT_RUN
        endpoints = [ep for ep in endpoints if ep.instance in args.instance]
    api_url = parse_stack_outputs(outputs).pangolin_url or ""
    reports = diagnose(endpoints, api_url=api_url, api_key=_api_key(stack), timeout=args.timeout)
    gateway = None
    if args.traefik_api:
        gateway = check_entry_points(outputs, args.traefik_api, stack=stack.name, timeout=args.timeout)
    elapsed = time.monotonic() - started
    if args.json:
        document = as_json(reports, stack=stack.name, elapsed=elapsed)
        if gateway is not None:
            document = {**document, "healthy": document["healthy"] and gateway.ok, "traefik": gateway.as_json()}
        print(json.dumps(document, indent=2))
    else:
        print(render(reports, stack=stack.name, elapsed=elapsed), end="")
        if gateway is not None:
            print(f"traefik: {'ok' if gateway.ok else 'BROKEN'}: {gateway.detail}")
    healthy = all(r.broken is None for r in reports) and (gateway is None or gateway.ok)
    return ExitCode.OK if healthy else ExitCode.FAILED


def _api_key(stack: auto.Stack) -> str | None:
    """The key in the one lookup order (the stack secret, then PANGOLIN_API_KEY); never printed."""
    config = {key: value.value for key, value in stack.get_all_config().items()}
    try:
        return find_api_key(config, os.environ)[0]
    except ValueError:
        return None  # not set, or not a key: the Pangolin check says so


if __name__ == "__main__":
    sys.exit(main())
