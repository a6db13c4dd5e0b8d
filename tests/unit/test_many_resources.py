"""A program with well over a thousand dynamic resources registers them all (pulumi/pulumi#17803)."""

from __future__ import annotations

import pickle

import pulumi
import pytest

from providers.pangolin import PangolinTcpResource, PangolinTcpResourceArgs
from ssh_gateway.core.names import PANGOLIN_TYPE

from .conftest import RecordingMocks

pytestmark = pytest.mark.unit


def test_1500_pangolin_resources_pickle_without_nesting(mocks: RecordingMocks) -> None:
    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def program() -> None:
        for n in range(1500):
            args = PangolinTcpResourceArgs(
                api_url="http://127.0.0.1:1/v1",
                org_id="acme",
                site_id=1,
                name=f"r{n}",
                proxy_port=20000 + n,
                target_ip="127.0.0.1",
                target_port=22,
            )
            PangolinTcpResource(f"r{n}", args)

    program()
    assert len(mocks.of_type(PANGOLIN_TYPE)) == 1500
    # At most the one wrapper pulumi puts in for the last resource, not 1500 of them.
    method = pickle._Pickler._batch_setitems  # type: ignore[attr-defined]
    depth = 0
    while method.__module__ != "pickle":
        method = next(c.cell_contents for c in method.__closure__ if callable(c.cell_contents))
        depth += 1
    assert depth <= 1
