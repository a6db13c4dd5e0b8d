"""The exit codes of every `ssh-gateway` command, defined once.

Each command's --help says what each code means for that command (`Command.codes`); what a code means for every
command is here. Standard library only: the workflows run `python3 -m ssh_gateway.ops shards` on a bare
checkout.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

__all__ = ["EXIT_CODES", "ExitCode"]


class ExitCode(IntEnum):
    """What a command's process exits with; what each means is `EXIT_CODES`. CI reads them: never renumber."""

    OK = 0
    FAILED = 1
    CANNOT_RUN = 2  # argparse's own code for bad arguments
    REFUSED = 3
    INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as a shell reports it


EXIT_CODES: Final = {
    ExitCode.OK: "success (for a check: healthy, no drift; for a dry run: the diff was shown)",
    ExitCode.FAILED: "the command ran and found a problem: a broken layer, drift, a preview with errors, a failed demo",
    ExitCode.CANNOT_RUN: "usage or environment error: bad arguments, no toolchain, no such stack, a preview that did "
    "not run",
    ExitCode.REFUSED: "refused, nothing written: an option from stack outputs that would run a command, a config "
    "the settings model rejects, a stack refused at preview (one of Azure's limits, a missing NSG, a full range)",
}
"""What each code means for every command (`ssh-gateway --help` ends with it); a command's own --help says what
it means there (`Command.codes`)."""
