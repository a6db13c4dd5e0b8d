"""A stack's outputs as `pulumi stack output --json` prints them, for the commands that read them from the outside:
from the offline toolchain's backend, the environment's (--ambient), or a file a person saved (--outputs)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ssh_gateway.plumbing.pulumi_cli import PulumiFailed, run_pulumi
from ssh_gateway.plumbing.toolchain import REPO, pulumi_env, require_pulumi

__all__ = ["outputs_of"]


def outputs_of(stack: str, outputs_file: Path | None, *, ambient: bool = False) -> dict[str, Any]:
    """The outputs of `stack` (or those saved in `outputs_file`); ValueError or OSError saying why not."""
    if outputs_file is not None or ambient:
        document = json.loads(outputs_file.read_text() if outputs_file is not None else _ambient_outputs(stack))
        if not isinstance(document, dict):
            raise ValueError(f"{outputs_file or stack}: not the JSON object `pulumi stack output --json` prints")
        return document
    from pulumi import automation as auto

    from ssh_gateway.ops.shared.automation import workspace_options

    require_pulumi()
    try:
        selected = auto.select_stack(stack, work_dir=str(REPO), opts=workspace_options())
    except auto.StackNotFoundError:
        raise ValueError(f"no stack {stack!r} in the backend ({pulumi_env()['PULUMI_BACKEND_URL']})") from None
    return {key: value.value for key, value in selected.outputs().items()}


def _ambient_outputs(stack: str) -> str:
    """`pulumi stack output --json` with the environment's pulumi and backend (a shared one, e.g. azblob://)."""
    try:
        return run_pulumi(["stack", "output", "--json", "--stack", stack], work_dir=REPO, env=os.environ)
    except PulumiFailed as exc:
        raise ValueError(str(exc)) from None
