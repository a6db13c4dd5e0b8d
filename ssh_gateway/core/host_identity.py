"""Host identity of the instances' sshd: Ed25519 keys, OpenSSH host certificates and known_hosts lines.

Every instance serves a host key of its own and a host certificate signed by the stack's SSH host CA whose
principals are every name a client dials. Both are derived from the stack's secrets on every run, the same bytes
each time (`derived_identity`); this module holds the formats they share with the tools that read them back. A
laptop then trusts all of the stack's instances, today's and tomorrow's, with one `@cert-authority` line in
known_hosts, and never sees a host-key prompt or a `REMOTE HOST IDENTIFICATION HAS CHANGED` again: ports may
move, pods restart, Services be replaced. docs/host-identity.md maps the files that take a key from the config
to the pod.

The cryptography is the `cryptography` library's (Ed25519, OpenSSH key files), not hand-written curve
arithmetic. Everything here is pure apart from drawing a fresh key (the CA's, drawn once per stack); nothing
knows Pulumi.

How OpenSSH's client checks a host, which the known_hosts patterns below are built around (ssh(1), sshd(8)
"SSH_KNOWN_HOSTS FILE FORMAT", and `check_host_key` in openssh-portable's sshconnect.c):

- known_hosts is looked up under the name dialled, written `[host]:port` when the port is not 22, or under
  `HostKeyAlias` exactly when one is set. Patterns are matched against that whole string with `*` and `?` as
  the only wildcards (`[` and `]` are plain characters), so `[ssh-*.example.com]:*` covers every instance on
  every port and `ssh-*.example.com` covers port 22 and an alias.
- A certificate's principals are matched against the host name without the port, lowercased, or against
  `HostKeyAlias` when one is set. So the alias for instances that share one HostName (the gateway, in CONNECT
  mode) is the instance's public host name: it is a principal, and the bare pattern covers it.

Errors are `HostIdentityError`s whose message names the value (never a private key's) and what is allowed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .names import INSTANCE_PLACEHOLDER, public_host

__all__ = [
    "CERTIFICATE_TYPE",
    "CLOCK_SKEW_SECONDS",
    "HOST_CERTIFICATE_FILE",
    "HOST_KEY_FILE",
    "HOST_PUBLIC_KEY_FILE",
    "KEY_TYPE",
    "MAX_VALID_DAYS",
    "MOUNT_DIR",
    "SECRET_KEYS",
    "CertificateRejected",
    "HostCertificate",
    "HostIdentityError",
    "KeyPair",
    "RejectReason",
    "Validity",
    "cert_authority_lines",
    "certificates_in_keyscan",
    "fingerprint",
    "generate_key_pair",
    "host_patterns",
    "instance_host_pattern",
    "key_pair_from_seed",
    "normalize_principals",
    "openssh_private_key",
    "openssh_public_key",
    "parse_host_certificate",
    "parse_public_key",
    "private_seed",
    "public_key_of",
    "secret_files",
    "ssh_config_identity_lines",
    "sshd_config_lines",
    "verify_host_certificate",
]

KEY_TYPE: Final = "ssh-ed25519"
CERTIFICATE_TYPE: Final = "ssh-ed25519-cert-v01@openssh.com"

HOST_KEY_FILE: Final = "ssh_host_ed25519_key"
HOST_PUBLIC_KEY_FILE: Final = "ssh_host_ed25519_key.pub"
HOST_CERTIFICATE_FILE: Final = "ssh_host_ed25519_key-cert.pub"
SECRET_KEYS: Final = (HOST_KEY_FILE, HOST_PUBLIC_KEY_FILE, HOST_CERTIFICATE_FILE)
"""The keys of an instance's Kubernetes Secret: the file names sshd and ssh-keygen use for an Ed25519 host key."""
MOUNT_DIR: Final = "/etc/ssh/gateway"
"""Where the pod mounts that Secret (docs/host-identity.md)."""

CLOCK_SKEW_SECONDS: Final = 300
"""A certificate is valid from this long before it was issued, so a client whose clock is a little behind
accepts it at once."""
MAX_VALID_DAYS: Final = 3650

_MAX_UINT64: Final = 2**64 - 1  # a certificate's times are uint64
# A DNS name or an IP address literal; no wildcards: a certificate names exactly the hosts it is for.
_PRINCIPAL: Final = re.compile(r"[a-z0-9]([a-z0-9._:-]{0,251}[a-z0-9])?")
_PATTERN: Final = re.compile(r"[a-z0-9*?._:\[\]-]{1,255}")
_SEED_BYTES: Final = 32


class HostIdentityError(ValueError):
    """A key, certificate, principal or pattern that is not valid here; the message names the value."""


RejectReason = Literal["malformed", "ca", "principal", "not-yet-valid", "expired"]
"""Why a certificate was refused: not a valid host certificate at all, another CA, no principal for the name
dialled, or outside its validity."""


class CertificateRejected(HostIdentityError):
    """A served host certificate that a client must refuse: another CA, no matching principal, or not valid now."""

    def __init__(self, message: str, *, reason: RejectReason) -> None:
        super().__init__(message)
        self.reason: RejectReason = reason
        """Which check failed, for the doctor's fix."""


def _shown(value: str, limit: int = 40) -> str:
    """A public value for an error message, cut short (keys are long)."""
    return repr(value) if len(value) <= limit else repr(value[: limit - 3] + "...")


def _utc(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- keys ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyPair:
    """An Ed25519 key pair in OpenSSH's file formats."""

    private_key: str = field(repr=False)
    """The unencrypted private key file, `-----BEGIN OPENSSH PRIVATE KEY-----...`. Secret: never log it."""
    public_key: str
    """`ssh-ed25519 AAAA...`, as in a .pub file, authorized_keys or known_hosts."""

    @property
    def fingerprint(self) -> str:
        """`SHA256:...`, as `ssh-keygen -l` prints it."""
        return fingerprint(self.public_key)


def _public_line(key: Ed25519PublicKey) -> str:
    return key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def _key_pair(key: Ed25519PrivateKey) -> KeyPair:
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    return KeyPair(private_key=private, public_key=_public_line(key.public_key()))


def generate_key_pair() -> KeyPair:
    """A fresh Ed25519 key pair from the operating system's random source."""
    return _key_pair(Ed25519PrivateKey.generate())


def key_pair_from_seed(seed: bytes) -> KeyPair:
    """The Ed25519 key pair of a 32-byte seed: the same public key on every machine and every run.

    A key made from a published seed is public: only for loopback-only servers (the demo's sshd).
    The private key file is not byte-for-byte stable (OpenSSH's format carries random check integers), the
    key in it is: compare keys by `public_key` or `fingerprint`, not by file text.
    """
    if len(seed) != _SEED_BYTES:
        raise HostIdentityError(f"an Ed25519 seed is {_SEED_BYTES} bytes, got {len(seed)}")
    return _key_pair(Ed25519PrivateKey.from_private_bytes(seed))


def openssh_private_key(seed: bytes) -> str:
    """The private key file of a seed's key (the demo sshd's fixed key)."""
    return key_pair_from_seed(seed).private_key


def openssh_public_key(seed: bytes, comment: str = "") -> str:
    """`ssh-ed25519 AAAA... comment` of a seed's key, as in a .pub file or a known_hosts line."""
    line = key_pair_from_seed(seed).public_key
    return f"{line} {comment}" if comment else line


def _load_private(private_key: str, name: str) -> Ed25519PrivateKey:
    # The messages never quote the value: it is a secret.
    try:
        key = serialization.load_ssh_private_key(private_key.encode(), password=None)
    except (ValueError, TypeError, UnicodeError) as exc:
        reason = "it is encrypted" if "password" in str(exc).lower() else "it does not parse"
        raise HostIdentityError(
            f"{name} is not an unencrypted OpenSSH private key ({reason}; value not shown, it is secret)"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise HostIdentityError(f"{name} is a {type(key).__name__}, not an Ed25519 key (value not shown, it is secret)")
    return key


def public_key_of(private_key: str, *, name: str = "private key") -> str:
    """`ssh-ed25519 AAAA...` of an OpenSSH private key file."""
    return _public_line(_load_private(private_key, name).public_key())


def private_seed(private_key: str, *, name: str = "private key") -> str:
    """The key of an OpenSSH private key file as its 32-byte Ed25519 seed in base64: the same key in 44
    characters instead of about 400 (what a host key keeps of its CA's key in state). As secret as the file."""
    seed = _load_private(private_key, name).private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return base64.b64encode(seed).decode()


def _load_public(public_key: str, name: str) -> Ed25519PublicKey:
    fields = public_key.split()
    if len(fields) < 2 or fields[0] != KEY_TYPE:
        raise HostIdentityError(
            f"{name}={_shown(public_key)} is not an OpenSSH Ed25519 public key ('{KEY_TYPE} AAAA...')"
        )
    try:
        key = serialization.load_ssh_public_identity(f"{fields[0]} {fields[1]}".encode())
    except (ValueError, binascii.Error):
        raise HostIdentityError(
            f"{name}={_shown(public_key)} does not parse as an OpenSSH Ed25519 public key"
        ) from None
    if not isinstance(key, Ed25519PublicKey):  # pragma: no cover - the type was checked above
        raise HostIdentityError(f"{name}={_shown(public_key)} is not an Ed25519 public key")
    return key


def parse_public_key(public_key: str, *, name: str = "public key") -> str:
    """The key as `ssh-ed25519 AAAA...` (comment dropped), or a HostIdentityError naming `name`."""
    return _public_line(_load_public(public_key, name))


def fingerprint(key_or_certificate: str) -> str:
    """`SHA256:...` of a public key or of a certificate's key, exactly as `ssh-keygen -l -f` prints it."""
    fields = key_or_certificate.split()
    if len(fields) >= 2 and fields[0] == CERTIFICATE_TYPE:
        key_or_certificate = parse_host_certificate(key_or_certificate).public_key
    blob = base64.b64decode(parse_public_key(key_or_certificate).split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


# --- certificates --------------------------------------------------------------------------------------------


def normalize_principals(principals: Iterable[str], *, name: str = "principals") -> tuple[str, ...]:
    """Sorted, unique, lowercase host names or addresses; at least one (a certificate with none is valid for
    every host, which is never what is meant)."""
    if isinstance(principals, str):
        raise HostIdentityError(f"{name} must be a list of host names, got the string {_shown(principals)}")
    normalized: set[str] = set()
    for principal in principals:
        if not isinstance(principal, str):
            raise HostIdentityError(f"{name}: {principal!r} is not a string; expected host names")
        lowered = principal.strip().lower()
        if not _PRINCIPAL.fullmatch(lowered):
            raise HostIdentityError(
                f"{name}: {_shown(principal)} is not a host name or address (letters, digits, '.', '-', '_', ':'; "
                "no wildcards, no spaces)"
            )
        normalized.add(lowered)
    if not normalized:
        raise HostIdentityError(f"{name} is empty: a host certificate needs at least one host name")
    return tuple(sorted(normalized))


@dataclass(frozen=True)
class Validity:
    """When a certificate is valid: from `valid_after` up to `valid_before`, in Unix seconds."""

    valid_after: int
    valid_before: int

    def __post_init__(self) -> None:
        if not 0 <= self.valid_after < self.valid_before <= _MAX_UINT64:
            raise HostIdentityError(
                f"validity from {self.valid_after} to {self.valid_before} is empty or out of range: "
                "valid_after must be before valid_before"
            )


@dataclass(frozen=True)
class HostCertificate:
    """What a host certificate says (its signature verified)."""

    public_key: str
    """The certified host key, `ssh-ed25519 AAAA...`."""
    ca_public_key: str
    """The key that signed it."""
    principals: tuple[str, ...]
    key_id: str
    serial: int
    valid_after: int
    valid_before: int

    @property
    def fingerprint(self) -> str:
        """Of the host key, as `ssh-keygen -l` prints it for the certificate file."""
        return fingerprint(self.public_key)


def parse_host_certificate(certificate: str, *, name: str = "certificate") -> HostCertificate:
    """Reads `ssh-ed25519-cert-v01@openssh.com AAAA... [comment]` and checks its signature and type."""
    fields = certificate.split()
    if len(fields) < 2 or fields[0] != CERTIFICATE_TYPE:
        raise HostIdentityError(
            f"{name}={_shown(certificate)} is not an OpenSSH Ed25519 certificate ('{CERTIFICATE_TYPE} AAAA...')"
        )
    try:
        parsed = serialization.load_ssh_public_identity(f"{fields[0]} {fields[1]}".encode())
    except (ValueError, binascii.Error):
        raise HostIdentityError(f"{name}={_shown(certificate)} does not parse as an OpenSSH certificate") from None
    if not isinstance(parsed, serialization.SSHCertificate):  # pragma: no cover - the type was checked above
        raise HostIdentityError(f"{name}={_shown(certificate)} is not a certificate")
    if parsed.type != serialization.SSHCertificateType.HOST:
        raise CertificateRejected(f"{name} is a user certificate, not a host certificate", reason="malformed")
    try:
        parsed.verify_cert_signature()
    except InvalidSignature:
        raise CertificateRejected(
            f"{name}'s signature does not verify: it was altered or is corrupt", reason="malformed"
        ) from None
    host, ca = parsed.public_key(), parsed.signature_key()
    if not isinstance(host, Ed25519PublicKey) or not isinstance(ca, Ed25519PublicKey):
        raise HostIdentityError(f"{name} certifies or is signed by a key that is not Ed25519")
    return HostCertificate(
        public_key=_public_line(host),
        ca_public_key=_public_line(ca),
        principals=tuple(p.decode(errors="replace") for p in parsed.valid_principals),
        key_id=parsed.key_id.decode(errors="replace"),
        serial=parsed.serial,
        valid_after=parsed.valid_after,
        valid_before=parsed.valid_before,
    )


def verify_host_certificate(
    certificate: str, *, ca_public_keys: Sequence[str], principal: str, now: int | None = None
) -> HostCertificate:
    """The checks a client makes of a served certificate: signed by one of `ca_public_keys`, `principal` (the
    name dialled, or the HostKeyAlias) among its principals, valid now. Raises CertificateRejected saying which
    failed, for the doctor to report."""
    parsed = parse_host_certificate(certificate)
    trusted = {parse_public_key(key, name="ca public key") for key in ca_public_keys}
    if parsed.ca_public_key not in trusted:
        known = ", ".join(sorted(fingerprint(key) for key in trusted)) or "none"
        raise CertificateRejected(
            f"certificate of {parsed.fingerprint} is signed by {fingerprint(parsed.ca_public_key)}, "
            f"not by the stack's host CA ({known})",
            reason="ca",
        )
    dialled = principal.lower()
    if dialled not in parsed.principals:
        raise CertificateRejected(
            f"certificate of {parsed.fingerprint} is not for {principal!r}: its principals are "
            f"{', '.join(parsed.principals) or 'none'}",
            reason="principal",
        )
    current = int(time.time()) if now is None else now
    if current < parsed.valid_after:
        raise CertificateRejected(
            f"certificate of {parsed.fingerprint} is not valid before {_utc(parsed.valid_after)}",
            reason="not-yet-valid",
        )
    if current >= parsed.valid_before:
        raise CertificateRejected(
            f"certificate of {parsed.fingerprint} expired at {_utc(parsed.valid_before)}", reason="expired"
        )
    return parsed


def certificates_in_keyscan(output: str) -> list[str]:
    """The certificates in `ssh-keyscan -c` output, as `type base64` lines. OpenSSH 9 prints a certificate
    alone on its line (no host field, unlike plain keys); a `host type base64` line is accepted too."""
    found = []
    for line in output.splitlines():
        fields = line.split()
        if line.startswith("#") or CERTIFICATE_TYPE not in fields[:2]:
            continue
        at = fields.index(CERTIFICATE_TYPE)
        if len(fields) > at + 1:
            found.append(f"{fields[at]} {fields[at + 1]}")
    return found


# --- known_hosts and ssh_config ------------------------------------------------------------------------------


def instance_host_pattern(host_template: str) -> str:
    """The known_hosts pattern of every name a host template makes: `ssh-{instance}.example.com` gives
    `ssh-*.example.com`, which also matches instances added later."""
    if host_template.count(INSTANCE_PLACEHOLDER) != 1:
        raise HostIdentityError(f"host template {host_template!r} must contain {INSTANCE_PLACEHOLDER} exactly once")
    pattern = public_host(host_template, "*").lower()
    if not _PATTERN.fullmatch(pattern) or pattern.strip("*.") == "":
        raise HostIdentityError(f"host template {host_template!r} does not make a host name pattern")
    return pattern


def host_patterns(host: str) -> tuple[str, str]:
    """`host` and `[host]:*`: the bare name (port 22, or a HostKeyAlias) and the name on any other port.

    `host` may be a pattern from `instance_host_pattern`. A port-agnostic entry keeps matching when the
    allocation moves an instance to another port.
    """
    lowered = host.lower()
    if not _PATTERN.fullmatch(lowered) or "[" in lowered or "]" in lowered:
        raise HostIdentityError(f"known_hosts host {host!r} is not a host name or pattern (no spaces, commas or [ ])")
    return (lowered, f"[{lowered}]:*")


def _joined_patterns(patterns: Sequence[str]) -> str:
    if not patterns:
        raise HostIdentityError("a known_hosts line needs at least one host pattern")
    for pattern in patterns:
        if not _PATTERN.fullmatch(pattern.lower()):
            raise HostIdentityError(f"known_hosts pattern {pattern!r} is not allowed (no spaces, commas, '!' or '#')")
    return ",".join(p.lower() for p in patterns)


def cert_authority_lines(patterns: Sequence[str], ca_public_keys: Sequence[str], comment: str = "") -> list[str]:
    """`@cert-authority <patterns> ssh-ed25519 AAAA... [comment]`, one line per published CA key: one line
    normally, two while a CA rotation overlaps (docs/host-identity.md)."""
    if not ca_public_keys:
        raise HostIdentityError("no CA public key to publish: at least one is needed")
    hosts = _joined_patterns(patterns)
    lines = []
    for key in ca_public_keys:
        line = f"@cert-authority {hosts} {parse_public_key(key, name='ca public key')}"
        lines.append(f"{line} {comment}" if comment else line)
    return lines


def ssh_config_identity_lines(*, known_hosts_file: str, host_key_alias: str | None = None) -> list[str]:
    """The ssh_config options of an instance's `Host` block that make the CA line do the checking.

    `host_key_alias` is needed only where instances share a HostName (CONNECT mode): the instance's public
    host name, which is one of its principals and matched by the CA line's bare pattern.
    """
    if any(c.isspace() for c in known_hosts_file) or not known_hosts_file:
        raise HostIdentityError(f"known_hosts file {known_hosts_file!r} must be a path without spaces")
    lines = [f"UserKnownHostsFile {known_hosts_file}", "StrictHostKeyChecking yes"]
    if host_key_alias is not None:
        lines.append(f"HostKeyAlias {normalize_principals([host_key_alias], name='HostKeyAlias')[0]}")
    return lines


# --- what the pod mounts -------------------------------------------------------------------------------------


def secret_files(*, private_key: str, public_key: str, certificate: str) -> dict[str, str]:
    """The data of an instance's Kubernetes Secret (file name -> content). Not checked to belong together: they
    do by construction (derived together, `derived_identity`), and checks would parse and verify every
    instance's files on every run."""
    return {
        HOST_KEY_FILE: private_key,
        HOST_PUBLIC_KEY_FILE: public_key + "\n",
        HOST_CERTIFICATE_FILE: certificate + "\n",
    }


def sshd_config_lines(mount_dir: str = MOUNT_DIR) -> list[str]:
    """The sshd_config lines that serve the mounted key and certificate (and no other host key)."""
    directory = mount_dir.rstrip("/")
    if not directory.startswith("/") or any(c.isspace() or c in "\"'#" for c in directory):
        raise HostIdentityError(f"mount directory {mount_dir!r} must be an absolute path without spaces or quotes")
    return [f"HostKey {directory}/{HOST_KEY_FILE}", f"HostCertificate {directory}/{HOST_CERTIFICATE_FILE}"]
