"""The doctor's arguments, defined once: `python -m ssh_gateway.ops.doctor` and `ssh-gateway doctor` both add them.

This module loads nothing but argparse, so the CLI can build its `--help` without the Pulumi SDK.
"""

from __future__ import annotations

import argparse

__all__ = ["add_arguments"]


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--stack, --json, --timeout, --instance and --traefik-api, as the doctor reads them."""
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
