"""Derived host identities: the same bytes on every run, read by ssh-keygen, and each guarantee of
docs/host-identity.md (a key per instance and generation, kept through a CA rotation; certificates in windows)."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ssh_gateway.core import host_identity as hi
from ssh_gateway.core.derived_identity import certificate_validity, derive_identity, derived_host_key, next_window_start
from tests.host_keys import checked_secret_files, key_pair_from_private_seed, renewal_due

pytestmark = pytest.mark.unit

ROOT = base64.b64encode(bytes(range(32))).decode()
CA_SEED = base64.b64encode(bytes(range(32, 64))).decode()
OTHER_CA_SEED = base64.b64encode(bytes(range(64, 96))).decode()
NOW = 1_800_000_000
DAY = 86_400


def _identity(**overrides: Any) -> Any:
    args: dict[str, Any] = {
        "root": ROOT,
        "ca_seed": CA_SEED,
        "instance": "gpu-01",
        "generation": 1,
        "principals": ("ssh-gpu-01.example.com", "ssh-gpu-01"),
        "key_id": "dev/gpu-01",
        "valid_days": 365,
        "now": NOW,
    }
    return derive_identity(**{**args, **overrides})


def test_every_run_derives_the_same_files() -> None:
    assert _identity() == _identity()
    assert _identity().private_key == _identity().private_key  # the check integers too, not only the key


def test_ssh_keygen_reads_the_key_and_the_certificate(tmp_path: Path) -> None:
    if shutil.which("ssh-keygen") is None:
        pytest.fail("ssh-keygen is missing: scripts/system-packages installs openssh-client")
    identity = _identity()
    key = tmp_path / hi.HOST_KEY_FILE
    key.write_text(identity.private_key)
    os.chmod(key, 0o600)
    (tmp_path / hi.HOST_CERTIFICATE_FILE).write_text(identity.certificate + "\n")
    public = subprocess.run(["ssh-keygen", "-y", "-f", key], capture_output=True, text=True, check=True)
    assert public.stdout.strip() == identity.public_key
    shown = subprocess.run(
        ["ssh-keygen", "-L", "-f", tmp_path / hi.HOST_CERTIFICATE_FILE],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "host certificate" in shown and 'Key ID: "dev/gpu-01"' in shown
    assert "ssh-gpu-01.example.com" in shown and "Critical Options: (none)" in shown


def test_the_certificate_verifies_as_a_client_checks_it() -> None:
    identity = _identity()
    ca_public = key_pair_from_private_seed(CA_SEED).public_key
    certificate = hi.verify_host_certificate(
        identity.certificate, ca_public_keys=[ca_public], principal="ssh-gpu-01.example.com", now=NOW
    )
    assert certificate.public_key == identity.public_key and certificate.principals == (
        "ssh-gpu-01",
        "ssh-gpu-01.example.com",
    )
    assert checked_secret_files(
        private_key=identity.private_key, public_key=identity.public_key, certificate=identity.certificate
    ) == hi.secret_files(
        private_key=identity.private_key, public_key=identity.public_key, certificate=identity.certificate
    )


def test_the_key_depends_on_the_instance_and_its_generation_only() -> None:
    key = _identity().public_key
    # Not on the CA (a rotation re-signs, the key stays), the names, the key id, the validity or the time.
    assert _identity(ca_seed=OTHER_CA_SEED, principals=("gw.example.com",), key_id="x", valid_days=30).public_key == key
    assert _identity(now=NOW + 400 * DAY).public_key == key
    assert _identity(generation=2).public_key != key  # the documented rotation of one instance
    assert _identity(instance="gpu-02").public_key != key
    assert _identity(root=base64.b64encode(bytes(32)).decode()).public_key != key  # another stack


def test_what_the_certificate_is_made_of_re_issues_it() -> None:
    certificate = _identity().certificate
    for change in ({"ca_seed": OTHER_CA_SEED}, {"principals": ("ssh-gpu-01",)}, {"key_id": "y"}, {"valid_days": 30}):
        assert _identity(**change).certificate != certificate, change
    assert hi.parse_host_certificate(_identity(ca_seed=OTHER_CA_SEED).certificate).ca_public_key == (
        key_pair_from_private_seed(OTHER_CA_SEED).public_key
    )


def test_validity_comes_in_windows_of_two_thirds() -> None:
    validity = certificate_validity(30, NOW)
    window = 20 * DAY
    assert validity.valid_before - validity.valid_after == 30 * DAY + hi.CLOCK_SKEW_SECONDS
    assert validity.valid_after + hi.CLOCK_SKEW_SECONDS <= NOW < validity.valid_after + hi.CLOCK_SKEW_SECONDS + window
    # Inside one window every run gives the same validity; the next window starts before a third is left.
    start = validity.valid_after + hi.CLOCK_SKEW_SECONDS
    assert certificate_validity(30, start + window - 1) == validity
    following = certificate_validity(30, start + window)
    assert following.valid_after == validity.valid_after + window
    assert not renewal_due(validity.valid_after, validity.valid_before, now=start + window - hi.CLOCK_SKEW_SECONDS)
    assert validity.valid_before - (start + window) >= 10 * DAY  # a third left when the next one takes over


@pytest.mark.parametrize("days", [0, 3651, 1.5, True])
def test_bad_validity_is_named(days: Any) -> None:
    with pytest.raises(hi.HostIdentityError, match="validDays="):
        certificate_validity(days, NOW)


def test_bad_secrets_are_refused_without_showing_them() -> None:
    with pytest.raises(hi.HostIdentityError, match="host-key root is not a 32-byte seed") as caught:
        derived_host_key("c2hvcnQ=", "gpu-01", 1)
    assert "c2hvcnQ" not in str(caught.value)
    with pytest.raises(hi.HostIdentityError, match="CA key is not a 32-byte seed"):
        _identity(ca_seed="not base64!")
    with pytest.raises(hi.HostIdentityError, match="hostKeyGeneration=-1"):
        derived_host_key(ROOT, "gpu-01", -1)


def test_a_bad_key_id_is_named() -> None:
    with pytest.raises(hi.HostIdentityError, match="keyId='' is not allowed"):
        _identity(key_id="")


def test_the_next_window_starts_where_a_new_certificate_begins() -> None:
    now = 1_800_000_000
    current = certificate_validity(30, now)
    renew = next_window_start(current)
    assert certificate_validity(30, renew - 1) == current
    assert certificate_validity(30, renew) != current
