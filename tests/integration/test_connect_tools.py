"""The operator's tools on stacks with connect-mode instances, through the real CLI: the preview summary, the
policy pack and the drift check.

Kubernetes objects are rendered to a directory (kubernetes.renderDir) except for the drift check, which needs a
live object to change: it runs against the real kube-apiserver with Istio's CRDs.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.local.control_plane import ControlPlane
from ssh_gateway.ops.preview.summary import render, summarize
from ssh_gateway.plumbing.toolchain import REPO

from .cli import pulumi, run
from .conftest import StackFactory, stack_config, static_instance
from .probe import make_probe
from .test_policy_pack import PACK, violations

pytestmark = pytest.mark.integration

CONNECT_PORT = 40443


def connect_section(port: int = CONNECT_PORT, **gateway: Any) -> dict[str, Any]:
    selector = {"istio": "ingressgateway"}
    return {"gateway": {"selector": selector, **gateway}, "public": {"via": "pangolin", "port": port}}


def connect_instance(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "routing": "connect", **extra}


def envoy_section(port: int = CONNECT_PORT) -> dict[str, Any]:
    """A standalone Envoy as the gateway (connect.gateway.kind envoy)."""
    gateway = {"kind": "envoy", "listenerPort": 20080, "targetHost": "10.0.0.9"}
    return {"gateway": gateway, "public": {"via": "pangolin", "port": port}}


def static_connect(name: str, port: int = 2225) -> dict[str, Any]:
    return connect_instance(name, target="static", staticHost="127.0.0.1", staticPort=port)


def test_summary_of_an_envoy_connect_preview(emulator: EmulatorHandle, make_stack: StackFactory) -> None:
    """Behind a standalone Envoy there are no EnvoyFilters: a switch of routing is read from the old outputs, and
    a static connect-mode instance's target is its staticHost:staticPort."""
    stack = make_stack(stack_config(emulator, [static_instance("a"), static_connect("c1")], connect=envoy_section()))
    stack.up()
    after = [static_connect("a", 2226), static_instance("c1"), static_connect("c2")]
    make_stack(stack_config(emulator, after, connect=envoy_section()), name=stack.name)

    preview = pulumi("preview", "--json", "--stack", stack.name)
    assert preview.returncode == 0, preview.stderr
    rows = {row.instance: row for row in summarize(json.loads(preview.stdout)).rows}
    assert {name: (row.routing, row.change, row.target) for name, row in rows.items()} == {
        "a": ("connect", "routing changed (port → connect)", "127.0.0.1:2226"),
        "c1": ("port", "routing changed (connect → port)", "127.0.0.1:2222"),
        "c2": ("connect", "added", "127.0.0.1:2225"),
    }
    assert (
        rows["c2"].endpoint == f"CONNECT ssh-c2.default.svc.cluster.local via ssh-connect.example.test:{CONNECT_PORT}"
    )


def test_summary_of_a_connect_preview(emulator: EmulatorHandle, make_stack: StackFactory, tmp_path: Path) -> None:
    before = [static_instance("a"), connect_instance("c1"), connect_instance("c3")]
    config = stack_config(emulator, before, render_dir=tmp_path / "rendered", connect=connect_section())
    stack = make_stack(config)
    stack.up()
    after = [connect_instance("a"), connect_instance("c2"), static_instance("c3")]  # c1 removed
    changed = stack_config(emulator, after, render_dir=tmp_path / "rendered", connect=connect_section(CONNECT_PORT + 1))
    make_stack(changed, name=stack.name)

    preview = pulumi("preview", "--json", "--stack", stack.name)
    assert preview.returncode == 0, preview.stderr
    summary = summarize(json.loads(preview.stdout))
    rows = {row.instance: row for row in summary.rows}
    assert {name: (row.routing, row.change) for name, row in rows.items()} == {
        "a": ("connect", "routing changed (port → connect)"),
        "c1": ("connect", "removed"),
        "c2": ("connect", "added"),
        "c3": ("port", "routing changed (connect → port)"),
        "CONNECT entry": ("connect", "port changed"),
    }
    via = f"via ssh-connect.example.test:{CONNECT_PORT + 1}"
    assert rows["c2"].endpoint == f"CONNECT ssh-c2.gpu-dev.svc.cluster.local {via}"
    assert rows["c2"].target == "ssh-c2.gpu-dev.svc.cluster.local:22"
    assert rows["a"].endpoint == f"CONNECT ssh-a.gpu-dev.svc.cluster.local {via}"
    assert rows["c3"].endpoint.startswith("ssh -p 4000") and rows["c3"].endpoint.endswith("root@ssh-c3.example.test")
    entry = rows["CONNECT entry"]
    assert (entry.old_port, entry.new_port) == (CONNECT_PORT, CONNECT_PORT + 1)
    assert entry.target == "istio-ingressgateway.istio-system.svc.cluster.local:80"

    markdown = render(summary)
    assert "| Instance | Routing | Change | Public endpoint | Target | NSG rules |" in markdown
    assert "Instances: 1 added, 1 routing changed (port → connect), 1 routing changed (connect → port), 1 removed." in (
        markdown
    )
    assert f"| `c2` | connect | added | `CONNECT ssh-c2.gpu-dev.svc.cluster.local {via}` |" in markdown
    assert f"| `CONNECT entry` | connect | port changed ({CONNECT_PORT} → {CONNECT_PORT + 1}) |" in markdown


@pytest.mark.parametrize("kind", ["istio", "envoy"])
def test_a_connect_stack_passes_the_pack_with_its_nsg_rule(
    azure_native: str, emulator: EmulatorHandle, make_stack: StackFactory, tmp_path: Path, kind: str
) -> None:
    firewall = {
        "resourceGroup": "rg-gw",
        "nsgName": "nsg-gw",
        "sourceCidrs": ["203.0.113.0/24"],
        "rules": "perInstance",
    }
    if kind == "envoy":  # static targets behind a standalone Envoy: no Kubernetes object at all
        instances = [static_instance("a"), static_connect("c1"), static_connect("c2", 2226)]
        config = stack_config(emulator, instances, firewall=firewall, connect=envoy_section())
    else:
        instances = [static_instance("a"), connect_instance("c1"), connect_instance("c2")]
        config = stack_config(
            emulator, instances, render_dir=tmp_path / "rendered", firewall=firewall, connect=connect_section()
        )
    stack = make_stack(config)
    preview = pulumi(
        "preview", "--policy-pack", PACK, "--stack", stack.name, env={"PULUMI_DEBUG_PROVIDERS": azure_native}
    )
    assert preview.returncode == 0, preview.stdout + preview.stderr
    assert "ssh-gateway-guardrails@v0.1.0" in preview.stdout and "[mandatory]" not in preview.stdout
    # The CONNECT port's rule is there: one NSG rule for a, one for the entry, none for c1 or c2.
    assert "connect-nsg-rule" in preview.stdout and "a-nsg-rule" in preview.stdout
    assert "c1-nsg-rule" not in preview.stdout


ENTRY_INSIDE = """
class ConnectEntry(pulumi.ComponentResource):
    # Stands in for a broken ConnectEntry: the real type token, its Pangolin resource on a port of the range.
    def __init__(self, name, port):
        super().__init__("ssh-gateway:index:ConnectEntry", name, None, None)
        pangolin(f"{name}-pangolin", port, opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({})


ConnectEntry("connect", 40010)
"""


def test_a_connect_port_inside_the_range_is_refused(tmp_path: Path) -> None:
    probe = make_probe(tmp_path, ENTRY_INSIDE)
    probe.configure({"ssh-gateway:ports": {"range": "40000-40019"}})
    preview = probe.pulumi("preview", "--policy-pack", PACK)
    assert preview.returncode != 0
    assert violations(preview.stdout) == [
        (
            "connect-port-outside-range-and-opened",
            "connect-pangolin",
            "the CONNECT entry's Pangolin resource 'connect-pangolin' has proxyPort 40010, inside the instances' "
            "range 40000-40019 (ssh-gateway:ports.range), where the allocator hands ports to port-mode instances. "
            "Allowed: a port outside the range in ssh-gateway:connect.public.port.",
        )
    ], preview.stdout


def test_the_drift_check_names_an_envoyfilter_deleted_by_hand(
    kube: ControlPlane, istio_crds: list[str], kube_namespace: str, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    gateway_ns = f"gw-{uuid.uuid4().hex[:6]}"
    kube.create_namespace(gateway_ns)
    kubernetes = {"namespace": kube_namespace, "kubeconfig": str(kube.kubeconfig)}
    config = stack_config(
        emulator,
        [connect_instance("gpu-c")],
        kubernetes=kubernetes,
        connect=connect_section(namespace=gateway_ns),
    )
    stack = make_stack(config)
    stack.up()
    drift_check = str(REPO / "scripts" / "drift-check")
    clean = run([drift_check, stack.name])
    assert clean.returncode == 0, clean.stdout + clean.stderr

    name = f"ssh-gpu-c.{kube_namespace}.connect"
    with kube.client() as api:
        api.delete(f"/apis/networking.istio.io/v1alpha3/namespaces/{gateway_ns}/envoyfilters/{name}").raise_for_status()
        gateway_filter = f"/apis/networking.istio.io/v1alpha3/namespaces/{gateway_ns}/envoyfilters/ssh-gateway-connect"
        api.delete(gateway_filter).raise_for_status()
    drifted = run([drift_check, stack.name])
    assert drifted.returncode == 1, drifted.stdout + drifted.stderr
    lines = drifted.stdout.splitlines()
    assert (
        "  - gpu-c-route (kubernetes:networking.istio.io/v1alpha3:EnvoyFilter, instance gpu-c): missing: deleted "
        "outside Pulumi (or never created)"
    ) in lines
    assert (
        "  - connect-gateway-filter (kubernetes:networking.istio.io/v1alpha3:EnvoyFilter, the CONNECT entry): "
        "missing: deleted outside Pulumi (or never created)"
    ) in lines

    stack.up(refresh=True)
    healed = run([drift_check, stack.name])
    assert healed.returncode == 0, healed.stdout + healed.stderr
