"""How a run tells `ssh-gateway up` that it was refused, not that it failed (docs/commands.md, exit codes).

Both end `pulumi up` with one error line and pulumi's one exit code, 1. They differ for whoever runs the `up` again:
a refusal (an invalid config, a stack over one of Azure's limits, a missing NSG, an exhausted port range) is
decided before anything is written and comes back the same until a person changes something, while a failure (an
API that did not answer) may heal by itself. So `ssh-gateway up` names a file in `REFUSAL_FILE_ENV`, which pulumi
passes to the program and to every provider it starts, and each refusal appends its line there: the `up` exits 3
when the file holds one, and the reconciler does not retry it hot.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

__all__ = ["REFUSAL_FILE_ENV", "note_refusal", "noted_refusals"]

REFUSAL_FILE_ENV: Final = "SSH_GATEWAY_REFUSAL_FILE"
"""The file each refusal's line is appended to, when set."""


def note_refusal(line: str, environ: Mapping[str, str] = os.environ) -> None:
    """Appends the refusal's line to the file `REFUSAL_FILE_ENV` names; nothing when it names none (a plain
    `pulumi up`)."""
    path = environ.get(REFUSAL_FILE_ENV)
    if not path:
        return
    with Path(path).open("a", encoding="utf-8") as out:  # one short write: the program and providers append
        out.write(" ".join(line.split()) + "\n")


def noted_refusals(path: Path) -> list[str]:
    """The refusal lines noted in `path` (none when the file is absent)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [line for line in text.splitlines() if line.strip()]
