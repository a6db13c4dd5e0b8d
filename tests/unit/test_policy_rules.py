"""The policy pack's rules (policy/rules.py) as functions: the NSG rule on what the program itself registers under
the mocks, and the edge cases the real-CLI tests (tests/integration/test_policy_pack.py) do not reach."""

from __future__ import annotations

from typing import Any

import pytest

from policy.rules import (
    Resource,
    connect_port_in_range,
    connect_port_rule,
    created_by_component,
    load_balancer_from_component,
    nsg_open_to_world,
    ports_outside_range,
    shared_ports,
    stack_range,
)
from ssh_gateway.core.names import (
    ALLOCATION_TYPE,
    CONNECT_ENTRY_TYPE,
    CONNECT_INSTANCE_TYPE,
    FIREWALL_TYPE,
    NSG_RULE_TYPE,
    NSG_TYPE,
    PANGOLIN_TYPE,
    SERVICE_TYPE,
    urn_name,
)
from ssh_gateway.core.ports import PortRange

from .conftest import RecordingMocks
from .test_program import run_program, settings

pytestmark = pytest.mark.unit

STACK = "urn:pulumi:prod::ssh-gateway::"


def child(instance: str, role: str, typ: str) -> str:
    return f"{STACK}ssh-gateway:index:SshInstance${typ}::{instance}-{role}"


def registered_rules(mocks: RecordingMocks, **firewall: Any) -> list[Resource]:
    run_program(
        settings(
            production=True,
            firewall={
                "resourceGroup": "rg",
                "nsgName": "nsg",
                "sourceCidrs": ["203.0.113.0/24"],
                "rules": "perInstance",  # a rule per instance, each child of its SshInstance
                **firewall,
            },
        )
    )
    return [
        Resource(urn=child(r.name.removesuffix("-nsg-rule"), "nsg-rule", r.typ), type=r.typ, props=r.inputs)
        for r in mocks.of_type(NSG_RULE_TYPE)
    ]


@pytest.mark.parametrize("source", ["0.0.0.0/0", "*", "Internet"])
def test_a_production_stack_with_a_world_open_rule_is_refused(mocks: RecordingMocks, source: str) -> None:
    resources = registered_rules(mocks, sourceCidrs=[source])
    found = [v for r in resources for v in nsg_open_to_world(r, production=True)]
    # One per instance (gpu-01, gpu-02 sets its own CIDRs, vm-01): each names the rule, the port and the source.
    assert sorted(str(v.urn) for v in found) == sorted(
        r.urn for r in resources if r.props.get("sourceAddressPrefix") == source
    )
    assert len(found) == 2
    gpu01 = next(v.message for v in found if v.urn == child("gpu-01", "nsg-rule", NSG_RULE_TYPE))
    assert f"NSG rule 'ssh-gateway-gpu-01' allows inbound 40001 from {source!r}" in gpu01
    assert "ssh-gateway:production: true" in gpu01


def test_specific_cidrs_pass_and_non_production_stacks_are_not_judged(mocks: RecordingMocks) -> None:
    resources = registered_rules(mocks)
    assert [v for r in resources for v in nsg_open_to_world(r, production=True)] == []
    assert (
        nsg_open_to_world(Resource("urn:x::y", NSG_RULE_TYPE, {"sourceAddressPrefix": "0.0.0.0/0"}), production=False)
        == []
    )


@pytest.mark.parametrize(
    ("props", "flagged"),
    [
        ({"sourceAddressPrefixes": ["203.0.113.0/24", "Any"]}, ["Any"]),
        ({"sourceAddressPrefix": "::/0"}, ["::/0"]),
        ({"sourceAddressPrefix": "*", "direction": "Outbound"}, []),
        ({"sourceAddressPrefix": "*", "access": "Deny"}, []),
    ],
)
def test_nsg_rule_edge_cases(props: dict[str, Any], flagged: list[str]) -> None:
    found = nsg_open_to_world(Resource("urn:a::b::c::r", NSG_RULE_TYPE, props), production=True)
    assert [f.message.split(" from ")[1].split(",")[0] for f in found] == [repr(s) for s in flagged]


def test_inline_rules_of_an_nsg_count_too() -> None:
    nsg = Resource(
        "urn:a::b::c::nsg",
        NSG_TYPE,
        {
            "securityRules": [
                {"name": "ok", "sourceAddressPrefix": "10.0.0.0/8"},
                {"name": "bad", "sourceAddressPrefix": "*"},
            ]
        },
    )
    [found] = nsg_open_to_world(nsg, production=True)
    assert "NSG rule 'bad'" in found.message


def test_range_comes_from_config_else_from_the_allocation_table() -> None:
    table = Resource("urn:a::b::c::ports", ALLOCATION_TYPE, {"start": 41000.0, "end": 41199.0})
    assert stack_range({"range": "40000-40019"}, [table]) == PortRange(start=40000, end=40019)
    assert stack_range(None, [table]) == PortRange(start=41000, end=41199)
    assert stack_range(None, []) is None


def test_ports_outside_the_range() -> None:
    inside = Resource(child("a", "pangolin", PANGOLIN_TYPE), PANGOLIN_TYPE, {"proxyPort": 40019.0})
    outside = Resource(child("b", "pangolin", PANGOLIN_TYPE), PANGOLIN_TYPE, {"proxyPort": 40020.0})
    [found] = ports_outside_range([inside, outside], PortRange(start=40000, end=40019))
    assert found.urn == outside.urn
    assert "'b-pangolin' has proxyPort 40020, outside the stack's range 40000-40019" in found.message
    assert ports_outside_range([inside], None)[0].message.startswith("the stack has Pangolin resources but no port")


def test_an_instance_shares_its_port_with_its_own_rule_only() -> None:
    def pangolin(instance: str, port: int) -> Resource:
        return Resource(child(instance, "pangolin", PANGOLIN_TYPE), PANGOLIN_TYPE, {"proxyPort": port}, f"{instance}")

    def rule(instance: str, ports: str) -> Resource:
        return Resource(
            child(instance, "nsg-rule", NSG_RULE_TYPE), NSG_RULE_TYPE, {"destinationPortRange": ports}, f"{instance}"
        )

    assert shared_ports([pangolin("a", 40001), rule("a", "40001"), pangolin("b", 40002), rule("b", "40002")]) == []
    clash = shared_ports([pangolin("a", 40001), rule("a", "40001"), pangolin("b", 40002), rule("b", "40000-40005")])
    assert {v.urn for v in clash} == {
        child("a", "pangolin", PANGOLIN_TYPE),
        child("a", "nsg-rule", NSG_RULE_TYPE),
        child("b", "nsg-rule", NSG_RULE_TYPE),
    }
    assert "port 40001 is used by 'a-pangolin' and also by a-nsg-rule, b-nsg-rule" in clash[0].message


def test_a_merged_rule_shares_each_port_with_the_instance_that_binds_it() -> None:
    def pangolin(instance: str, port: int) -> Resource:
        return Resource(child(instance, "pangolin", PANGOLIN_TYPE), PANGOLIN_TYPE, {"proxyPort": port}, f"{instance}")

    def merged(key: str, ranges: list[str]) -> Resource:
        urn = f"{STACK}{FIREWALL_TYPE}${NSG_RULE_TYPE}::firewall-ports{key}"
        return Resource(urn, NSG_RULE_TYPE, {"destinationPortRanges": ranges}, f"{STACK}{FIREWALL_TYPE}::firewall")

    fleet = [pangolin("a", 40001), pangolin("b", 40002), pangolin("c", 40007)]
    assert shared_ports([*fleet, merged("", ["40001-40002"]), merged("-1a2b3c4d", ["40007"])]) == []
    clash = shared_ports([*fleet, merged("", ["40001-40002"]), merged("-1a2b3c4d", ["40002", "40007"])])
    assert {urn_name(v.urn or "") for v in clash} == {"b-pangolin", "firewall-ports", "firewall-ports-1a2b3c4d"}


def test_load_balancer_only_matters_inside_the_component() -> None:
    lb = {"spec": {"type": "LoadBalancer"}}
    mine = Resource(child("a", "service", SERVICE_TYPE), SERVICE_TYPE, lb)
    theirs = Resource(f"{STACK}{SERVICE_TYPE}::ingress", SERVICE_TYPE, lb)
    assert created_by_component(mine.urn) and not created_by_component(theirs.urn)
    assert "has type LoadBalancer" in load_balancer_from_component(mine)[0].message
    assert load_balancer_from_component(theirs) == []
    assert load_balancer_from_component(Resource(mine.urn, SERVICE_TYPE, {"spec": {"type": "NodePort"}})) == []


# --- the CONNECT entry ------------------------------------------------------------------------------------------


def entry_child(role: str, typ: str) -> str:
    return f"{STACK}{CONNECT_ENTRY_TYPE}${typ}::connect-{role}"


def entry_pangolin(port: int) -> Resource:
    return Resource(urn=entry_child("pangolin", PANGOLIN_TYPE), type=PANGOLIN_TYPE, props={"proxyPort": port})


def entry_rule(port: int) -> Resource:
    return Resource(
        urn=entry_child("nsg-rule", NSG_RULE_TYPE), type=NSG_RULE_TYPE, props={"destinationPortRange": str(port)}
    )


def test_the_connect_port_must_be_outside_the_range_not_inside() -> None:
    rng = PortRange.parse("40000-40099")
    outside, inside = entry_pangolin(40443), entry_pangolin(40050)
    assert ports_outside_range([outside], rng) == []  # the per-instance rule leaves the entry alone
    assert connect_port_in_range([outside], rng) == []
    [violation] = connect_port_in_range([inside], rng)
    assert violation.urn == inside.urn
    assert "the CONNECT entry's Pangolin resource 'connect-pangolin' has proxyPort 40050, inside" in violation.message


def test_the_connect_port_is_opened_by_the_entrys_own_rule() -> None:
    instance_rule = Resource(
        urn=child("gpu-01", "nsg-rule", NSG_RULE_TYPE), type=NSG_RULE_TYPE, props={"destinationPortRange": "40443"}
    )
    assert connect_port_rule([entry_pangolin(40443)]) == []  # no firewall layer at all
    assert connect_port_rule([entry_pangolin(40443), entry_rule(40443), instance_rule]) == []
    [missing] = connect_port_rule([entry_pangolin(40443), instance_rule])  # an instance's rule does not count
    assert "listens on 40443, but no NSG rule of the entry opens 40443 (it opens nothing)" in missing.message
    [wrong] = connect_port_rule([entry_pangolin(40443), entry_rule(40444)])
    assert "(it opens [40444])" in wrong.message


def test_the_entrys_port_and_rule_are_one_owner_and_connect_instances_are_components() -> None:
    entry = f"{STACK}{CONNECT_ENTRY_TYPE}::connect"
    pangolin, rule = entry_pangolin(40443), entry_rule(40443)
    owned = [Resource(r.urn, r.type, r.props, parent=entry) for r in (pangolin, rule)]
    assert shared_ports(owned) == []
    lb = f"{STACK}{CONNECT_INSTANCE_TYPE}${SERVICE_TYPE}::gpu-c-service"
    assert created_by_component(lb)
