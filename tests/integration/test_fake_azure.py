"""The Azure stand-in (azure.py) holds to Azure's rules for an NSG's rules, driven over its gRPC interface
the way the engine drives it (no pulumi CLI: these take well under a second each)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pulumi
import pytest
from google.protobuf import json_format, struct_pb2
from pulumi import automation as auto
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc
from pulumi_azure_native import network

from ssh_gateway.ops.shared.automation import workspace_options

from .fake_azure import (
    GET_NSG,
    RULE_TYPE,
    SUBSCRIPTION,
    AzureRefusal,
    FakeAzure,
    NsgWrites,
    fake_azure_native,
    nsg_id,
    rule_id,
)

pytestmark = pytest.mark.integration

RG, NSG = "rg-gw", "nsg-gw"
RULE: dict[str, Any] = {
    "direction": "Inbound",
    "access": "Allow",
    "protocol": "Tcp",
    "sourcePortRange": "*",
    "sourceAddressPrefix": "203.0.113.0/24",
    "destinationAddressPrefix": "*",
    "destinationPortRange": "40000",
}
"""An inbound rule as the program writes it, without its priority."""


def _struct(values: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(values)
    return message


def _rule(**properties: Any) -> dict[str, Any]:
    """`RULE` with `properties` over it; a None drops the property (a plural field instead of a single one)."""
    return {k: v for k, v in {**RULE, **properties}.items() if v is not None}


def _inputs(rule: str, nsg: str = NSG, **properties: Any) -> dict[str, Any]:
    return {"resourceGroupName": RG, "networkSecurityGroupName": nsg, "securityRuleName": rule, **_rule(**properties)}


class Engine:
    """Calls the stand-in as the engine does."""

    def __init__(self, stub: provider_pb2_grpc.ResourceProviderStub) -> None:
        self._stub = stub

    def create(self, rule: str, nsg: str = NSG, *, preview: bool = False, **properties: Any) -> str:
        request = provider_pb2.CreateRequest(
            urn=f"urn:pulumi:s::p::{RULE_TYPE}::{rule}",
            properties=_struct(_inputs(rule, nsg, **properties)),
            preview=preview,
        )
        return str(self._stub.Create(request).id)

    def update(self, rule: str, nsg: str = NSG, **properties: Any) -> None:
        arm_id = rule_id(SUBSCRIPTION, RG, nsg, rule)
        news = _struct(_inputs(rule, nsg, **properties))
        self._stub.Update(provider_pb2.UpdateRequest(id=arm_id, urn=f"urn:pulumi:s::p::{RULE_TYPE}::{rule}", news=news))

    def delete(self, rule: str, nsg: str = NSG) -> None:
        self._stub.Delete(provider_pb2.DeleteRequest(id=rule_id(SUBSCRIPTION, RG, nsg, rule)))

    def read(self, arm_id: str) -> dict[str, Any]:
        response = self._stub.Read(provider_pb2.ReadRequest(id=arm_id))
        return {"id": response.id, **json_format.MessageToDict(response.properties)}

    def get_nsg(self, nsg: str = NSG) -> dict[str, Any]:
        args = _struct({"resourceGroupName": RG, "networkSecurityGroupName": nsg})
        response = self._stub.Invoke(provider_pb2.InvokeRequest(tok=GET_NSG, args=args))
        return dict(json_format.MessageToDict(getattr(response, "return")))

    def refusal(self, call: str, rule: str, **properties: Any) -> str:
        """The text the engine gets for a write the stand-in must refuse."""
        with pytest.raises(grpc.RpcError) as refused:
            getattr(self, call)(rule, **properties)
        return str(refused.value.details())


@pytest.fixture(name="azure")
def azure_fixture() -> FakeAzure:
    return FakeAzure()


@pytest.fixture(name="engine")
def engine_fixture(azure: FakeAzure) -> Iterator[Engine]:
    with fake_azure_native(azure) as debug, grpc.insecure_channel(f"127.0.0.1:{debug.rsplit(':', 1)[1]}") as ch:
        yield Engine(provider_pb2_grpc.ResourceProviderStub(ch))


def _seed(azure: FakeAzure, count: int) -> None:
    for n in range(count):
        azure.seed_rule(RG, NSG, f"other-{n}", _rule(priority=100 + n))


# --- the NSG's read and the counts -------------------------------------------------------------------------


def test_get_nsg_answers_its_rules_the_seeded_ones_and_azures_defaults(engine: Engine, azure: FakeAzure) -> None:
    azure.seed_rule(
        RG, NSG, "corp-vpn", _rule(priority=300, sourceAddressPrefix=None, sourceAddressPrefixes=["198.51.100.0/24"])
    )
    engine.create("gw-a", priority=1000, destinationPortRanges=["40000-40009", "40020"], destinationPortRange=None)

    nsg = engine.get_nsg()

    assert nsg["id"] == nsg_id(SUBSCRIPTION, RG, NSG) and nsg["name"] == NSG
    rules = {r["name"]: r for r in nsg["securityRules"]}
    assert sorted(rules) == ["corp-vpn", "gw-a"]
    assert rules["corp-vpn"]["priority"] == 300 and rules["corp-vpn"]["sourceAddressPrefixes"] == ["198.51.100.0/24"]
    assert rules["gw-a"]["id"] == rule_id(SUBSCRIPTION, RG, NSG, "gw-a")
    assert rules["gw-a"]["destinationPortRanges"] == ["40000-40009", "40020"]
    assert rules["gw-a"]["sourcePortRanges"] == []  # unset plural fields are empty lists, as Azure answers
    defaults = {(r["name"], r["direction"], r["priority"]) for r in nsg["defaultSecurityRules"]}
    assert ("DenyAllInBound", "Inbound", 65500) in defaults and len(defaults) == 6
    assert engine.get_nsg("nsg-other")["securityRules"] == []  # every NSG exists, empty until written


def test_read_answers_a_rule_and_an_nsg_by_id_and_nothing_for_a_gone_rule(engine: Engine) -> None:
    arm_id = engine.create("gw-a", priority=1000)
    assert engine.read(arm_id)["destinationPortRange"] == "40000"
    assert [r["name"] for r in engine.read(nsg_id(SUBSCRIPTION, RG, NSG))["securityRules"]] == ["gw-a"]
    engine.delete("gw-a")
    assert engine.read(arm_id)["id"] == ""


def test_a_removed_nsg_cannot_be_read_nor_written(engine: Engine, azure: FakeAzure) -> None:
    engine.create("gw-a", priority=1000)
    azure.remove_nsg(RG, NSG)
    with pytest.raises(grpc.RpcError) as failed:
        engine.get_nsg()
    assert failed.value.details() == (
        f'Status=404 Code="ResourceNotFound" Message="The Resource \'Microsoft.Network/networkSecurityGroups/{NSG}\' '
        f"under resource group '{RG}' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix\""
    )
    assert engine.read(nsg_id(SUBSCRIPTION, RG, NSG))["id"] == ""
    assert engine.read(rule_id(SUBSCRIPTION, RG, NSG, "gw-a"))["id"] == ""  # its rules went with it
    assert engine.refusal("create", "gw-b", priority=1001).startswith('Status=404 Code="ParentResourceNotFound"')
    assert engine.get_nsg("nsg-other")["securityRules"] == []


def test_writes_are_counted_per_nsg_by_outcome(engine: Engine, azure: FakeAzure) -> None:
    engine.create("gw-a", priority=1000)
    engine.create("gw-b", priority=1001)
    engine.create("gw-c", priority=1002, preview=True)  # a preview writes nothing
    engine.update("gw-a", priority=1000, destinationPortRange="40005")
    engine.delete("gw-b")
    engine.refusal("create", "gw-a", priority=1000)  # exists
    engine.refusal("create", "gw-d", priority=1000)  # conflicts with gw-a
    engine.create("gw-a", "nsg-other", priority=1000)

    assert azure.writes(RG, NSG) == NsgWrites(creates=2, updates=1, deletes=1, refused=2)
    assert azure.writes(RG, NSG).accepted == 4
    assert azure.writes(RG, "nsg-other") == NsgWrites(creates=1)
    assert azure.rules(RG, NSG)["gw-a"]["destinationPortRange"] == "40005"
    assert azure.refused[0] == f"cannot create already existing resource '{rule_id(SUBSCRIPTION, RG, NSG, 'gw-a')}'"


# --- Azure's refusals ---------------------------------------------------------------------------------------


def test_a_rule_name_over_80_characters_is_refused(engine: Engine) -> None:
    engine.create("a" * 80, priority=1000)
    long = "a" * 81
    assert engine.refusal("create", long, priority=1001) == (
        f'Status=400 Code="InvalidResourceName" Message="Resource name {long} is invalid. The name can be up to 80 '
        "characters long. It must begin with a word character, and it must end with a word character or with '_'. "
        "The name may contain word characters or '.', '-', '_'.\""
    )


@pytest.mark.parametrize("priority", [99, 4097, 0])
def test_a_priority_outside_100_to_4096_is_refused(engine: Engine, azure: FakeAzure, priority: int) -> None:
    engine.create("lowest", priority=100)
    engine.create("highest", priority=4096)
    assert engine.refusal("create", "gw-a", priority=priority) == (
        f'Status=400 Code="SecurityRuleInvalidPriority" Message="Security rule has invalid Priority. '
        f'Value provided: {priority} Allowed range 100-4096."'
    )
    assert engine.refusal("update", "lowest", priority=priority).startswith(
        'Status=400 Code="SecurityRuleInvalidPriority"'
    )
    assert azure.rules(RG, NSG)["lowest"]["priority"] == 100


def test_two_rules_with_one_priority_and_direction_conflict(engine: Engine, azure: FakeAzure) -> None:
    azure.seed_rule(RG, NSG, "corp-vpn", _rule(priority=1000))
    assert engine.refusal("create", "gw-a", priority=1000) == (
        'Status=400 Code="SecurityRuleConflict" Message="Security rule corp-vpn conflicts with rule gw-a. Rules '
        'cannot have the same Priority and Direction. To learn more, see aka.ms/nsgrules."'
    )
    engine.create("gw-out", priority=1000, direction="Outbound")  # the other direction does not conflict
    engine.create("gw-a", priority=1001)
    refused = engine.refusal("update", "gw-a", priority=1000)  # an update is checked as a create is
    assert refused.startswith('Status=400 Code="SecurityRuleConflict" Message="Security rule corp-vpn conflicts')
    assert azure.rules(RG, NSG)["gw-a"]["priority"] == 1001
    with pytest.raises(AzureRefusal, match="SecurityRuleConflict"):  # another tool's write is checked too
        azure.seed_rule(RG, NSG, "corp-other", _rule(priority=1001))


def test_an_nsg_holds_at_most_1000_rules(engine: Engine, azure: FakeAzure) -> None:
    _seed(azure, 999)
    engine.create("gw-a", priority=2000)  # the 1,000th
    assert engine.refusal("create", "gw-b", priority=2001) == (
        'Status=400 Code="SecurityRuleCountLimitReached" Message="A security group cannot have more than 1000 '
        'security rules."'
    )
    engine.update("gw-a", priority=2000, destinationPortRange="40001")  # a change of one of them still fits
    engine.delete("gw-a")
    engine.create("gw-b", priority=2001)
    assert len(azure.rules(RG, NSG)) == 1000


def test_an_nsg_holds_at_most_4000_source_addresses_counted_across_its_rules(engine: Engine, azure: FakeAzure) -> None:
    def block(n: int, count: int) -> list[str]:
        return [f"10.{n}.{i // 256}.{i % 256}" for i in range(count)]

    for n in range(3):  # 3,000 from other tools
        seeded = _rule(priority=100 + n, sourceAddressPrefix=None, sourceAddressPrefixes=block(n, 1000))
        azure.seed_rule(RG, NSG, f"other-{n}", seeded)
    # `*` and service tags are not addresses; the destination side is counted on its own.
    azure.seed_rule(RG, NSG, "tags", _rule(priority=200, sourceAddressPrefix="Internet"))
    engine.create("gw-a", priority=1000, sourceAddressPrefix=None, sourceAddressPrefixes=block(9, 999))
    engine.create("gw-b", priority=1001, destinationAddressPrefixes=block(8, 10))  # its single source: the 4,000th

    refused = engine.refusal("create", "gw-c", priority=1002)  # one more, in the single field
    assert refused == (
        'Status=400 Code="SecurityRuleAddressesOrPortsPerSecurityGroupLimitReached" Message="Network security '
        f"group {nsg_id(SUBSCRIPTION, RG, NSG)} has 4001 SourceAddressPrefixes. A security group cannot have more "
        'than 4000 SourceAddressPrefixes as per the limit MaxSecurityRuleAddressesOrPortsPerSecurityGroup."'
    )
    grown = block(9, 1000)  # an update that grows the plural field is checked against the rest
    refused = engine.refusal("update", "gw-a", priority=1000, sourceAddressPrefix=None, sourceAddressPrefixes=grown)
    assert "has 4001 SourceAddressPrefixes" in refused
    engine.update("gw-a", priority=1000, sourceAddressPrefix=None, sourceAddressPrefixes=block(7, 999))


def test_the_destination_side_is_limited_to_4000_on_its_own(engine: Engine, azure: FakeAzure) -> None:
    wide = [f"10.0.{i // 256}.{i % 256}" for i in range(4000)]
    azure.seed_rule(RG, NSG, "other", _rule(priority=100, destinationAddressPrefixes=wide))
    refused = engine.refusal("create", "gw-a", priority=1000, destinationAddressPrefix="192.0.2.1")
    assert "has 4001 DestinationAddressPrefixes. A security group cannot have more than 4000" in refused


def test_a_rule_changes_in_place_from_one_port_to_several(engine: Engine, azure: FakeAzure) -> None:
    arm_id = engine.create("gw-shard", priority=1000)
    engine.update("gw-shard", priority=1000, destinationPortRange=None, destinationPortRanges=["40000-40001", "40003"])
    assert engine.read(arm_id)["destinationPortRanges"] == ["40000-40001", "40003"]
    assert "destinationPortRange" not in azure.rules(RG, NSG)["gw-shard"]
    assert azure.writes(RG, NSG) == NsgWrites(creates=1, updates=1)


# --- writes on one NSG are serialized -----------------------------------------------------------------------


def _at_once(engine: Engine, names: list[str], nsgs: list[str]) -> float:
    """Creates the rules from as many threads at once; the seconds it took."""
    start = threading.Barrier(len(names))

    def create(n: int) -> str:
        start.wait()
        return engine.create(names[n], nsgs[n], priority=1000 + n)

    began = time.monotonic()
    with ThreadPoolExecutor(len(names)) as pool:
        list(pool.map(create, range(len(names))))
    return time.monotonic() - began


def test_writes_on_one_nsg_wait_their_turn_and_on_several_nsgs_do_not() -> None:
    azure = FakeAzure(write_seconds=0.5)
    with fake_azure_native(azure) as debug, grpc.insecure_channel(f"127.0.0.1:{debug.rsplit(':', 1)[1]}") as ch:
        engine = Engine(provider_pb2_grpc.ResourceProviderStub(ch))
        one_nsg = _at_once(engine, ["a", "b", "c", "d"], [NSG] * 4)
        four_nsgs = _at_once(engine, ["a", "b", "c", "d"], ["n1", "n2", "n3", "n4"])
    assert one_nsg >= 4 * 0.5 and four_nsgs < 2 * 0.5, (one_nsg, four_nsgs)
    assert azure.writes(RG, NSG) == NsgWrites(creates=4, contended=3)
    assert azure.writes(RG, "n1") == NsgWrites(creates=1)


def test_a_write_that_cannot_get_its_nsg_within_the_retries_gets_azures_429() -> None:
    azure = FakeAzure(write_seconds=0.5, retry_seconds=0.1)
    with fake_azure_native(azure) as debug, grpc.insecure_channel(f"127.0.0.1:{debug.rsplit(':', 1)[1]}") as ch:
        engine = Engine(provider_pb2_grpc.ResourceProviderStub(ch))
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(engine.create, "gw-a", priority=1000)
            while "gw-a" not in azure.rules(RG, NSG):  # its write runs, the NSG locked until it ends
                time.sleep(0.01)
            refused = engine.refusal("create", "gw-b", priority=1001)
            first.result()
        engine.create("gw-b", priority=1001)  # once the NSG is free, the same write goes through
    assert refused == 'Status=429 Code="RetryableError" Message="A retryable error occured."'
    assert azure.writes(RG, NSG) == NsgWrites(creates=2, refused=1, contended=1)


# --- through the real engine -------------------------------------------------------------------------------


@pytest.mark.usefixtures("azure_native")  # the engine attaches to the stand-in that serves `fake_azure`
def test_the_engine_reads_the_nsg_and_gets_azures_refusal(fake_azure: FakeAzure, tmp_path: Path) -> None:
    """A program of its own (not the project's, whose rule design changes) through the real CLI: the SDK's invoke
    finds the stand-in's function and result shape, and a refused create fails `up` with Azure's text."""
    fake_azure.seed_rule(RG, NSG, "corp-vpn", _rule(priority=1000))
    priority = {"value": 1000}

    def program() -> None:
        got = network.get_network_security_group_output(resource_group_name=RG, network_security_group_name=NSG)
        pulumi.export("seen", got.security_rules.apply(lambda rules: sorted((r.name, r.priority) for r in rules or [])))
        network.SecurityRule(
            "gw-a",
            resource_group_name=RG,
            network_security_group_name=NSG,
            security_rule_name="gw-a",
            priority=priority["value"],
            direction="Inbound",
            access="Allow",
            protocol="Tcp",
            source_port_range="*",
            source_address_prefix="203.0.113.0/24",
            destination_address_prefix="*",
            destination_port_range="40000",
        )

    backend = tmp_path / "state"
    backend.mkdir()
    options = workspace_options(tmp_path, {"PULUMI_BACKEND_URL": f"file://{backend}"})
    options.project_settings = auto.ProjectSettings(name="fake-azure", runtime="python")
    stack = auto.create_or_select_stack("it", project_name="fake-azure", program=program, opts=options)
    try:
        with pytest.raises(auto.CommandError) as refused:
            stack.up()
        assert (
            'Status=400 Code="SecurityRuleConflict" Message="Security rule corp-vpn conflicts with rule gw-a.'
            in str(refused.value)
        )
        priority["value"] = 1001
        outputs = stack.up().outputs
        assert outputs["seen"].value == [["corp-vpn", 1000]]
        assert sorted(fake_azure.rules(RG, NSG)) == ["corp-vpn", "gw-a"]
    finally:
        stack.destroy()
        stack.workspace.remove_stack(stack.name)
    assert fake_azure.writes(RG, NSG) == NsgWrites(creates=1, deletes=1, refused=1)
