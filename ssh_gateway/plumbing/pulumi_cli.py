"""One way to run a `pulumi` command whose output a tool reads: captured, and explained in one line when it fails.

The tools read `pulumi stack export`, `preview --json`, `config --json` and `stack output --json` this way. A
failure is `PulumiFailed`, whose message names the command and its error lines: the error diagnostics of a
`--json` run, else the last lines of its stderr. Never its stdout, which may hold state or (with
--show-secrets) secrets.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

__all__ = ["SECRET_SIG", "SECRET_SIG_KEY", "PulumiFailed", "error_lines", "revealed", "run_pulumi"]

SECRET_SIG_KEY: Final = "4dabf18193072939515e22adb298388d"  # noqa: S105 - a format marker, no secret
SECRET_SIG: Final = "1b47061264138c4ac30d75fd1eb44270"  # noqa: S105
"""How a deployment marks a secret value (Pulumi's `sig` package): `{SECRET_SIG_KEY: SECRET_SIG, "plaintext": <JSON>}`
in a `--show-secrets` export, and the form `pulumi stack import` encrypts."""

_MAX_DETAIL: Final = 600
"""Characters of error text in one message: enough for the engine's reason, not a wall of it."""

# What a failed `preview --json` adds after its real errors, saying nothing they do not.
_NOISE: Final = frozenset({"error: preview failed"})


def error_lines(stdout: str, stderr: str) -> str:
    """The error lines of a failed command, joined: the diagnostics of a `--json` run, else its stderr's last 3."""
    try:
        diagnostics = json.loads(stdout).get("diagnostics") or []
        lines = [str(d.get("message", "")).strip() for d in diagnostics if d.get("severity") == "error"]
    except (ValueError, AttributeError):
        lines = []
    lines = [line for line in lines if line and line not in _NOISE]
    lines = lines or [line for line in stderr.strip().splitlines() if line.strip()][-3:] or ["no output"]
    return " ".join(lines)[:_MAX_DETAIL]


def _named(args: Sequence[str]) -> str:
    """`pulumi stack export --stack dev`: the command's words and its stack, not its other options."""
    words = list(itertools.takewhile(lambda arg: not arg.startswith("-"), args))
    if "--stack" in args:
        at = args.index("--stack")
        words += args[at : at + 2]
    return " ".join(["pulumi", *words])


class PulumiFailed(RuntimeError):
    """A `pulumi` command exited nonzero. `str()` names it and its error lines; `stderr` is all of its stderr."""

    def __init__(self, args: Sequence[str], code: int, stdout: str, stderr: str) -> None:
        super().__init__(f"`{_named(args)}` failed: {error_lines(stdout, stderr)}")
        self.code = code
        self.stderr = stderr


def run_pulumi(args: Sequence[str], *, work_dir: Path, env: Mapping[str, str]) -> str:
    """`pulumi ARGS --non-interactive` in `work_dir` with exactly `env` (whose PATH finds the CLI: the pinned one
    of `pulumi_env()`, or CI's); its stdout, or `PulumiFailed`."""
    argv = ["pulumi", *args, "--non-interactive"]
    done = subprocess.run(argv, cwd=work_dir, env=dict(env), capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        raise PulumiFailed(args, done.returncode, done.stdout, done.stderr)
    return done.stdout


def revealed(value: object) -> object:
    """A value of a `--show-secrets` export with its secret envelope taken off (the decoded "plaintext"); any other
    value as it is."""
    if isinstance(value, Mapping) and value.get(SECRET_SIG_KEY) == SECRET_SIG and "plaintext" in value:
        return json.loads(str(value["plaintext"]))
    return value
