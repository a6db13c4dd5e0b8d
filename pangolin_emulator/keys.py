"""Integration API key format: `<15 [a-z0-9]>.<40 lowercase base32>` (contract §1.2)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import string

__all__ = ["generate_api_key", "hash_secret", "secret_matches", "split_token"]

_ID_ALPHABET = string.ascii_lowercase + string.digits
_SECRET_ALPHABET = string.ascii_lowercase + "234567"


def generate_api_key() -> str:
    key_id = "".join(secrets.choice(_ID_ALPHABET) for _ in range(15))
    secret = "".join(secrets.choice(_SECRET_ALPHABET) for _ in range(40))
    return f"{key_id}.{secret}"


def split_token(token: str) -> tuple[str, str | None]:
    """Split like Pangolin does (`token.split(".")`): the id, then the secret if there is one."""
    parts = token.split(".")
    return parts[0], parts[1] if len(parts) > 1 else None


def hash_secret(secret: str) -> str:
    # Pangolin stores argon2 hashes; a plain digest is enough for a local test double.
    return hashlib.sha256(secret.encode()).hexdigest()


def secret_matches(secret: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), stored_hash)
