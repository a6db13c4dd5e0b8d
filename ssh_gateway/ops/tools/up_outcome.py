"""What a finished `pulumi up` (or a first `up`'s decision preview) means for `ssh-gateway up`: its exit code, as
docs/commands.md gives them, and the one hint line that says what to do next.

pulumi's own codes (`pkg/cmd/pulumi/cmd/exit_codes.go`) are not this project's: its 3 is an authentication
error, where ours is "refused". So they are mapped, never passed on: 0 stays 0; a run the program or a provider
refused (`core/refusal_note.py`) is 3; pulumi's "configuration error", "authentication error" and "stack not found"
are 2 (cannot run); a cancel or a SIGINT is 130; anything else is 1. The hint comes from the run's errors, read
from pulumi's `--event-log`: after Azure's `SecurityRuleConflict` run again (the next `up` reads the NSG again and
picks a free priority), after Azure's 429 wait first, after anything else the generic one.
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ssh_gateway.ops.exit_codes import ExitCode

__all__ = ["UpOutcome", "error_messages", "up_outcome"]

_PULUMI_CANNOT_RUN: Final = frozenset({2, 3, 6})
"""pulumi's ExitConfigurationError, ExitAuthenticationError, ExitStackNotFound."""
_PULUMI_CANCELLED: Final = 8

_CONFLICT: Final = "SecurityRuleConflict"
_THROTTLED: Final = ("Status=429", "TooManyRequests", 'Code="RetryableError"')
"""How azure-native's error shows Azure's 429 (throttling, or an NSG busy past its retries)."""


@dataclass(frozen=True)
class UpOutcome:
    """The exit code of `ssh-gateway up` and the line it prints last (None after a success)."""

    code: int
    hint: str | None


def error_messages(event_log: Path) -> list[str]:
    """The error diagnostics of a run, from pulumi's `--event-log` (one JSON event a line); none when the file is
    absent or unreadable (the run never started)."""
    try:
        lines = event_log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # the last line of a killed run may be cut
        diagnostic = event.get("diagnosticEvent") if isinstance(event, dict) else None
        if isinstance(diagnostic, dict) and diagnostic.get("severity") == "error":
            found.append(str(diagnostic.get("message", "")))
    return found


def up_outcome(stack: str, pulumi_code: int, *, refusals: list[str], errors: list[str]) -> UpOutcome:
    """The outcome of a run that ended with `pulumi_code` (negative: killed by that signal), with the `refusals`
    the program and providers noted and the run's error `errors`."""
    again = f"ssh-gateway up --stack {stack}"
    if pulumi_code == 0:
        return UpOutcome(ExitCode.OK, None)
    if refusals:
        return UpOutcome(
            ExitCode.REFUSED, f"up {stack}: refused, nothing was written: change what the error names, then {again}"
        )
    if pulumi_code in _PULUMI_CANNOT_RUN:
        return UpOutcome(ExitCode.CANNOT_RUN, f"up {stack}: pulumi cannot run it (exit {pulumi_code}): see its error")
    if pulumi_code in (_PULUMI_CANCELLED, -signal.SIGINT):
        return UpOutcome(ExitCode.INTERRUPTED, _interrupted(stack))
    text = "\n".join(errors)
    if _CONFLICT in text:
        hint = (
            f"up {stack}: Azure refused an NSG rule's priority ({_CONFLICT}): another stack took it between this "
            f"run's read of the NSG and its create. Run {again} again: it reads the NSG again and picks a free "
            "priority (docs/troubleshooting.md)"
        )
    elif any(mark in text for mark in _THROTTLED):
        hint = (
            f"up {stack}: Azure throttled a request (429) past azure-native's retries: wait a few minutes, then "
            f"{again}; run fewer stacks against one subscription at once (docs/troubleshooting.md)"
        )
    else:
        hint = f"up {stack}: pulumi up failed (exit {pulumi_code}). {_interrupted(stack)}"
    return UpOutcome(ExitCode.FAILED, hint)


def _interrupted(stack: str) -> str:
    return (
        f"If it was interrupted (killed, a runner lost): ssh-gateway recover --stack {stack}, then "
        f"ssh-gateway up --stack {stack}"
    )
