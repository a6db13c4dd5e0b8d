"""The property names of `SshHostCa` and `SshHostKey` and the validation of their inputs.

Property keys are camelCase, as the engine, the state and `pulumi preview --diff` show them. Each check
turns a bad value into one message that names the property, the value (never a private key's) and what is
allowed; the provider reports it as a `CheckFailure` on that property (a secret input's on none, see
`SECRET_INPUTS`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from providers.unknowns import has_unknowns
from ssh_gateway.core.host_identity import (
    MAX_VALID_DAYS,
    HostIdentityError,
    key_pair_from_private_seed,
    normalize_principals,
    parse_public_key,
)

__all__ = [
    "CA_INPUT_KEYS",
    "CA_REPLACE_KEYS",
    "KEY_INPUT_KEYS",
    "KEY_REISSUE_KEYS",
    "KEY_REPLACE_KEYS",
    "SECRET_INPUTS",
    "SECRET_OUTPUTS",
    "check_inputs",
]

CA_INPUT_KEYS: Final = ("generation",)
CA_REPLACE_KEYS: Final = ("generation",)
"""A CA's key changes only with its generation: bumping it replaces the CA (a rotation with no overlap)."""

KEY_INPUT_KEYS: Final = ("principals", "validDays", "keyId", "caPublicKey", "caPrivateKey", "generation")
"""`caPrivateKey` is the signing CA's key as its seed (`private_seed`): 44 characters, not a 400-character key
file, in every host key's inputs and so in every checkpoint."""
KEY_REPLACE_KEYS: Final = ("generation",)
"""A host key changes only with its generation: bumping it replaces the key (rotates one instance)."""
KEY_REISSUE_KEYS: Final = ("principals", "validDays", "keyId", "caPublicKey")
"""Inputs the certificate is made from: a change re-issues it in place, the key stays. The CA's private key
is not compared: it belongs to `caPublicKey` (check proves it), and a secret is better left out of the diff."""

SECRET_INPUTS: Final = ("caPrivateKey",)
"""Inputs whose check failures name no property: for a failure on a property the engine prints that property's
value beside the reason, secret or not (seen with v3.259.0: a CA key file in plaintext in the diagnostics).
The reason still starts with the property's name."""

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


def _valid_days(value: Any) -> int:
    return _whole_number("validDays", value, 1, MAX_VALID_DAYS)


def _principals(value: Any) -> list[str]:
    if not isinstance(value, list | tuple):
        raise HostIdentityError(f"principals={value!r} is not allowed: expected a list of host names")
    return list(normalize_principals(value, name="principals"))


def _key_id(value: Any) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 255 or not value.isprintable():
        raise HostIdentityError(f"keyId={value!r} is not allowed: expected 1 to 255 printable characters")
    return value


def _ca_public_key(value: Any) -> str:
    if not isinstance(value, str):
        raise HostIdentityError(f"caPublicKey={value!r} is not allowed: expected 'ssh-ed25519 AAAA...'")
    return parse_public_key(value, name="caPublicKey")


def _ca_private_key(value: Any) -> str:
    if not isinstance(value, str):
        raise HostIdentityError("caPrivateKey is not a string (value not shown, it is secret): expected a seed")
    key_pair_from_private_seed(value, name="caPrivateKey")  # parses it; the messages never quote a private key
    return value


_VALIDATORS: Final[dict[str, Callable[[Any], Any]]] = {
    "generation": _generation,
    "validDays": _valid_days,
    "principals": _principals,
    "keyId": _key_id,
    "caPublicKey": _ca_public_key,
    "caPrivateKey": _ca_private_key,
}


def check_inputs(keys: tuple[str, ...], news: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Validated and normalised inputs, and (property, reason) for each bad one. An unknown value passes
    through unchecked (preview); `caPrivateKey` is also checked to be the private half of `caPublicKey`."""
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
    failed = {key for key, _ in failures}
    private, public = inputs.get("caPrivateKey"), inputs.get("caPublicKey")
    if (
        "caPrivateKey" in keys
        and not failed & {"caPrivateKey", "caPublicKey"}
        and not has_unknowns([private, public])
        and key_pair_from_private_seed(str(private), name="caPrivateKey").public_key != public
    ):
        failures.append(("caPrivateKey", "caPrivateKey is not the private half of caPublicKey (value not shown)"))
    return inputs, failures
