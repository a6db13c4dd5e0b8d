"""The reconciler's HTTP endpoint (`--metrics-address`): `/metrics` (Prometheus' text format), `/healthz` and
`/readyz` (200 `ok`, or 500 with one line saying why), on a thread of its own.

The standard library's `ThreadingHTTPServer` with prometheus-client's `generate_latest`, not the client's
`start_http_server`: that one serves the metrics on every path and has no place for the two probes, and a WSGI
server would be a second dependency for three GET routes.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from prometheus_client import CONTENT_TYPE_LATEST

from ssh_gateway.core.addresses import ListenAddress

from .health import Health
from .metrics import ReconcilerMetrics

__all__ = ["EndpointError", "MetricsEndpoint"]

_TEXT: Final = "text/plain; charset=utf-8"


class EndpointError(RuntimeError):
    """The endpoint cannot listen where it is told to (the port taken, the address not this host's)."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    routes: dict[str, Callable[[], tuple[int, str, bytes]]]


class _V6Server(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # the standard library's name
        route = self.server.routes.get(self.path.split("?", 1)[0])
        code, kind, body = route() if route is not None else (404, _TEXT, b"not found: /metrics, /healthz, /readyz\n")
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a probe every few seconds is no news for the JSON log


class MetricsEndpoint:
    """Listens on `address` once made (an `EndpointError` when it cannot); `start` serves, `stop` ends it."""

    def __init__(self, address: ListenAddress, metrics: ReconcilerMetrics, health: Health) -> None:
        server_class = _V6Server if ":" in address.host else _Server
        try:
            self._server = server_class((address.host, address.port), _Handler)
        except OSError as exc:
            raise EndpointError(f"--metrics-address {address}: cannot listen there: {exc.strerror or exc}") from None
        self._server.routes = {
            "/metrics": lambda: (200, CONTENT_TYPE_LATEST, metrics.exposition()),
            "/healthz": lambda: _probe(health.problem()),
            "/readyz": lambda: _probe(health.not_ready()),
        }
        host, port = self._server.server_address[:2]
        self.address = ListenAddress(host=str(host), port=int(port))
        """Where it listens (with the port the system picked for port 0)."""
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():  # `shutdown` waits for a `serve_forever` that never started otherwise
            self._server.shutdown()
        self._server.server_close()


def _probe(problem: str | None) -> tuple[int, str, bytes]:
    return (200, _TEXT, b"ok\n") if problem is None else (500, _TEXT, f"{problem}\n".encode())
