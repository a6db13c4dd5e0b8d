"""`pulumi preview --json` run on a stack, and `ssh-gateway preview-summary` (ssh_gateway/ops/commands/), which
renders it; `ssh-gateway instances` shows the preview of its edit through `run_preview` too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ssh_gateway.ops.command import say_error
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.plumbing.toolchain import REPO, pulumi_env

from .summary import summary_json, summary_markdown

__all__ = ["preview_summary", "run_preview"]


@dataclass(frozen=True)
class PreviewRun:
    """A `pulumi preview --json` run: its exit code and its document (None when it printed no JSON)."""

    code: int
    document: Mapping[str, Any] | None


def run_preview(stack: str, *, ambient: bool = False, extra: Sequence[str] = ()) -> PreviewRun:
    """`pulumi preview --json --stack STACK` from the repo; its progress and errors go to our stderr."""
    env = dict(os.environ) if ambient else pulumi_env()
    argv = ["pulumi", "preview", "--json", "--stack", stack, *extra]
    result = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True, check=False)  # noqa: S603
    try:
        document = json.loads(result.stdout) if result.stdout.strip() else None
    except json.JSONDecodeError:
        document = None
    return PreviewRun(result.returncode, document if isinstance(document, Mapping) else None)


def _read_file(file: Path) -> PreviewRun | None:
    text = sys.stdin.read() if str(file) == "-" else file.read_text()
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        say_error(f"{file} is not the JSON of `pulumi preview --json` ({exc})")
        return None
    return PreviewRun(0, document if isinstance(document, Mapping) else None)


def preview_summary(
    stack: str | None,
    *,
    file: Path | None = None,
    ambient: bool = False,
    extra: Sequence[str] = (),
    json_output: bool = False,
) -> int:
    """The summary of the preview of `stack` (run with `extra` arguments) or of the document in `file` ('-':
    stdin), as Markdown or JSON: OK, FAILED when the preview failed (rendered all the same), CANNOT_RUN with no
    document."""
    if file is not None:
        preview = _read_file(file)
        if preview is None:
            return ExitCode.CANNOT_RUN
    elif stack is None:
        say_error("preview-summary needs a STACK (or --file)")
        return ExitCode.CANNOT_RUN
    else:
        preview = run_preview(stack, ambient=ambient, extra=extra)
    if preview.document is None:
        say_error(f"pulumi preview printed no JSON (exit code {preview.code})")
        return ExitCode.CANNOT_RUN
    if json_output:
        print(json.dumps({"previewExitCode": preview.code, **summary_json(preview.document)}, indent=2))
    else:
        sys.stdout.write(summary_markdown(preview.document))
    return ExitCode.OK if preview.code == 0 else ExitCode.FAILED
