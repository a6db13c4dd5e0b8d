"""`StackRefused`: a `RunError` that refuses the run (ssh_gateway/core/refusal_note.py), as opposed to one that
reports a read that failed."""

from __future__ import annotations

import pulumi

__all__ = ["StackRefused"]


class StackRefused(pulumi.RunError):
    """The stack cannot run as configured, against what exists (a config value, one of Azure's limits, a missing
    NSG, a bound port): decided before anything is written, and the same at every run until a person acts."""
