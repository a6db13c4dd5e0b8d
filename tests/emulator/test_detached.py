"""`DetachedEmulator` (the demo's emulator): its internal API is on the port it bound itself, whatever an earlier
start in the same directory left behind."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from pangolin_emulator.harness import DetachedEmulator
from pangolin_emulator.keys import generate_api_key
from ssh_gateway.plumbing.loopback import free_port

pytestmark = pytest.mark.provider


def test_a_port_taken_since_the_last_start_does_not_stop_the_next(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        # As an earlier start left it; another process has bound that port since.
        (tmp_path / "internal-port").write_text(f"{taken}\n")
        emulator = DetachedEmulator(
            tmp_path, url=f"http://127.0.0.1:{free_port()}/v1", org_id="acme", api_key=generate_api_key()
        )
        emulator.start()
        try:
            bound = urlsplit(emulator.traefik_config_url).port
            assert bound not in (None, taken)
            assert httpx.get(emulator.traefik_config_url, timeout=10).json() == {}
        finally:
            assert emulator.stop()
