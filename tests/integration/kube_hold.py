"""A TLS relay in front of the tests' kube-apiserver that can hold the answer to one write.

To land a kill -9 exactly between "the API server made the object" and "the engine knows it did", the relay
forwards the create of a named object (a POST of the collection, or the PATCH/PUT of the object that a
server-side apply sends), lets the API server answer, and keeps that answer from the provider until the test
releases it. The test kills the `up` during the hold: the object exists, and the state holds its create as
pending. Every other request passes through unchanged. HTTP/1.1 only (ALPN), so the Go client speaks it.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml

from ssh_gateway.local.control_plane import ControlPlane

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host"}


class HoldingRelay:
    """The relay's state: what to hold, and whether a hold began."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self._lock = threading.Lock()
        self._target: tuple[str, str] | None = None
        self.held = threading.Event()
        """Set once the API server answered the held write (the object exists) and the answer is kept back."""
        self._release = threading.Event()
        self.port = 0

    def hold(self, plural: str, name: str) -> threading.Event:
        """Hold the answer to the create of `<plural>/<name>` (e.g. `services`, `ssh-a`)."""
        with self._lock:
            self._target = (plural, name)
            self.held.clear()
            self._release.clear()
        return self.held

    def release(self) -> None:
        with self._lock:
            self._target = None
        self._release.set()

    def kubeconfig(self, path: Path) -> Path:
        """A kubeconfig like the API server's own, pointing at the relay."""
        config = yaml.safe_load(self.plane.kubeconfig.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = f"https://127.0.0.1:{self.port}"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    def matches(self, method: str, path: str, body: bytes) -> bool:
        with self._lock:
            target = self._target
        if target is None or method not in ("POST", "PATCH", "PUT"):
            return False
        plural, name = target
        parts = path.split("?", 1)[0].strip("/").split("/")
        if method == "POST" and parts[-1] == plural:
            try:
                return bool(json.loads(body).get("metadata", {}).get("name") == name)
            except ValueError:
                return False
        return len(parts) >= 2 and parts[-2:] == [plural, name]

    def wait_for_release(self) -> None:
        self.held.set()
        self._release.wait(timeout=600)


def _handler(relay: HoldingRelay, upstream: httpx.Client) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _relay(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP | {"accept-encoding"}}
            answer = upstream.request(self.command, self.path, content=body, headers=headers)
            if answer.status_code < 300 and relay.matches(self.command, self.path, body):
                relay.wait_for_release()
            try:
                self.send_response(answer.status_code)
                for key, value in answer.headers.items():
                    if key.lower() not in _HOP_BY_HOP:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)
            except OSError:
                pass  # the client was killed during the hold

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _relay

    return Handler


@contextmanager
def holding_relay(plane: ControlPlane) -> Iterator[HoldingRelay]:
    """The relay on a free loopback port, serving the API server's own certificate (its CA signs 127.0.0.1)."""
    relay = HoldingRelay(plane)
    pki = plane.ca_file.parent
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki / "serving.crt", pki / "serving.key")
    context.set_alpn_protocols(["http/1.1"])
    with httpx.Client(base_url=plane.url, verify=str(plane.ca_file), timeout=120) as upstream:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(relay, upstream))
        server.daemon_threads = True
        server.socket = context.wrap_socket(server.socket, server_side=True)
        relay.port = server.server_address[1]
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield relay
        finally:
            relay.release()
            server.shutdown()
            server.server_close()
