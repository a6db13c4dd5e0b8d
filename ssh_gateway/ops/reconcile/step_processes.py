"""How the reconciler runs a stack's step: the project's own `ssh-gateway recover` or `up` as a process, a bounded
number at once. Light to import: `ssh-gateway reconcile --help` shows its default."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ssh_gateway.core.log_events import JSON_LOG_ENV
from ssh_gateway.plumbing.toolchain import REPO

if TYPE_CHECKING:  # the worker imports the kubernetes client
    from .worker import Action, RunStep

__all__ = ["PARALLEL_STEPS", "subprocess_steps"]

PARALLEL_STEPS: Final = 2
"""How many stacks' `recover`s and `up`s run at once by default: each is a pulumi engine, the program and its
providers (a first `up` of 250 pods peaks at 0.8 GiB with them), and an `up` is CPU-bound, so a reconciler of 40
shards starting 40 together only runs out of memory (the Deployment's limit is 2 GiB) and gains no time on its
cores."""


def subprocess_steps(
    *, ambient: bool, skip_preview: bool, parallel: int = PARALLEL_STEPS, work_dir: Path = REPO
) -> RunStep:
    """Each step as the project's own command, `python -m ssh_gateway.ops <action> --stack S` (its commands import
    their tool only when they run), in this process's group (a container killed kills it too: the next start heals
    what it left), at most `parallel` at once across the stacks (the others wait their turn). Its phases join this
    log."""
    env = {**os.environ, JSON_LOG_ENV: "1"}
    turns = threading.BoundedSemaphore(parallel)

    def run(action: Action, stack: str, arguments: Sequence[str]) -> int:
        argv = [sys.executable, "-m", "ssh_gateway.ops", action, "--stack", stack, *arguments]
        argv += ["--ambient"] if ambient else []
        argv += ["--", "--skip-preview"] if skip_preview and action == "up" else []
        with turns:
            return subprocess.run(argv, cwd=work_dir, env=env, check=False).returncode  # noqa: S603 - our own argv

    return run
