"""`ssh-gateway host-identity`: ssh_gateway/ops/tools/host_identity_files.py (`host_identity`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

from ssh_gateway.ops.command import Command, add_ambient
from ssh_gateway.ops.exit_codes import ExitCode

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", required=True, help="the stack")
    parser.add_argument("--instance", required=True, help="the instance (as in ssh-gateway:instances)")
    parser.add_argument("--write", type=Path, metavar="DIR", help="write the files into DIR (mode 0600)")
    add_ambient(parser)


def _run(args: argparse.Namespace) -> int:
    from ssh_gateway.ops.tools.host_identity_files import host_identity

    return host_identity(str(args.stack), str(args.instance), ambient=bool(args.ambient), write_dir=args.write)


COMMAND: Final = Command(
    name="host-identity",
    summary="an instance's host key and certificate, derived from the stack (for hosts no Secret serves)",
    description="An instance's host key and certificate, derived from the stack's host-key root and CA (its "
    "state) and its config, for a host no Kubernetes Secret serves (a static target, rendered manifests). "
    "Without --write: the three files as JSON. With --write DIR: the files in DIR, mode 0600, for sshd's "
    "HostKey and HostCertificate lines. Run it again from the date it prints, after a CA rotation or a "
    "hostKeyGeneration bump.",
    examples=(
        "ssh-gateway host-identity --stack dev --instance vm-01 --write /etc/ssh/gateway",
        "ssh-gateway host-identity --stack dev --instance vm-01 | jq -r '.\"ssh_host_ed25519_key-cert.pub\"'",
        "ssh-gateway host-identity --ambient --stack prod --instance vm-01 --write out/   # CI: its backend",
    ),
    codes={
        ExitCode.OK: "printed or written",
        ExitCode.CANNOT_RUN: "no toolchain, no such stack, a stack never brought up, a config the settings reject",
        ExitCode.REFUSED: "no such instance, or the stack issues it no host key (a pinned hostKey, host identity off)",
    },
    run=_run,
    arguments=_arguments,
)
