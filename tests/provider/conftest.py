"""Provider tests: real HTTP against the local Pangolin emulator (`pangolin_emulator.harness`).

One emulator per version serves the whole session; every test makes its own uniquely named
resources and ports, so tests do not see each other's objects. Tests that need a differently
configured server (1.15.0, raw resources disabled) start their own.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pulumi.dynamic import Config, ConfigureRequest

from providers.pangolin import PangolinClient, PangolinTcpProvider
from providers.pangolin.policy import HttpPolicy

if TYPE_CHECKING:
    from pangolin_emulator.harness import EmulatorHandle

VERSIONS = ("1.18.4", "1.22.0")

# Short timeouts and backoff: the emulator's "timeout" fault sleeps ~3 s, 429 says Retry-After: 1.
FAST: dict[str, Any] = {
    "policy": HttpPolicy(
        connect_timeout=1.0, read_timeout=1.0, max_retries=6, backoff_base=0.01, backoff_max=0.05, retry_after_max=0.05
    )
}

_ports = itertools.count(41000)


@pytest.fixture(scope="session", params=VERSIONS)
def pangolin(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorHandle]:
    """A running emulator of each contract version, shared by the session."""
    from pangolin_emulator.harness import running_emulator

    state_dir = tmp_path_factory.mktemp(f"pangolin-{request.param}")
    with running_emulator(state_dir, version=request.param) as handle:
        yield handle


@pytest.fixture
def emulator(pangolin: EmulatorHandle) -> Iterator[EmulatorHandle]:
    """The session emulator with faults off and counters reset, restored after the test."""
    pangolin.set_faults(0.0)
    pangolin.reset_counters()
    yield pangolin
    pangolin.set_faults(0.0)


@pytest.fixture
def version(request: pytest.FixtureRequest, emulator: EmulatorHandle) -> str:
    """The contract version the session emulator of this test speaks."""
    return str(request.node.callspec.params["pangolin"])


@pytest.fixture
def start_emulator(tmp_path: Path) -> Iterator[Callable[..., EmulatorHandle]]:
    """Start an extra, differently configured emulator for one test; stopped afterwards."""
    from pangolin_emulator.harness import running_emulator

    stack: list[Any] = []

    def start(**options: Any) -> EmulatorHandle:
        context = running_emulator(tmp_path / f"state-{len(stack)}", **options)
        handle = context.__enter__()
        stack.append(context)
        return handle

    yield start
    for context in reversed(stack):
        context.__exit__(None, None, None)


def configure(provider: PangolinTcpProvider, api_key: str) -> PangolinTcpProvider:
    """Configure a provider the way the engine does: the stack config, namespaced."""
    provider.configure(ConfigureRequest(Config({"pangolin:apiKey": api_key}, "ssh-gateway")))
    return provider


@pytest.fixture
def provider(emulator: EmulatorHandle) -> PangolinTcpProvider:
    """A provider configured with the emulator's org key and fast retries."""
    return configure(PangolinTcpProvider(**FAST), emulator.api_key)


@pytest.fixture
def client(emulator: EmulatorHandle) -> Iterator[PangolinClient]:
    """A direct API client, for setting things up and changing them out of band."""
    with PangolinClient(emulator.url, emulator.api_key, **FAST) as api:
        yield api


def unique_name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def next_port() -> int:
    return next(_ports)


def inputs(emulator: EmulatorHandle, **overrides: Any) -> dict[str, Any]:
    """Valid provider inputs for one resource on the emulator's local site."""
    props: dict[str, Any] = {
        "apiUrl": emulator.url,
        "orgId": emulator.org_id,
        "siteId": emulator.site_id,
        "name": unique_name(),
        "protocol": "tcp",
        "proxyPort": next_port(),
        "enabled": True,
        "targetIp": "10.20.30.40",
        "targetPort": 22,
        "adoptResourceId": None,
    }
    props.update(overrides)
    return props


def writes(counters: dict[str, int]) -> dict[str, int]:
    """The non-GET entries of the emulator's request counters."""
    return {route: n for route, n in counters.items() if not route.startswith("GET ") and n}


def lists(counters: dict[str, int]) -> dict[str, int]:
    """The list-route entries of the emulator's request counters."""
    return {route: n for route, n in counters.items() if route.startswith("GET ") and route.endswith("s") and n}


def count(emulator: EmulatorHandle, route: str) -> int:
    """How often `route` (e.g. "PUT /v1/org/{orgId}/resource") was requested since the last reset."""
    return emulator.counters().get(route, 0)
