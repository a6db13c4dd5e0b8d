"""Host keys and certificates derived from the stack's secrets: the same bytes on every run, so none is kept.

A host key drawn at random must be stored (one `SshHostKey` per instance: a third engine step, two more
checkpoint writes and ~3.5 KB of state per instance, rewritten at every checkpoint). A key derived from a
stack secret needs no record: the program derives it again on every run, byte for byte. So does everything
made from it, provided that every random choice in the formats is derived too:

- the host key: Ed25519 from HKDF-SHA256 of the stack's host-key root (`SshHostKeyRoot`, 32 random bytes
  drawn once per stack), the instance's name and its `hostKeyGeneration`. Not from the CA: a CA rotation
  re-signs every certificate and keeps every key (docs/host-identity.md);
- its OpenSSH private key file: OpenSSH's format opens the secret part with two equal random "check" integers
  (a decryption check), which `cryptography` draws from `os.urandom`; here they come from the key itself;
- the certificate: Ed25519 signatures are deterministic (RFC 8032); the certificate's 32-byte nonce is the
  one random field, derived here from the CA's key and the certificate's other fields, so it stays unknown to
  anyone without the CA key (the nonce's job: no chosen-prefix collision on what the CA signs); its serial
  from the key and the validity; its validity from a fixed grid (`certificate_validity`), not from the time
  of the run.

What stays as before: a key never changes with the port, the target, the routing or a re-run; bumping an
instance's `hostKeyGeneration` rotates its key alone; a certificate is re-issued when its principals, key id,
validity or signing CA change, and with a third of its validity left.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
from dataclasses import dataclass, field
from typing import Final

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .host_identity import (
    CERTIFICATE_TYPE,
    CLOCK_SKEW_SECONDS,
    KEY_TYPE,
    MAX_VALID_DAYS,
    HostIdentityError,
    KeyPair,
    Validity,
    normalize_principals,
)

__all__ = [
    "DerivedIdentity",
    "certificate_validity",
    "derive_identity",
    "derived_host_key",
    "next_window_start",
]

_SECONDS_PER_DAY: Final = 86_400
_SEED_BYTES: Final = 32
_KEY_SALT: Final = b"ssh-gateway host key v1"
_HOST_CERTIFICATE: Final = 2  # SSH2_CERT_TYPE_HOST (PROTOCOL.certkeys)
_PEM_BEGIN: Final = "-----BEGIN OPENSSH PRIVATE KEY-----"
_PEM_END: Final = "-----END OPENSSH PRIVATE KEY-----"


def _seed_bytes(seed: str, name: str) -> bytes:
    try:
        raw = base64.b64decode(seed, validate=True)
    except ValueError:
        raw = b""
    if len(raw) != _SEED_BYTES:
        raise HostIdentityError(f"{name} is not a {_SEED_BYTES}-byte seed in base64 (value not shown, it is secret)")
    return raw


def _sshstr(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _stable_key_file(key: Ed25519PrivateKey) -> str:
    """`cryptography`'s OpenSSH private key file, with its two random check integers replaced by ones derived
    from the key: the same file on every run. The check integers are the first 8 bytes of the (unencrypted)
    private section, whose offset follows from the header's length-prefixed fields (PROTOCOL.key)."""
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    body = bytearray(base64.b64decode("".join(pem.strip().splitlines()[1:-1])))
    offset = len(b"openssh-key-v1\0")
    for _ in range(3):  # ciphername, kdfname, kdfoptions
        offset += 4 + struct.unpack_from(">I", body, offset)[0]
    offset += 4  # the number of keys
    offset += 4 + struct.unpack_from(">I", body, offset)[0]  # the public key
    offset += 4  # the private section's length
    raw = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    check = hashlib.sha256(b"openssh-key-v1 check\0" + raw).digest()[:4]
    body[offset : offset + 8] = check + check
    text = base64.b64encode(bytes(body)).decode()
    lines = [text[i : i + 70] for i in range(0, len(text), 70)]
    return "\n".join([_PEM_BEGIN, *lines, _PEM_END]) + "\n"


def _public_line(key: Ed25519PrivateKey) -> str:
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def derived_host_key(root: str, instance: str, generation: int) -> KeyPair:
    """The instance's host key of `generation`, from the stack's host-key root (a 32-byte seed, base64)."""
    if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
        raise HostIdentityError(f"hostKeyGeneration={generation!r} is not allowed: expected a whole number >= 0")
    info = f"{instance}\0{generation}".encode()
    seed = HKDF(algorithm=hashes.SHA256(), length=_SEED_BYTES, salt=_KEY_SALT, info=info).derive(
        _seed_bytes(root, "the host-key root")
    )
    key = Ed25519PrivateKey.from_private_bytes(seed)
    return KeyPair(private_key=_stable_key_file(key), public_key=_public_line(key))


def certificate_validity(valid_days: int, now: int) -> Validity:
    """The validity of a certificate issued at `now`: `valid_days` from the start of the current window (minus
    `CLOCK_SKEW_SECONDS`), windows of two thirds of `valid_days` counted from the Unix epoch.

    Every run inside one window gives the same validity (so the same certificate); the next window's
    certificate replaces it when a third of its validity is left.
    """
    if isinstance(valid_days, bool) or not isinstance(valid_days, int) or not 1 <= valid_days <= MAX_VALID_DAYS:
        raise HostIdentityError(
            f"validDays={valid_days!r} is not allowed: expected a whole number from 1 to {MAX_VALID_DAYS}"
        )
    period = valid_days * _SECONDS_PER_DAY
    window = period * 2 // 3
    start = now - now % window
    return Validity(valid_after=start - CLOCK_SKEW_SECONDS, valid_before=start + period)


def next_window_start(validity: Validity) -> int:
    """When the window after the one `certificate_validity` gave `validity` in begins: from then on a run issues
    the next certificate."""
    start = validity.valid_after + CLOCK_SKEW_SECONDS
    return start + (validity.valid_before - start) * 2 // 3


def signed_certificate(
    *, ca_seed: str, host_public_key: str, principals: tuple[str, ...], key_id: str, validity: Validity
) -> str:
    """The OpenSSH host certificate (PROTOCOL.certkeys) of `host_public_key`, signed by the CA of `ca_seed`,
    as one `-cert.pub` line. Deterministic: the nonce and the serial are derived, the signature is Ed25519's."""
    ca = Ed25519PrivateKey.from_private_bytes(_seed_bytes(ca_seed, "the CA key"))
    fields = host_public_key.split()
    if len(fields) < 2 or fields[0] != KEY_TYPE:
        raise HostIdentityError(f"host public key {host_public_key[:40]!r} is not '{KEY_TYPE} AAAA...'")
    host_blob = base64.b64decode(fields[1])
    host_key = host_blob[4 + len(KEY_TYPE) + 4 :]  # string "ssh-ed25519", string key
    names = normalize_principals(principals)
    if not key_id or len(key_id) > 255 or not key_id.isprintable():
        raise HostIdentityError(f"keyId={key_id!r} is not allowed: expected 1 to 255 printable characters")
    ca_public = base64.b64decode(_public_line(ca).split()[1])
    # What the CA vouches for, but the nonce and the serial, which are derived from it.
    vouched = b"".join(
        [
            _sshstr(host_key),
            struct.pack(">I", _HOST_CERTIFICATE),
            _sshstr(key_id.encode()),
            _sshstr(b"".join(_sshstr(n.encode()) for n in names)),
            struct.pack(">QQ", validity.valid_after, validity.valid_before),
            _sshstr(b""),  # critical options: none for a host certificate
            _sshstr(b""),  # extensions: none
            _sshstr(b""),  # reserved
            _sshstr(ca_public),
        ]
    )
    ca_raw = ca.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    nonce = hmac.new(ca_raw, b"ssh-gateway certificate nonce\0" + vouched, hashlib.sha256).digest()
    serial = int.from_bytes(hashlib.sha256(b"serial\0" + vouched).digest()[:8], "big") >> 1
    body = b"".join(
        [
            _sshstr(CERTIFICATE_TYPE.encode()),
            _sshstr(nonce),
            _sshstr(host_key),
            struct.pack(">Q", serial),
            vouched[4 + len(host_key) :],
        ]
    )
    signature = _sshstr(KEY_TYPE.encode()) + _sshstr(ca.sign(body))
    return f"{CERTIFICATE_TYPE} {base64.b64encode(body + _sshstr(signature)).decode()}"


@dataclass(frozen=True)
class DerivedIdentity:
    """An instance's host key and certificate, as its three files."""

    private_key: str = field(repr=False)
    """The `ssh_host_ed25519_key` file. Secret."""
    public_key: str
    """`ssh-ed25519 AAAA...`."""
    certificate: str
    """`ssh-ed25519-cert-v01@openssh.com AAAA...`."""


def derive_identity(
    *,
    root: str,
    ca_seed: str,
    instance: str,
    generation: int,
    principals: tuple[str, ...],
    key_id: str,
    valid_days: int,
    now: int,
) -> DerivedIdentity:
    """The instance's key of `generation` and its certificate from the CA of `ca_seed`, valid at `now`."""
    pair = derived_host_key(root, instance, generation)
    certificate = signed_certificate(
        ca_seed=ca_seed,
        host_public_key=pair.public_key,
        principals=principals,
        key_id=key_id,
        validity=certificate_validity(valid_days, now),
    )
    return DerivedIdentity(private_key=pair.private_key, public_key=pair.public_key, certificate=certificate)
