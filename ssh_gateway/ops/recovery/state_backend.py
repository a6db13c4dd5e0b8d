"""One seam for the tools that must look past the pulumi CLI at a stack's backend: its locks, and whether it exists.

`stack_state(PULUMI_BACKEND_URL, project, stack, env)` gives the file backend's `StackFiles`
(ssh_gateway/ops/recovery/file_backend.py, which also repairs files a kill can break there) or the Azure Blob backend's
`AzblobStack` (ssh_gateway/ops/recovery/azblob_backend.py), both a `StackState`; None for a backend that locks on its
server (Pulumi Cloud: `pulumi cancel`) or one this project does not read (S3). An Azure Blob backend that cannot
be reached or read raises `AzblobError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from .azblob_backend import AzblobError, azblob_stack
from .file_backend import stack_files
from .stack_lock import Lock

__all__ = ["AzblobError", "StackState", "stack_state"]


class StackState(Protocol):
    """A stack in a self-managed backend, as far as recovery needs it."""

    @property
    def project(self) -> str: ...

    @property
    def stack(self) -> str: ...

    @property
    def where(self) -> str:
        """The backend, for messages (no credential)."""
        ...

    def exists(self) -> bool:
        """Whether the stack's checkpoint is there."""
        ...

    def locks(self) -> list[Lock]:
        """The stack's locks, as their holders wrote them."""
        ...

    def remove_lock(self, lock: Lock) -> None:
        """Delete one lock (only after its holder is known to be gone)."""
        ...


def stack_state(backend_url: str, project: str, stack: str, env: Mapping[str, str]) -> StackState | None:
    """The stack in the backend at `backend_url`, or None where this project does not read the backend itself."""
    if backend_url.startswith("file://"):
        return stack_files(backend_url, project, stack)
    if backend_url.startswith("azblob://"):
        return azblob_stack(backend_url, project, stack, env)
    return None
