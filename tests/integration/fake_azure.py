"""A stand-in `azure-native` resource provider, so the real CLI can run stacks with `firewall.enabled: true`.

The local toolchain has no azure-native plugin (it cannot be built here). The engine attaches to a provider
that is already serving when `PULUMI_DEBUG_PROVIDERS=azure-native:<port>` is set (pulumi's own mechanism for
debugging providers), so this in-process gRPC server answers for it. It keeps its "Azure": one dict of
objects by ARM id, living in the test process, so it outlives every `pulumi` of a test, a killed one
included, and it holds to the contract azure-native keeps with the engine:

- `Create` refuses an object that exists, as azure-native does before each create's PUT: `CanCreate` in
  `provider/pkg/azure/client_azcore.go` (pulumi/pulumi-azure-native) GETs the id and fails with
  `cannot create already existing resource '<id>'` on a 200 with a body. The `subresource` variant of that
  text is what it returns for a resource with a default body (a 200 whose body is not the default); a security
  rule has none, so its create gets the `resource` text, and so does this stand-in's.
- The id is the real ARM id of a security rule:
  `/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Network/networkSecurityGroups/<nsg>/securityRules/<rule>`.
- `Read` by id answers an empty id for an object that is not there (what the engine takes as "gone", and what
  `pulumi import` reports as not found), else its properties and inputs rebuilt from them: `pulumi import`
  and refresh go through it.
- `Delete` of an object that is not there succeeds, as azure-native's Delete treats a 404.
- `Invoke` answers one function, `azure-native:authorization:getClientConfig`: the subscription (and tenant and
  client) the provider acts as, its configured `subscriptionId` or else the stand-in's default one, as
  azure-native answers with the subscription it found by itself.

`hold_after_create` lets a test hold the answer to the create of a named rule after the object exists, so a
kill lands exactly between "Azure made it" and "the engine knows".
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import plugin_pb2, provider_pb2, provider_pb2_grpc

VERSION = "3.29.0"  # pulumi-azure-native in pyproject.toml; the engine asks the provider for this version
SUBSCRIPTION = "00000000-0000-4000-8000-000000000001"
"""The subscription of a provider configured without `azure-native:subscriptionId`."""
TENANT = "00000000-0000-4000-8000-000000000002"
CLIENT = "00000000-0000-4000-8000-000000000003"
CLIENT_CONFIG = "azure-native:authorization:getClientConfig"
"""azure-native's function returning the subscription, tenant and client (and object) id it acts as."""
RULE_TYPE = "azure-native:network:SecurityRule"
# What azure-native keeps as a rule's inputs besides the properties: the path parameters of its PUT.
_PATH_KEYS = ("resourceGroupName", "networkSecurityGroupName", "securityRuleName")


def rule_id(subscription: str, resource_group: str, nsg: str, rule: str) -> str:
    """A security rule's ARM id."""
    return (
        f"/subscriptions/{subscription}/resourceGroups/{resource_group}/providers/Microsoft.Network/"
        f"networkSecurityGroups/{nsg}/securityRules/{rule}"
    )


def _plain(message: struct_pb2.Struct) -> dict[str, Any]:
    return dict(json_format.MessageToDict(message))


def _struct(values: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(values)
    return message


@dataclass
class FakeAzure:
    """The stand-in's "Azure": objects by ARM id, and the holds a test sets."""

    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    """ARM id -> the object's properties (its inputs without the path parameters, plus `name`)."""
    creates: list[str] = field(default_factory=list)
    """Every create asked for, by id, refused ones included."""
    refused: list[str] = field(default_factory=list)
    """The messages of the refused creates."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    _holds: dict[str, threading.Event] = field(default_factory=dict)
    _held: dict[str, threading.Event] = field(default_factory=dict)

    def hold_after_create(self, rule: str) -> threading.Event:
        """Hold the answer to the create of rule `rule` once the object exists; returns the event that is set
        when the hold begins. The hold ends when the test calls `release` (or after 10 minutes)."""
        with self.lock:
            self._holds[rule] = threading.Event()
            self._held[rule] = threading.Event()
            return self._held[rule]

    def release(self) -> None:
        with self.lock:
            for event in self._holds.values():
                event.set()
            self._holds.clear()

    def rule_names(self) -> list[str]:
        with self.lock:
            return sorted(i.rsplit("/", 1)[1] for i in self.objects)

    def _after_create(self, rule: str) -> None:
        with self.lock:
            hold, held = self._holds.get(rule), self._held.get(rule)
        if hold is not None and held is not None:
            held.set()
            hold.wait(timeout=600)


class FakeAzureNative(provider_pb2_grpc.ResourceProviderServicer):
    def __init__(self, azure: FakeAzure) -> None:
        self._azure = azure
        self._subscription = SUBSCRIPTION
        self._etags = itertools.count(1)

    def Handshake(self, _request: Any, _context: Any) -> Any:
        return provider_pb2.ProviderHandshakeResponse(accept_secrets=True, accept_resources=True)

    def GetPluginInfo(self, _request: Any, _context: Any) -> Any:
        return plugin_pb2.PluginInfo(version=VERSION)

    def Configure(self, request: Any, _context: Any) -> Any:
        self._subscription = str(
            dict(request.variables).get("azure-native:config:subscriptionId")
            or _plain(request.args).get("subscriptionId")
            or SUBSCRIPTION
        )
        # No preview support: in a preview the engine then shows the inputs as the outputs.
        return provider_pb2.ConfigureResponse(acceptSecrets=True, acceptResources=True, supportsPreview=False)

    def CheckConfig(self, request: Any, _context: Any) -> Any:
        return provider_pb2.CheckResponse(inputs=request.news)

    def DiffConfig(self, _request: Any, _context: Any) -> Any:
        return provider_pb2.DiffResponse(changes=provider_pb2.DiffResponse.DIFF_NONE)

    def Check(self, request: Any, _context: Any) -> Any:
        return provider_pb2.CheckResponse(inputs=request.news)

    def Diff(self, request: Any, _context: Any) -> Any:
        # Against the old inputs, as azure-native diffs: the outputs also hold what Azure adds (id, etag, ...).
        olds, news = _plain(request.old_inputs), _plain(request.news)
        changed = sorted(k for k in {*olds, *news} if olds.get(k) != news.get(k))
        replace = sorted(k for k in changed if k in _PATH_KEYS)
        kind = provider_pb2.DiffResponse.DIFF_SOME if changed else provider_pb2.DiffResponse.DIFF_NONE
        return provider_pb2.DiffResponse(changes=kind, diffs=changed, replaces=replace)

    def Create(self, request: Any, context: Any) -> Any:
        inputs = _plain(request.properties)
        if request.preview:  # a preview's create makes nothing (azure-native returns before CanCreate)
            return provider_pb2.CreateResponse(properties=request.properties)
        arm_id = self._id(inputs)
        with self._azure.lock:
            self._azure.creates.append(arm_id)
            if arm_id in self._azure.objects:
                message = f"cannot create already existing resource '{arm_id}'"
                self._azure.refused.append(message)
                context.abort(grpc.StatusCode.UNKNOWN, message)
            self._azure.objects[arm_id] = self._stored(inputs)
        self._azure._after_create(str(inputs["securityRuleName"]))
        return provider_pb2.CreateResponse(id=arm_id, properties=_struct(self._outputs(arm_id, inputs)))

    def Update(self, request: Any, _context: Any) -> Any:
        if request.preview:
            return provider_pb2.UpdateResponse(properties=request.news)
        news = _plain(request.news)
        with self._azure.lock:
            self._azure.objects[request.id] = self._stored(news)
        return provider_pb2.UpdateResponse(properties=_struct(self._outputs(request.id, news)))

    def Read(self, request: Any, _context: Any) -> Any:
        with self._azure.lock:
            stored = self._azure.objects.get(request.id)
        if stored is None:
            return provider_pb2.ReadResponse()
        inputs = {**_path_of(request.id), **{k: v for k, v in stored.items() if k != "name"}}
        return provider_pb2.ReadResponse(
            id=request.id, properties=_struct(self._outputs(request.id, inputs)), inputs=_struct(inputs)
        )

    def Delete(self, request: Any, _context: Any) -> Any:
        with self._azure.lock:
            self._azure.objects.pop(request.id, None)
        return empty_pb2.Empty()

    def Cancel(self, _request: Any, _context: Any) -> Any:
        return empty_pb2.Empty()

    def Attach(self, _request: Any, _context: Any) -> Any:
        # The engine's first call on a provider it attached to (PULUMI_DEBUG_PROVIDERS).
        return empty_pb2.Empty()

    def GetSchema(self, _request: Any, context: Any) -> Any:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "the fake azure-native has no schema")

    def Invoke(self, request: Any, context: Any) -> Any:
        # Only the function that says whom the provider acts as (what `recover` asks for the subscription).
        if request.tok != CLIENT_CONFIG:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"the fake azure-native has no function {request.tok}")
        identity = {"subscriptionId": self._subscription, "tenantId": TENANT, "clientId": CLIENT, "objectId": CLIENT}
        response = provider_pb2.InvokeResponse()
        getattr(response, "return").CopyFrom(_struct(identity))  # `return` is a keyword in Python
        return response

    def _id(self, inputs: dict[str, Any]) -> str:
        return rule_id(
            self._subscription,
            str(inputs["resourceGroupName"]),
            str(inputs["networkSecurityGroupName"]),
            str(inputs["securityRuleName"]),
        )

    @staticmethod
    def _stored(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"name": inputs["securityRuleName"], **{k: v for k, v in inputs.items() if k not in _PATH_KEYS}}

    def _outputs(self, arm_id: str, inputs: dict[str, Any]) -> dict[str, Any]:
        return {
            **inputs,
            "id": arm_id,
            "name": inputs["securityRuleName"],
            "type": "Microsoft.Network/networkSecurityGroups/securityRules",
            "etag": f'W/"{next(self._etags)}"',
            "provisioningState": "Succeeded",
        }


def _path_of(arm_id: str) -> dict[str, str]:
    parts = arm_id.strip("/").split("/")
    return {"resourceGroupName": parts[3], "networkSecurityGroupName": parts[7], "securityRuleName": parts[9]}


@contextmanager
def fake_azure_native(azure: FakeAzure | None = None) -> Iterator[str]:
    """Serves the fake on loopback; yields the `PULUMI_DEBUG_PROVIDERS` value that points the engine at it."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    provider_pb2_grpc.add_ResourceProviderServicer_to_server(FakeAzureNative(azure or FakeAzure()), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"azure-native:{port}"
    finally:
        if azure is not None:
            azure.release()
        server.stop(grace=None)
