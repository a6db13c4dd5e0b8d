"""The dynamic providers behind `SshHostCa` and `SshHostKey`: keys generated once, kept only in state.

There is nothing outside Pulumi to talk to: a key is drawn in `create`, lives in the resource's outputs
(`privateKey` encrypted, see `SECRET_OUTPUTS`) and never changes afterwards. Re-runs, refresh (`read` returns
the stored state) and changes of any input but `generation` keep it; `generation` replaces the resource, i.e.
draws a new key. A host key's certificate is re-issued in `update` when what it is made from changes (the
principals, the validity, the key id, the CA) or when a third of its validity is left.

The providers hold no attributes: nothing but the classes' names is pickled into `__provider`, so it need
not be a secret. The engine sends secret inputs (the CA's private key) in plaintext, since dynamic providers
do not accept secrets, and re-marks same-named outputs as secret; this module never puts a private key
into an error message.
"""

from __future__ import annotations

import secrets
from typing import Any, Final

from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    CreateResult,
    DiffResult,
    ReadResult,
    ResourceProvider,
    UpdateResult,
)

from providers.unknowns import has_unknowns
from ssh_gateway.core.host_identity import (
    Validity,
    fingerprint,
    generate_key_pair,
    key_pair_from_private_seed,
    renewal_due,
    sign_host_certificate,
)

from .models import (
    CA_INPUT_KEYS,
    CA_REPLACE_KEYS,
    KEY_INPUT_KEYS,
    KEY_REISSUE_KEYS,
    KEY_REPLACE_KEYS,
    SECRET_INPUTS,
    check_inputs,
)

__all__ = ["SshHostCaProvider", "SshHostKeyProvider"]

# Numbers cross the engine as float64: a serial above 2**53 would come back rounded.
_SERIAL_LIMIT: Final = 2**53


def changed_keys(olds: dict[str, Any], news: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    """Which of `keys` differ between the stored outputs and the new inputs (unknown counts as changed).

    Only the named keys are compared, so `__provider` (which changes with a Pulumi or dill upgrade) and the
    computed outputs never make a diff.
    """
    return [key for key in keys if has_unknowns(news.get(key)) or olds.get(key) != news.get(key)]


def _stored(props: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in props.items() if key != "__provider"}


def _failures(keys: tuple[str, ...], news: dict[str, Any]) -> CheckResult:
    inputs, problems = check_inputs(keys, news)
    return CheckResult(inputs, [CheckFailure("" if key in SECRET_INPUTS else key, reason) for key, reason in problems])


class SshHostCaProvider(ResourceProvider):
    """The stack's SSH host CA: an Ed25519 key pair drawn once per `generation`."""

    serialize_as_secret_always = False

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        return _failures(CA_INPUT_KEYS, news)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = changed_keys(olds, news, CA_INPUT_KEYS)
        # Every input is a replace key: there is never an update, so the provider has no `update`.
        return DiffResult(changes=bool(changed), replaces=[k for k in changed if k in CA_REPLACE_KEYS])

    def create(self, props: dict[str, Any]) -> CreateResult:
        pair = generate_key_pair()
        outputs = {
            "generation": int(props["generation"]),
            "publicKey": pair.public_key,
            "privateKey": pair.private_key,
            "fingerprint": pair.fingerprint,
        }
        return CreateResult(pair.fingerprint, outputs)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        # The key exists only in state: refresh keeps it (and, returning no inputs, the stored inputs too).
        return ReadResult(id_, _stored(props))


def _certificate_outputs(inputs: dict[str, Any], public_key: str) -> dict[str, Any]:
    """A fresh certificate for `public_key` from the checked inputs, and the outputs that describe it."""
    validity = Validity.for_days(int(inputs["validDays"]))
    serial = secrets.randbelow(_SERIAL_LIMIT)
    certificate = sign_host_certificate(
        ca_private_key=key_pair_from_private_seed(str(inputs["caPrivateKey"]), name="caPrivateKey").private_key,
        host_public_key=public_key,
        principals=list(inputs["principals"]),
        key_id=str(inputs["keyId"]),
        validity=validity,
        serial=serial,
    )
    return {
        # The inputs the certificate was made from, so that `diff` (which sees only outputs) can compare them.
        # Not `caPrivateKey`: the outputs need not hold the CA's secret a second time. Not `caPublicKey`: the CA
        # is compared by `caFingerprint` (`_reissue_changes`), ~95 bytes less per instance in every checkpoint.
        **{key: inputs[key] for key in KEY_INPUT_KEYS if key not in ("caPrivateKey", "caPublicKey")},
        "certificate": certificate,
        "serial": serial,
        "validAfter": validity.valid_after,
        "validBefore": validity.valid_before,
        "caFingerprint": fingerprint(str(inputs["caPublicKey"])),
    }


def _reissue_changes(olds: dict[str, Any], news: dict[str, Any]) -> list[str]:
    """Which inputs of the certificate differ from those it was made from; the CA by its fingerprint (state
    written before the outputs dropped `caPublicKey` has `caFingerprint` too)."""
    changed = changed_keys(olds, news, tuple(key for key in KEY_REISSUE_KEYS if key != "caPublicKey"))
    public = news.get("caPublicKey")
    if has_unknowns(public) or olds.get("caFingerprint") != fingerprint(str(public)):
        changed.append("caPublicKey")
    return changed


class SshHostKeyProvider(ResourceProvider):
    """One instance's Ed25519 host key, drawn once per `generation`, with its host certificate."""

    serialize_as_secret_always = False

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        return _failures(KEY_INPUT_KEYS, news)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = changed_keys(olds, news, KEY_REPLACE_KEYS) + _reissue_changes(olds, news)
        renew = not changed and renewal_due(int(olds.get("validAfter", 0)), int(olds.get("validBefore", 0)))
        return DiffResult(
            changes=bool(changed) or renew,
            replaces=[key for key in changed if key in KEY_REPLACE_KEYS],
            delete_before_replace=False,
        )

    def create(self, props: dict[str, Any]) -> CreateResult:
        pair = generate_key_pair()
        outputs = {
            **_certificate_outputs(props, pair.public_key),
            "publicKey": pair.public_key,
            "privateKey": pair.private_key,
            "fingerprint": pair.fingerprint,
        }
        return CreateResult(pair.fingerprint, outputs)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        """Re-issues the certificate for the key already in state; the key itself is carried over untouched."""
        keep = {key: olds[key] for key in ("publicKey", "privateKey", "fingerprint")}
        return UpdateResult({**_certificate_outputs(news, str(olds["publicKey"])), **keep})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_, _stored(props))
