"""The program drops the SDK's per-resource debug messages unless SSH_GATEWAY_SDK_DEBUG=1 keeps them."""

from __future__ import annotations

import pulumi
import pytest

from components import sdk_debug

pytestmark = pytest.mark.unit


def test_debug_messages_are_dropped_unless_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []
    monkeypatch.setattr(pulumi.log, "debug", lambda msg, *_args, **_kwargs: sent.append(msg))
    monkeypatch.setenv(sdk_debug.KEEP_VARIABLE, "1")
    sdk_debug.drop_sdk_debug_messages()
    pulumi.log.debug("kept")
    monkeypatch.delenv(sdk_debug.KEEP_VARIABLE)
    sdk_debug.drop_sdk_debug_messages()
    # As the SDK calls it, positionally and by keyword.
    pulumi.log.debug("dropped")
    pulumi.log.debug(msg="dropped", resource=None, stream_id=0, ephemeral=True)
    assert sent == ["kept"]
