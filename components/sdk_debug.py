"""`drop_sdk_debug_messages`: the Python SDK's per-resource debug messages are not sent to the engine.

The SDK sends four to six debug messages for every resource it registers ("registering resource: ty=...",
"resource registration prepared", "resource registration successful", ...), each a blocking `Log` RPC to the
engine, which shows them only under `pulumi up --debug` (pulumi/pulumi#7292: #7295 cut the worst, these remain).
Measured on a no-op preview of 300 static instances (py-spy): 15% of the program's CPU, plus the engine's work
on each message, on every run and in proportion to the instances. The program sends no debug message of its own,
so only the SDK's go. `SSH_GATEWAY_SDK_DEBUG=1` in the environment keeps them, for a `pulumi up --debug` that
needs them.
"""

from __future__ import annotations

import os
from typing import Final

import pulumi

__all__ = ["KEEP_VARIABLE", "drop_sdk_debug_messages"]

KEEP_VARIABLE: Final = "SSH_GATEWAY_SDK_DEBUG"
"""Set to 1 to send the SDK's debug messages to the engine as before."""


def _dropped(
    msg: str,  # `pulumi.log.debug`'s signature: the SDK passes some by keyword
    resource: pulumi.Resource | None = None,
    stream_id: int | None = None,
    ephemeral: bool | None = None,
) -> None:
    """`pulumi.log.debug`, sending nothing."""


def drop_sdk_debug_messages() -> None:
    """For the rest of this program's run, `pulumi.log.debug` sends nothing (unless `KEEP_VARIABLE` is 1)."""
    if os.environ.get(KEEP_VARIABLE) != "1":
        pulumi.log.debug = _dropped
