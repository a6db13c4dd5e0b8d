"""Values a preview does not know yet, as the dynamic provider server hands them to `check` and `diff`.

pulumi 3.259.0's `dynamic/__main__.py` deserializes with `keep_unknowns=True`, which turns the wire sentinel
into a `pulumi.output.Unknown` instance; other paths keep the sentinel string. Both are recognised.
"""

from __future__ import annotations

from typing import Any

from pulumi.output import Unknown
from pulumi.runtime.rpc import UNKNOWN

__all__ = ["has_unknowns", "is_unknown"]


def is_unknown(value: object) -> bool:
    """Whether this one value is unknown."""
    return isinstance(value, Unknown) or (isinstance(value, str) and value == UNKNOWN)


def has_unknowns(value: Any) -> bool:
    """Whether a value, or anything in it, is still unknown."""
    if isinstance(value, dict):
        return any(has_unknowns(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(has_unknowns(v) for v in value)
    return is_unknown(value)
