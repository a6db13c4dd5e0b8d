"""Data plane: bytes reach the target and follow port changes, disables and deletes."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pangolin_emulator.harness import STDERR_NAME, EmulatorHandle
from ssh_gateway.plumbing.loopback import free_port

from .conftest import Start, api

pytestmark = pytest.mark.provider

FOLLOW_WITHIN = 2.0


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture
def echo_port() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def _echoes(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"ping")
            return sock.recv(16) == b"ping"
    except OSError:
        return False


def _eventually(condition: bool, probe: int) -> bool:
    """Whether `_echoes(probe)` becomes `condition` within FOLLOW_WITHIN seconds."""
    deadline = time.monotonic() + FOLLOW_WITHIN
    while time.monotonic() < deadline:
        if _echoes(probe) == condition:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def plane(start: Start) -> EmulatorHandle:
    return start(data_plane=True)


def test_forwards_and_follows_changes(plane: EmulatorHandle, echo_port: int) -> None:
    first, second = free_port(), free_port()
    with api(plane) as client:
        rid = client.put(
            f"/org/{plane.org_id}/resource", json={"name": "fwd", "mode": "tcp", "proxyPort": first}
        ).json()["data"]["resourceId"]
        assert not _echoes(first)  # no target yet, nothing to serve
        client.put(f"/resource/{rid}/target", json={"siteId": plane.site_id, "ip": "127.0.0.1", "port": echo_port})
        assert _eventually(True, first)
        with socket.create_connection(("127.0.0.1", first), timeout=2) as sock:
            payload = bytes(range(256)) * 512
            sock.sendall(payload)
            received = b""
            while len(received) < len(payload):
                received += sock.recv(65536)
            assert received == payload

        client.post(f"/resource/{rid}", json={"proxyPort": second})
        assert _eventually(True, second)
        assert _eventually(False, first)

        client.post(f"/resource/{rid}", json={"enabled": False})
        assert _eventually(False, second)
        client.post(f"/resource/{rid}", json={"enabled": True})
        assert _eventually(True, second)

        with socket.create_connection(("127.0.0.1", second), timeout=2) as live:
            client.delete(f"/resource/{rid}")
            assert _eventually(False, second)
            # The live connection went away with its resource.
            live.settimeout(FOLLOW_WITHIN)
            assert live.recv(16) == b""


def test_unbindable_port_is_logged_and_retried(plane: EmulatorHandle, echo_port: int, tmp_path: Path) -> None:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    taken = int(blocker.getsockname()[1])
    with api(plane) as client:
        rid = client.put(
            f"/org/{plane.org_id}/resource", json={"name": "busy", "mode": "tcp", "proxyPort": taken}
        ).json()["data"]["resourceId"]
        client.put(f"/resource/{rid}/target", json={"siteId": plane.site_id, "ip": "127.0.0.1", "port": echo_port})
        log = tmp_path / "emu0" / STDERR_NAME
        deadline = time.monotonic() + FOLLOW_WITHIN
        while "cannot listen" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert log.read_text().count(f"cannot listen on 127.0.0.1:{taken}") == 1
        assert client.get(f"/resource/{rid}").status_code == 200  # the API is unaffected
        blocker.close()
        assert _eventually(True, taken)
