"""HTTP plumbing: envelopes, the `/v1` pipeline in Pangolin's middleware order, admin, faults.

Pipeline for `/v1`: route match and call counting → the test gate (`gate.py`) → fault injection → the health route and
the unauthenticated OpenAPI routes → JSON body parsing (express.json runs before the routers)
→ API-key check (before routing, so unknown paths need a key) → HTML 404 for unknown paths →
access and action checks → handler. The pipeline produces an `_Answer`; it is sent, unless a
"timeout-after-write" fault withholds it after the handler ran.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import time
import traceback
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from pangolin_emulator.admin import ADMIN_PREFIX, handle_admin
from pangolin_emulator.auth import authenticate, authorise
from pangolin_emulator.bodies import parse_json_body
from pangolin_emulator.context import Context, Query, Settings
from pangolin_emulator.errors import INTERNAL, ApiError
from pangolin_emulator.faults import AFTER_HANDLER_KINDS, LATENCY_KINDS, FaultInjector
from pangolin_emulator.gate import Gate
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
    gate: Gate = field(default_factory=Gate)


class EmulatorServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], app: App) -> None:
        super().__init__(address, _Handler)
        self.app = app


class _Reset(Exception):
    """The connection was reset on purpose; nothing more to send."""


@dataclass(frozen=True)
class _Answer:
    """A complete HTTP answer, built before anything is written to the socket."""

    status: int
    body: bytes
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)


def _json_answer(status: int, data: Any, headers: dict[str, str] | None = None) -> _Answer:
    body = json.dumps(data, separators=(",", ":")).encode()
    return _Answer(status, body, "application/json; charset=utf-8", headers or {})


def _error_answer(error: ApiError, headers: dict[str, str] | None = None) -> _Answer:
    envelope = {
        "data": None,
        "success": False,
        "error": True,
        "message": error.message,
        "status": error.status,
        "stack": None,
    }
    return _json_answer(error.status, envelope, headers)


def _html_404(method: str, path: str) -> _Answer:
    page = _HTML_404.format(method=method, path=path)
    return _Answer(404, page.encode(), "text/html; charset=utf-8", {"Content-Security-Policy": "default-src 'none'"})


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

    def _send(self, answer: _Answer) -> None:
        self.send_response(answer.status)
        self.send_header("X-Powered-By", "Express")
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(answer.body)

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
                self._send(self._admin_answer(url.path, raw))
            elif url.path == "/v1" or url.path.startswith("/v1/"):
                self._handle_v1(url.path, url.query, raw)
            else:
                self._send(_html_404(self.command, url.path))
        except _Reset:
            return
        except Exception:
            # Only the admin API and the socket can get here: /v1 errors become answers.
            traceback.print_exc(file=sys.stderr)
            self._send(_error_answer(ApiError(500, INTERNAL)))

    def _admin_answer(self, path: str, raw: bytes) -> _Answer:
        app = self.server.app
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError as exc:
            return _json_answer(400, {"error": f"invalid JSON: {exc}"})
        status, data = handle_admin(app.store, app.faults, app.gate, self.command, path, body)
        return _json_answer(status, data)

    def _apply_fault(self, kind: str) -> None:
        """Answer with a fault that runs instead of the request."""
        if kind == "reset":
            self._reset()
        elif kind == "429":
            self._send(_error_answer(ApiError(429, "Too many requests, please try again later."), {"Retry-After": "1"}))
        else:
            if kind == "timeout":
                time.sleep(self.server.app.faults.config.delay)
            self._send(_error_answer(ApiError(500, INTERNAL)))

    def _route_key(self, path: str) -> str | None:
        """The counter key of the route this request reaches, or None for an unknown path."""
        app = self.server.app
        if self.command == "GET" and path in ("/v1", "/v1/"):
            return HEALTH_ROUTE
        public = app.router.match_public(self.command, path)
        if public is not None:
            return public.key
        matched = app.router.match(self.command, path)
        return matched[0].key if matched is not None else None

    def _handle_v1(self, path: str, raw_query: str, raw: bytes) -> None:
        app = self.server.app
        route_key = self._route_key(path)
        fault: str | None = None
        if route_key is not None:
            app.store.count_call(route_key)
            app.gate.hold(route_key)
            # The health route is what start-up waits for, so it is never faulted.
            fault = app.faults.draw() if route_key != HEALTH_ROUTE else None
            if fault is not None:
                app.store.count_fault(route_key, fault)
                if fault in LATENCY_KINDS:
                    time.sleep(app.faults.config.delay)
                elif fault not in AFTER_HANDLER_KINDS:
                    self._apply_fault(fault)
                    return
        answer = self._answer_v1(path, raw_query, raw)
        if fault in AFTER_HANDLER_KINDS:
            # "timeout-after-write": the handler ran and committed; its answer is lost.
            time.sleep(app.faults.config.delay)
            self._reset()
        self._send(answer)

    def _answer_v1(self, path: str, raw_query: str, raw: bytes) -> _Answer:
        try:
            return self._run_v1(path, raw_query, raw)
        except ApiError as error:
            return _error_answer(error)
        except Exception:
            traceback.print_exc(file=sys.stderr)
            return _error_answer(ApiError(500, INTERNAL))

    def _run_v1(self, path: str, raw_query: str, raw: bytes) -> _Answer:
        app = self.server.app
        if self.command == "GET" and path in ("/v1", "/v1/"):
            return _json_answer(200, {"message": "Healthy"})
        public = app.router.match_public(self.command, path)
        if public is not None:
            return _Answer(200, public.body, public.content_type)
        if len(raw) > _BODY_LIMIT:
            raise ApiError(413, "request entity too large")
        body = parse_json_body(self.headers.get("Content-Type"), raw)
        key = authenticate(app.store, self.headers.get("Authorization"))
        matched = app.router.match(self.command, path)
        if matched is None:
            return _html_404(self.command, path)
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
        return _json_answer(reply.status, envelope)
