"""Deterministic Ed25519 SSH keys from a 32-byte seed, in OpenSSH's own file formats (stdlib only).

Why: the local stack pins its instances' host key (`hostKey` in stacks/Pulumi.local.yaml), so the demo's sshd
must present the same key on every machine and every run. `ssh-keygen` cannot derive a key from a seed and
the project has no crypto dependency, so the public half is computed here (RFC 8032 §5.1.5) and the private
key file is written in the `openssh-key-v1` format. A key made from a published seed is public: use it only
for loopback-only demo servers, never for anything reachable from another machine.
"""

from __future__ import annotations

import base64
import hashlib
import struct

__all__ = ["KEY_TYPE", "openssh_private_key", "openssh_public_key", "public_key_bytes"]

KEY_TYPE = "ssh-ed25519"

# Curve25519 in twisted Edwards form, with extended coordinates (X, Y, Z, T): RFC 8032 §5.1.
_P = 2**255 - 19
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)
_Point = tuple[int, int, int, int]


def _recover_x(y: int, sign: int) -> int:
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P != 0:
        x = x * _SQRT_M1 % _P
    if x & 1 != sign:
        x = _P - x
    return x


_GY = 4 * pow(5, _P - 2, _P) % _P
_GX = _recover_x(_GY, 0)
_G: _Point = (_GX, _GY, 1, _GX * _GY % _P)


def _add(p: _Point, q: _Point) -> _Point:
    a = (p[1] - p[0]) * (q[1] - q[0]) % _P
    b = (p[1] + p[0]) * (q[1] + q[0]) % _P
    c = 2 * p[3] * q[3] * _D % _P
    d = 2 * p[2] * q[2] % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _multiply(scalar: int, point: _Point) -> _Point:
    result: _Point = (0, 1, 1, 0)
    while scalar:
        if scalar & 1:
            result = _add(result, point)
        point = _add(point, point)
        scalar >>= 1
    return result


def public_key_bytes(seed: bytes) -> bytes:
    """The 32-byte Ed25519 public key of a 32-byte private seed."""
    if len(seed) != 32:
        raise ValueError(f"an Ed25519 seed is 32 bytes, got {len(seed)}")
    digest = hashlib.sha512(seed).digest()
    scalar = int.from_bytes(digest[:32], "little")
    scalar &= (1 << 254) - 8
    scalar |= 1 << 254
    x, y, z, _ = _multiply(scalar, _G)
    z_inv = pow(z, _P - 2, _P)
    x, y = x * z_inv % _P, y * z_inv % _P
    return int.to_bytes(y | ((x & 1) << 255), 32, "little")


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _public_blob(public: bytes) -> bytes:
    return _string(KEY_TYPE.encode()) + _string(public)


def openssh_public_key(seed: bytes, comment: str = "") -> str:
    """`ssh-ed25519 AAAA... comment`, as in a .pub file or a known_hosts line."""
    text = f"{KEY_TYPE} {base64.b64encode(_public_blob(public_key_bytes(seed))).decode()}"
    return f"{text} {comment}" if comment else text


def openssh_private_key(seed: bytes, comment: str = "") -> str:
    """The unencrypted private key file (`-----BEGIN OPENSSH PRIVATE KEY-----`) that ssh-keygen would write."""
    public = public_key_bytes(seed)
    # The check integers only detect a wrong passphrase; any fixed value is valid for an unencrypted key.
    check = struct.pack(">II", 0x55D0_5EED, 0x55D0_5EED)
    private = check + _public_blob(public) + _string(seed + public) + _string(comment.encode())
    private += bytes(range(1, 1 + (-len(private) % 8)))  # pad to the "none" cipher's block size
    blob = (
        b"openssh-key-v1\0"
        + _string(b"none")  # cipher
        + _string(b"none")  # kdf
        + _string(b"")  # kdf options
        + struct.pack(">I", 1)
        + _string(_public_blob(public))
        + _string(private)
    )
    text = base64.b64encode(blob).decode()
    lines = [text[i : i + 70] for i in range(0, len(text), 70)]
    return "\n".join(["-----BEGIN OPENSSH PRIVATE KEY-----", *lines, "-----END OPENSSH PRIVATE KEY-----", ""])
