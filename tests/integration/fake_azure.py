"""A stand-in `azure-native` resource provider, with Azure's NSG rules behind it, so the real CLI can run stacks
with `firewall.enabled: true`.

The local toolchain has no azure-native plugin (it cannot be built here). The engine attaches to a provider
that is already serving when `PULUMI_DEBUG_PROVIDERS=azure-native:<port>` is set (pulumi's own mechanism for
debugging providers), so this in-process gRPC server answers for it. Its "Azure" (`FakeAzure`: the rules of
each NSG, by resource group and NSG name) lives in the test process, so it outlives every `pulumi` of a test,
a killed one included. It imports nothing of the code under test; what it does is written from Azure's and
azure-native's documented behaviour, cited below.

## The provider's contract with the engine (pulumi/pulumi-azure-native, `provider/pkg/...`)
- `Create` refuses an object that exists, as azure-native does before each create's PUT: `CanCreate` in
  `azure/client_azcore.go` GETs the id and fails with `cannot create already existing resource '<id>'` on a
  200 with a body (the `subresource` variant is for resources with a default body; a rule has none). That
  check is a read: two creates of one name that pass it together both PUT, and the second PUT is an upsert.
- An error Azure answers to a PUT or DELETE reaches the engine as azure-native formats it
  (`PulumiAzcoreResponseError` in `azure/client_azcore.go`): `Status=400 Code="<code>" Message="<message>"`,
  the ARM error's top-level `code` and `message` only (its `details` are dropped).
- The id is the rule's ARM id, `rule_id(...)`. `Read` by id answers an empty id for an object that is not there
  (what the engine takes as "gone", and what `pulumi import` reports as not found), else its properties and
  inputs rebuilt from them; it also reads an NSG by its id. `Delete` of an object that is not there succeeds
  (azure-native's Delete treats a 404 as done). `Diff` compares the old inputs with the new ones; a changed
  path parameter (resource group, NSG, rule name) replaces, any other change (e.g. `destinationPortRanges`) is
  an in-place `Update`: a PUT, checked like a create.
- `Invoke` answers two functions:
  - `azure-native:authorization:getClientConfig`: the subscription (and tenant and client) the provider acts
    as, its configured `subscriptionId` or else `SUBSCRIPTION`.
  - `azure-native:network:getNetworkSecurityGroup` (args `resourceGroupName`, `networkSecurityGroupName`,
    optional `expand`): the NSG in the SDK's shape (`pulumi_azure_native/network/get_network_security_group.py`,
    API version 2024-05-01), with `securityRules` (each rule as `SecurityRuleResponse`: `name`, `id`, `etag`,
    `priority`, `direction`, `access`, `protocol`, the single and plural address and port fields, the plural
    ones `[]` when unset, as Azure answers) and Azure's six `defaultSecurityRules`. Every NSG exists, empty
    until written, unless a test removes it (`remove_nsg`): then its read fails with ARM's 404, `Status=404
    Code="ResourceNotFound" Message="The Resource 'Microsoft.Network/networkSecurityGroups/<nsg>' under
    resource group '<rg>' was not found. ..."`, and a rule write into it with `ParentResourceNotFound`.

## Azure's rules for an NSG's rules (refused with status 400, the code and the text Azure answers)
- Rule name: 1 to 80 characters, word characters, `.`, `-`, `_`, beginning with a word character and ending with
  one (ARM template reference, `Microsoft.Network/networkSecurityGroups/securityRules`).
  `InvalidResourceName`: "Resource name <name> is invalid. The name can be up to 80 characters long. ..."
  (the text as in rh-mobb/documentation#204).
- Priority 100 to 4096 (azure-native's `SecurityRule.priority` doc). `SecurityRuleInvalidPriority`: "Security
  rule has invalid Priority. Value provided: 0 Allowed range 100-4096." (pulumi/pulumi-azure-native#2221).
- At most 1,000 rules per NSG (MicrosoftDocs/azure-docs `includes/azure-virtual-network-limits.md`, "NSG rules
  per NSG"). `SecurityRuleCountLimitReached`: "A security group cannot have more than 1000 security rules."
  (Azure/azure-rest-api-specs#3003). Azure's default rules do not count.
- Two rules of one NSG with the same priority and direction. `SecurityRuleConflict`: "Security rule <existing>
  conflicts with rule <new>. Rules cannot have the same Priority and Direction. To learn more, see
  aka.ms/nsgrules." (hashicorp/terraform-provider-azurerm#11137; the existing rule is named first, as in
  egen/bucc#183).
- At most 4,000 IP addresses and ranges for source, and separately 4,000 for destination, counted across all
  rules of the NSG ("IP addresses and ranges specified for source or destination in a security group (The
  limit applies separately to source and destination)", the limits page above): the single and the plural
  field both count; `*` and service tags (`Internet`, ...) are not addresses. Code
  `SecurityRuleAddressesOrPortsPerSecurityGroupLimitReached`: "Network security group <id> has 4094
  DestinationAddressPrefixes. A security group cannot have more than 4000 DestinationAddressPrefixes as per
  the limit MaxSecurityRuleAddressesOrPortsPerSecurityGroup." (kubernetes-sigs/cloud-provider-azure#2725).
  The limit's name says "or ports", but no source says port ranges count, so they are not counted here.
The checks run in that order, on the NSG as it would be after the write (an update replaces the rule's old
self). Seeded rules (`seed_rule`) go through the same checks.

## Writes on one NSG are serialized
Azure: the network resource provider answers 429 `RetryableErrorDueToAnotherOperation` "when the target
resource is locked by another operation" (MicrosoftDocs/azure-docs, `azure-resource-manager/management/
request-limits-and-throttling.md`); for a rule write the body is `{"code": "RetryableError", "message": "A
retryable error occured.", "details": [{"code": "RetryableErrorDueToAnotherOperation", "message": "Operation
PutSecurityRuleOperation (...) is updating resource <nsg id>..."}]}` (Azure/azure-sdk-for-python#556).
azure-native (`initPipelineOpts`, `client_azcore.go`) retries 408, 429, 5xx and 409 `AnotherOperationInProgress`
three times (azcore's default), 20 s, 60 s and 120 s apart ("the new backoff sequence"), and polls each
create's operation every 10 s (`updatePollingIntervalSeconds`). So the engine never sees a collision unless a
write found the NSG busy at all four tries (some 200 s); it sees the write take longer.

The stand-in models that pair, provider and Azure, as the engine sees it: a write holds its NSG for
`write_seconds` (Azure's time per write; 0 by default so tests stay fast, a few ms in a benchmark shows the
serialization), a write that finds the NSG busy waits its turn, and fails only if it waited longer than
`retry_seconds` (azure-native's retry budget, `RETRY_SECONDS`), with `Status=429 Code="RetryableError"
Message="A retryable error occured."`, what azure-native makes of Azure's 429. `retry_seconds=0` is Azure
without the provider's retries: the first collision is refused. Real azure-native waits whole backoff steps
instead of taking the NSG the moment it is free; the writes that had to wait are counted (`contended`), each
at least 20 s on real Azure. Not modelled: an operation that ends `Canceled` (superseded by a later write).

## The API a test or benchmark uses
- `FakeAzure(write_seconds=0.0, retry_seconds=RETRY_SECONDS)`; `fake_azure_native(azure)` serves it and yields
  the `PULUMI_DEBUG_PROVIDERS` value.
- `seed_rule(resource_group, nsg, name, properties)`: a rule some other tool owns (`properties` in the SDK's
  camelCase shape: `priority`, `direction`, `access`, `protocol`, `sourceAddressPrefix(es)`,
  `destinationPortRange(s)`, ...); raises `AzureRefusal` as Azure would refuse it. Not counted as a write.
- `remove_nsg(resource_group, nsg)`: the NSG is gone (its rules with it), so its read fails (a failed read is
  not an empty NSG).
- `rules(resource_group, nsg)`: the NSG's rules by name; `rule_names()`: every rule's name, all NSGs.
- `writes(resource_group, nsg)`: `NsgWrites` (creates, updates, deletes, refused, contended; previews not
  counted).
- `refused` (the engine-visible text of each refusal), `creates` (the ARM id of every create asked for), `objects`
  (a copy: rule ARM id -> properties and `name`), `lock` (hold it to read several of these at one moment).
- `hold_after_create(rule)`, `hold_after_update(rule)` / `release()`: hold the answer to the create (or the
  update) of a named rule after Azure carried it out, so a kill lands exactly between "Azure made it" and "the
  engine knows".
- `hold_before_create(rule)` / `release()`: hold the create of a named rule before Azure carries it out, so
  another writer's create lands first (two `up`s racing on one NSG).
"""

from __future__ import annotations

import ipaddress
import itertools
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NoReturn

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
GET_NSG = "azure-native:network:getNetworkSecurityGroup"
"""azure-native's function returning a network security group with its rules."""
RULE_TYPE = "azure-native:network:SecurityRule"
MAX_RULES = 1000
MAX_ADDRESSES = 4000
PRIORITIES = range(100, 4097)
RETRY_SECONDS = 20.0 + 60.0 + 120.0
"""How long azure-native keeps retrying a write Azure answered 429 (its three backoff steps)."""
_API_VERSION = "2024-05-01"
_LOCATION = "westeurope"
# What azure-native keeps as a rule's inputs besides the properties: the path parameters of its PUT.
_PATH_KEYS = ("resourceGroupName", "networkSecurityGroupName", "securityRuleName")
_RULE_NAME = re.compile(r"\w(?:[\w.-]{0,78}\w)?")
_PLURALS = ("sourceAddressPrefixes", "destinationAddressPrefixes", "sourcePortRanges", "destinationPortRanges")
# Azure's own rules in every NSG (name, direction, access, priority, source, destination, description).
_DEFAULT_RULES = (
    ("AllowVnetInBound", "Inbound", "Allow", 65000, "VirtualNetwork", "VirtualNetwork",
     "Allow inbound traffic from all VMs in VNET"),
    ("AllowAzureLoadBalancerInBound", "Inbound", "Allow", 65001, "AzureLoadBalancer", "*",
     "Allow inbound traffic from azure load balancer"),
    ("DenyAllInBound", "Inbound", "Deny", 65500, "*", "*", "Deny all inbound traffic"),
    ("AllowVnetOutBound", "Outbound", "Allow", 65000, "VirtualNetwork", "VirtualNetwork",
     "Allow outbound traffic from all VMs to all VMs in VNET"),
    ("AllowInternetOutBound", "Outbound", "Allow", 65001, "*", "Internet",
     "Allow outbound traffic from all VMs to Internet"),
    ("DenyAllOutBound", "Outbound", "Deny", 65500, "*", "*", "Deny all outbound traffic"),
)  # fmt: skip

Nsg = tuple[str, str]
"""(resource group, NSG name)."""


def nsg_id(subscription: str, resource_group: str, nsg: str) -> str:
    """A network security group's ARM id."""
    group = f"/subscriptions/{subscription}/resourceGroups/{resource_group}"
    return f"{group}/providers/Microsoft.Network/networkSecurityGroups/{nsg}"


def rule_id(subscription: str, resource_group: str, nsg: str, rule: str) -> str:
    """A security rule's ARM id."""
    return f"{nsg_id(subscription, resource_group, nsg)}/securityRules/{rule}"


class AzureRefusal(Exception):
    """A write Azure (or azure-native before it) refuses; `str()` is the text the engine shows."""

    @classmethod
    def arm(cls, status: int, code: str, message: str) -> AzureRefusal:
        """An ARM error as azure-native formats it (`PulumiAzcoreResponseError`)."""
        return cls(f'Status={status} Code="{code}" Message="{message}"')


@dataclass(frozen=True)
class NsgWrites:
    """What the engine asked of one NSG, by outcome (a preview's calls are not writes)."""

    creates: int = 0
    """Rules created."""
    updates: int = 0
    """Rules changed in place."""
    deletes: int = 0
    """Rule deletions (of a rule that is not there too: the engine still sends the DELETE)."""
    refused: int = 0
    """Writes refused (a limit, a conflict, a name, an existing rule, a 429 past the retries)."""
    contended: int = 0
    """Writes that found another write on the NSG in flight: each got a 429 on real Azure and waited at least
    azure-native's first backoff step (20 s), which the stand-in does not sleep."""

    @property
    def accepted(self) -> int:
        """The writes Azure carried out."""
        return self.creates + self.updates + self.deletes


@dataclass
class FakeAzure:
    """The stand-in's "Azure": the rules of each NSG, the counts of writes, and the holds a test sets."""

    write_seconds: float = 0.0
    """How long Azure takes over one rule write, holding its NSG."""
    retry_seconds: float = RETRY_SECONDS
    """How long a write waits for its NSG before the engine sees the 429 (0: Azure without azure-native)."""
    subscription: str = SUBSCRIPTION
    """The subscription the provider acts as (set when the engine configures it)."""
    creates: list[str] = field(default_factory=list)
    """Every create asked for, by ARM id, refused ones included."""
    refused: list[str] = field(default_factory=list)
    """The text the engine got for each refused write."""
    lock: threading.RLock = field(default_factory=threading.RLock)
    _nsgs: dict[Nsg, dict[str, dict[str, Any]]] = field(default_factory=dict)
    _sizes: dict[Nsg, dict[str, tuple[int, int]]] = field(default_factory=dict)
    """Per rule, how many source and destination addresses it names (the 4,000 limit, summed per write)."""
    _counts: dict[Nsg, Counter[str]] = field(default_factory=dict)
    _busy: dict[Nsg, threading.Lock] = field(default_factory=dict)
    _versions: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _etags: dict[Nsg, int] = field(default_factory=dict)
    _absent: set[Nsg] = field(default_factory=set)
    _holds: dict[tuple[str, str], threading.Event] = field(default_factory=dict)
    """(`create` or `update`, rule name) -> set by `release`."""
    _held: dict[tuple[str, str], threading.Event] = field(default_factory=dict)
    """(`create` or `update`, rule name) -> set when the hold begins."""

    # --- what a test reads and seeds ---------------------------------------------------------------------

    def seed_rule(self, resource_group: str, nsg: str, name: str, properties: Mapping[str, Any]) -> None:
        """Put a rule that another tool owns into the NSG (checked as Azure checks it; not a counted write)."""
        with self.lock:
            self._put((resource_group, nsg), name, _properties(properties))

    def remove_nsg(self, resource_group: str, nsg: str) -> None:
        """The NSG no longer exists, nor its rules: its read fails, as does a rule write into it."""
        with self.lock:
            self._absent.add((resource_group, nsg))
            self._nsgs.pop((resource_group, nsg), None)
            self._sizes.pop((resource_group, nsg), None)

    def rules(self, resource_group: str, nsg: str) -> dict[str, dict[str, Any]]:
        """The NSG's rules by name (copies of their properties)."""
        with self.lock:
            return {name: dict(props) for name, props in self._nsgs.get((resource_group, nsg), {}).items()}

    def rule_names(self) -> list[str]:
        with self.lock:
            return sorted(name for rules in self._nsgs.values() for name in rules)

    @property
    def objects(self) -> dict[str, dict[str, Any]]:
        """Rule ARM id -> its properties and `name` (a copy)."""
        with self.lock:
            return {
                rule_id(self.subscription, rg, nsg, name): {"name": name, **props}
                for (rg, nsg), rules in self._nsgs.items()
                for name, props in rules.items()
            }

    def writes(self, resource_group: str, nsg: str) -> NsgWrites:
        with self.lock:
            return NsgWrites(**self._counts.get((resource_group, nsg), Counter()))

    def hold_after_create(self, rule: str) -> threading.Event:
        """Hold the answer to the create of rule `rule` once the object exists; returns the event that is set
        when the hold begins. The hold ends when the test calls `release` (or after 10 minutes)."""
        return self._hold("create", rule)

    def hold_after_update(self, rule: str) -> threading.Event:
        """Hold the answer to the next update of rule `rule` once Azure carried it out, as `hold_after_create`."""
        return self._hold("update", rule)

    def hold_before_create(self, rule: str) -> threading.Event:
        """Hold the create of rule `rule` before Azure carries it out, as `hold_after_create` holds its answer."""
        return self._hold("before create", rule)

    def _hold(self, write: str, rule: str) -> threading.Event:
        with self.lock:
            self._holds[write, rule] = threading.Event()
            self._held[write, rule] = threading.Event()
            return self._held[write, rule]

    def release(self) -> None:
        with self.lock:
            for event in self._holds.values():
                event.set()
            self._holds.clear()

    # --- what the provider asks of Azure -----------------------------------------------------------------

    def create(self, where: Nsg, name: str, properties: dict[str, Any]) -> str:
        """azure-native's create: its existence check, then the PUT. Returns the rule's ARM id."""
        arm_id = rule_id(self.subscription, *where, name)
        with self.lock:
            self.creates.append(arm_id)
            exists = name in self._nsgs.get(where, {})
        if exists:
            self._refuse(where, AzureRefusal(f"cannot create already existing resource '{arm_id}'"))
        self._wait_if_held("before create", name)
        with self._writing(where):
            self._put(where, name, properties)
            self._counts.setdefault(where, Counter())["creates"] += 1
        self._wait_if_held("create", name)
        return arm_id

    def update(self, where: Nsg, name: str, properties: dict[str, Any]) -> None:
        with self._writing(where):
            self._put(where, name, properties)
            self._counts.setdefault(where, Counter())["updates"] += 1
        self._wait_if_held("update", name)

    def delete(self, where: Nsg, name: str) -> None:
        with self._writing(where):
            self._nsgs.get(where, {}).pop(name, None)
            self._sizes.get(where, {}).pop(name, None)
            self._etags[where] = next(self._versions)
            self._counts.setdefault(where, Counter())["deletes"] += 1

    def rule(self, where: Nsg, name: str) -> dict[str, Any] | None:
        with self.lock:
            found = self._nsgs.get(where, {}).get(name)
            return None if found is None else dict(found)

    def nsg(self, where: Nsg) -> dict[str, Any]:
        """The NSG as `getNetworkSecurityGroup` answers (the SDK's result shape); `AzureRefusal` if it is gone."""
        with self.lock:
            if where in self._absent:
                raise AzureRefusal.arm(
                    404,
                    "ResourceNotFound",
                    f"The Resource 'Microsoft.Network/networkSecurityGroups/{where[1]}' under resource group "
                    f"'{where[0]}' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix",
                )
            group = nsg_id(self.subscription, *where)
            etag = f'W/"{self._etags.get(where, 0)}"'
            rules = sorted(self._nsgs.get(where, {}).items())
            return {
                "azureApiVersion": _API_VERSION,
                "id": group,
                "name": where[1],
                "type": "Microsoft.Network/networkSecurityGroups",
                "location": _LOCATION,
                "etag": etag,
                "provisioningState": "Succeeded",
                "resourceGuid": str(uuid.uuid5(uuid.NAMESPACE_URL, group)),
                "securityRules": [_rule_view(f"{group}/securityRules/{n}", n, p, etag) for n, p in rules],
                "defaultSecurityRules": [_default_rule(group, etag, *d) for d in _DEFAULT_RULES],
                "flowLogs": [],
                "networkInterfaces": [],
                "subnets": [],
            }

    @contextmanager
    def _writing(self, where: Nsg) -> Iterator[None]:
        """Holds the NSG for one write (waiting its turn, up to the retry budget), under `lock`."""
        with self.lock:
            busy = self._busy.setdefault(where, threading.Lock())
        if not busy.acquire(blocking=False):
            with self.lock:
                self._counts.setdefault(where, Counter())["contended"] += 1
            if not busy.acquire(timeout=self.retry_seconds):
                self._refuse(where, AzureRefusal.arm(429, "RetryableError", "A retryable error occured."))
        try:
            with self.lock:
                try:
                    yield
                except AzureRefusal as refusal:
                    self._refuse(where, refusal)
            time.sleep(self.write_seconds)  # the operation runs on; the NSG stays locked until it ends
        finally:
            busy.release()

    def _refuse(self, where: Nsg, refusal: AzureRefusal) -> NoReturn:
        with self.lock:
            self._counts.setdefault(where, Counter())["refused"] += 1
            self.refused.append(str(refusal))
        raise refusal

    def _put(self, where: Nsg, name: str, properties: dict[str, Any]) -> None:
        """Azure's checks on the NSG as it would be after the write, then the write (under `lock`)."""
        if where in self._absent:
            raise AzureRefusal.arm(
                404,
                "ParentResourceNotFound",
                f"Can not perform requested operation on nested resource. Parent resource '{where[1]}' not found.",
            )
        rules = self._nsgs.setdefault(where, {})
        if not _RULE_NAME.fullmatch(name):
            raise AzureRefusal.arm(
                400,
                "InvalidResourceName",
                f"Resource name {name} is invalid. The name can be up to 80 characters long. It must begin with a "
                "word character, and it must end with a word character or with '_'. The name may contain word "
                "characters or '.', '-', '_'.",
            )
        priority = _whole(properties.get("priority"))
        if priority not in PRIORITIES:
            raise AzureRefusal.arm(
                400,
                "SecurityRuleInvalidPriority",
                f"Security rule has invalid Priority. Value provided: {priority} Allowed range 100-4096.",
            )
        properties = {**properties, "priority": priority}
        if name not in rules and len(rules) >= MAX_RULES:
            raise AzureRefusal.arm(
                400,
                "SecurityRuleCountLimitReached",
                f"A security group cannot have more than {MAX_RULES} security rules.",
            )
        direction = str(properties.get("direction", "")).lower()
        for other, props in rules.items():
            if other != name and props["priority"] == priority and str(props.get("direction", "")).lower() == direction:
                raise AzureRefusal.arm(
                    400,
                    "SecurityRuleConflict",
                    f"Security rule {other} conflicts with rule {name}. Rules cannot have the same Priority and "
                    "Direction. To learn more, see aka.ms/nsgrules.",
                )
        sizes = self._sizes.setdefault(where, {})
        size = (_addresses(properties, "source"), _addresses(properties, "destination"))
        for side, label in enumerate(("source", "destination")):
            count = size[side] + sum(s[side] for other, s in sizes.items() if other != name)
            if count > MAX_ADDRESSES:
                field_name = f"{label.capitalize()}AddressPrefixes"
                raise AzureRefusal.arm(
                    400,
                    "SecurityRuleAddressesOrPortsPerSecurityGroupLimitReached",
                    f"Network security group {nsg_id(self.subscription, *where)} has {count} {field_name}. A security "
                    f"group cannot have more than {MAX_ADDRESSES} {field_name} as per the limit "
                    "MaxSecurityRuleAddressesOrPortsPerSecurityGroup.",
                )
        rules[name], sizes[name] = properties, size
        self._etags[where] = next(self._versions)

    def _wait_if_held(self, write: str, rule: str) -> None:
        """Waits for `release` when the test holds this write of this rule (`write`: `create`, `update` or
        `before create`)."""
        with self.lock:
            hold, held = self._holds.get((write, rule)), self._held.get((write, rule))
        if hold is not None and held is not None and not held.is_set():  # one write held, not every later one
            held.set()
            hold.wait(timeout=600)


def _whole(value: Any) -> Any:
    """A number from a protobuf Struct (always a float) as the integer it stands for; anything else as it is."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _addresses(rule: Mapping[str, Any], side: str) -> int:
    """How many IP addresses and ranges a rule names on one side (`*` and service tags are not addresses)."""
    values = [rule.get(f"{side}AddressPrefix"), *(rule.get(f"{side}AddressPrefixes") or [])]
    return sum(_is_address(v) for v in values if isinstance(v, str))


def _is_address(value: str) -> bool:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return True


def _rule_view(arm_id: str, name: str, properties: Mapping[str, Any], etag: str) -> dict[str, Any]:
    """A rule as Azure answers it in an NSG (`SecurityRuleResponse`): unset plural fields are `[]`."""
    return {
        **{plural: [] for plural in _PLURALS},
        **properties,
        "name": name,
        "id": arm_id,
        "etag": etag,
        "type": "Microsoft.Network/networkSecurityGroups/securityRules",
        "provisioningState": "Succeeded",
    }


def _default_rule(
    group: str, etag: str, name: str, direction: str, access: str, priority: int, source: str, dest: str, text: str
) -> dict[str, Any]:
    properties = {
        "description": text,
        "protocol": "*",
        "sourcePortRange": "*",
        "destinationPortRange": "*",
        "sourceAddressPrefix": source,
        "destinationAddressPrefix": dest,
        "access": access,
        "priority": priority,
        "direction": direction,
    }
    view = _rule_view(f"{group}/defaultSecurityRules/{name}", name, properties, etag)
    return {**view, "type": "Microsoft.Network/networkSecurityGroups/defaultSecurityRules"}


def _plain(message: struct_pb2.Struct) -> dict[str, Any]:
    return dict(json_format.MessageToDict(message))


def _struct(values: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(values)
    return message


def _where(inputs: Mapping[str, Any]) -> Nsg:
    return str(inputs["resourceGroupName"]), str(inputs["networkSecurityGroupName"])


def _properties(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """A rule's properties from its inputs: without the path parameters, and without nulls (azure-native
    unmarshals with `SkipNulls`)."""
    return {k: v for k, v in inputs.items() if k not in _PATH_KEYS and v is not None}


class FakeAzureNative(provider_pb2_grpc.ResourceProviderServicer):
    def __init__(self, azure: FakeAzure) -> None:
        self._azure = azure
        self._etags = itertools.count(1)

    def Handshake(self, _request: Any, _context: Any) -> Any:
        return provider_pb2.ProviderHandshakeResponse(accept_secrets=True, accept_resources=True)

    def GetPluginInfo(self, _request: Any, _context: Any) -> Any:
        return plugin_pb2.PluginInfo(version=VERSION)

    def Configure(self, request: Any, _context: Any) -> Any:
        self._azure.subscription = str(
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
        try:
            arm_id = self._azure.create(_where(inputs), str(inputs["securityRuleName"]), _properties(inputs))
        except AzureRefusal as refusal:
            context.abort(grpc.StatusCode.UNKNOWN, str(refusal))
        return provider_pb2.CreateResponse(id=arm_id, properties=_struct(self._outputs(arm_id, inputs)))

    def Update(self, request: Any, context: Any) -> Any:
        if request.preview:
            return provider_pb2.UpdateResponse(properties=request.news)
        news = _plain(request.news)
        try:
            self._azure.update(_where(news), str(news["securityRuleName"]), _properties(news))
        except AzureRefusal as refusal:
            context.abort(grpc.StatusCode.UNKNOWN, str(refusal))
        return provider_pb2.UpdateResponse(properties=_struct(self._outputs(request.id, news)))

    def Read(self, request: Any, _context: Any) -> Any:
        path = self._path_of(request.id)
        if path is None:
            return provider_pb2.ReadResponse()
        where = _where(path)
        if "securityRuleName" not in path:  # an NSG (`NetworkSecurityGroup.get`)
            try:
                found = self._azure.nsg(where)
            except AzureRefusal:  # a 404: gone
                return provider_pb2.ReadResponse()
            return provider_pb2.ReadResponse(id=request.id, properties=_struct(found), inputs=_struct(path))
        stored = self._azure.rule(where, path["securityRuleName"])
        if stored is None:
            return provider_pb2.ReadResponse()
        inputs = {**path, **stored}
        return provider_pb2.ReadResponse(
            id=request.id, properties=_struct(self._outputs(request.id, inputs)), inputs=_struct(inputs)
        )

    def Delete(self, request: Any, context: Any) -> Any:
        path = self._path_of(request.id)
        if path is not None and "securityRuleName" in path:
            try:
                self._azure.delete(_where(path), path["securityRuleName"])
            except AzureRefusal as refusal:
                context.abort(grpc.StatusCode.UNKNOWN, str(refusal))
        return empty_pb2.Empty()

    def Cancel(self, _request: Any, _context: Any) -> Any:
        return empty_pb2.Empty()

    def Attach(self, _request: Any, _context: Any) -> Any:
        # The engine's first call on a provider it attached to (PULUMI_DEBUG_PROVIDERS).
        return empty_pb2.Empty()

    def GetSchema(self, _request: Any, context: Any) -> Any:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "the fake azure-native has no schema")

    def Invoke(self, request: Any, context: Any) -> Any:
        if request.tok == CLIENT_CONFIG:
            identity = {"tenantId": TENANT, "clientId": CLIENT, "objectId": CLIENT}
            result = {"subscriptionId": self._azure.subscription, **identity}
        elif request.tok == GET_NSG:
            args = _plain(request.args)
            missing = [k for k in ("resourceGroupName", "networkSecurityGroupName") if not args.get(k)]
            if missing:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{GET_NSG}: missing required {', '.join(missing)}")
            try:
                result = self._azure.nsg(_where(args))
            except AzureRefusal as refusal:
                context.abort(grpc.StatusCode.UNKNOWN, str(refusal))
        else:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"the fake azure-native has no function {request.tok}")
        response = provider_pb2.InvokeResponse()
        getattr(response, "return").CopyFrom(_struct(result))  # `return` is a keyword in Python
        return response

    def _path_of(self, arm_id: str) -> dict[str, str] | None:
        """The path parameters of an NSG's or a rule's ARM id in this subscription, else None."""
        parts = arm_id.strip("/").split("/")
        if len(parts) not in (8, 10) or parts[1] != self._azure.subscription or parts[6] != "networkSecurityGroups":
            return None
        path = {"resourceGroupName": parts[3], "networkSecurityGroupName": parts[7]}
        return path if len(parts) == 8 else {**path, "securityRuleName": parts[9]}

    def _outputs(self, arm_id: str, inputs: dict[str, Any]) -> dict[str, Any]:
        return {
            **inputs,
            "id": arm_id,
            "name": inputs["securityRuleName"],
            "type": "Microsoft.Network/networkSecurityGroups/securityRules",
            "etag": f'W/"{next(self._etags)}"',
            "provisioningState": "Succeeded",
        }


@contextmanager
def fake_azure_native(azure: FakeAzure | None = None) -> Iterator[str]:
    """Serves the fake on loopback; yields the `PULUMI_DEBUG_PROVIDERS` value that points the engine at it."""
    # Workers enough that writes waiting for their NSG do not starve the engine's reads.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
    provider_pb2_grpc.add_ResourceProviderServicer_to_server(FakeAzureNative(azure or FakeAzure()), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"azure-native:{port}"
    finally:
        if azure is not None:
            azure.release()
        server.stop(grace=None)
