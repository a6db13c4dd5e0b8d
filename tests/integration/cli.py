"""The real pulumi CLI (and the scripts around it) as a subprocess, for output the Automation API does not give:
`preview --json`, `--policy-pack` text, a script's exit code and stderr."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ssh_gateway.plumbing.toolchain import REPO, pulumi_env


def run(argv: list[str], *, cwd: Path = REPO, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Runs `argv` with the offline toolchain's environment (plus `env`) and captures its text."""
    return subprocess.run(
        argv, cwd=cwd, env={**pulumi_env(), **(env or {})}, capture_output=True, text=True, timeout=600, check=False
    )


def pulumi(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run(["pulumi", *args], cwd=cwd, env=env)
