"""`wait_for_outputs_together`: the SDK's last wait, for every pending Output at once instead of one at a time.

When the program's RPCs are done, the SDK (`pulumi/runtime/stack.py` `wait_for_rpcs`, v3.259) drains the pending
Outputs with `asyncio.wait(pending, return_when=FIRST_COMPLETED)` in a loop (pulumi/pulumi#22411): every pass adds
a done-callback to each pending Output and removes it again, for one completion. With P Outputs that is P passes
of P each: quadratic in the instances (about 130 Outputs each). Measured with py-spy on a `+1` up of 300 static
instances: a third of the program's CPU, the largest per-instance cost of a run (docs/scaling.md). Waiting for all
of them together (`ALL_COMPLETED`) is one pass per wave of Outputs: the loop still picks up Outputs made
meanwhile on its next pass, still ends only when none is pending, and still re-raises what a failed one raised,
after the others have settled instead of before. `SSH_GATEWAY_SDK_WAIT=first` keeps the SDK's own wait.
"""

from __future__ import annotations

import asyncio
import os
import types
from collections.abc import Iterable
from typing import Any, Final

from pulumi.runtime import stack as sdk_stack

__all__ = ["KEEP_VARIABLE", "wait_for_outputs_together"]

KEEP_VARIABLE: Final = "SSH_GATEWAY_SDK_WAIT"
"""Set to `first` to keep the SDK's one-at-a-time wait."""


class _AllAtOnce(types.ModuleType):
    """`asyncio` as `pulumi.runtime.stack` sees it: the same module, but `wait` waits for all."""

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    @staticmethod
    async def wait(
        fs: Iterable[asyncio.Future[Any]], *, timeout: float | None = None, return_when: str = asyncio.ALL_COMPLETED
    ) -> tuple[set[asyncio.Future[Any]], set[asyncio.Future[Any]]]:
        del return_when  # FIRST_COMPLETED is the SDK's; all of them is this module's point
        return await asyncio.wait(fs, timeout=timeout, return_when=asyncio.ALL_COMPLETED)


def wait_for_outputs_together() -> None:
    """For the rest of this program's run, the SDK's drain of pending Outputs waits for all of them at once."""
    # The module's `asyncio` global, as `wait_for_rpcs` looks it up at each call; an SDK without it is left alone.
    if os.environ.get(KEEP_VARIABLE) != "first" and getattr(sdk_stack, "asyncio", None) is asyncio:
        setattr(sdk_stack, "asyncio", _AllAtOnce("asyncio"))  # noqa: B010 - a private global of the SDK
