"""A loopback sshd that serves an issued host identity the way a pod does: from a Secret volume.

`mount_secret` lays files out as the kubelet writes a Secret volume (a timestamped directory, `..data`
pointing at it, one symlink per key through `..data`, file mode = the volume's `defaultMode`), and
`IdentitySshd` is the demo's `LocalSshd` with its seed-derived `HostKey` line replaced by the pod's lines
from `host_identity.sshd_config_lines`. So the tests exercise the same files, modes and sshd_config lines
that docs/host-identity.md tells a pod to use.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from ssh_gateway.core.host_identity import HOST_PUBLIC_KEY_FILE, parse_public_key, sshd_config_lines

from .sshd import LocalSshd, SshdError

__all__ = ["IdentitySshd", "mount_secret"]

_DATA_LINK = "..data"


def mount_secret(directory: Path, data: Mapping[str, str], *, mode: int = 0o600) -> Path:
    """Writes `data` (file name -> content) into `directory` as a Secret volume with `defaultMode: mode`.

    A second call swaps the content in atomically, as the kubelet's atomic writer does when the Secret
    changes: the new files are complete before `..data` is renamed over to them.
    """
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime()) + f"{time.time_ns() % 10**9:09d}"
    payload = directory / stamp
    payload.mkdir(mode=0o755)
    for name, content in data.items():
        if "/" in name or name.startswith("."):
            raise ValueError(f"Secret key {name!r} is not a plain file name")
        fd = os.open(payload / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(content)
        # Set after writing: the kubelet applies defaultMode to finished files, and 0400 is not writable.
        os.chmod(payload / name, mode)
    previous = os.readlink(directory / _DATA_LINK) if (directory / _DATA_LINK).is_symlink() else None
    fresh_link = directory / f"{_DATA_LINK}_tmp"
    fresh_link.unlink(missing_ok=True)
    fresh_link.symlink_to(stamp)
    fresh_link.replace(directory / _DATA_LINK)
    for name in data:
        link = directory / name
        if not link.is_symlink():
            link.unlink(missing_ok=True)
            link.symlink_to(f"{_DATA_LINK}/{name}")
    if previous is not None:
        for old in (directory / previous).iterdir():
            old.chmod(0o600)
            old.unlink()
        (directory / previous).rmdir()
    return directory


class IdentitySshd(LocalSshd):
    """`LocalSshd` serving the host key and certificate mounted at `mount_dir` instead of its seed key."""

    def __init__(self, directory: Path, *, mount_dir: Path, port: int, authorized_keys: list[str]) -> None:
        super().__init__(directory, port=port, authorized_keys=authorized_keys)
        self.mount_dir = mount_dir

    @property
    def host_public_key(self) -> str:
        """The mounted host key's public half."""
        return parse_public_key((self.mount_dir / HOST_PUBLIC_KEY_FILE).read_text(), name=HOST_PUBLIC_KEY_FILE)

    def write_files(self) -> None:
        """LocalSshd's files, then its config with the pod's `HostKey`/`HostCertificate` lines as the only host key."""
        super().write_files()
        seed_line = f'HostKey "{self.host_key_file}"'
        config = self.config_file.read_text()
        if config.count(seed_line) != 1:
            raise SshdError(f"{self.config_file} has no single {seed_line!r} line to replace")
        self.config_file.write_text(config.replace(seed_line, "\n".join(sshd_config_lines(str(self.mount_dir)))))
