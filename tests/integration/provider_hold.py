"""Hold the answer to one `Create` of a real provider plugin, so that a kill -9 of `pulumi up` lands exactly
between "the provider made the object" and "the engine knows": deterministic, not a race.

The engine attaches to a provider that is already serving when `PULUMI_DEBUG_PROVIDERS=<name>:<port>` is set.
`provider_hold` starts the real plugin binary (started without an engine address, a plugin serves and waits
for the engine's `Attach`) and serves in front of it a relay that passes every call through as raw bytes, so
the engine talks to the real provider unchanged. For the create of the resource named by `hold_after_create`
(the last part of its URN; never a preview's create) the relay passes the call on, waits for the plugin's
answer - the object exists then, the plugin made it - and withholds that answer until `release()`. The test
kills `pulumi up` in between.

Why at the gRPC layer and not in front of the cloud's API (a TLS relay before the kube-apiserver): there the
one create is known by its URN, the answer is held after the provider's whole create (its retries and awaits
included), every other call passes untouched, and no certificate or API protocol is involved. One relay fits
any plugin, not only pulumi-kubernetes.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
from pulumi.runtime.proto import provider_pb2

_HOLD_TIMEOUT = 600.0


class ProviderHold:
    """The relay's holds: which create to hold, and whether the hold began."""

    def __init__(self, debug: str) -> None:
        self.debug = debug
        """The `PULUMI_DEBUG_PROVIDERS` entry (`<name>:<port>`) that points the engine at the relay."""
        self.held_urns: list[str] = []
        """The URNs whose create answers were withheld, in order."""
        self._lock = threading.Lock()
        self._name: str | None = None
        self._held = threading.Event()
        self._release = threading.Event()

    def hold_after_create(self, name: str) -> threading.Event:
        """Hold the answer to the create of the resource named `name` (its URN ends in `::name`) once the plugin
        has answered; returns the event that is set when the hold begins. The hold ends at `release()` (or
        after 10 minutes)."""
        with self._lock:
            self._name, self._held, self._release = name, threading.Event(), threading.Event()
            return self._held

    def release(self) -> None:
        self._release.set()

    def _take(self, raw: bytes) -> Callable[[], None] | None:
        """If this create request is the one to hold (no later one is, then): what withholds its answer."""
        request = provider_pb2.CreateRequest.FromString(raw)
        with self._lock:
            if self._name is None or request.preview or not request.urn.endswith(f"::{self._name}"):
                return None
            self._name = None
            self.held_urns.append(request.urn)
            held, release = self._held, self._release

        def withhold() -> None:
            held.set()
            release.wait(timeout=_HOLD_TIMEOUT)

        return withhold


def _relay(channel: grpc.Channel, hold: ProviderHold) -> grpc.GenericRpcHandler:
    """A handler of every method of the provider protocol, each passed on to `channel` as raw bytes (no
    serializers on either side)."""
    service = provider_pb2.DESCRIPTOR.services_by_name["ResourceProvider"]
    handlers = {
        m.name: _handler(channel, f"/{service.full_name}/{m.name}", m.server_streaming, hold) for m in service.methods
    }
    return grpc.method_handlers_generic_handler(service.full_name, handlers)


def _handler(channel: grpc.Channel, method: str, streaming: bool, hold: ProviderHold) -> grpc.RpcMethodHandler:
    if streaming:
        stream = channel.unary_stream(method)
        return grpc.unary_stream_rpc_method_handler(
            lambda raw, context: _forward(lambda: list(stream(raw, metadata=_metadata(context))), context)
        )
    call = channel.unary_unary(method)
    holds = method.endswith("/Create")

    def answer(raw: bytes, context: grpc.ServicerContext) -> Any:
        withhold = hold._take(raw) if holds else None
        answered = _forward(lambda: call(raw, metadata=_metadata(context)), context)
        if withhold is not None:  # the plugin has made the object; the engine does not learn it
            withhold()
        return answered

    return grpc.unary_unary_rpc_method_handler(answer)


def _metadata(context: grpc.ServicerContext) -> list[tuple[str, str | bytes]]:
    # The caller's own metadata; gRPC's transport keys are the relay's to set. No deadline is passed on: a
    # server's `time_remaining()` of a call without one is not "none" (it failed every call at once).
    return [(k, v) for k, v in context.invocation_metadata() if not k.startswith("grpc-") and k != "user-agent"]


def _forward(send: Callable[[], Any], context: grpc.ServicerContext) -> Any:
    """The plugin's answer, or its error with the same code, details and trailing metadata (where the engine
    reads a create's partial failure)."""
    try:
        return send()
    except grpc.RpcError as exc:
        failed: Any = exc
        context.set_trailing_metadata(failed.trailing_metadata() or ())
        context.abort(failed.code(), failed.details() or "")


def plugin_binary(plugins: Path, package: str) -> Path:
    """The one installed plugin of `package` in a `$PULUMI_HOME/plugins` directory."""
    found = sorted(plugins.glob(f"resource-{package}-v*/pulumi-resource-{package}"))
    assert len(found) == 1, f"expected one {package} plugin in {plugins}, found {found}: run scripts/bootstrap"
    return found[0]


@contextmanager
def provider_hold(binary: Path, package: str, env: dict[str, str], log: Path) -> Iterator[ProviderHold]:
    """The real plugin `binary` (its environment `env`, its stderr in `log`) behind a relay that can hold one
    create; yields the holds, whose `debug` entry the engine is to be given in `PULUMI_DEBUG_PROVIDERS`."""
    with log.open("wb") as err:
        plugin = subprocess.Popen([str(binary)], env=env, stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        port = plugin.stdout.readline().strip() if plugin.stdout is not None else ""
        assert port.isdigit(), f"{binary} did not start (it printed {port!r}); its log: {log}"
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
            relay_port = server.add_insecure_port("127.0.0.1:0")
            hold = ProviderHold(f"{package}:{relay_port}")
            server.add_generic_rpc_handlers([_relay(channel, hold)])
            server.start()
            try:
                yield hold
            finally:
                hold.release()
                server.stop(grace=None)
    finally:
        plugin.kill()
        plugin.wait(timeout=30)
