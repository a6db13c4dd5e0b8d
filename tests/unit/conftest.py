"""Unit layer: Pulumi mocks that record every registration, and pure functions. No processes."""

from __future__ import annotations

from collections.abc import Iterator

import pulumi
import pytest

from tests.mocks import ASSIGNED_NODE_PORT, RecordingMocks

__all__ = ["ASSIGNED_NODE_PORT", "RecordingMocks", "mocks"]


@pytest.fixture
def mocks() -> Iterator[RecordingMocks]:
    recording = RecordingMocks()
    pulumi.runtime.set_mocks(recording, project="ssh-gateway", stack="unit", preview=False)
    yield recording
