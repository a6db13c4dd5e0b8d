"""Helpers of the adoption tests: stacks on the real kube-apiserver (through the holding relay) and the Azure
stand-in, and the audit of what exists against what the state holds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.names import NSG_RULE_TYPE, SECRET_TYPE, SERVICE_TYPE, STACK_MARK, stack_mark
from ssh_gateway.local.control_plane import ControlPlane

from .conftest import stack_config
from .fake_azure import FakeAzure
from .reliability import audit

FIREWALL = {"resourceGroup": "rg-gw", "nsgName": "nsg-gw", "sourceCidrs": ["203.0.113.0/24"]}
SUBSCRIPTION = "11111111-2222-4333-8444-555555555555"


def adoptable_config(
    emulator: EmulatorHandle, instances: list[str], *, kubeconfig: Path, namespace: str, port_range: str
) -> dict[str, Any]:
    """Every instance a ClusterIP Service with its host-key Secret, and an NSG rule on the stand-in."""
    config = stack_config(
        emulator,
        [{"name": name, "target": "clusterIp"} for name in instances],
        port_range=port_range,
        kubernetes={"namespace": namespace, "kubeconfig": str(kubeconfig), "skipAwait": True},
        firewall=FIREWALL,
    )
    config["azure-native:subscriptionId"] = SUBSCRIPTION
    return config


@dataclass(frozen=True)
class Leftovers:
    """What exists that the stack's state does not hold, and what the state holds twice."""

    kubernetes: list[str]
    """`<kind>/<namespace>/<name>` of Services and Secrets with this stack's mark that no state entry holds."""
    rules: list[str]
    """NSG rule names in the stand-in that no state entry holds."""
    pangolin: list[str]
    """The Pangolin audit's orphans, twins and ports bound twice (as text)."""
    pending: int

    @property
    def clean(self) -> bool:
        return not (self.kubernetes or self.rules or self.pangolin or self.pending)


def leftovers(
    stack: auto.Stack, emulator: EmulatorHandle, kube: ControlPlane, namespace: str, azure: FakeAzure
) -> Leftovers:
    resources = (stack.export_stack().deployment or {}).get("resources", [])
    held = {(r["type"], str(r.get("id"))) for r in resources if r.get("id")}
    mark = stack_mark(stack.workspace.project_settings().name, stack.name)
    live: list[str] = []
    with kube.client() as api:
        for kind, plural in ((SERVICE_TYPE, "services"), (SECRET_TYPE, "secrets")):
            for item in api.get(f"/api/v1/namespaces/{namespace}/{plural}").raise_for_status().json()["items"]:
                meta = item["metadata"]
                if (meta.get("annotations") or {}).get(STACK_MARK) == mark and (
                    kind,
                    f"{namespace}/{meta['name']}",
                ) not in held:
                    live.append(f"{plural}/{namespace}/{meta['name']}")
    with azure.lock:
        rule_ids = list(azure.objects)
    pangolin = audit(emulator, stack, [])
    return Leftovers(
        kubernetes=sorted(live),
        rules=sorted(i.rsplit("/", 1)[1] for i in rule_ids if (NSG_RULE_TYPE, i) not in held),
        pangolin=[f"orphans {pangolin.orphans}"] * bool(pangolin.orphans)
        + [f"twins {pangolin.twins}"] * bool(pangolin.twins)
        + [f"bound twice {pangolin.doubly_bound}"] * bool(pangolin.doubly_bound),
        pending=pangolin.pending,
    )


def pending_urns(stack: auto.Stack) -> list[str]:
    deployment = stack.export_stack().deployment or {}
    return [str(op["resource"]["urn"]) for op in deployment.get("pending_operations") or []]
