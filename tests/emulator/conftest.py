"""Contract tests of the emulator: plain httpx against `python -m pangolin_emulator`.

Session-scoped emulators (one per version) serve tests that only look at their own objects;
tests that count, paginate, restart or inject faults start a fresh one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from pangolin_emulator.harness import DB_NAME, EmulatorHandle, running_emulator
from pangolin_emulator.keys import generate_api_key, hash_secret, split_token
from pangolin_emulator.store import Store

_ports = itertools.count(42000)

Start = Callable[..., EmulatorHandle]


def next_port() -> int:
    """A proxyPort no other test uses (API-only tests never bind it)."""
    return next(_ports)


def api(emu: EmulatorHandle, key: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key or emu.api_key}"}
    return httpx.Client(base_url=emu.url, headers=headers, timeout=10)


def add_key(state_dir: Path, org_id: str, actions: tuple[str, ...]) -> str:
    """Insert an org key straight into the emulator's db (Pangolin would use the root key API)."""
    key = generate_api_key()
    key_id, secret = split_token(key)
    store = Store(state_dir / DB_NAME)
    store.ensure_org(org_id)
    store.put_key(key_id, hash_secret(secret or ""), is_root=False, org_id=org_id, actions=actions)
    store.close()
    return key


def create_raw(client: httpx.Client, org_id: str, name: str, port: int, **extra: Any) -> dict[str, Any]:
    response = client.put(f"/org/{org_id}/resource", json={"name": name, "mode": "tcp", "proxyPort": port, **extra})
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


@pytest.fixture(scope="session")
def emu122(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorHandle]:
    with running_emulator(tmp_path_factory.mktemp("emu122"), version="1.22.0") as emu:
        yield emu


@pytest.fixture(scope="session")
def emu118(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorHandle]:
    with running_emulator(tmp_path_factory.mktemp("emu118"), version="1.18.4") as emu:
        yield emu


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    """Start fresh emulators in this test's tmp dir; all are stopped afterwards."""
    with ExitStack() as stack:
        count = itertools.count()

        def _start(**kwargs: Any) -> EmulatorHandle:
            state_dir = kwargs.pop("state_dir", tmp_path / f"emu{next(count)}")
            return stack.enter_context(running_emulator(state_dir, **kwargs))

        yield _start
