"""The internal API's one route the emulator serves: Traefik's HTTP provider endpoint, on a port of its own.

Real Pangolin serves `GET /api/v1/traefik-config` on `server.internal_port` (3001 by default) with no auth: that
port is meant for the Traefik container beside it (docs/pangolin-api.md §2.4.1). The body is the dynamic
configuration itself, not the Integration API's envelope.
"""

from __future__ import annotations

import json
import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pangolin_emulator.store import Store
from pangolin_emulator.traefik_config import TRAEFIK_CONFIG_PATH, traefik_config

__all__ = ["InternalServer"]


class InternalServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], store: Store) -> None:
        super().__init__(address, _Handler)
        self.store = store


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60
    server: InternalServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] == TRAEFIK_CONFIG_PATH:
            store = self.server.store
            self._send(200, traefik_config(store.list_resources(), store.list_targets()))
        else:
            self._send(404, {"error": f"the emulator's internal API serves only GET {TRAEFIK_CONFIG_PATH}"})

    def log_message(self, format: str, *args: Any) -> None:
        pass  # Traefik polls every second or so; a line each would drown the log

    def _send(self, status: int, data: Any) -> None:
        body = json.dumps(data, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
