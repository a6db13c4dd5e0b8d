"""Host keys and certificates as tests need them, which the product never makes.

The product derives every instance's key and certificate (`ssh_gateway/core/derived_identity.py`). Tests also
need a certificate from any CA with any validity (a stale one, another stack's), a key back from the seed that
state keeps of it, and a check that a Secret's three files belong together. The certificates here are signed by
`cryptography`'s `SSHCertificateBuilder`, a second signer beside the product's hand-built one: what OpenSSH and
the doctor accept from one, they must accept from the other.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterable

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ssh_gateway.core import host_identity as hi

DAY = 86_400


def validity_for_days(days: int, *, now: int | None = None) -> hi.Validity:
    """`days` from now, from `CLOCK_SKEW_SECONDS` before it, as a certificate the product issues would be."""
    issued = int(time.time()) if now is None else now
    return hi.Validity(valid_after=issued - hi.CLOCK_SKEW_SECONDS, valid_before=issued + days * DAY)


def renewal_due(valid_after: int, valid_before: int, *, now: int) -> bool:
    """True once less than a third of a certificate's validity is left: when the product's next validity
    window must have begun, so that a stack run at least that often never serves an expired certificate."""
    return now >= valid_before - (valid_before - valid_after) // 3


def sign_host_certificate(
    *,
    ca_private_key: str,
    host_public_key: str,
    principals: Iterable[str],
    key_id: str,
    validity: hi.Validity,
    serial: int,
) -> str:
    """An OpenSSH host certificate for `host_public_key`, as the one line of a `-cert.pub` file."""
    ca = serialization.load_ssh_private_key(ca_private_key.encode(), password=None)
    host = serialization.load_ssh_public_identity(host_public_key.encode())
    assert isinstance(ca, Ed25519PrivateKey) and isinstance(host, Ed25519PublicKey)
    certificate = (
        serialization.SSHCertificateBuilder()
        .public_key(host)
        .serial(serial)
        .type(serialization.SSHCertificateType.HOST)
        .key_id(key_id.encode())
        .valid_principals([n.encode() for n in hi.normalize_principals(principals)])
        .valid_after(validity.valid_after)
        .valid_before(validity.valid_before)
        .sign(ca)
    )
    return certificate.public_bytes().decode()


def key_pair_from_private_seed(seed: str) -> hi.KeyPair:
    """The key pair of a `private_seed` (what state keeps of a CA's or the host-key root's key)."""
    return hi.key_pair_from_seed(base64.b64decode(seed, validate=True))


def checked_secret_files(*, private_key: str, public_key: str, certificate: str) -> dict[str, str]:
    """`secret_files` of three files, asserted to belong together: the private half of the public key, and a
    certificate of that key whose signature verifies."""
    public = hi.parse_public_key(public_key)
    assert hi.public_key_of(private_key) == public, f"the private key is not the other half of {hi.fingerprint(public)}"
    certified = hi.parse_host_certificate(certificate).public_key
    assert certified == public, f"the certificate is of {hi.fingerprint(certified)}, not {hi.fingerprint(public)}"
    return hi.secret_files(private_key=private_key, public_key=public, certificate=certificate)
