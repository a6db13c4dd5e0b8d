"""The property names of `SshHostCa` and `SshHostKeyRoot` and the validation of their inputs.

Property keys are camelCase, as the engine, the state and `pulumi preview --diff` show them. Each check
turns a bad value into one message that names the property, the value (never a private key's) and what is
allowed; the provider reports it as a `CheckFailure` on that property.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from providers.unknowns import has_unknowns
from ssh_gateway.core.host_identity import HostIdentityError

__all__ = ["CA_INPUT_KEYS", "CA_REPLACE_KEYS", "SECRET_OUTPUTS", "check_inputs"]

CA_INPUT_KEYS: Final = ("generation",)
CA_REPLACE_KEYS: Final = ("generation",)
"""A CA's key (and the host-key root) changes only with its generation: bumping it replaces the resource (for
the CA, a rotation with no overlap)."""

SECRET_OUTPUTS: Final = ("privateKey",)
"""Outputs the engine must encrypt in state (the resources pass them as `additional_secret_outputs`)."""

_MAX_GENERATION: Final = 2**31 - 1


def _whole_number(key: str, value: Any, low: int, high: int) -> int:
    # The engine sends numbers as floats (3.0); bools and strings are refused, not coerced.
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value or not low <= value <= high:
        raise HostIdentityError(f"{key}={value!r} is not allowed: expected a whole number from {low} to {high}")
    return int(value)


def _generation(value: Any) -> int:
    return _whole_number("generation", value, 0, _MAX_GENERATION)


_VALIDATORS: Final[dict[str, Callable[[Any], Any]]] = {
    "generation": _generation,
}


def check_inputs(keys: tuple[str, ...], news: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Validated and normalised inputs, and (property, reason) for each bad one. An unknown value passes
    through unchecked (preview)."""
    inputs = dict(news)
    failures: list[tuple[str, str]] = []
    for key in keys:
        value = news.get(key)
        if has_unknowns(value):
            continue
        if value is None:
            failures.append((key, f"{key} is required"))
            continue
        try:
            inputs[key] = _VALIDATORS[key](value)
        except HostIdentityError as exc:
            failures.append((key, str(exc)))
    return inputs, failures
