"""A real OpenSSH server on loopback, standing in for the instances' pods (the demo and the tests use it).

It runs from a directory of its own: config, host key, `authorized_keys`, pid file and log. It works as root
(CI) and as a normal user (a laptop): a non-root sshd can log in only the user running it, so `AllowUsers`
names exactly that user. It runs in a session of its own, so a caller may leave it running (`scripts/demo
--keep`) and stop it later from its pid file.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ssh_gateway.core.host_identity import HostIdentityError, openssh_private_key, openssh_public_key, public_key_of
from ssh_gateway.plumbing.process import ManagedProcess, PidFile, ProcessError, ProcessSpec, tcp_ready

__all__ = [
    "DEMO_HOST_KEY_SEED",
    "ClientKey",
    "LocalSshd",
    "SshdError",
    "ensure_client_keypair",
    "login_user",
    "wait_for_port",
]

DEMO_HOST_KEY_SEED = hashlib.sha256(b"ssh-gateway: the local demo sshd's host key, loopback only").digest()
"""Seed of the host key a `LocalSshd` serves by default (the demo's instances with a pinned `hostKey`, the tests).
Public on purpose: the key only ever serves 127.0.0.1, like the emulator's local-only API key; see
`host_identity.key_pair_from_seed`."""

_PRIVSEP_MISSING = re.compile(r"Missing privilege separation directory: (\S+)")


class SshdError(ProcessError):
    """sshd (or ssh-keygen) is missing, or the server did not come up; the message says why."""


def login_user() -> str:
    """The user this process runs as: the only one a non-root sshd can log in."""
    return getpass.getuser()


def find_sshd() -> Path:
    """sshd's absolute path (it must be started by absolute path to re-exec itself for each connection)."""
    # Debian puts sshd in /usr/sbin, which a normal user's PATH often lacks.
    found = shutil.which("sshd") or shutil.which("sshd", path="/usr/sbin:/usr/local/sbin:/sbin")
    if not found:
        raise SshdError("sshd is not installed: run scripts/system-packages (apt-get install openssh-server)")
    return Path(found).resolve()


@dataclass(frozen=True)
class ClientKey:
    """A client key pair on disk."""

    private: Path
    """The private key file (mode 0600), for `ssh -i`."""
    public_key: str
    """`ssh-ed25519 AAAA... comment`, for `authorized_keys`."""


def ensure_client_keypair(private: Path, comment: str) -> ClientKey:
    """An Ed25519 key pair at `private` (+ `.pub`): generated once with ssh-keygen, reused afterwards."""
    public = private.with_name(private.name + ".pub")
    if not (private.exists() and public.exists()):
        keygen = shutil.which("ssh-keygen")
        if keygen is None:
            raise SshdError("ssh-keygen is not installed: run scripts/system-packages (openssh-client)")
        private.parent.mkdir(parents=True, exist_ok=True)
        private.unlink(missing_ok=True)
        public.unlink(missing_ok=True)
        subprocess.run(  # noqa: S603 - fixed argv
            [keygen, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(private)],
            check=True,
            capture_output=True,
            timeout=30,
        )
    return ClientKey(private, public.read_text().strip())


def wait_for_port(host: str, port: int, timeout: float) -> bool:
    """True once host:port accepts a TCP connection, False if it still does not after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


def _quote(path: Path) -> str:
    """A path as one sshd_config argument (the config format splits on spaces unless quoted)."""
    return f'"{path}"'


class LocalSshd:
    """One sshd listening on `host:port`, configured and run from `directory`."""

    def __init__(
        self,
        directory: Path,
        *,
        host: str = "127.0.0.1",
        port: int,
        authorized_keys: list[str],
        host_key_seed: bytes = DEMO_HOST_KEY_SEED,
    ) -> None:
        self.directory = directory
        self.host = host
        self.port = port
        self.authorized_keys = authorized_keys
        self.host_key_seed = host_key_seed
        self.config_file = directory / "sshd_config"
        self.host_key_file = directory / "ssh_host_ed25519_key"
        self.authorized_keys_file = directory / "authorized_keys"
        self.pid_file = directory / "sshd.pid"
        self.log_file = directory / "sshd.log"
        self._pid = PidFile(self.pid_file, marker=str(self.config_file))
        self._process: ManagedProcess | None = None

    @property
    def host_public_key(self) -> str:
        """`ssh-ed25519 AAAA...`: what a known_hosts line (or the stack's `hostKey`) pins."""
        return openssh_public_key(self.host_key_seed)

    def write_files(self) -> None:
        """Host key, authorized_keys and config, matching the arguments. sshd reads authorized_keys at each
        login, so a running one accepts a new key at once."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._stale_host_key():
            host_key = openssh_private_key(self.host_key_seed)
            # Written aside and renamed in: a running sshd never sees a missing or half-written key. Mode 0600:
            # sshd refuses a host key that others can read, whatever StrictModes says.
            fresh = self.host_key_file.with_suffix(".new")
            fresh.unlink(missing_ok=True)
            fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(host_key)
            fresh.replace(self.host_key_file)
        self.authorized_keys_file.write_text("".join(f"{key}\n" for key in self.authorized_keys))
        self.config_file.write_text(
            "\n".join(
                [
                    "# Written by ssh_gateway.local.sshd: a loopback-only sshd standing in for the instances' pods.",
                    f"ListenAddress {self.host}:{self.port}",
                    f"HostKey {_quote(self.host_key_file)}",
                    f"PidFile {_quote(self.pid_file)}",
                    f"AuthorizedKeysFile {_quote(self.authorized_keys_file)}",
                    # Not root, sshd can only log in its own user anyway; as root, allow no one else either.
                    f"AllowUsers {login_user()}",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    # PAM sessions need root; a non-root sshd must do without, so both modes do.
                    "UsePAM no",
                    # The files live in a checkout (e.g. group-writable dirs) that StrictModes would reject.
                    "StrictModes no",
                    "PermitRootLogin prohibit-password",
                    "PrintMotd no",
                    "X11Forwarding no",
                    "AllowAgentForwarding no",
                    "LogLevel VERBOSE",
                    "",
                ]
            )
        )

    def _stale_host_key(self) -> bool:
        """Whether the host key file is missing or holds another key. Compared by key, not by file text: the
        OpenSSH format carries random check integers, so the same key writes a different file each time."""
        if not self.host_key_file.exists():
            return True
        try:
            served = public_key_of(self.host_key_file.read_text(), name=str(self.host_key_file))
        except HostIdentityError:
            return True
        return served != openssh_public_key(self.host_key_seed)

    def running_pid(self) -> int | None:
        """The pid of this directory's sshd if it is running, else None."""
        return self._pid.running_pid()

    def start(self, timeout: float = 10.0) -> int:
        """Starts sshd in a session of its own and waits until it accepts connections; returns its pid."""
        if wait_for_port(self.host, self.port, 0):
            raise SshdError(
                f"{self.host}:{self.port} is in use by another process: stop it, or give the instances another "
                "staticPort in the stack's config"
            )
        self.write_files()
        self.pid_file.unlink(missing_ok=True)
        spec = ProcessSpec(
            name="sshd",
            # -D: no fork into the background, so the pid is sshd's own; detached below instead, so it outlives
            # its caller (`scripts/demo --keep`) as a daemon would, and is stopped through its pid file.
            argv=(str(find_sshd()), "-D", "-f", str(self.config_file), "-E", str(self.log_file)),
            log=self.log_file,  # with -E even its fatal config errors go there rather than to stderr
            pid_file=self._pid,
            stop_grace=5.0,
            error=SshdError,
        )
        self._process = ManagedProcess(spec)
        ready = tcp_ready(self.host, self.port)
        try:
            return self._process.start(ready=ready, timeout=timeout, detach=True)
        except SshdError as exc:
            _make_privsep_dir(exc)
        return self._process.start(ready=ready, timeout=timeout, detach=True)

    def stop(self, timeout: float = 5.0) -> bool:
        """Stops this directory's sshd if it runs (also one an earlier process started); True if it was running."""
        process, self._process = self._process, None
        if process is None:
            return self._pid.terminate(timeout)
        return process.stop(timeout)


def _make_privsep_dir(failed: SshdError) -> None:
    """Makes the privilege-separation directory whose absence made sshd fail; re-raises any other failure.

    Run as root, sshd wants it (Debian: /run/sshd), and only the init script creates it: containers without
    init never run it."""
    missing = _PRIVSEP_MISSING.search(str(failed))
    if not missing:
        raise failed
    if os.geteuid() != 0:
        raise SshdError(f"sshd: {missing[0]}") from failed
    Path(missing[1]).mkdir(mode=0o755, parents=True, exist_ok=True)
