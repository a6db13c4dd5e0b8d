"""The SDK's drain of pending Outputs waits for all of them at once, unless SSH_GATEWAY_SDK_WAIT=first."""

from __future__ import annotations

import asyncio

import pytest
from pulumi.runtime import stack as sdk_stack

from components import sdk_wait

pytestmark = pytest.mark.unit


def test_the_sdk_wait_returns_when_all_are_done_and_can_be_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdk_stack, "asyncio", asyncio)
    monkeypatch.setenv(sdk_wait.KEEP_VARIABLE, "first")
    sdk_wait.wait_for_outputs_together()
    assert getattr(sdk_stack, "asyncio") is asyncio  # noqa: B009
    monkeypatch.delenv(sdk_wait.KEEP_VARIABLE)
    sdk_wait.wait_for_outputs_together()
    shim = getattr(sdk_stack, "asyncio")  # noqa: B009
    assert shim is not asyncio and shim.FIRST_COMPLETED == asyncio.FIRST_COMPLETED  # the rest is asyncio's

    async def drain() -> tuple[int, int]:
        fast, slow = asyncio.ensure_future(asyncio.sleep(0)), asyncio.ensure_future(asyncio.sleep(0.05))
        # As the SDK calls it: FIRST_COMPLETED, which would return with `slow` pending.
        done, pending = await shim.wait([fast, slow], return_when=asyncio.FIRST_COMPLETED)
        return len(done), len(pending)

    assert asyncio.run(drain()) == (2, 0)
