"""The real Traefik (ssh_gateway/local/traefik.py) reads the emulator's HTTP-provider endpoint as it reads Pangolin's:
routers appear and go with the Pangolin resources, and bytes pass only where a router is."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pangolin_emulator.harness import EmulatorHandle, running_emulator
from ssh_gateway.local.traefik import TraefikProcess
from ssh_gateway.plumbing.loopback import free_port

pytestmark = pytest.mark.integration

BANNER = b"SSH-2.0-stand-in\r\n"


class _Banner(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(BANNER)


@pytest.fixture
def backend() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Banner)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def banner(port: int, timeout: float = 3.0) -> bytes:
    """The first bytes through Traefik's entry point; b"" when Traefik has no router there (it holds the
    connection, then closes it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            return sock.recv(64)
        except TimeoutError:
            return b""


def test_traefik_follows_the_emulators_routers(tmp_path: Path, backend: int) -> None:
    with running_emulator(tmp_path / "pangolin") as emulator:
        api = httpx.Client(base_url=emulator.url, headers={"Authorization": f"Bearer {emulator.api_key}"}, timeout=10)
        first, second = free_port(), free_port()
        entry_points = {f"tcp-{p}": {"address": f":{p}/tcp"} for p in (first, second)}
        rid = _raw(api, emulator, "ssh-gateway/it/one", first, backend)
        with TraefikProcess(tmp_path / "traefik", entry_points, emulator.traefik_config_url) as traefik:
            assert traefik.version() == "3.7.15"
            assert traefik.entry_point_names() == {"traefik", *entry_points}
            routers = traefik.wait_for_routers(lambda rs: len(rs) == 1)
            assert [(r["name"], r["entryPoints"], r["rule"], r["status"]) for r in routers] == [
                (f"{rid}-ssh-gateway-it-one-router@http", [f"tcp-{first}"], "HostSNI(`*`)", "enabled")
            ]
            assert banner(first) == BANNER
            assert banner(second) == b""  # an entry point without a router passes nothing

            # A second enabled resource on the same port: Pangolin refuses nothing, Traefik holds two routers.
            twin = _raw(api, emulator, "ssh-gateway/it/twin", first, backend)
            routers = traefik.wait_for_routers(lambda rs: len(rs) == 2)
            assert {r["entryPoints"][0] for r in routers} == {f"tcp-{first}"}
            # Disabling one (the reliability design's "disable the loser") leaves one router on the port.
            assert api.post(f"/resource/{twin}", json={"enabled": False}).status_code == 200
            traefik.wait_for_routers(lambda rs: [r["name"].split("-", 1)[0] for r in rs] == [str(rid)])

            assert api.delete(f"/resource/{rid}").status_code == 200
            traefik.wait_for_routers(lambda rs: rs == [])
            assert banner(first) == b""


def _raw(api: httpx.Client, emulator: EmulatorHandle, name: str, port: int, backend: int) -> int:
    created = api.put(f"/org/{emulator.org_id}/resource", json={"name": name, "mode": "tcp", "proxyPort": port})
    assert created.status_code == 201, created.text
    rid = int(created.json()["data"]["resourceId"])
    target = {"siteId": emulator.site_id, "ip": "127.0.0.1", "port": backend}
    assert api.put(f"/resource/{rid}/target", json=target).status_code == 201
    return rid
