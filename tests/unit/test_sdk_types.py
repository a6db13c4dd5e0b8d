"""The program has the SDK work out each resource class's output types once, unless SSH_GATEWAY_SDK_TYPES=each."""

from __future__ import annotations

import pytest
from pulumi import _types

from components import sdk_types
from providers.pangolin.resource import PangolinTcpResource

pytestmark = pytest.mark.unit


def test_output_types_are_computed_once_per_class_unless_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    computed: list[type] = []
    sdk = _types.resource_types

    def counting(cls: type) -> dict[str, type]:
        computed.append(cls)
        return sdk(cls)

    monkeypatch.setattr(_types, "resource_types", counting)
    monkeypatch.setenv(sdk_types.KEEP_VARIABLE, "each")
    sdk_types.cache_resource_types()
    _types.resource_types(PangolinTcpResource)
    _types.resource_types(PangolinTcpResource)
    assert computed == [PangolinTcpResource] * 2

    monkeypatch.delenv(sdk_types.KEEP_VARIABLE)
    sdk_types.cache_resource_types()
    sdk_types.cache_resource_types()  # a second call wraps nothing again
    first = _types.resource_types(PangolinTcpResource)
    assert _types.resource_types(PangolinTcpResource) is first
    assert first == sdk(PangolinTcpResource) and "proxy_port" in first
    assert computed == [PangolinTcpResource] * 3
