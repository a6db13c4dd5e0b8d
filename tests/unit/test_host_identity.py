"""Host keys, certificates and known_hosts lines from `ssh_gateway.core.host_identity`.

The files are checked by OpenSSH's own reader: `ssh-keygen -l -f` / `-L -f` (the one process this layer
runs: it only parses files, it serves nothing).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ssh_gateway.core import host_identity as hi
from ssh_gateway.local.sshd import DEMO_HOST_KEY_SEED
from tests.host_keys import key_pair_from_private_seed, sign_host_certificate, validity_for_days

pytestmark = pytest.mark.unit

SEED = hashlib.sha256(b"ssh-gateway unit test seed").digest()
NOW = 1_800_000_000
DAY = 86_400


@pytest.fixture(scope="module")
def ca() -> hi.KeyPair:
    return hi.generate_key_pair()


@pytest.fixture(scope="module")
def host() -> hi.KeyPair:
    return hi.generate_key_pair()


def _certificate(ca: hi.KeyPair, host: hi.KeyPair, **overrides: object) -> str:
    args: dict[str, object] = {
        "ca_private_key": ca.private_key,
        "host_public_key": host.public_key,
        "principals": ["ssh-gpu-alice.example.com", "ssh-gpu-alice"],
        "key_id": "ssh-gateway/dev/gpu-alice",
        "validity": validity_for_days(30, now=NOW),
        "serial": 42,
    }
    args.update(overrides)
    return sign_host_certificate(**args)  # type: ignore[arg-type]


def _keygen(*args: str) -> str:
    keygen = shutil.which("ssh-keygen")
    assert keygen is not None, "ssh-keygen is not installed: run scripts/system-packages"
    result = subprocess.run([keygen, *args], capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _write(path: Path, text: str) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    return path


# --- keys ---------------------------------------------------------------------------------------------------


def test_ssh_keygen_reads_the_key_files(tmp_path: Path, host: hi.KeyPair) -> None:
    private = _write(tmp_path / hi.HOST_KEY_FILE, host.private_key)
    public = _write(tmp_path / hi.HOST_PUBLIC_KEY_FILE, host.public_key + "\n")
    assert _keygen("-l", "-f", str(private)).split()[1] == host.fingerprint
    assert _keygen("-l", "-f", str(public)).split()[1] == host.fingerprint
    # ssh-keygen derives the public half from the private file exactly as we did.
    assert _keygen("-y", "-f", str(private)).strip() == host.public_key


def test_keys_are_ed25519_in_openssh_formats(host: hi.KeyPair) -> None:
    assert host.private_key.startswith("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    assert host.private_key.endswith("-----END OPENSSH PRIVATE KEY-----\n")
    assert host.public_key.startswith("ssh-ed25519 AAAA") and len(host.public_key.split()) == 2
    assert hi.public_key_of(host.private_key) == host.public_key
    assert "PRIVATE" not in repr(host), "the private key must not show in a repr (logs, tracebacks)"


def test_generated_keys_differ() -> None:
    assert hi.generate_key_pair().public_key != hi.generate_key_pair().public_key


def test_seed_gives_the_same_key_every_time(tmp_path: Path) -> None:
    first, second = hi.key_pair_from_seed(SEED), hi.key_pair_from_seed(SEED)
    assert first.public_key == second.public_key and first.fingerprint == second.fingerprint
    assert hi.public_key_of(first.private_key) == hi.public_key_of(second.private_key) == first.public_key
    assert hi.key_pair_from_seed(bytes(32)).public_key != first.public_key
    assert hi.openssh_public_key(SEED) == first.public_key
    assert hi.openssh_public_key(SEED, "demo") == f"{first.public_key} demo"
    private = _write(tmp_path / "seeded", hi.openssh_private_key(SEED))
    assert _keygen("-y", "-f", str(private)).strip() == first.public_key


def test_seed_matches_rfc8032() -> None:
    # RFC 8032 section 7.1, TEST 1: secret key -> public key.
    seed = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    public = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    line = hi.openssh_public_key(seed)
    assert base64.b64decode(line.split()[1]).endswith(public)


def test_seed_must_be_32_bytes() -> None:
    with pytest.raises(hi.HostIdentityError, match="32 bytes, got 31"):
        hi.key_pair_from_seed(bytes(31))


def test_private_seed_is_the_same_key_in_44_characters(host: hi.KeyPair) -> None:
    seed = hi.private_seed(host.private_key)
    assert len(seed) == 44 and len(host.private_key) > 300
    assert key_pair_from_private_seed(seed).public_key == host.public_key


def test_fingerprint_is_what_ssh_keygen_prints(tmp_path: Path, host: hi.KeyPair) -> None:
    path = _write(tmp_path / "k.pub", f"{host.public_key} a comment\n")
    assert hi.fingerprint(f"{host.public_key} a comment") == _keygen("-l", "-f", str(path)).split()[1]


def test_bad_private_keys_are_refused_without_showing_them(host: hi.KeyPair) -> None:
    garbage = "-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LWJ5dGVz\n-----END OPENSSH PRIVATE KEY-----\n"
    with pytest.raises(hi.HostIdentityError, match="caPrivateKey is not an unencrypted OpenSSH private key") as err:
        hi.public_key_of(garbage, name="caPrivateKey")
    assert "c2VjcmV0" not in str(err.value)
    with pytest.raises(hi.HostIdentityError, match="value not shown"):
        hi.public_key_of(host.public_key, name="caPrivateKey")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ", "is not an OpenSSH Ed25519 public key"),
        ("ssh-ed25519", "is not an OpenSSH Ed25519 public key"),
        ("ssh-ed25519 AAAAnotbase64!!", "does not parse"),
        ("", "is not an OpenSSH Ed25519 public key"),
    ],
)
def test_bad_public_keys_are_named(value: str, message: str) -> None:
    with pytest.raises(hi.HostIdentityError, match=message) as err:
        hi.parse_public_key(value, name="caPublicKey")
    assert str(err.value).startswith("caPublicKey=")


# --- certificates -------------------------------------------------------------------------------------------


def test_ssh_keygen_reads_the_certificate(tmp_path: Path, ca: hi.KeyPair, host: hi.KeyPair) -> None:
    certificate = _certificate(ca, host)
    path = _write(tmp_path / hi.HOST_CERTIFICATE_FILE, certificate + "\n")
    listed = _keygen("-L", "-f", str(path))
    assert "ssh-ed25519-cert-v01@openssh.com host certificate" in listed
    assert f"Public key: ED25519-CERT {host.fingerprint}" in listed
    assert f"Signing CA: ED25519 {ca.fingerprint}" in listed
    assert 'Key ID: "ssh-gateway/dev/gpu-alice"' in listed
    assert "Serial: 42" in listed
    principals = listed.split("Principals:")[1].split("Critical Options:")[0].split()
    assert principals == ["ssh-gpu-alice", "ssh-gpu-alice.example.com"]
    assert _keygen("-l", "-f", str(path)).split()[1] == host.fingerprint == hi.fingerprint(certificate)


def test_certificate_validity_is_what_was_asked(ca: hi.KeyPair, host: hi.KeyPair) -> None:
    parsed = hi.parse_host_certificate(_certificate(ca, host))
    assert parsed.valid_after == NOW - hi.CLOCK_SKEW_SECONDS
    assert parsed.valid_before == NOW + 30 * DAY
    assert (parsed.public_key, parsed.ca_public_key, parsed.serial) == (host.public_key, ca.public_key, 42)


def test_verify_accepts_the_names_the_certificate_is_for(ca: hi.KeyPair, host: hi.KeyPair) -> None:
    certificate = _certificate(ca, host)
    for name in ("ssh-gpu-alice.example.com", "SSH-GPU-ALICE.example.com", "ssh-gpu-alice"):
        hi.verify_host_certificate(certificate, ca_public_keys=[ca.public_key], principal=name, now=NOW)


def test_verify_accepts_any_published_ca(ca: hi.KeyPair, host: hi.KeyPair) -> None:
    certificate = _certificate(ca, host)
    other = hi.generate_key_pair().public_key
    hi.verify_host_certificate(certificate, ca_public_keys=[other, ca.public_key], principal="ssh-gpu-alice", now=NOW)


def test_verify_refuses_another_ca(ca: hi.KeyPair, host: hi.KeyPair) -> None:
    other = hi.generate_key_pair()
    certificate = _certificate(other, host)
    with pytest.raises(
        hi.CertificateRejected, match=re.escape(f"signed by {other.fingerprint}, not by the stack's host CA")
    ):
        hi.verify_host_certificate(certificate, ca_public_keys=[ca.public_key], principal="ssh-gpu-alice", now=NOW)


def test_verify_refuses_a_wrong_principal(ca: hi.KeyPair, host: hi.KeyPair) -> None:
    with pytest.raises(
        hi.CertificateRejected, match=re.escape("is not for 'ssh-gpu-bob.example.com': its principals are")
    ):
        hi.verify_host_certificate(
            _certificate(ca, host), ca_public_keys=[ca.public_key], principal="ssh-gpu-bob.example.com", now=NOW
        )


def test_verify_refuses_expired_and_not_yet_valid(ca: hi.KeyPair, host: hi.KeyPair) -> None:
    certificate = _certificate(ca, host)
    with pytest.raises(hi.CertificateRejected, match="expired at 2027-"):
        hi.verify_host_certificate(
            certificate, ca_public_keys=[ca.public_key], principal="ssh-gpu-alice", now=NOW + 31 * DAY
        )
    with pytest.raises(hi.CertificateRejected, match="not valid before"):
        hi.verify_host_certificate(
            certificate, ca_public_keys=[ca.public_key], principal="ssh-gpu-alice", now=NOW - DAY
        )


def test_a_tampered_certificate_is_refused(ca: hi.KeyPair, host: hi.KeyPair) -> None:
    kind, body = _certificate(ca, host).split()
    blob = bytearray(base64.b64decode(body))
    blob[-5] ^= 0x01  # inside the signature
    with pytest.raises(hi.CertificateRejected, match="signature does not verify"):
        hi.parse_host_certificate(f"{kind} {base64.b64encode(bytes(blob)).decode()}")


@pytest.mark.parametrize(
    ("principals", "message"),
    [
        ([], "principals is empty"),
        (["*.example.com"], "'\\*.example.com' is not a host name or address"),
        (["two words"], "is not a host name"),
        (["-leading.example.com"], "is not a host name"),
        ("ssh-a.example.com", "must be a list of host names, got the string"),
    ],
)
def test_bad_principals_are_named(principals: object, message: str) -> None:
    with pytest.raises(hi.HostIdentityError, match=message):
        hi.normalize_principals(principals)  # type: ignore[arg-type]


def test_principals_are_sorted_unique_lowercase() -> None:
    assert hi.normalize_principals(["B.example.com", "a", "b.example.com", "10.0.0.1"]) == (
        "10.0.0.1",
        "a",
        "b.example.com",
    )


def test_validity_must_not_be_empty() -> None:
    with pytest.raises(hi.HostIdentityError, match="valid_after must be before valid_before"):
        hi.Validity(valid_after=NOW, valid_before=NOW)


def test_keyscan_output_yields_the_certificates(ca: hi.KeyPair, host: hi.KeyPair) -> None:
    certificate = _certificate(ca, host)
    output = (
        f"# 127.0.0.1:2222 SSH-2.0-OpenSSH_9.2p1\n{certificate}\n[127.0.0.1]:2222 {host.public_key}\n"
        f"[127.0.0.1]:2222 {certificate}\n"
    )
    assert hi.certificates_in_keyscan(output) == [certificate, certificate]


# --- known_hosts, ssh_config, the pod's files ---------------------------------------------------------------


def test_one_cert_authority_line_covers_every_instance(ca: hi.KeyPair) -> None:
    pattern = hi.instance_host_pattern("ssh-{instance}.Example.com")
    assert pattern == "ssh-*.example.com"
    assert hi.host_patterns(pattern) == ("ssh-*.example.com", "[ssh-*.example.com]:*")
    assert hi.cert_authority_lines(hi.host_patterns(pattern), [ca.public_key], "ssh-gateway dev") == [
        f"@cert-authority ssh-*.example.com,[ssh-*.example.com]:* {ca.public_key} ssh-gateway dev"
    ]


def test_an_overlapping_rotation_publishes_two_lines(ca: hi.KeyPair) -> None:
    previous = hi.generate_key_pair().public_key
    lines = hi.cert_authority_lines(["ssh-*.example.com"], [ca.public_key, previous])
    assert [line.split()[2:] for line in lines] == [ca.public_key.split(), previous.split()]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: hi.instance_host_pattern("ssh.example.com"), "must contain {instance} exactly once"),
        (lambda: hi.instance_host_pattern("{instance}"), "does not make a host name pattern"),
        (lambda: hi.host_patterns("a b"), "is not a host name or pattern"),
        (lambda: hi.host_patterns("[a]:22"), "is not a host name or pattern"),
        (lambda: hi.cert_authority_lines([], ["x"]), "needs at least one host pattern"),
        (lambda: hi.cert_authority_lines(["a,b"], ["x"]), "known_hosts pattern 'a,b' is not allowed"),
        (lambda: hi.cert_authority_lines(["a"], []), "no CA public key to publish"),
        (lambda: hi.sshd_config_lines("relative/dir"), "must be an absolute path"),
        (lambda: hi.ssh_config_identity_lines(known_hosts_file="a b"), "must be a path without spaces"),
    ],
)
def test_bad_known_hosts_and_config_values_are_named(call: object, message: str) -> None:
    with pytest.raises(hi.HostIdentityError, match=message.replace("[", "\\[").replace("{", "\\{")):
        call()  # type: ignore[operator]


def test_ssh_config_lines() -> None:
    assert hi.ssh_config_identity_lines(known_hosts_file="~/.ssh/known_hosts.d/ssh-gateway-dev") == [
        "UserKnownHostsFile ~/.ssh/known_hosts.d/ssh-gateway-dev",
        "StrictHostKeyChecking yes",
    ]
    assert hi.ssh_config_identity_lines(known_hosts_file="kh", host_key_alias="SSH-a.example.com")[-1] == (
        "HostKeyAlias ssh-a.example.com"
    )


def test_secret_files_and_sshd_lines(ca: hi.KeyPair, host: hi.KeyPair) -> None:
    certificate = _certificate(ca, host)
    data = hi.secret_files(private_key=host.private_key, public_key=host.public_key, certificate=certificate)
    assert tuple(data) == hi.SECRET_KEYS
    assert data[hi.HOST_KEY_FILE] == host.private_key
    assert hi.sshd_config_lines() == [
        "HostKey /etc/ssh/gateway/ssh_host_ed25519_key",
        "HostCertificate /etc/ssh/gateway/ssh_host_ed25519_key-cert.pub",
    ]


def test_the_demo_seed_still_gives_the_key_it_always_gave() -> None:
    # The key ssh_gateway/sshkeys.py derived by hand before the library replaced it: a stack that pins it
    # (the demo's sshd serves it to pinned instances) must see no change.
    assert hi.openssh_public_key(DEMO_HOST_KEY_SEED) == (
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAi5LozFLqWuY6k4TyD1C+Oys0CW2N2WqpjyAxjMsw+d"
    )
