"""A stand-in `azure-native` resource provider, so the real CLI can run stacks with `firewall.enabled: true`.

The local toolchain has no azure-native plugin (it cannot be built here). The engine attaches to a provider
that is already serving when `PULUMI_DEBUG_PROVIDERS=azure-native:<port>` is set (pulumi's own mechanism for
debugging providers), so this in-process gRPC server answers for it: `Check` accepts the inputs as they are,
`Diff` compares them, `Create`/`Update` echo them back with a made-up id, `Delete` forgets. Nothing goes to
Azure; what the tests need is the engine's real view of the SecurityRule inputs the program registers.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2
from pulumi.runtime.proto import plugin_pb2, provider_pb2, provider_pb2_grpc

VERSION = "3.29.0"  # pulumi-azure-native in pyproject.toml; the engine asks the provider for this version


class FakeAzureNative(provider_pb2_grpc.ResourceProviderServicer):
    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def Handshake(self, _request: Any, _context: Any) -> Any:
        return provider_pb2.ProviderHandshakeResponse(accept_secrets=True, accept_resources=True)

    def GetPluginInfo(self, _request: Any, _context: Any) -> Any:
        return plugin_pb2.PluginInfo(version=VERSION)

    def Configure(self, _request: Any, _context: Any) -> Any:
        # No preview support: in a preview the engine then shows the inputs as the outputs.
        return provider_pb2.ConfigureResponse(acceptSecrets=True, acceptResources=True, supportsPreview=False)

    def CheckConfig(self, request: Any, _context: Any) -> Any:
        return provider_pb2.CheckResponse(inputs=request.news)

    def DiffConfig(self, _request: Any, _context: Any) -> Any:
        return provider_pb2.DiffResponse(changes=provider_pb2.DiffResponse.DIFF_NONE)

    def Check(self, request: Any, _context: Any) -> Any:
        return provider_pb2.CheckResponse(inputs=request.news)

    def Diff(self, request: Any, _context: Any) -> Any:
        olds, news = dict(request.olds), dict(request.news)
        changed = sorted(k for k in {*olds, *news} if olds.get(k) != news.get(k))
        kind = provider_pb2.DiffResponse.DIFF_SOME if changed else provider_pb2.DiffResponse.DIFF_NONE
        return provider_pb2.DiffResponse(changes=kind, diffs=changed)

    def Create(self, request: Any, _context: Any) -> Any:
        return provider_pb2.CreateResponse(id=f"fake-{next(self._ids)}", properties=request.properties)

    def Update(self, request: Any, _context: Any) -> Any:
        return provider_pb2.UpdateResponse(properties=request.news)

    def Read(self, request: Any, _context: Any) -> Any:
        return provider_pb2.ReadResponse(id=request.id, properties=request.properties, inputs=request.inputs)

    def Delete(self, _request: Any, _context: Any) -> Any:
        return empty_pb2.Empty()

    def Cancel(self, _request: Any, _context: Any) -> Any:
        return empty_pb2.Empty()

    def Attach(self, _request: Any, _context: Any) -> Any:
        # The engine's first call on a provider it attached to (PULUMI_DEBUG_PROVIDERS).
        return empty_pb2.Empty()

    def GetSchema(self, _request: Any, context: Any) -> Any:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "the fake azure-native has no schema")

    def Invoke(self, _request: Any, context: Any) -> Any:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "the fake azure-native has no functions")


@contextmanager
def fake_azure_native() -> Iterator[str]:
    """Serves the fake on loopback; yields the `PULUMI_DEBUG_PROVIDERS` value that points the engine at it."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    provider_pb2_grpc.add_ResourceProviderServicer_to_server(FakeAzureNative(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"azure-native:{port}"
    finally:
        server.stop(grace=None)


@pytest.fixture(name="azure_native")
def azure_native_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The fake, for the stacks and CLI runs of one test. Ask for it before `make_stack`, so that it outlives
    the stacks' destroy at teardown."""
    with fake_azure_native() as debug:
        monkeypatch.setenv("PULUMI_DEBUG_PROVIDERS", debug)
        yield debug
