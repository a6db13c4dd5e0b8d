"""A real sshd serving an issued host key and certificate from a Secret-shaped volume, and a real `ssh`
(`strict_ssh`: StrictHostKeyChecking=yes, BatchMode) whose known_hosts holds only the stack's `@cert-authority`
line: it connects with no prompt, and refuses a certificate from another CA, an expired one and a wrong principal.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ssh_gateway.core import host_identity as hi
from ssh_gateway.core.trust import plain_line
from ssh_gateway.local.sshd import ClientKey, ensure_client_keypair
from ssh_gateway.local.sshd_identity import IdentitySshd, mount_secret
from ssh_gateway.plumbing.loopback import free_port
from tests.host_keys import checked_secret_files, sign_host_certificate, validity_for_days

from .strict_ssh import GREETING, strict_ssh

pytestmark = pytest.mark.integration

HOST = "ssh-gpu-alice.example.test"
PATTERNS = hi.host_patterns(hi.instance_host_pattern("ssh-{instance}.example.test"))
DAY = 86_400


@pytest.fixture(scope="module")
def ca() -> hi.KeyPair:
    return hi.generate_key_pair()


@pytest.fixture(scope="module")
def host_key() -> hi.KeyPair:
    return hi.generate_key_pair()


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> ClientKey:
    return ensure_client_keypair(tmp_path_factory.mktemp("client") / "id_ed25519", "host-identity-test")


def issue(ca: hi.KeyPair, host_key: hi.KeyPair, *, principals: list[str] | None = None, **validity: int) -> str:
    return sign_host_certificate(
        ca_private_key=ca.private_key,
        host_public_key=host_key.public_key,
        principals=principals or [HOST, "ssh-gpu-alice"],
        key_id="test/gpu-alice",
        validity=hi.Validity(**validity) if validity else validity_for_days(7),
        serial=1,
    )


Serve = Callable[..., IdentitySshd]


@pytest.fixture
def serve(tmp_path: Path, client: ClientKey, host_key: hi.KeyPair) -> Iterator[Serve]:
    """Starts sshd with `certificate` (and the host key) mounted as a pod mounts its Secret."""
    started: list[IdentitySshd] = []

    def start(certificate: str, *, mode: int = 0o600) -> IdentitySshd:
        data = checked_secret_files(
            private_key=host_key.private_key, public_key=host_key.public_key, certificate=certificate
        )
        mount = mount_secret(tmp_path / f"secret-{len(started)}", data, mode=mode)
        sshd = IdentitySshd(
            tmp_path / f"sshd-{len(started)}", mount_dir=mount, port=free_port(), authorized_keys=[client.public_key]
        )
        started.append(sshd)
        sshd.start()
        return sshd

    yield start
    for sshd in started:
        sshd.stop()


def ca_line(ca: hi.KeyPair) -> list[str]:
    return hi.cert_authority_lines(PATTERNS, [ca.public_key], "ssh-gateway test CA")


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_ca_line_alone_lets_ssh_in_without_a_prompt(
    tmp_path: Path, serve: Serve, client: ClientKey, ca: hi.KeyPair, host_key: hi.KeyPair, mode: int
) -> None:
    sshd = serve(issue(ca, host_key), mode=mode)
    mounted = sshd.mount_dir / hi.HOST_KEY_FILE
    assert mounted.is_symlink() and mounted.stat().st_mode & 0o777 == mode
    for alias in (False, True):
        result = strict_ssh(tmp_path, client, ca_line(ca), host=HOST, port=sshd.port, alias=alias)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == GREETING
        looked_up = HOST if alias else f"[{HOST}]:{sshd.port}"
        assert f"Host '{looked_up}' is known and matches the ED25519-CERT host certificate" in result.stderr
        assert f"Server host certificate: ssh-ed25519-cert-v01@openssh.com {host_key.fingerprint}" in result.stderr
        assert "Permanently added" not in result.stderr


def test_plain_per_instance_line_works_without_the_ca(
    tmp_path: Path, serve: Serve, client: ClientKey, ca: hi.KeyPair, host_key: hi.KeyPair
) -> None:
    sshd = serve(issue(ca, host_key))
    result = strict_ssh(tmp_path, client, [plain_line(HOST, host_key.public_key)], host=HOST, port=sshd.port)
    assert result.returncode == 0, result.stderr
    # ssh tries the CA first ("No matching CA found"), then the plain key: under the bare name or [name]:port.
    assert "is known and matches the ED25519 host key" in result.stderr


def test_overlapping_ca_lines_accept_either_ca(
    tmp_path: Path, serve: Serve, client: ClientKey, ca: hi.KeyPair, host_key: hi.KeyPair
) -> None:
    previous = hi.generate_key_pair()
    both = hi.cert_authority_lines(PATTERNS, [ca.public_key, previous.public_key])
    for signer in (ca, previous):
        result = strict_ssh(tmp_path, client, both, host=HOST, port=serve(issue(signer, host_key)).port)
        assert result.returncode == 0, result.stderr


def test_doctor_reads_the_served_certificate(serve: Serve, ca: hi.KeyPair, host_key: hi.KeyPair) -> None:
    sshd = serve(issue(ca, host_key))
    scan = subprocess.run(
        ["ssh-keyscan", "-c", "-p", str(sshd.port), "127.0.0.1"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    (served,) = hi.certificates_in_keyscan(scan.stdout)
    verified = hi.verify_host_certificate(served, ca_public_keys=[ca.public_key], principal=HOST)
    assert verified.public_key == sshd.host_public_key == host_key.public_key
    assert verified.fingerprint == host_key.fingerprint


@pytest.mark.parametrize("case", ["another CA", "expired", "wrong principal"])
def test_ssh_refuses_a_bad_certificate(
    tmp_path: Path, serve: Serve, client: ClientKey, ca: hi.KeyPair, host_key: hi.KeyPair, case: str
) -> None:
    now = int(time.time())
    certificate, said, doctor_says = {
        "another CA": (issue(hi.generate_key_pair(), host_key), "No matching CA found", "not by the stack's host CA"),
        "expired": (
            issue(ca, host_key, valid_after=now - 2 * DAY, valid_before=now - DAY),
            "Certificate invalid: expired",
            "expired at",
        ),
        "wrong principal": (
            issue(ca, host_key, principals=["ssh-gpu-bob.example.test"]),
            "Certificate invalid: name is not a listed principal",
            "is not for",
        ),
    }[case]
    sshd = serve(certificate)
    result = strict_ssh(tmp_path, client, ca_line(ca), host=HOST, port=sshd.port)
    assert result.returncode == 255, result.stdout
    assert said in result.stderr
    assert "Host key verification failed." in result.stderr
    assert GREETING not in result.stdout
    with pytest.raises(hi.CertificateRejected, match=doctor_says):
        hi.verify_host_certificate(certificate, ca_public_keys=[ca.public_key], principal=HOST)
