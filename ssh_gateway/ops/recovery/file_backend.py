"""The Pulumi file backend (`file://` URLs) on disk: a stack's lock files and its checkpoint, and their repairs.

Layout (project-scoped stacks, the default since pulumi 3.61; gocloud.dev's `fileblob` underneath):

    <backend>/.pulumi/stacks/<project>/<stack>.json           the checkpoint (the stack's state)
    <backend>/.pulumi/stacks/<project>/<stack>.json.bak       the previous checkpoint, written before each save
    <backend>/.pulumi/stacks/<project>/<stack>.json.attrs     fileblob's attributes of the file: JSON, with its md5
    <backend>/.pulumi/locks/organization/<project>/<stack>/<uuid>.json   {"pid", "username", "hostname", "timestamp"}

A process killed with SIGKILL leaves its lock behind (`the stack is currently locked by 1 lock(s)`), and one
killed while fileblob rewrites a blob can leave a 0-byte `.attrs` (every command then fails with `failed to
load checkpoint: EOF`) or a truncated checkpoint. This module finds those and repairs them; it never touches a
stack whose lock's process is alive.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .stack_lock import Lock, read_lock

__all__ = ["StackFiles", "stack_files"]

# What the pulumi CLI (through fileblob) writes into every `.attrs` file, apart from the md5.
_ATTRS_TEMPLATE: Final = {
    "user.cache_control": "",
    "user.content_disposition": "",
    "user.content_encoding": "",
    "user.content_language": "",
    "user.content_type": "text/plain; charset=utf-8",
    "user.metadata": None,
}


def stack_files(backend_url: str, project: str, stack: str) -> StackFiles:
    """The files of `stack` in the file backend at `backend_url`; a `ValueError` for any other backend."""
    if not backend_url.startswith("file://"):
        raise ValueError(
            f"PULUMI_BACKEND_URL={backend_url.split('?')[0]} is not a file:// backend: locks and checkpoint files "
            "can only be repaired on the local file backend (on a cloud backend use `pulumi cancel`)"
        )
    root = Path(backend_url.removeprefix("file://").split("?")[0]).expanduser() / ".pulumi"
    return StackFiles(root=root, project=project, stack=stack)


@dataclass(frozen=True)
class StackFiles:
    """Where one stack's files are in a file backend."""

    root: Path
    """The backend's `.pulumi` directory."""
    project: str
    stack: str

    @property
    def where(self) -> str:
        return str(self.root.parent)

    def exists(self) -> bool:
        return self.checkpoint.exists()

    @property
    def checkpoint(self) -> Path:
        return self.root / "stacks" / self.project / f"{self.stack}.json"

    @property
    def backup(self) -> Path:
        return self.checkpoint.with_name(f"{self.stack}.json.bak")

    def locks(self) -> list[Lock]:
        """The stack's lock files (project-scoped layout, and the older one without projects)."""
        found: list[Lock] = []
        for folder in (
            self.root / "locks" / "organization" / self.project / self.stack,
            self.root / "locks" / self.stack,
        ):
            for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
                found.append(read_lock(str(path), _read_bytes(path)))
        return found

    def remove_lock(self, lock: Lock) -> None:
        """Delete a lock file and its attributes."""
        Path(lock.key).unlink(missing_ok=True)
        _attrs_of(Path(lock.key)).unlink(missing_ok=True)

    def repair_attrs(self) -> list[Path]:
        """Rewrite each empty or unreadable `.attrs` of the checkpoint and its backup from the file itself."""
        repaired: list[Path] = []
        for blob in (self.checkpoint, self.backup):
            attrs = _attrs_of(blob)
            if blob.exists() and attrs.exists() and not _readable_json(attrs):
                _write_attrs(blob)
                repaired.append(attrs)
        return repaired

    def restore_checkpoint(self) -> Path | None:
        """If the checkpoint is empty or not JSON and the backup is sound, put the backup in its place.

        The broken file is kept beside it as `<stack>.json.broken-<unix time>`; returns that path, or None if
        nothing was wrong (or there is no sound backup to restore, which the caller reports).
        """
        if not self.checkpoint.exists() or _readable_json(self.checkpoint):
            return None
        if not self.backup.exists() or not _readable_json(self.backup):
            return None
        kept = self.checkpoint.with_name(f"{self.stack}.json.broken-{int(time.time())}")
        shutil.move(self.checkpoint, kept)
        _attrs_of(self.checkpoint).unlink(missing_ok=True)
        shutil.copyfile(self.backup, self.checkpoint)
        _write_attrs(self.checkpoint)
        return kept

    def checkpoint_is_sound(self) -> bool:
        """Whether the checkpoint (if any) is readable JSON."""
        return not self.checkpoint.exists() or _readable_json(self.checkpoint)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _attrs_of(blob: Path) -> Path:
    return blob.with_name(blob.name + ".attrs")


def _readable_json(path: Path) -> bool:
    try:
        json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return True


def _write_attrs(blob: Path) -> None:
    digest = base64.b64encode(hashlib.md5(blob.read_bytes()).digest()).decode()  # noqa: S324 - fileblob's checksum
    _attrs_of(blob).write_text(json.dumps({**_ATTRS_TEMPLATE, "md5": digest}, separators=(",", ":")))
