"""Opt-in data plane: stands in for Gerbil + Traefik + Newt by forwarding TCP bytes.

For every enabled TCP resource with an enabled target it listens on `host:proxyPort` and pipes
bytes both ways to a target. An asyncio loop in its own thread reconciles listeners with the
store every `period` seconds and whenever the store reports a change.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
import threading
from dataclasses import dataclass, field

from pangolin_emulator.bindings import Binding, desired_bindings
from pangolin_emulator.store import Store

__all__ = ["DataPlane", "DataPlaneLimits"]

_CHUNK = 65536


def _log(message: str) -> None:
    print(f"pangolin-emulator: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class DataPlaneLimits:
    max_connections: int = 64
    """Concurrent connections per listener; extra ones are closed at once."""
    idle_timeout: float = 300.0
    """Seconds without bytes in either direction before a connection is closed."""
    connect_timeout: float = 5.0
    """Seconds to reach the target before giving up on a connection."""


@dataclass
class _Listener:
    binding: Binding
    server: asyncio.Server
    connections: set[asyncio.Task[None]] = field(default_factory=set)
    turn: itertools.count[int] = field(default_factory=itertools.count)
    writers: set[asyncio.StreamWriter] = field(default_factory=set)
    """Both ends of every live connection, closed directly when the listener goes."""
    closed: bool = False

    def next_upstream(self) -> tuple[str, int]:
        """Round-robin over the enabled targets, like Traefik's load balancer."""
        upstreams = self.binding.upstreams
        return upstreams[next(self.turn) % len(upstreams)]

    async def close(self) -> None:
        self.closed = True
        self.server.close()
        for writer in list(self.writers):
            writer.close()
        for task in list(self.connections):
            task.cancel()
        if self.connections:
            await asyncio.wait(list(self.connections), timeout=2)


class DataPlane:
    def __init__(self, store: Store, host: str, limits: DataPlaneLimits, period: float = 0.5) -> None:
        self._store = store
        self._host = host
        self._limits = limits
        self._period = period
        self._listeners: dict[int, _Listener] = {}
        self._bind_errors: dict[int, str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="data-plane", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(timeout=10)

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
            self.nudge()
        self._thread.join(timeout=10)

    def nudge(self) -> None:
        """Ask for a reconcile now (called from API threads after a change)."""
        if self._loop is not None and self._wake is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed during shutdown
                self._loop.call_soon_threadsafe(self._wake.set)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._ready.set()
        while not self._stopping.is_set():
            try:
                await self._reconcile()
            except Exception as exc:  # a bad row must not kill the data plane
                _log(f"data plane reconcile failed: {exc!r}")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._period):
                    await self._wake.wait()
            self._wake.clear()
        for listener in self._listeners.values():
            await listener.close()
        self._listeners.clear()

    async def _reconcile(self) -> None:
        desired = desired_bindings(self._store.list_resources(), self._store.list_targets())
        for port, listener in list(self._listeners.items()):
            want = desired.get(port)
            if want is None or want.resource_id != listener.binding.resource_id:
                del self._listeners[port]
                await listener.close()
            else:
                listener.binding = want
        for port in list(self._bind_errors):
            if port not in desired:
                del self._bind_errors[port]
        for port, binding in desired.items():
            if port not in self._listeners:
                await self._listen(binding)

    async def _listen(self, binding: Binding) -> None:
        listener: _Listener | None = None

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if listener is not None:
                await self._serve(listener, reader, writer)

        try:
            server = await asyncio.start_server(accept, self._host, binding.port, reuse_address=True)
        except OSError as exc:
            # One line per distinct failure; the next reconcile retries.
            if self._bind_errors.get(binding.port) != str(exc):
                _log(
                    f"data plane cannot listen on {self._host}:{binding.port} for resource "
                    f"{binding.resource_id}: {exc.strerror or exc}; retrying"
                )
            self._bind_errors[binding.port] = str(exc)
            return
        self._bind_errors.pop(binding.port, None)
        listener = _Listener(binding, server)
        self._listeners[binding.port] = listener

    async def _serve(self, listener: _Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        # A connection accepted just before the listener closed must not outlive it.
        full = len(listener.connections) >= self._limits.max_connections
        if task is None or listener.closed or full:
            writer.close()
            return
        listener.connections.add(task)
        listener.writers.add(writer)
        upstream_writer: asyncio.StreamWriter | None = None
        try:
            ip, port = listener.next_upstream()
            # asyncio.timeout, unlike 3.11's wait_for, never swallows a cancellation.
            async with asyncio.timeout(self._limits.connect_timeout):
                upstream_reader, upstream = await asyncio.open_connection(ip, port)
            upstream_writer = upstream
            listener.writers.add(upstream)
            if listener.closed:
                return
            last_activity = [asyncio.get_running_loop().time()]
            await asyncio.gather(
                self._pump(reader, upstream, last_activity),
                self._pump(upstream_reader, writer, last_activity),
            )
        except (OSError, TimeoutError):
            pass  # unreachable target or a peer reset: drop this connection only
        finally:
            listener.connections.discard(task)
            for stream in (writer, upstream_writer):
                if stream is not None:
                    listener.writers.discard(stream)
                    stream.close()

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, last: list[float]) -> None:
        loop = asyncio.get_running_loop()
        idle = self._limits.idle_timeout
        while True:
            try:
                async with asyncio.timeout(idle):
                    data = await source.read(_CHUNK)
            except TimeoutError:
                if loop.time() - last[0] >= idle:
                    break
                continue  # the other direction was busy
            if not data:
                break
            last[0] = loop.time()
            sink.write(data)
            await sink.drain()
        # Pass the half-close on so request/response protocols see end of input.
        with contextlib.suppress(OSError):
            if sink.can_write_eof():
                sink.write_eof()
