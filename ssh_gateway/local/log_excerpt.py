"""The lines of a local process's log worth putting into an exception's text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

__all__ = ["log_excerpt"]


def log_excerpt(log_file: Path, is_problem: Callable[[str], bool], lines: int) -> str:
    """The log's last `lines` problem lines (or, if none, its last lines), indented under a header; "" if none."""
    if not log_file.exists():
        return ""
    logged = log_file.read_text(errors="replace").splitlines()
    tail = [line for line in logged if is_problem(line)][-lines:] or logged[-lines:]
    return f"\n  last lines of {log_file}:\n    " + "\n    ".join(tail) if tail else ""
