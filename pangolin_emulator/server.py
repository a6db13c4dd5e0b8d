"""HTTP plumbing: envelopes, the `/v1` pipeline in Pangolin's middleware order, admin, faults.

Pipeline for `/v1`: route match and call counting → fault injection → JSON body parsing
(express.json runs before the routers) → API-key check (before routing, so unknown paths
need a key) → HTML 404 for unknown paths → access and action checks → handler.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import time
import traceback
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from pangolin_emulator.admin import ADMIN_PREFIX, handle_admin
from pangolin_emulator.auth import authenticate, authorise
from pangolin_emulator.bodies import parse_json_body
from pangolin_emulator.context import Context, Query, Settings
from pangolin_emulator.errors import INTERNAL, ApiError
from pangolin_emulator.faults import FaultInjector
from pangolin_emulator.routes import HEALTH_ROUTE, Router
from pangolin_emulator.store import Store

__all__ = ["App", "EmulatorServer"]

_BODY_LIMIT = 100 * 1024  # body-parser's default limit
_HTML_404 = (
    '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>Error</title>\n'
    "</head>\n<body>\n<pre>Cannot {method} {path}</pre>\n</body>\n</html>\n"
)


@dataclass
class App:
    """Everything a request needs, shared by all handler threads."""

    store: Store
    settings: Settings
    router: Router
    faults: FaultInjector
    log_requests: bool = False


class EmulatorServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], app: App) -> None:
        super().__init__(address, _Handler)
        self.app = app


class _Reset(Exception):
    """The connection was reset on purpose; nothing more to send."""


def _query(raw: str) -> Query:
    query: Query = {}
    for name, value in parse_qsl(raw, keep_blank_values=True):
        previous = query.get(name)
        if previous is None:
            query[name] = value
        else:
            query[name] = [*previous, value] if isinstance(previous, list) else [previous, value]
    return query


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60  # idle keep-alive connections must not hold a thread forever
    server: EmulatorServer

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without NODELAY, Nagle plus the
        # client's delayed ACK adds ~40 ms to every answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.app.log_requests:
            super().log_message(format, *args)

    # --- responses -----------------------------------------------------------------------

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("X-Powered-By", "Express")
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _send_json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(data, separators=(",", ":")).encode()
        self._send(status, body, "application/json; charset=utf-8", headers)

    def _send_error(self, error: ApiError, headers: dict[str, str] | None = None) -> None:
        envelope = {
            "data": None,
            "success": False,
            "error": True,
            "message": error.message,
            "status": error.status,
            "stack": None,
        }
        self._send_json(error.status, envelope, headers)

    def _send_html_404(self, path: str) -> None:
        page = _HTML_404.format(method=self.command, path=path)
        self._send(404, page.encode(), "text/html; charset=utf-8", {"Content-Security-Policy": "default-src 'none'"})

    def _reset(self) -> None:
        # SO_LINGER 0 makes close() send an RST instead of a FIN.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True
        raise _Reset

    # --- request pipeline ----------------------------------------------------------------

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _handle(self) -> None:
        url = urlsplit(self.path)
        try:
            raw = self._read_body()
            if url.path == ADMIN_PREFIX or url.path.startswith(ADMIN_PREFIX + "/"):
                self._handle_admin(url.path, raw)
            elif url.path == "/v1" or url.path.startswith("/v1/"):
                self._handle_v1(url.path, url.query, raw)
            else:
                self._send_html_404(url.path)
        except _Reset:
            return
        except ApiError as error:
            self._send_error(error)
        except Exception:
            traceback.print_exc(file=sys.stderr)
            self._send_error(ApiError(500, INTERNAL))

    def _handle_admin(self, path: str, raw: bytes) -> None:
        app = self.server.app
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError as exc:
            self._send_json(400, {"error": f"invalid JSON: {exc}"})
            return
        status, data = handle_admin(app.store, app.faults, self.command, path, body)
        self._send_json(status, data)

    def _apply_fault(self, kind: str) -> None:
        if kind == "reset":
            self._reset()
        elif kind == "429":
            self._send_error(ApiError(429, "Too many requests, please try again later."), {"Retry-After": "1"})
        else:
            if kind == "timeout":
                time.sleep(self.server.app.faults.config.delay)
            self._send_error(ApiError(500, INTERNAL))

    def _handle_v1(self, path: str, raw_query: str, raw: bytes) -> None:
        app = self.server.app
        if self.command == "GET" and path in ("/v1", "/v1/"):
            app.store.count_call(HEALTH_ROUTE)
            self._send_json(200, {"message": "Healthy"})
            return
        matched = app.router.match(self.command, path)
        if matched is not None:
            app.store.count_call(matched[0].key)
            fault = app.faults.draw()
            if fault is not None:
                app.store.count_fault(matched[0].key)
                self._apply_fault(fault)
                return
        if len(raw) > _BODY_LIMIT:
            raise ApiError(413, "request entity too large")
        body = parse_json_body(self.headers.get("Content-Type"), raw)
        key = authenticate(app.store, self.headers.get("Authorization"))
        if matched is None:
            self._send_html_404(path)
            return
        route, params = matched
        org_id, entities = authorise(app.store, key, route.access, route.action, params)
        ctx = Context(app.store, app.settings, params, _query(raw_query), body, key, entities, org_id)
        reply = route.handler(ctx)
        envelope = {
            "data": reply.data,
            "success": True,
            "error": False,
            "message": reply.message,
            "status": reply.status,
        }
        self._send_json(reply.status, envelope)
