"""Finding private keys in text: the PEM header and each key's 32-byte seed as any encoding Pulumi, the engine
or Kubernetes could give it (hex, base64 at every alignment inside a longer base64 run, base64 of the PEM)."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

__all__ = ["PEM_HEADER", "key_material", "seed_fragments"]

PEM_HEADER = "BEGIN OPENSSH PRIVATE KEY"
# A Kubernetes Secret's `data` is base64 of the file: its first 30 bytes ("-----BEGIN OPENSSH PRIVATE KEY") in base64.
_PEM_HEADER_B64 = base64.b64encode(b"-----BEGIN OPENSSH PRIVATE KEY").decode()


def seed_fragments(private_key: str) -> set[str]:
    """What would give an Ed25519 key away in text: its 32-byte seed, in hex and in base64 at each of the 3
    alignments it can have inside a longer base64 run (the 40 characters that only the seed decides)."""
    key = serialization.load_ssh_private_key(private_key.encode(), password=None)
    assert isinstance(key, Ed25519PrivateKey)
    seed = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    fragments = {seed.hex(), base64.b64encode(seed).decode()[:40]}
    for offset in (1, 2):
        fragments.add(base64.b64encode(bytes(offset) + seed).decode()[4:44])
    return fragments


def key_material(text: str, private_keys: Iterable[str]) -> int:
    """How many pieces of the keys `text` holds in plaintext: PEM headers, plain or base64, and seed fragments."""
    fragments = set().union(*(seed_fragments(key) for key in private_keys))
    # In JSON a key file's line breaks are \n (\\n when nested): join the lines so no fragment is split.
    joined = re.sub(r"\\+n|\n", "", text)
    headers = text.count(PEM_HEADER) + text.count(_PEM_HEADER_B64)
    return headers + sum(joined.count(fragment) for fragment in fragments)
