"""The doctor on one stack: its outputs read (by the tools' one reader), every instance checked, the verdict
printed; its exit code (0 every instance healthy, 1 one is broken, 2 it cannot run)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ssh_gateway.core.credentials import find_api_key
from ssh_gateway.core.outputs import parse_stack_outputs
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.ops.shared.automation import project_name, stack_config
from ssh_gateway.ops.shared.stack_outputs import outputs_of

from .diagnose import diagnose
from .model import endpoints_from_outputs
from .report import as_json, render
from .traefik import check_entry_points

__all__ = ["check_stack"]


def check_stack(
    stack: str,
    *,
    outputs_file: Path | None = None,
    instances: Sequence[str] = (),
    timeout: float = 3.0,
    traefik_api: str | None = None,
    json_output: bool = False,
) -> int:
    """Checks the instances (all, or those named) of `stack`, whose outputs are read from the backend or from
    `outputs_file` (`pulumi stack output --json`: the API key then comes from PANGOLIN_API_KEY alone)."""
    started = time.monotonic()
    try:
        outputs = outputs_of(stack, outputs_file)
    except (ValueError, OSError) as exc:
        print(f"doctor: cannot open stack {stack!r}: {exc}", file=sys.stderr)
        return ExitCode.CANNOT_RUN
    endpoints = endpoints_from_outputs(outputs, project=project_name(), stack=stack)
    if not endpoints:
        print(f"doctor: stack {stack!r} has no endpoints in its outputs: run pulumi up first", file=sys.stderr)
        return ExitCode.CANNOT_RUN
    if instances:
        unknown = sorted(set(instances) - {ep.instance for ep in endpoints})
        if unknown:
            print(f"doctor: stack {stack!r} has no instance {', '.join(unknown)}", file=sys.stderr)
            return ExitCode.CANNOT_RUN
        endpoints = [ep for ep in endpoints if ep.instance in instances]
    api_url = parse_stack_outputs(outputs).pangolin_url or ""
    config = stack_config(stack) if outputs_file is None else {}
    reports = diagnose(endpoints, api_url=api_url, api_key=_api_key(config), timeout=timeout)
    gateway = check_entry_points(outputs, traefik_api, stack=stack, timeout=timeout) if traefik_api else None
    elapsed = time.monotonic() - started
    if json_output:
        document = as_json(reports, stack=stack, elapsed=elapsed)
        if gateway is not None:
            document = {**document, "healthy": document["healthy"] and gateway.ok, "traefik": gateway.as_json()}
        print(json.dumps(document, indent=2))
    else:
        print(render(reports, stack=stack, elapsed=elapsed), end="")
        if gateway is not None:
            print(f"traefik: {'ok' if gateway.ok else 'BROKEN'}: {gateway.detail}")
    healthy = all(r.broken is None for r in reports) and (gateway is None or gateway.ok)
    return ExitCode.OK if healthy else ExitCode.FAILED


def _api_key(config: Mapping[str, str]) -> str | None:
    """The key in the one lookup order (the stack secret, then PANGOLIN_API_KEY); never printed."""
    try:
        return find_api_key(config, os.environ)[0]
    except ValueError:
        return None  # not set, or not a key: the Pangolin check says so
