"""The dynamic providers behind `SshHostCa` and `SshHostKeyRoot`: secrets drawn once, kept only in state.

There is nothing outside Pulumi to talk to: a key is drawn in `create`, lives in the resource's outputs
(`privateKey` encrypted, see `SECRET_OUTPUTS`) and never changes afterwards. Re-runs, refresh (`read` returns
the stored state) keep it; a new `generation` replaces the resource, i.e. draws a new one. The instances'
host keys and certificates are derived from these two in the program (`ssh_gateway.core.derived_identity`),
so they need no resource of their own.

The providers hold no attributes: nothing but the classes' names is pickled into `__provider`, so it need
not be a secret; this module never puts a private key into an error message.

Do not move or rename this module or its provider classes: each resource's `__provider` in every stack's state is a
pickle of `providers.host_identity.provider` `SshHostCaProvider`, `SshHostKeyRootProvider` and `SshHostKeyProvider`
(providers/__init__.py; pinned by tests/unit/test_provider_paths.py).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any

from pulumi import dynamic

from providers.key_diff import diff_keys, without_provider
from ssh_gateway.core.host_identity import generate_key_pair

from .models import CA_INPUT_KEYS, CA_REPLACE_KEYS, check_inputs

__all__ = ["SshHostCaProvider", "SshHostKeyProvider", "SshHostKeyRootProvider"]


def _failures(keys: tuple[str, ...], news: dict[str, Any]) -> dynamic.CheckResult:
    inputs, problems = check_inputs(keys, news)
    return dynamic.CheckResult(inputs, [dynamic.CheckFailure(key, reason) for key, reason in problems])


class _DrawnOnce:
    """What a key drawn once per `generation` does besides drawing it, the CA's and the root's alike. A mixin, not
    a `ResourceProvider`: state pickles only the classes below (tests/unit/test_provider_paths.py)."""

    serialize_as_secret_always = False

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> dynamic.CheckResult:
        return _failures(CA_INPUT_KEYS, news)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        # Every input is a replace key: there is never an update, so the provider has no `update`.
        return diff_keys(olds, news, CA_INPUT_KEYS, replace_keys=CA_REPLACE_KEYS)

    def read(self, id_: str, props: dict[str, Any]) -> dynamic.ReadResult:
        # The key exists only in state: refresh keeps it (and, returning no inputs, the stored inputs too).
        return dynamic.ReadResult(id_, without_provider(props))


class SshHostCaProvider(_DrawnOnce, dynamic.ResourceProvider):
    """The stack's SSH host CA: an Ed25519 key pair drawn once per `generation`."""

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        pair = generate_key_pair()
        outputs = {
            "generation": int(props["generation"]),
            "publicKey": pair.public_key,
            "privateKey": pair.private_key,
            "fingerprint": pair.fingerprint,
        }
        return dynamic.CreateResult(pair.fingerprint, outputs)


class SshHostKeyRootProvider(_DrawnOnce, dynamic.ResourceProvider):
    """The stack's host-key root: 32 random bytes drawn once per `generation`, from which every instance's host
    key is derived (`ssh_gateway.core.derived_identity`). Bumping `generation` replaces it: every key changes."""

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        raw = secrets.token_bytes(32)
        # The id names the root without revealing it (a hash of a 256-bit secret).
        digest = hashlib.sha256(b"ssh-gateway host-key root\0" + raw).hexdigest()[:32]
        outputs = {"generation": int(props["generation"]), "privateKey": base64.b64encode(raw).decode()}
        return dynamic.CreateResult(digest, outputs)


class SshHostKeyProvider(dynamic.ResourceProvider):
    """Only so that the engine can delete the `SshHostKey` records of stacks made before the host keys were
    derived (one random key per instance, kept in state): their `__provider` names this class, and a delete
    unpickles it. Deleting such a record deletes nothing else (the key lived only in state)."""

    serialize_as_secret_always = False
