"""`ssh-gateway preview-summary`: a stack's `pulumi preview --json`, rendered by ssh_gateway/ops/preview_summary.py.

`run_preview` and the two renderings are `instances`' too: it shows the preview of the edit it made.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ssh_gateway.ops.command import Command, add_ambient, say_error
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.plumbing.toolchain import REPO, pulumi_env

__all__ = ["COMMAND", "run_preview", "summary_json", "summary_markdown"]


@dataclasses.dataclass(frozen=True)
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


def summary_json(document: Mapping[str, Any]) -> dict[str, Any]:
    """The summary of a preview's document, as JSON."""
    from ssh_gateway.ops.preview_summary import summarize

    return dataclasses.asdict(summarize(document))


def summary_markdown(document: Mapping[str, Any]) -> str:
    """The summary of a preview's document, as the reviewer's Markdown."""
    from ssh_gateway.ops.preview_summary import render, summarize

    return render(summarize(document))


def _run(args: argparse.Namespace) -> int:
    if args.file is not None:
        text = sys.stdin.read() if str(args.file) == "-" else args.file.read_text()
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            say_error(f"{args.file} is not the JSON of `pulumi preview --json` ({exc})")
            return ExitCode.CANNOT_RUN
        preview = PreviewRun(0, document if isinstance(document, Mapping) else None)
    elif args.stack is None:
        say_error("preview-summary needs a STACK (or --file)")
        return ExitCode.CANNOT_RUN
    else:
        preview = run_preview(args.stack, ambient=args.ambient, extra=args.preview_args)
    if preview.document is None:
        say_error(f"pulumi preview printed no JSON (exit code {preview.code})")
        return ExitCode.CANNOT_RUN
    if args.json:
        print(json.dumps({"previewExitCode": preview.code, **summary_json(preview.document)}, indent=2))
    else:
        sys.stdout.write(summary_markdown(preview.document))
    return ExitCode.OK if preview.code == 0 else ExitCode.FAILED


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", nargs="?")
    parser.add_argument("preview_args", nargs="*", metavar="-- PREVIEW_ARG", help="passed to `pulumi preview`")
    parser.add_argument("--file", type=Path, help="render this `pulumi preview --json` document ('-': stdin)")
    parser.add_argument("--json", action="store_true", help="the summary as JSON, not Markdown")
    add_ambient(parser)


COMMAND: Final = Command(
    name="preview-summary",
    summary="the reviewer's table of a preview: endpoints, ports, targets, NSG rules",
    description="Runs `pulumi preview --json` on a stack (or reads one from --file) and renders one row "
    "per instance the preview touches, then the warnings (range nearly full, ports freed, rules open to "
    "anyone, the preview's errors). A broken preview still renders what it could, and exits 1.",
    examples=[
        "ssh-gateway preview-summary dev",
        "ssh-gateway preview-summary dev -- --refresh       # more `pulumi preview` arguments after --",
        "ssh-gateway preview-summary --ambient dev > summary.md   # in CI",
        "ssh-gateway preview-summary --file preview.json --json",
    ],
    codes={
        ExitCode.OK: "the preview succeeded and its summary is printed",
        ExitCode.FAILED: "the preview failed; what it could show is rendered, with its errors",
        ExitCode.CANNOT_RUN: "the preview printed no JSON (no such stack, no toolchain), or --file is not its JSON",
    },
    run=_run,
    arguments=_arguments,
)
