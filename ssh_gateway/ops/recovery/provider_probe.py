"""Read objects by id through a resource provider plugin, as `pulumi import` and refresh do, without the engine.

`recover` must know which of a batch of objects exist before it imports them: one absent object fails a whole
`pulumi import --file`, and an object is adopted only if it carries this stack's marks, which only a read
shows. Asking the provider (not each cloud's API by hand) keeps one code path for Kubernetes and Azure, with
the provider's own credentials and id formats: a `Read` with an id and no state is the provider's import read,
and it answers an empty id for an object that is not there.

The plugin is the one the engine would use: the one named in `PULUMI_DEBUG_PROVIDERS` (`<name>:<port>`, pulumi's
mechanism for a provider that is already serving) or else `$PULUMI_HOME/plugins/resource-<name>-v<version>/`,
started with the address of a minimal engine that takes its log messages.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import engine_pb2_grpc, provider_pb2, provider_pb2_grpc

__all__ = ["ProbeError", "provider_probe"]

_CONNECT_TIMEOUT = 60.0
_CALL_TIMEOUT = 120.0


class ProbeError(Exception):
    """The provider could not be started, configured or asked; the message says which and why."""


class ProviderProbe:
    """A configured provider to read objects through."""

    def __init__(self, stub: provider_pb2_grpc.ResourceProviderStub, package: str) -> None:
        self._stub = stub
        self._package = package

    def read(self, urn: str, object_id: str) -> dict[str, Any] | None:
        """The object's live properties, or None when the provider finds nothing at `object_id`."""
        request = provider_pb2.ReadRequest(
            id=object_id, urn=urn, properties=struct_pb2.Struct(), inputs=struct_pb2.Struct()
        )
        try:
            response = self._stub.Read(request, timeout=_CALL_TIMEOUT)
        except grpc.RpcError as exc:
            raise ProbeError(f"the {self._package} provider cannot read {object_id!r}: {_detail(exc)}") from None
        if not response.id:
            return None
        return dict(json_format.MessageToDict(response.properties))

    def invoke(self, token: str) -> dict[str, Any]:
        """What the provider's function `token` returns when called without arguments."""
        request = provider_pb2.InvokeRequest(tok=token, args=struct_pb2.Struct())
        try:
            response = self._stub.Invoke(request, timeout=_CALL_TIMEOUT)
        except grpc.RpcError as exc:
            raise ProbeError(f"the {self._package} provider cannot answer {token}: {_detail(exc)}") from None
        if response.failures:
            raise ProbeError(f"the {self._package} provider's {token} failed: {response.failures[0].reason}")
        return dict(json_format.MessageToDict(getattr(response, "return")))


class _Engine(engine_pb2_grpc.EngineServicer):
    """What a provider plugin calls back: only its log messages, which a probe does not need."""

    def Log(self, _request: Any, _context: Any) -> Any:
        return empty_pb2.Empty()


@contextmanager
def provider_probe(
    package: str, version: str | None, config: Mapping[str, Any], env: Mapping[str, str]
) -> Iterator[ProviderProbe]:
    """The `package` provider (`kubernetes`, `azure-native`), configured with `config` (its provider inputs:
    `kubeconfig`, `subscriptionId`, ...), for the duration of the block."""
    debug = _debug_providers(env.get("PULUMI_DEBUG_PROVIDERS", ""))
    engine: grpc.Server | None = None
    plugin: subprocess.Popen[str] | None = None
    try:
        if package in debug:
            address = f"127.0.0.1:{debug[package]}"
        else:
            engine = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
            engine_pb2_grpc.add_EngineServicer_to_server(_Engine(), engine)
            engine_port = engine.add_insecure_port("127.0.0.1:0")
            engine.start()
            binary = _plugin_binary(package, version, env)
            # The plugin's own binary, found where the engine finds it; it prints the port it serves on.
            plugin = subprocess.Popen(  # noqa: S603
                [str(binary), f"127.0.0.1:{engine_port}"],
                env=dict(env),
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            port = plugin.stdout.readline().strip() if plugin.stdout is not None else ""
            if not port.isdigit():
                raise ProbeError(f"the {package} plugin {binary} did not start (it printed {port!r})")
            address = f"127.0.0.1:{port}"
        with grpc.insecure_channel(address) as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=_CONNECT_TIMEOUT)
            except grpc.FutureTimeoutError:
                raise ProbeError(f"the {package} provider at {address} does not answer") from None
            stub = provider_pb2_grpc.ResourceProviderStub(channel)
            _configure(stub, package, config)
            yield ProviderProbe(stub, package)
    finally:
        if plugin is not None:
            plugin.kill()
            plugin.wait(timeout=30)
        if engine is not None:
            engine.stop(grace=None)


def _configure(stub: provider_pb2_grpc.ResourceProviderStub, package: str, config: Mapping[str, Any]) -> None:
    # Both forms the engine sends: `variables` (every value a string, as older providers read them) and `args`.
    variables = {
        f"{package}:config:{key}": value if isinstance(value, str) else json.dumps(value)
        for key, value in config.items()
        if value is not None and key != "version"
    }
    args = struct_pb2.Struct()
    args.update({k: v for k, v in config.items() if v is not None and k != "version"})
    request = provider_pb2.ConfigureRequest(variables=variables, args=args, acceptSecrets=True, acceptResources=True)
    try:
        stub.Configure(request, timeout=_CALL_TIMEOUT)
    except grpc.RpcError as exc:
        raise ProbeError(f"the {package} provider refused its configuration: {_detail(exc)}") from None


def _debug_providers(value: str) -> dict[str, str]:
    pairs = (entry.split(":", 1) for entry in value.split(",") if ":" in entry)
    return {name.strip(): port.strip() for name, port in pairs}


def _plugin_binary(package: str, version: str | None, env: Mapping[str, str]) -> Path:
    plugins = Path(env.get("PULUMI_HOME") or Path.home() / ".pulumi") / "plugins"
    if version:
        found = [plugins / f"resource-{package}-v{version}" / f"pulumi-resource-{package}"]
    else:
        found = sorted(plugins.glob(f"resource-{package}-v*/pulumi-resource-{package}"))
    runnable = [path for path in found if path.exists()]
    if not runnable:
        # As the engine does, an ambient plugin on PATH (the reconciler's image has its plugins there: its
        # PULUMI_HOME is an empty, writable directory).
        ambient = shutil.which(f"pulumi-resource-{package}", path=env.get("PATH"))
        if ambient is not None:
            return Path(ambient)
        wanted = f"v{version}" if version else "any version"
        raise ProbeError(f"no {package} plugin ({wanted}) in {plugins}, nor on PATH: run scripts/bootstrap")
    return runnable[-1]


def _detail(exc: grpc.RpcError) -> str:
    details = getattr(exc, "details", None)
    return str(details() if callable(details) else exc).splitlines()[0][:300]
