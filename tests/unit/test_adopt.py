"""`ssh_gateway.ops.recovery.adopt` without a CLI: what it reads from a preview, the ids and marks it checks, the import
file and the state scaffolding it writes, and the port table's adoption by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from providers.port_allocation.provider import PortAllocationProvider
from ssh_gateway.core.names import (
    ALLOCATION_TYPE,
    COMPONENT_TYPE,
    NSG_RULE_TYPE,
    PANGOLIN_TYPE,
    SECRET_TYPE,
    SERVICE_TYPE,
    STACK_MARK,
    STATUS_TYPE,
    stack_marked,
)
from ssh_gateway.ops.recovery import adopt
from ssh_gateway.plumbing.pulumi_cli import revealed

pytestmark = pytest.mark.unit

ROOT = "urn:pulumi:dev::ssh-gateway::pulumi:pulumi:Stack::ssh-gateway-dev"
K8S = "urn:pulumi:dev::ssh-gateway::pulumi:providers:kubernetes::kubernetes"
AZURE = "urn:pulumi:dev::ssh-gateway::pulumi:providers:azure-native::default_3_29_0"
COMPONENT = f"urn:pulumi:dev::ssh-gateway::{COMPONENT_TYPE}::a"
SERVICE = f"urn:pulumi:dev::ssh-gateway::{COMPONENT_TYPE}${SERVICE_TYPE}::a-service"
RULE = f"urn:pulumi:dev::ssh-gateway::{COMPONENT_TYPE}${NSG_RULE_TYPE}::a-nsg-rule"
UNKNOWN_ID = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


def _step(op: str, urn: str, type_: str, parent: str | None = ROOT, provider: str | None = None, **inputs: Any) -> Any:
    state: dict[str, Any] = {"urn": urn, "type": type_, "inputs": inputs}
    if parent:
        state["parent"] = parent
    if provider:
        state["provider"] = provider
    return {"op": op, "urn": urn, "newState": state}


def _first_up_preview() -> dict[str, Any]:
    """What the preview of a stack with no resources plans: everything is a create."""
    return {
        "steps": [
            _step("create", ROOT, "pulumi:pulumi:Stack", parent=None),
            _step("create", K8S, "pulumi:providers:kubernetes", kubeconfig="/k/config", version="4.25.0"),
            _step("create", COMPONENT, COMPONENT_TYPE),
            _step(
                "create", SERVICE, SERVICE_TYPE, parent=COMPONENT, provider=f"{K8S}::{UNKNOWN_ID}",
                metadata={"name": "ssh-a", "namespace": "gpu"},
            ),
            _step(
                "create", RULE, NSG_RULE_TYPE, parent=COMPONENT, provider=f"{AZURE}::{UNKNOWN_ID}",
                resourceGroupName="rg", networkSecurityGroupName="nsg", securityRuleName="ssh-gateway-a",
            ),
        ]
    }  # fmt: skip


def test_the_preview_gives_each_resource_its_op_parent_and_provider() -> None:
    planned = adopt.planned_creates(_first_up_preview())
    assert planned[SERVICE].op == "create" and planned[SERVICE].parent == COMPONENT
    assert planned[SERVICE].provider == f"{K8S}::{UNKNOWN_ID}"
    assert planned[ROOT].parent is None


def test_ids_are_the_ones_the_providers_import_by() -> None:
    planned = adopt.planned_creates(_first_up_preview())
    assert adopt._object_id(planned[SERVICE], {}) == "gpu/ssh-a"
    rule = adopt._object_id(planned[RULE], {"subscriptionId": "sub-1"})
    assert rule == (
        "/subscriptions/sub-1/resourceGroups/rg/providers/Microsoft.Network/networkSecurityGroups/nsg/"
        "securityRules/ssh-gateway-a"
    )
    with pytest.raises(adopt.AdoptError, match="subscriptionId"):
        adopt._object_id(planned[RULE], {})


def test_only_this_stacks_mark_makes_an_object_ours() -> None:
    assert adopt._marked({"metadata": {"annotations": {STACK_MARK: "ssh-gateway/dev"}}}, "ssh-gateway/dev")
    assert not adopt._marked({"metadata": {"annotations": {STACK_MARK: "ssh-gateway/prod"}}}, "ssh-gateway/dev")
    assert not adopt._marked({"metadata": {"name": "ssh-a"}}, "ssh-gateway/dev")  # a name is no proof
    described = stack_marked("ssh-gateway: public ssh to instance a", "ssh-gateway", "dev")
    assert adopt._marked({"description": described}, "ssh-gateway/dev")
    assert not adopt._marked({"description": "ssh-gateway: public ssh to instance a"}, "ssh-gateway/dev")


def test_a_first_ups_objects_get_their_parents_and_providers_first_then_one_import_file() -> None:
    planned = adopt.planned_creates(_first_up_preview())
    adopted = {SERVICE: "gpu/ssh-a", RULE: "/subscriptions/s/x"}
    missing = [p.urn for p in adopt._missing_ancestors(planned, adopted)]
    # The component before nothing that needs it; the root stack and the providers the preview plans.
    assert missing == [ROOT, COMPONENT, K8S], missing  # the default azure provider: the import makes it
    document = adopt._import_file(planned, adopted)
    by_name = {v: k for k, v in document["nameTable"].items()}
    service, rule = document["resources"]
    assert (service["type"], service["logicalName"], service["id"]) == (SERVICE_TYPE, "a-service", "gpu/ssh-a")
    assert document["nameTable"][service["parent"]] == COMPONENT
    assert document["nameTable"][service["provider"]] == K8S
    assert rule["parent"] == service["parent"] and "provider" not in rule  # a default provider no state has yet
    assert rule["version"] == "3.29.0" and "version" not in service  # ... made as the program's default_3_29_0
    assert ROOT not in by_name  # the root stack is the import's default parent


def test_an_unchanged_provider_is_configured_with_the_inputs_the_state_holds() -> None:
    # A preview lists no step for a provider it leaves as it is: its inputs come from the state, revealed.
    held = {"__internal": {}, "kubeconfig": revealed(adopt._secret("/k/config")), "version": "4.25.0"}
    config = adopt._provider_config(None, held, "kubernetes", "dev", Path("."), {})
    assert config == {"kubeconfig": "/k/config", "version": "4.25.0"}
    planned = adopt.planned_creates(_first_up_preview())
    assert adopt._provider_config(planned[K8S], held | {"kubeconfig": "/old"}, "kubernetes", "dev", Path("."), {}) == {
        "kubeconfig": "/k/config",
        "version": "4.25.0",
    }  # the preview's, when it plans the provider


def test_provider_inputs_enter_the_state_as_secrets() -> None:
    secret = adopt._secret("/k/config")
    assert secret["plaintext"] == '"/k/config"' and len(secret) == 2


def test_skip_checkpoints_is_recoverable_only_for_a_first_up_of_adoptable_types() -> None:
    first = [NSG_RULE_TYPE, PANGOLIN_TYPE, ALLOCATION_TYPE, COMPONENT_TYPE, "pulumi:providers:k"]
    assert adopt.skip_checkpoints_is_recoverable(first, stack_has_resources=False)
    assert not adopt.skip_checkpoints_is_recoverable(first, stack_has_resources=True)
    istio = "kubernetes:networking.istio.io/v1alpha3:EnvoyFilter"
    assert not adopt.skip_checkpoints_is_recoverable([*first, istio], stack_has_resources=False)
    # Proven by the kill tests against the real kube-apiserver (tests/integration/test_recover_import.py).
    assert adopt.skip_checkpoints_is_recoverable([*first, SERVICE_TYPE, SECRET_TYPE], stack_has_resources=False)
    assert adopt.skip_checkpoints_is_recoverable([*first, STATUS_TYPE], stack_has_resources=False)  # discovery


def _binding(port: int, resource_id: int, name: str) -> dict[str, Any]:
    return {"id": resource_id, "name": name, "protocol": "tcp", "enabled": True}


def test_a_lost_table_takes_back_the_ports_the_stacks_own_resources_bind() -> None:
    news = {
        "instances": ["a", "b", "c"],
        "start": 40000,
        "end": 40009,
        "pins": {},
        "reserved": [],
        "ownerPrefix": "ssh-gateway/dev/",
        "held": {
            "40000": [_binding(40000, 7, "someone/else/x")],
            "40004": [_binding(40004, 9, "ssh-gateway/dev/b"), _binding(40004, 12, "ssh-gateway/dev/b")],
            "40007": [_binding(40007, 3, "ssh-gateway/dev/gone")],  # a removed instance's: still someone else
        },
    }
    checked = PortAllocationProvider().check({}, news).inputs
    assert checked["ports"]["b"] == 40004
    assert {checked["ports"]["a"], checked["ports"]["c"]}.isdisjoint({40000, 40004, 40007})
