"""Seed-derived Ed25519 keys: RFC 8032's test vectors, and a private key file laid out as OpenSSH reads it."""

from __future__ import annotations

import base64
import struct

import pytest

from ssh_gateway.sshkeys import openssh_private_key, openssh_public_key, public_key_bytes

pytestmark = pytest.mark.unit

# RFC 8032 §7.1, TEST 1, 2 and 3: (secret key, public key).
RFC8032 = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
    ),
]


@pytest.mark.parametrize(("secret", "public"), RFC8032)
def test_public_key_matches_rfc8032(secret: str, public: str) -> None:
    assert public_key_bytes(bytes.fromhex(secret)).hex() == public


def test_seed_must_be_32_bytes() -> None:
    with pytest.raises(ValueError, match="32 bytes, got 31"):
        public_key_bytes(bytes(31))


def _strings(data: bytes) -> list[bytes]:
    out = []
    while data:
        (length,) = struct.unpack(">I", data[:4])
        out.append(data[4 : 4 + length])
        data = data[4 + length :]
    return out


def test_private_key_file_layout() -> None:
    seed = bytes.fromhex(RFC8032[0][0])
    public = bytes.fromhex(RFC8032[0][1])
    text = openssh_private_key(seed, "a comment")
    lines = text.splitlines()
    assert lines[0] == "-----BEGIN OPENSSH PRIVATE KEY-----" and lines[-1] == "-----END OPENSSH PRIVATE KEY-----"
    assert all(len(line) <= 70 for line in lines[1:-1])
    blob = base64.b64decode("".join(lines[1:-1]))
    magic = b"openssh-key-v1\0"
    assert blob.startswith(magic)
    cipher, kdf, kdf_options = _strings(blob[len(magic) : len(magic) + 12 + 8])
    assert (cipher, kdf, kdf_options) == (b"none", b"none", b"")
    rest = blob[len(magic) + 20 :]
    assert struct.unpack(">I", rest[:4]) == (1,)
    public_blob, private = _strings(rest[4:])
    assert _strings(public_blob) == [b"ssh-ed25519", public]
    assert len(private) % 8 == 0
    check1, check2 = struct.unpack(">II", private[:8])
    assert check1 == check2
    key_type, pub, secret, comment = _strings(private[8 : private.index(b"a comment") + len(b"a comment")])
    assert (key_type, pub, secret, comment) == (b"ssh-ed25519", public, seed + public, b"a comment")
    padding = private[private.index(b"a comment") + len(b"a comment") :]
    assert padding == bytes(range(1, 1 + len(padding)))


def test_public_key_line() -> None:
    seed = bytes.fromhex(RFC8032[0][0])
    line = openssh_public_key(seed, "host")
    key_type, encoded, comment = line.split()
    assert (key_type, comment) == ("ssh-ed25519", "host")
    assert _strings(base64.b64decode(encoded)) == [b"ssh-ed25519", bytes.fromhex(RFC8032[0][1])]
