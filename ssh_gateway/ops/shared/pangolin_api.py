"""The tools' one way into Pangolin: the program's own client, errors and provider `read`.

The doctor and `recover` speak Pangolin's Integration API exactly as the program does (the same dialects,
pagination and error tree), so they use the provider's code rather than a second client. This module is the
only one in `ssh_gateway.ops` that imports `providers/` (a contract in pyproject.toml checks it).
"""

from __future__ import annotations

from typing import Any

import httpx

from providers.pangolin.client import PangolinClient
from providers.pangolin.errors import PangolinAuthError, PangolinError, PangolinNotFound, PangolinTransportError
from providers.pangolin.models import Resource
from providers.pangolin.policy import HttpPolicy

__all__ = [
    "PangolinAuthError",
    "PangolinClient",
    "PangolinError",
    "PangolinNotFound",
    "PangolinTransportError",
    "Resource",
    "no_retry_client",
    "read_resource_outputs",
]


def no_retry_client(
    api_url: str, api_key: str, timeout: float, *, transport: httpx.BaseTransport | None = None
) -> PangolinClient:
    """A client whose every call gives up after `timeout`, with no retries (the doctor must not wait out a
    backoff). `transport` is a test seam (httpx.MockTransport)."""
    policy = HttpPolicy(connect_timeout=timeout, read_timeout=timeout, max_retries=0)
    return PangolinClient(api_url, api_key, policy=policy, transport=transport)


def read_resource_outputs(resource_id: int, inputs: dict[str, Any], api_key: str) -> dict[str, Any]:
    """A resource's outputs as the provider's own `read` gives them (what `pulumi refresh` would record)."""
    # Imported here: the provider loads the Pulumi SDK, which `recover --help` has no need of.
    from pulumi.dynamic import Config, ConfigureRequest

    from providers.pangolin.provider import PangolinTcpProvider
    from ssh_gateway.core.credentials import API_KEY_CONFIG

    provider = PangolinTcpProvider()
    provider.configure(ConfigureRequest(Config({API_KEY_CONFIG: api_key}, "pangolin")))
    read = provider.read(str(resource_id), {k: v for k, v in inputs.items() if k != "__provider"})
    return dict(read.outs or {})
