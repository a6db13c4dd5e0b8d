"""A stack with connect-mode instances through the real CLI, against the real kube-apiserver with Istio's CRDs.

1. The EnvoyFilters the stack creates are read back from the API server: exactly the core's manifests (no
   casing translation on the way), accepted by Istio's own validation (`istio-envoyfilter validate`), applied
   by Istio's patch code to a gateway as istiod builds it, and the result accepted by `envoy --mode validate`.
   Switching an instance from port to connect updates its Service in place (same uid); destroy removes all.
2. The data path of such a stack: real `ssh` with the generated ssh config block (ProxyCommand proxytunnel) and
   only the stack's CA line -> the emulator's data plane on the CONNECT port (the stack's one Pangolin resource)
   -> a real Envoy configured like an Istio gateway, with the filters read back from the API server -> a real
   sshd serving the host key and certificate of the Secret read back from the API server.
"""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from pangolin_emulator.harness import EmulatorHandle, running_emulator
from ssh_gateway.core.connect import (
    ConnectGateway,
    ConnectInstance,
    GatewayServer,
    connect_cluster,
    gateway_connect_filter,
    instance_route_filter,
    istio_gateway,
    namespace_hosts,
)
from ssh_gateway.local.control_plane import ControlPlane
from ssh_gateway.local.envoy import (
    EnvoyGateway,
    apply_istio_patches,
    gateway_listener,
    gateway_route_configuration,
    istio_helper,
)
from ssh_gateway.local.sshd import ClientKey, ensure_client_keypair, login_user
from ssh_gateway.local.sshd_identity import IdentitySshd, mount_secret
from ssh_gateway.ops.doctor import diagnose, endpoints_from_outputs
from ssh_gateway.ops.shared.automation import open_stack, remove_stack
from ssh_gateway.plumbing.loopback import free_port

from .conftest import StackFactory, stack_config
from .envoy_validate import envoy_validate

pytestmark = pytest.mark.integration

SELECTOR = {"istio": "ingressgateway"}
FILTERS = "/apis/networking.istio.io/v1alpha3/namespaces/{namespace}/envoyfilters"
GATEWAYS = "/apis/networking.istio.io/v1/namespaces/{namespace}/gateways"


def istio_objects(kube: ControlPlane, path: str, namespace: str) -> dict[str, dict[str, Any]]:
    with kube.client() as api:
        response = api.get(path.format(namespace=namespace))
    response.raise_for_status()
    return {item["metadata"]["name"]: item for item in response.json()["items"]}


def envoy_filters(kube: ControlPlane, namespace: str) -> dict[str, dict[str, Any]]:
    return istio_objects(kube, FILTERS, namespace)


def services(kube: ControlPlane, namespace: str) -> dict[str, dict[str, Any]]:
    with kube.client() as api:
        response = api.get(f"/api/v1/namespaces/{namespace}/services")
    response.raise_for_status()
    return {item["metadata"]["name"]: item for item in response.json()["items"]}


def kube_config(kube: ControlPlane, namespace: str) -> dict[str, Any]:
    return {"namespace": namespace, "kubeconfig": str(kube.kubeconfig)}


def port_outside(excluded: range) -> int:
    while (port := free_port()) in excluded:
        pass
    return port


def validate(filters: list[dict[str, Any]], path: Path) -> subprocess.CompletedProcess[str]:
    path.write_text("\n".join(json.dumps(f) for f in filters) + "\n")
    argv = [str(istio_helper()), "validate", str(path)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_envoyfilters_on_a_real_api_server(
    kube: ControlPlane,
    istio_crds: list[str],
    kube_namespace: str,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    tmp_path: Path,
) -> None:
    assert "envoyfilters.networking.istio.io" in istio_crds
    ns, gateway_ns = kube_namespace, f"gw-{uuid.uuid4().hex[:6]}"
    kube.create_namespace(gateway_ns)
    connect = {
        "gateway": {"namespace": gateway_ns, "selector": SELECTOR, "listenerPort": 8080, "createGateway": True},
        "public": {"via": "pangolin", "port": 40443},
    }
    instances: list[dict[str, Any]] = [
        {"name": "gpu-p", "target": "clusterIp"},
        {"name": "gpu-c1", "routing": "connect"},
        {"name": "gpu-c2", "routing": "connect", "podPort": 2222},
    ]
    config = stack_config(emulator, instances, kubernetes=kube_config(kube, ns), connect=connect)
    stack = make_stack(config)
    outputs = {k: v.value for k, v in stack.up().outputs.items()}
    assert {name: ep["routing"] for name, ep in outputs["endpoints"].items()} == {
        "gpu-p": "port",
        "gpu-c1": "connect",
        "gpu-c2": "connect",
    }

    # What the API server holds is exactly what the core generates, snake_case Envoy fields and "@type" included.
    live = envoy_filters(kube, gateway_ns)
    server = GatewayServer(port=80, hosts=namespace_hosts(ns))
    gateway = ConnectGateway(SELECTOR, 8080, namespace=gateway_ns, server=server)
    expected = {
        "ssh-gateway-connect": gateway_connect_filter(gateway),
        **{
            f"ssh-{name}.{ns}.connect": instance_route_filter(gateway, ConnectInstance(name, ns))
            for name in ("gpu-c1", "gpu-c2")
        },
    }
    assert sorted(live) == sorted(expected)
    for name, manifest in expected.items():
        assert manifest is not None
        assert live[name]["spec"] == manifest["spec"], name
        assert live[name]["metadata"]["labels"] == manifest["metadata"]["labels"], name

    live_services = services(kube, ns)
    assert sorted(live_services) == ["ssh-gpu-c1", "ssh-gpu-c2", "ssh-gpu-p"]
    c2 = live_services["ssh-gpu-c2"]["spec"]
    assert c2["type"] == "ClusterIP"
    assert [(p["name"], p["port"], p["targetPort"]) for p in c2["ports"]] == [("tcp-ssh", 22, 2222)]

    # The Istio Gateway whose HTTP server on the Service port makes istiod build what the filters patch.
    [live_gateway] = istio_objects(kube, GATEWAYS, gateway_ns).values()
    expected_gateway = istio_gateway(gateway)
    assert expected_gateway is not None
    assert live_gateway["metadata"]["name"] == expected_gateway["metadata"]["name"]
    assert live_gateway["spec"] == expected_gateway["spec"]

    # Istio's own validation, then istiod's patching of a gateway, then Envoy's verdict on the result.
    read_back = [live[name] for name in sorted(live)]
    result = validate([live_gateway, *read_back], tmp_path / "live.json")
    assert result.returncode == 0, result.stderr
    listener, routes = apply_istio_patches(
        read_back,
        listener=gateway_listener(8080, rds_path=tmp_path / "rds" / "routes.json"),
        route_configuration=gateway_route_configuration(8080),
        selector=SELECTOR,
        namespace=gateway_ns,
        workdir=tmp_path / "istio",
    )
    assert listener is not None
    assert [vh["name"] for vh in routes["virtual_hosts"]] == [
        "web.example.com:80",
        f"ssh-gateway.ssh-gpu-c1.{ns}.svc.cluster.local",
        f"ssh-gateway.ssh-gpu-c2.{ns}.svc.cluster.local",
    ]
    hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
    assert [u["upgrade_type"] for u in hcm["upgrade_configs"]] == ["websocket", "CONNECT"]
    clusters = {connect_cluster(f"ssh-{name}.{ns}.svc.cluster.local"): 22 for name in ("gpu-c1", "gpu-c2")}
    verdict = envoy_validate(listener, routes, clusters, tmp_path / "envoy")
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr

    # One Pangolin resource per port-mode instance, one for the CONNECT entry, to the gateway's Service.
    state = emulator.state()
    resources = {r["name"].rsplit("/", 1)[1]: r for r in state["resources"]}
    assert sorted(resources) == ["@connect", "gpu-p"]
    entry = resources["@connect"]
    assert entry["proxyPort"] == 40443
    [target] = [t for t in state["targets"] if t["resourceId"] == entry["resourceId"]]
    assert (target["ip"], target["port"]) == (f"istio-ingressgateway.{gateway_ns}.svc.cluster.local", 80)
    stack.preview(expect_no_changes=True)

    # gpu-p moves to connect: its Service is the same object, updated (the components alias each other).
    uid = live_services["ssh-gpu-p"]["metadata"]["uid"]
    config["ssh-gateway:instances"] = [{"name": "gpu-p", "routing": "connect"}, *instances[1:]]
    stack = make_stack(config, name=stack.name)
    stack.up()
    moved = services(kube, ns)["ssh-gpu-p"]
    assert moved["metadata"]["uid"] == uid
    assert [p["name"] for p in moved["spec"]["ports"]] == ["tcp-ssh"]
    assert f"ssh-gpu-p.{ns}.connect" in envoy_filters(kube, gateway_ns)
    assert [r["name"].rsplit("/", 1)[1] for r in emulator.state()["resources"]] == ["@connect"]

    stack.destroy()
    assert envoy_filters(kube, gateway_ns) == {} and services(kube, ns) == {}
    assert istio_objects(kube, GATEWAYS, gateway_ns) == {}
    assert emulator.state()["resources"] == []


# --- the data path of a connect stack ---------------------------------------------------------------------


@pytest.fixture
def client_key(tmp_path: Path) -> ClientKey:
    return ensure_client_keypair(tmp_path / "client" / "id_ed25519", "connect-stack-test")


def read_secret(kube: ControlPlane, namespace: str, name: str) -> dict[str, str]:
    with kube.client() as api:
        response = api.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
    response.raise_for_status()
    return {key: base64.b64decode(value).decode() for key, value in response.json()["data"].items()}


def test_ssh_through_pangolin_and_envoy_to_sshd(
    kube: ControlPlane,
    istio_crds: list[str],
    kube_namespace: str,
    client_key: ClientKey,
    tmp_path: Path,
) -> None:
    """As a connect stack has it, on loopback: the gateway Service is Envoy's listener (targetHost 127.0.0.1,
    servicePort = listenerPort), the instance's endpoints are an sshd (the cluster istiod would build for
    ssh-gpu-c:22, pointing at pod IP 127.0.0.1 and the podPort) serving the host key and certificate of the
    Secret the stack created, mounted as a pod mounts it; ssh trusts only the stack's knownHosts (the CA line)."""
    ns, gateway_ns = kube_namespace, f"gw-{uuid.uuid4().hex[:6]}"
    kube.create_namespace(gateway_ns)
    port_range = range(40000, 40020)
    envoy_port, connect_port, pod_port = (port_outside(port_range) for _ in range(3))
    with running_emulator(tmp_path / "pangolin", data_plane=True) as emulator:
        connect = {
            "gateway": {
                "namespace": gateway_ns,
                "selector": SELECTOR,
                "listenerPort": envoy_port,
                "servicePort": envoy_port,
                "targetHost": "127.0.0.1",
            },
            "serverAliveInterval": 15,
            "public": {"via": "pangolin", "port": connect_port, "host": "127.0.0.1"},
        }
        instance = {"name": "gpu-c", "routing": "connect", "podPort": pod_port, "user": login_user()}
        config = stack_config(emulator, [instance], kubernetes=kube_config(kube, ns), connect=connect)
        stack = open_stack(f"it-{uuid.uuid4().hex[:8]}", config, secrets={"pangolin:apiKey": emulator.api_key})
        sshd = IdentitySshd(
            tmp_path / "sshd", mount_dir=tmp_path / "mount", port=pod_port, authorized_keys=[client_key.public_key]
        )
        try:
            outputs = {k: v.value for k, v in stack.up().outputs.items()}
            authority = f"ssh-gpu-c.{ns}.svc.cluster.local"
            assert outputs["endpoints"]["gpu-c"]["authority"] == authority
            mount_secret(sshd.mount_dir, read_secret(kube, ns, "ssh-gpu-c-host-key"))
            sshd.start()
            filters = list(envoy_filters(kube, gateway_ns).values())
            gateway = EnvoyGateway(
                tmp_path / "envoy",
                port=envoy_port,
                clusters={connect_cluster(authority): pod_port},
                filters=filters,
                selector=SELECTOR,
                namespace=gateway_ns,
            )
            with gateway:
                config_file = ssh_files(tmp_path, outputs, client_key)
                block = outputs["sshConfig"]
                assert f"ProxyCommand proxytunnel -q -p 127.0.0.1:{connect_port} -d %h:%p" in block
                assert outputs["knownHosts"].startswith("@cert-authority ") and "\n" not in outputs["knownHosts"]
                result = subprocess.run(
                    ["ssh", "-F", str(config_file), "ssh-gpu-c", "echo $SSH_CONNECTION"],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                )
                assert result.returncode == 0, result.stderr + gateway.log_tail()
                assert int(result.stdout.split()[3]) == pod_port
                # The doctor reads the same outputs: every layer, the CONNECT entry's Pangolin resource included,
                # and the certificate fetched through the tunnel for the HostKeyAlias.
                project = stack.workspace.project_settings().name
                endpoints = endpoints_from_outputs(outputs, project=project, stack=stack.name)
                [report] = diagnose(endpoints, api_url=emulator.url, api_key=emulator.api_key, timeout=10)
                layers = ("dns", "tcp", "connect", "banner", "hostidentity", "pangolin")
                assert {c.layer: c.status for c in report.checks} == {
                    **{layer: "ok" for layer in layers},
                    "hostkey": "skip",
                }, report.checks
                assert "for ssh-gpu-c, signed by the stack's CA" in report.check("hostidentity").detail
        finally:
            sshd.stop()
            try:
                stack.destroy()
            finally:
                remove_stack(stack)


def ssh_files(directory: Path, outputs: dict[str, Any], key: ClientKey) -> Path:
    """The stack's `sshConfig` and `knownHosts` outputs as a user would install them, with the test's key. The
    test's `Host *` comes first: ssh takes the first value it finds, so its known_hosts stands in for the
    blocks' `UserKnownHostsFile ~/.ssh/known_hosts.d/...`."""
    known_hosts = directory / "known_hosts"
    known_hosts.write_text(str(outputs["knownHosts"]) + "\n")
    config = directory / "ssh_config"
    config.write_text(
        "Host *\n"
        + f'    IdentityFile "{key.private}"\n'
        + "    IdentitiesOnly yes\n"
        + "    BatchMode yes\n"
        + "    StrictHostKeyChecking yes\n"
        + f'    UserKnownHostsFile "{known_hosts}"\n'
        + "    GlobalKnownHostsFile /dev/null\n"
        + "    ConnectTimeout 10\n\n"
        + str(outputs["sshConfig"])
    )
    return config
