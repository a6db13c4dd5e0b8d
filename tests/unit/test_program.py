"""The component wiring with Pulumi mocks: what `build(settings)` registers and exports."""

from __future__ import annotations

import time
from typing import Any
from unittest.mock import ANY

import pulumi
import pytest

from components.program import build
from ssh_gateway.core import host_identity as hi
from ssh_gateway.core.names import (
    ALLOCATION_TYPE,
    HOST_CA_TYPE,
    HOST_KEY_ROOT_TYPE,
    HOST_KEY_TYPE,
    PANGOLIN_TYPE,
    SECRET_TYPE,
    STACK_MARK,
    StackName,
)
from ssh_gateway.core.org import OrgView
from ssh_gateway.core.settings import parse_settings
from ssh_gateway.core.stack_plan import plan_stack
from ssh_gateway.core.targets import IN_PLACE_ANNOTATIONS, SERVICE_AWAIT_ANNOTATIONS
from ssh_gateway.ops.tools.host_identity_files import InstanceRefused, identity_files
from tests.host_keys import checked_secret_files
from tests.mocks import revealed

from .conftest import ASSIGNED_NODE_PORT, RecordingMocks

pytestmark = pytest.mark.unit

NO_ORG = OrgView()
UNIT = StackName("ssh-gateway", "unit")


def settings(**overrides: Any) -> Any:
    raw: dict[str, Any] = {
        "pangolin": {"url": "https://pangolin.example.com/v1", "orgId": "acme", "siteId": 3},
        "ports": {"range": "40000-40099", "reserved": [40000]},
        "gateway": {"hostTemplate": "ssh-{instance}.example.com"},
        "kubernetes": {"namespace": "gpu", "nodeIp": "10.0.0.4"},
        "firewall": {
            "resourceGroup": "rg-gw",
            "nsgName": "nsg-gw",
            "sourceCidrs": ["203.0.113.0/24"],
            "priorityBase": 1000,
            "rules": "perInstance",  # what these tests look at; merged rules: test_program_firewall.py
        },
        "instances": [
            {"name": "gpu-01", "user": "alice"},
            {"name": "gpu-02", "target": "clusterIp", "sourceCidrs": ["198.51.100.7/32", "198.51.100.8/32"]},
            {"name": "vm-01", "target": "static", "staticHost": "10.1.2.3", "staticPort": 2200, "port": 40050},
        ],
    }
    raw.update(overrides)
    return parse_settings(raw)


def run_program(settings: Any, org: OrgView = NO_ORG) -> dict[str, Any]:
    """Runs `build` under the mocks until every registration has settled; returns the resolved outputs."""
    resolved: dict[str, Any] = {}

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def program() -> pulumi.Output[None]:
        outputs = build(plan_stack(settings, org=org, name=UNIT))
        return pulumi.Output.from_input(outputs).apply(resolved.update)

    program()
    return resolved


def test_each_instance_gets_service_pangolin_resource_and_nsg_rule(mocks: RecordingMocks) -> None:
    out = run_program(settings())
    assert out["allocations"] == {"gpu-01": 40001, "gpu-02": 40002, "vm-01": 40050}
    services = {r.inputs["metadata"]["name"]: r.inputs for r in mocks.of_type("kubernetes:core/v1:Service")}
    assert set(services) == {"ssh-gpu-01", "ssh-gpu-02"}  # static targets have no Service
    assert services["ssh-gpu-01"]["spec"]["type"] == "NodePort"
    assert services["ssh-gpu-02"]["spec"]["type"] == "ClusterIP"
    assert services["ssh-gpu-01"]["spec"]["selector"] == {"app": "gpu-01"}
    assert services["ssh-gpu-01"]["metadata"]["namespace"] == "gpu"

    pangolin = {r.inputs["name"]: r.inputs for r in mocks.of_type(PANGOLIN_TYPE)}
    assert (pangolin["ssh-gateway/unit/gpu-01"]["siteId"], pangolin["ssh-gateway/unit/gpu-01"]["orgId"]) == (3, "acme")
    assert (pangolin["ssh-gateway/unit/gpu-01"]["targetIp"], pangolin["ssh-gateway/unit/gpu-01"]["targetPort"]) == (
        "10.0.0.4",
        ASSIGNED_NODE_PORT,
    )
    assert (pangolin["ssh-gateway/unit/gpu-02"]["targetIp"], pangolin["ssh-gateway/unit/gpu-02"]["targetPort"]) == (
        "ssh-gpu-02.gpu.svc.cluster.local",
        22,
    )
    assert (pangolin["ssh-gateway/unit/vm-01"]["targetIp"], pangolin["ssh-gateway/unit/vm-01"]["targetPort"]) == (
        "10.1.2.3",
        2200,
    )
    assert {name: p["proxyPort"] for name, p in pangolin.items()} == {
        "ssh-gateway/unit/gpu-01": 40001,
        "ssh-gateway/unit/gpu-02": 40002,
        "ssh-gateway/unit/vm-01": 40050,
    }

    rules = {r.inputs["securityRuleName"]: r.inputs for r in mocks.of_type("azure-native:network:SecurityRule")}
    assert set(rules) == {"ssh-gateway-gpu-01", "ssh-gateway-gpu-02", "ssh-gateway-vm-01"}
    gpu01 = rules["ssh-gateway-gpu-01"]
    assert gpu01["destinationPortRange"] == "40001"
    assert gpu01["priority"] == 1001  # base + (port - range start): unique and stable per port
    assert gpu01["sourceAddressPrefix"] == "203.0.113.0/24"
    assert (gpu01["direction"], gpu01["access"], gpu01["protocol"]) == ("Inbound", "Allow", "Tcp")
    assert (gpu01["resourceGroupName"], gpu01["networkSecurityGroupName"]) == ("rg-gw", "nsg-gw")
    assert rules["ssh-gateway-gpu-02"]["sourceAddressPrefixes"] == ["198.51.100.7/32", "198.51.100.8/32"]
    assert rules["ssh-gateway-vm-01"]["priority"] == 1050
    assert not mocks.of_type("azure-native:network:NetworkSecurityGroup")  # never inline rules

    assert out["endpoints"]["gpu-01"] == {
        "routing": "port",
        "pangolinResourceId": 7,
        "host": "ssh-gpu-01.example.com",
        "port": 40001,
        "user": "alice",
        "ssh": "ssh -p 40001 alice@ssh-gpu-01.example.com",
    }
    assert "Host ssh-gpu-01\n    HostName ssh-gpu-01.example.com\n    Port 40001\n    User alice\n" in out["sshConfig"]
    assert out["sshConfig"].count("Host ") == 3 and "*" not in out["sshConfig"]
    assert out["gateway"]["gerbilPublishedPorts"] == "40000-40099:40000-40099/tcp"
    assert len(out["gateway"]["traefikEntryPoints"]) == 100
    assert out["gateway"]["traefikEntryPoints"]["tcp-40001"] == {"address": ":40001/tcp"}
    assert len(mocks.of_type(ALLOCATION_TYPE)) == 1


def test_firewall_layer_can_be_off(mocks: RecordingMocks) -> None:
    run_program(settings(firewall={"enabled": False}))
    assert not mocks.of_type("azure-native:network:SecurityRule")
    assert len(mocks.of_type(PANGOLIN_TYPE)) == 3


def test_components_parent_their_children(mocks: RecordingMocks) -> None:
    run_program(settings())
    components = [r for r in mocks.registered if r.typ == "ssh-gateway:index:SshInstance"]
    assert sorted(r.name for r in components) == ["gpu-01", "gpu-02", "vm-01"]
    children = [r for r in mocks.registered if r.name.startswith("gpu-01-")]
    assert sorted(r.name for r in children) == [
        "gpu-01-host-key-secret",
        "gpu-01-nsg-rule",
        "gpu-01-pangolin",
        "gpu-01-service",
    ]


# --- host identity ------------------------------------------------------------------------------


def _state(mocks: RecordingMocks) -> dict[str, Any]:
    """The run's CAs and host-key root as `pulumi stack export --show-secrets` shows them (what the
    `host-identity` command reads)."""
    resources = [
        {"type": r.typ, "urn": f"urn:pulumi:unit::ssh-gateway::{r.typ}::{r.name}", "outputs": kept}
        for r in mocks.registered
        if r.typ in (HOST_CA_TYPE, HOST_KEY_ROOT_TYPE)
        for kept in [mocks.kept[r.name, r.inputs["generation"]]]
    ]
    return {"deployment": {"resources": resources}}


def _from_command(raw: Any, mocks: RecordingMocks, instance: str) -> dict[str, str]:
    """The files `ssh-gateway host-identity` derives for `instance` from this run's settings and state."""
    return identity_files(raw, _state(mocks), instance, project="ssh-gateway", stack="unit", now=int(time.time()))


def _issued(out: dict[str, Any], mocks: RecordingMocks, raw: Any) -> dict[str, hi.HostCertificate]:
    """Each issued instance's certificate (verified against the signing CA), from its Secret or, where no
    Secret serves it, from the `host-identity` command."""
    signer = next(e["publicKey"] for e in out["hostCa"] if e["signing"])
    files = {
        r.inputs["metadata"]["name"].removeprefix("ssh-").removesuffix("-host-key"): revealed(r.inputs["stringData"])
        for r in mocks.of_type(SECRET_TYPE)
    }
    files |= {
        i.name: _from_command(raw, mocks, i.name)
        for i in raw.instances
        if raw.issues_host_key(i) and not raw.delivers_secret(i)
    }
    certificates = {name: f[hi.HOST_CERTIFICATE_FILE] for name, f in files.items()}
    return {
        name: hi.verify_host_certificate(
            c, ca_public_keys=[signer], principal=hi.parse_host_certificate(c).principals[0]
        )
        for name, c in certificates.items()
    }


def test_each_instance_gets_a_certified_key_and_service_targets_a_secret(mocks: RecordingMocks) -> None:
    raw = settings()
    out = run_program(raw)
    (ca,) = mocks.of_type(HOST_CA_TYPE)
    assert (ca.name, ca.inputs["generation"]) == ("host-ca-g1", 1)
    [ca_entry] = out["hostCa"]
    assert ca_entry["generation"] == 1 and ca_entry["signing"] is True
    assert ca_entry["fingerprint"] == hi.fingerprint(ca_entry["publicKey"])
    # One host-key root per stack, and no resource per instance: each key is derived from the root.
    assert [r.name for r in mocks.of_type(HOST_KEY_ROOT_TYPE)] == ["host-key-root"]
    assert not mocks.of_type(HOST_KEY_TYPE)

    issued = _issued(out, mocks, raw)
    assert sorted(issued) == ["gpu-01", "gpu-02", "vm-01"]
    gpu01 = issued["gpu-01"]
    # The public host and the ssh alias; never a port, so a moved port leaves the certificate alone.
    assert gpu01.principals == ("ssh-gpu-01", "ssh-gpu-01.example.com")
    assert gpu01.key_id == "ssh-gateway/unit/gpu-01"
    assert gpu01.valid_before - gpu01.valid_after == 365 * 86_400 + hi.CLOCK_SKEW_SECONDS

    # knownHosts: one CA line for every instance's names on every port.
    assert out["knownHosts"] == (
        f"@cert-authority ssh-*.example.com,[ssh-*.example.com]:* {ca_entry['publicKey']} "
        "ssh-gateway host CA g1 (stack unit)"
    )
    # Service targets: a Secret beside the Service, with the three files sshd reads.
    secrets = {r.inputs["metadata"]["name"]: r for r in mocks.of_type(SECRET_TYPE)}
    assert sorted(secrets) == ["ssh-gpu-01-host-key", "ssh-gpu-02-host-key"]
    secret = secrets["ssh-gpu-01-host-key"]
    assert secret.name == "gpu-01-host-key-secret" and secret.inputs["type"] == "Opaque"
    assert secret.inputs["metadata"]["namespace"] == "gpu"
    assert secret.inputs["metadata"]["annotations"] == {STACK_MARK: ANY, **IN_PLACE_ANNOTATIONS}  # no skip-await
    files = revealed(secret.inputs["stringData"])
    assert sorted(files) == sorted(hi.SECRET_KEYS)
    public = files[hi.HOST_PUBLIC_KEY_FILE].strip()
    assert hi.public_key_of(files[hi.HOST_KEY_FILE]) == public == gpu01.public_key
    assert (
        checked_secret_files(
            private_key=files[hi.HOST_KEY_FILE], public_key=public, certificate=files[hi.HOST_CERTIFICATE_FILE].strip()
        )
        == files
    )
    assert out["hostKeys"]["gpu-01"] == f"ssh-gpu-01.example.com,[ssh-gpu-01.example.com]:* {public}"

    # The static instance: no Secret and no output holds its identity; the `host-identity` command derives it
    # from the state, for the key the stack publishes. For a Secret's instance it derives the Secret's bytes.
    assert "hostIdentities" not in out
    vm = _from_command(raw, mocks, "vm-01")
    public_vm = vm[hi.HOST_PUBLIC_KEY_FILE].strip()
    assert hi.public_key_of(vm[hi.HOST_KEY_FILE]) == public_vm == out["hostKeys"]["vm-01"].split(" ", 1)[1]
    hi.verify_host_certificate(
        vm[hi.HOST_CERTIFICATE_FILE], ca_public_keys=[ca_entry["publicKey"]], principal="ssh-vm-01"
    )
    assert _from_command(raw, mocks, "gpu-01") == files

    block = out["sshConfig"].split("Host ssh-gpu-01\n", 1)[1].split("\n\n", 1)[0]
    assert "    UserKnownHostsFile ~/.ssh/known_hosts.d/ssh-gateway-unit\n    StrictHostKeyChecking yes" in block
    assert "HostKeyAlias" not in out["sshConfig"]  # every instance has a name of its own


def test_a_rerun_derives_the_same_files(mocks: RecordingMocks) -> None:
    # The same stack (its root and CA kept in state) gives byte-identical Secrets: no update on every `up`.
    # By name: the instances register concurrently, so the order of the registrations is not the program's.
    first = run_program(settings())
    first_secrets = {r.name: revealed(r.inputs["stringData"]) for r in mocks.of_type(SECRET_TYPE)}
    mocks.registered.clear()
    again = run_program(settings())
    assert {r.name: revealed(r.inputs["stringData"]) for r in mocks.of_type(SECRET_TYPE)} == first_secrets
    assert len(first_secrets) == 2
    assert again["hostKeys"] == first["hostKeys"]


def test_a_shared_host_name_gets_aliases_and_the_ca_line_covers_them(mocks: RecordingMocks) -> None:
    raw = settings(gateway={"hostTemplate": "gw.example.com"})
    out = run_program(raw)
    patterns = out["knownHosts"].split()[1]
    assert patterns == "gw.example.com,[gw.example.com]:*,ssh-*,[ssh-*]:*"
    assert out["sshConfig"].count("HostKeyAlias ") == 3
    assert "Host ssh-gpu-02\n    HostName gw.example.com\n" in out["sshConfig"]
    assert "    HostKeyAlias ssh-gpu-02\n" in out["sshConfig"]
    # The plain lines are under the alias, which ssh looks the key up by (without a port).
    assert out["hostKeys"]["gpu-02"].startswith("ssh-gpu-02,[ssh-gpu-02]:* ssh-ed25519 ")
    assert _issued(out, mocks, raw)["gpu-02"].principals == ("gw.example.com", "ssh-gpu-02")


def test_a_pinned_host_key_keeps_its_plain_line_and_gets_no_issued_key(mocks: RecordingMocks) -> None:
    pin = hi.generate_key_pair().public_key
    instances = [
        {"name": "gpu-01", "user": "alice"},
        {"name": "vm-01", "target": "static", "staticHost": "10.1.2.3", "staticPort": 2200, "hostKey": pin},
    ]
    raw = settings(instances=instances)
    out = run_program(raw)
    assert sorted(_issued(out, mocks, raw)) == ["gpu-01"]
    ca_line, pinned = out["knownHosts"].splitlines()
    assert ca_line.startswith("@cert-authority ")
    assert pinned == f"ssh-vm-01.example.com,[ssh-vm-01.example.com]:* {pin}"  # every port: survives a move
    assert out["hostKeys"]["vm-01"] == pinned
    with pytest.raises(InstanceRefused, match=r"--instance 'vm-01': stack unit issues it no host key"):
        _from_command(raw, mocks, "vm-01")
    assert out["sshConfig"].count("StrictHostKeyChecking yes") == 2


def test_a_ca_rotation_publishes_both_and_signs_with_the_chosen_one(mocks: RecordingMocks) -> None:
    raw = settings(hostIdentity={"ca": {"generations": [1, 2], "signing": 2}, "validDays": 30})
    out = run_program(raw)
    assert sorted(r.name for r in mocks.of_type(HOST_CA_TYPE)) == ["host-ca-g1", "host-ca-g2"]
    lines = out["knownHosts"].splitlines()
    assert [line.split()[-3] for line in lines] == ["g1", "g2"]
    signer = {e["generation"]: e for e in out["hostCa"]}
    assert (signer[1]["signing"], signer[2]["signing"]) == (False, True)
    for certificate in _issued(out, mocks, raw).values():
        assert certificate.ca_public_key == signer[2]["publicKey"]
        assert certificate.valid_before - certificate.valid_after == 30 * 86_400 + hi.CLOCK_SKEW_SECONDS


def test_rotating_one_instance_bumps_only_its_generation(mocks: RecordingMocks) -> None:
    before = run_program(settings(instances=[{"name": "gpu-01"}, {"name": "gpu-02"}]))["hostKeys"]
    instances = [{"name": "gpu-01"}, {"name": "gpu-02", "hostKeyGeneration": 2}]
    after = run_program(settings(instances=instances))["hostKeys"]
    assert after["gpu-01"] == before["gpu-01"] and after["gpu-02"] != before["gpu-02"]


def test_host_identity_off_issues_nothing(mocks: RecordingMocks) -> None:
    out = run_program(settings(hostIdentity={"enabled": False}))
    assert not mocks.of_type(HOST_CA_TYPE) and not mocks.of_type(HOST_KEY_ROOT_TYPE) and not mocks.of_type(SECRET_TYPE)
    assert (out["knownHosts"], out["hostKeys"], out["hostCa"]) == ("", {}, [])
    # No line vouches for these instances, so their blocks do not ask for strict checking either.
    assert "StrictHostKeyChecking" not in out["sshConfig"]


def test_rendered_manifests_get_no_secret_and_the_command_derives_the_identity(mocks: RecordingMocks) -> None:
    instances = [{"name": "gpu-01", "nodePort": 30022}, {"name": "gpu-02", "target": "clusterIp"}]
    raw_settings = settings(
        instances=instances, kubernetes={"namespace": "gpu", "nodeIp": "10.0.0.4", "renderDir": "/tmp/rendered"}
    )
    out = run_program(raw_settings)
    assert not mocks.of_type(SECRET_TYPE)
    # The command derives their files; with no Secret, a certificate of the stack's CA.
    assert sorted(_issued(out, mocks, raw_settings)) == ["gpu-01", "gpu-02"]
    [warning] = [w for w in raw_settings.warnings() if "renderDir" in w]
    assert "host-key Secrets of gpu-01, gpu-02 are not rendered" in warning


def test_only_the_service_skips_the_readiness_wait(mocks: RecordingMocks) -> None:
    # The Service is published before its pod runs (a Pending GPU pod never holds the up); a Secret has no
    # await logic to skip: it carries the stack's mark and the force of an object updated in place.
    run_program(settings(kubernetes={"namespace": "gpu", "nodeIp": "10.0.0.4"}))
    (service, *_) = mocks.of_type("kubernetes:core/v1:Service")
    assert service.inputs["metadata"]["annotations"].items() >= SERVICE_AWAIT_ANNOTATIONS.items()
    secrets = mocks.of_type(SECRET_TYPE)
    assert secrets
    for secret in secrets:
        assert secret.inputs["metadata"]["annotations"] == {STACK_MARK: ANY, **IN_PLACE_ANNOTATIONS}


def test_config_maps_and_secrets_are_updated_in_place(mocks: RecordingMocks) -> None:
    # The status ConfigMap (tests/unit/test_program_discovery.py checks its force annotation) and the host-key
    # Secrets are never replaced for a change of their data.
    run_program(settings(kubernetes={"namespace": "gpu", "nodeIp": "10.0.0.4"}))
    [provider] = mocks.of_type("pulumi:providers:kubernetes")
    assert provider.inputs["enableConfigMapMutable"] == "true"  # provider inputs are strings
    assert provider.inputs["enableSecretMutable"] == "true"


def test_the_host_key_does_not_depend_on_port_target_or_routing(mocks: RecordingMocks) -> None:
    def key_inputs(**instance: Any) -> str:
        mocks.registered.clear()
        # The key (the stack's root and CA are kept across runs, as in state).
        return str(run_program(settings(instances=[{"name": "gpu-01", **instance}]))["hostKeys"]["gpu-01"]).split()[-1]

    first = key_inputs()
    assert key_inputs(port=40077) == first
    assert key_inputs(target="clusterIp") == first
    assert key_inputs(target="static", staticHost="10.9.9.9", staticPort=22) == first
