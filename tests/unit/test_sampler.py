"""The sampler of the integration tests: every probe at every sample, findings kept with their sample."""

from __future__ import annotations

import itertools
import time

import pytest

from tests.integration.sampler import Probe, Sampler

pytestmark = pytest.mark.unit


def test_every_probe_is_called_each_sample_and_findings_keep_their_sample() -> None:
    ticks = itertools.count()

    def odd() -> str | None:
        n = next(ticks)
        return f"tick {n}" if n % 2 else None

    def broken() -> str | None:
        raise OSError("emulator gone")

    with Sampler([Probe("odd", odd), Probe("broken", broken)], interval=0.001) as sampler:
        deadline = time.monotonic() + 10
        while sampler.samples < 6 and time.monotonic() < deadline:
            time.sleep(0.005)

    assert sampler.samples >= 6
    found = sampler.found("odd")
    assert [f.sample for f in found[:3]] == [1, 3, 5]
    assert found[0].what == "tick 1"
    assert sampler.errors[0] == "broken: OSError: emulator gone"
    assert len(sampler.errors) == sampler.samples
