"""`ssh-gateway preview-summary`: ssh_gateway/ops/preview/ (`preview_summary`), a stack's `pulumi preview --json`
rendered for a reviewer."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

from ssh_gateway.ops.command import Command, add_ambient
from ssh_gateway.ops.exit_codes import ExitCode

__all__ = ["COMMAND"]


def _run(args: argparse.Namespace) -> int:
    from ssh_gateway.ops.preview.run import preview_summary

    return preview_summary(
        args.stack,
        file=args.file,
        ambient=bool(args.ambient),
        extra=[str(a) for a in args.preview_args],
        json_output=bool(args.json),
    )


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
