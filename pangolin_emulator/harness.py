"""The one launcher of the emulator: as a subprocess for a test (`running_emulator`), or detached at a fixed
address for the demo (`DetachedEmulator`).

    with running_emulator(tmp_path) as emu:
        client = httpx.Client(base_url=emu.url, headers={"Authorization": f"Bearer {emu.api_key}"})

State lives in `state_dir/pangolin-emulator.db`; the keys are kept in `state_dir/api-keys.json`
so a later run on the same directory authenticates with the same keys. The process's output (its ready
line, then its log on stderr) goes to `state_dir/pangolin-emulator.stderr.log`.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from pangolin_emulator.faults import DEFAULT_FAULT_KINDS
from pangolin_emulator.keys import generate_api_key
from pangolin_emulator.traefik_config import TRAEFIK_CONFIG_PATH
from ssh_gateway.plumbing.process import ManagedProcess, PidFile, Probe, ProcessError, ProcessSpec, http_ready

__all__ = ["DetachedEmulator", "EmulatorError", "EmulatorHandle", "running_emulator"]

DB_NAME = "pangolin-emulator.db"
KEYS_NAME = "api-keys.json"
STDERR_NAME = "pangolin-emulator.stderr.log"
_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 5.0


@dataclass
class _Launch:
    """How to (re)start the process, and the process itself."""

    state_dir: Path
    version: str
    allow_raw_resources: bool
    data_plane: bool
    port: int
    fault_rate: float
    fault_seed: int
    fault_kinds: tuple[str, ...] = DEFAULT_FAULT_KINDS
    fault_delay: float = 3.0
    host: str = "127.0.0.1"
    seed_org: str | None = None
    internal_port: int = 0
    """The internal API's port (Traefik's HTTP provider); 0: the emulator binds a free one and reports it."""
    process: ManagedProcess | None = None

    def argv(self, api_key: str, root_api_key: str | None = None) -> list[str]:
        argv = [
            sys.executable, "-m", "pangolin_emulator",
            "--host", self.host, "--port", str(self.port), "--version", self.version,
            "--db", str(self.state_dir / DB_NAME),
            "--allow-raw-resources" if self.allow_raw_resources else "--no-allow-raw-resources",
            "--fault-rate", str(self.fault_rate), "--fault-seed", str(self.fault_seed),
            "--fault-kinds", ",".join(self.fault_kinds), "--fault-delay", str(self.fault_delay),
            "--seed-key", api_key, "--internal-port", str(self.internal_port),
        ]  # fmt: skip
        if root_api_key:
            argv += ["--seed-root-key", root_api_key]
        if self.seed_org:
            argv += ["--seed-org", self.seed_org]
        return [*argv, "--data-plane"] if self.data_plane else argv


@dataclass
class EmulatorHandle:
    url: str
    """Base URL of the API, "http://127.0.0.1:PORT/v1"."""
    api_key: str
    """Org key "<id>.<secret>" with every resource/target/site/domain action on `org_id`."""
    root_api_key: str
    """Root key with every action, root-only ones included."""
    org_id: str
    site_id: int
    """The seeded `local` site."""
    domain_id: str
    """The seeded wildcard domain, "domain1"."""
    _launch: _Launch = field(repr=False)

    @property
    def admin_url(self) -> str:
        return self.url.removesuffix("/v1") + "/__emulator"

    @property
    def traefik_config_url(self) -> str:
        """Traefik's HTTP-provider endpoint on the internal API port (no auth, as in Pangolin)."""
        return f"http://{self._launch.host}:{self._launch.internal_port}{TRAEFIK_CONFIG_PATH}"

    def traefik_config(self) -> dict[str, Any]:
        """The dynamic configuration Traefik would read now."""
        response = httpx.get(self.traefik_config_url, timeout=10)
        response.raise_for_status()
        config: dict[str, Any] = response.json()
        return config

    def _admin(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = httpx.request(method, f"{self.admin_url}/{path}", json=body, timeout=10)
        response.raise_for_status()
        return response.json()

    def counters(self) -> dict[str, int]:
        """Calls per route template and method, e.g. {"PUT /v1/org/{orgId}/resource": 2}."""
        calls: dict[str, int] = self._admin("GET", "counters")["calls"]
        return calls

    def fault_counters(self) -> dict[str, int]:
        """How many of those calls got an injected fault, per route template."""
        faults: dict[str, int] = self._admin("GET", "counters")["faults"]
        return faults

    def fault_counters_by_kind(self) -> dict[str, int]:
        """Injected faults per kind over all routes, e.g. {"500": 3, "timeout-after-write": 1}."""
        kinds: dict[str, int] = self._admin("GET", "counters")["fault_kinds"]
        return kinds

    def fault_counters_by_route_and_kind(self) -> dict[str, dict[str, int]]:
        """Injected faults per route template and kind: `["PUT /v1/org/{orgId}/resource"]
        ["timeout-after-write"]` counts creates that were applied but never answered."""
        by_route: dict[str, dict[str, int]] = self._admin("GET", "counters")["route_fault_kinds"]
        return by_route

    def reset_counters(self) -> None:
        self._admin("POST", "counters/reset")

    def doubly_bound_ports(self) -> dict[int, list[int]]:
        return {int(port): ids for port, ids in self._admin("GET", "doubly-bound").items()}

    def doubly_routed_ports(self) -> dict[int, list[int]]:
        """Ports that two enabled TCP resources with an enabled target bind: two Traefik routers on one port."""
        return {int(port): ids for port, ids in self._admin("GET", "doubly-routed").items()}

    def arm_gate(self, route: str, parties: int = 2, timeout: float = 20.0) -> None:
        """Hold calls of `route` (a counter key, e.g. "GET /v1/org/{orgId}/resources") until `parties` of them
        wait, then let them all go on; each is held `timeout` seconds at most (`pangolin_emulator.gate`)."""
        self._admin("POST", "gate", {"route": route, "parties": parties, "timeout": timeout})

    def gate(self) -> dict[str, Any]:
        """`{"armed": {...} | None, "waiting": n, "met": n, "timedOut": n}`."""
        gate: dict[str, Any] = self._admin("GET", "gate")
        return gate

    def disarm_gate(self) -> None:
        self._admin("POST", "gate/open")

    def set_faults(
        self,
        rate: float,
        seed: int = 0,
        kinds: tuple[str, ...] = DEFAULT_FAULT_KINDS,
        delay: float | None = None,
    ) -> None:
        """Change fault injection now; `restart()` keeps the latest settings. `kinds` may name
        "timeout-after-write" (applied, then never answered), which the default leaves out;
        `delay` (seconds the timeout kinds hold a request) stays as it was when None."""
        launch = self._launch
        delay = launch.fault_delay if delay is None else delay
        self._admin("POST", "faults", {"rate": rate, "seed": seed, "kinds": list(kinds), "delay": delay})
        launch.fault_rate, launch.fault_seed, launch.fault_kinds, launch.fault_delay = rate, seed, tuple(kinds), delay

    def state(self) -> dict[str, Any]:
        """{"resources": [...], "targets": [...]} as stored."""
        state: dict[str, Any] = self._admin("GET", "state")
        return state

    def restart(self) -> None:
        """Stop and start again with the same db and the same port."""
        self.stop()
        _start(self._launch, self.api_key, self.root_api_key)

    def stop(self) -> None:
        launch = self._launch
        process, launch.process = launch.process, None
        if process is not None:
            process.stop()


def _ready_line(log: Path, offset: int) -> dict[str, Any] | None:
    """The emulator's ready line (the one JSON object it prints) among what it logged after `offset`."""
    with log.open("rb") as logged:
        logged.seek(offset)
        lines = logged.read().decode(errors="replace").splitlines()
    for line in lines:
        if line.startswith("{"):
            try:
                ready: dict[str, Any] = json.loads(line)
            except ValueError:
                continue  # not all written yet
            return ready
    return None


def _serving(log: Path, offset: int) -> Probe:
    """Ready once the emulator has printed its ready line and its API answers."""

    def look() -> str | None:
        ready = _ready_line(log, offset)
        if ready is None:
            return "no ready line yet"
        api = http_ready(f"{ready['url']}/")
        return None if api() else api.last

    return Probe("serving", look)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env


def _run(launch: _Launch, spec: ProcessSpec, timeout: float, *, detach: bool = False) -> tuple[int, dict[str, Any]]:
    """Start the process and, once it serves, return its pid and ready line; the ports it bound (where `launch` said
    0) go into `launch`, so that `EmulatorHandle.restart` serves at the same address."""
    offset = spec.log.stat().st_size if spec.log.exists() else 0  # a restart appends to the log of the run before
    launch.process = ManagedProcess(spec)
    pid = launch.process.start(ready=_serving(spec.log, offset), timeout=timeout, detach=detach)
    ready = _ready_line(spec.log, offset)
    if ready is None:  # _serving held, so it is there
        raise spec.error(f"{spec.name}: no ready line in {spec.log}")
    launch.port = int(urlsplit(str(ready["url"])).port or 0)
    launch.internal_port = int(urlsplit(str(ready["internal"])).port or 0)
    return pid, ready


def _start(launch: _Launch, api_key: str, root_api_key: str) -> dict[str, Any]:
    """Start the process for a test and return its ready line."""
    argv = tuple(launch.argv(api_key, root_api_key))
    log = launch.state_dir / STDERR_NAME
    # No death signal: as before, a test's emulator is stopped by its context manager.
    spec = ProcessSpec(
        name="pangolin emulator", argv=argv, log=log, env=_env(), stop_grace=_STOP_TIMEOUT, death_signal=None
    )
    return _run(launch, spec, _START_TIMEOUT)[1]


def _keys(state_dir: Path) -> tuple[str, str]:
    """Reuse the keys of an earlier run on this directory, or make new ones."""
    path = state_dir / KEYS_NAME
    if path.exists():
        saved = json.loads(path.read_text())
        return str(saved["api_key"]), str(saved["root_api_key"])
    api_key, root_api_key = generate_api_key(), generate_api_key()
    path.write_text(json.dumps({"api_key": api_key, "root_api_key": root_api_key}))
    path.chmod(0o600)
    return api_key, root_api_key


@contextmanager
def running_emulator(
    state_dir: Path,
    *,
    version: str = "1.22.0",
    allow_raw_resources: bool = True,
    fault_rate: float = 0.0,
    fault_seed: int = 0,
    fault_kinds: tuple[str, ...] = DEFAULT_FAULT_KINDS,
    fault_delay: float = 3.0,
    data_plane: bool = False,
    port: int = 0,
) -> Iterator[EmulatorHandle]:
    """Run `python -m pangolin_emulator` until the block exits, then always stop it."""
    state_dir.mkdir(parents=True, exist_ok=True)
    api_key, root_api_key = _keys(state_dir)
    launch = _Launch(
        state_dir, version, allow_raw_resources, data_plane, port, fault_rate, fault_seed, fault_kinds, fault_delay
    )
    ready = _start(launch, api_key, root_api_key)
    handle = EmulatorHandle(
        url=str(ready["url"]),
        api_key=api_key,
        root_api_key=root_api_key,
        org_id=str(ready["org_id"]),
        site_id=int(ready["site_id"]),
        domain_id=str(ready["domain_id"]),
        _launch=launch,
    )
    try:
        yield handle
    finally:
        handle.stop()


class EmulatorError(ProcessError):
    """The emulator cannot start where the stack expects it; the message says why."""


class DetachedEmulator:
    """The emulator at a fixed `url`, with its internal API for Traefik, outliving its caller (`scripts/demo --keep`).

    Unlike `running_emulator` (a context manager that always stops the process, for tests), it runs in a
    session of its own, is found again and stopped through its pid file, and is seeded with the key the
    stack already holds (`pangolin:apiKey`), so the stack's secret and the emulator agree.
    """

    def __init__(self, directory: Path, *, url: str, org_id: str, api_key: str) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost") or parts.port is None:
            raise EmulatorError(
                f"pangolin.url {url!r} is not a local emulator address (http://127.0.0.1:PORT/v1): "
                "the demo only runs against the emulator"
            )
        self.directory = directory
        self.url = url.rstrip("/")
        self.log_file = directory / "emulator.log"
        self._api_key = api_key
        self._launch = _Launch(
            directory, "1.22.0", True, False, parts.port, 0.0, 0, host=parts.hostname, seed_org=org_id
        )
        self._pid = PidFile(directory / "emulator.pid", marker=str(directory / DB_NAME))
        self._internal_port_file = directory / "internal-port"

    @property
    def traefik_config_url(self) -> str:
        """Traefik's HTTP-provider endpoint on the internal API port the emulator bound at its last `start` (the
        demo starts Traefik after the emulator, so a Traefik polls the port of the emulator that runs)."""
        try:
            port = int(self._internal_port_file.read_text())
        except (OSError, ValueError):
            raise EmulatorError(f"{self._internal_port_file} is missing: start the emulator first") from None
        return f"http://{self._launch.host}:{port}{TRAEFIK_CONFIG_PATH}"

    def healthy(self) -> bool:
        return http_ready(f"{self.url}/")()

    def running_pid(self) -> int | None:
        """The pid of the emulator this directory started, if it still runs."""
        return self._pid.running_pid()

    def start(self, timeout: float = 20.0) -> int:
        """Starts the emulator in its own session (so it survives us with --keep); returns its pid."""
        launch = self._launch
        with socket.socket() as probe:
            if probe.connect_ex((launch.host, launch.port)) == 0:
                raise EmulatorError(
                    f"{launch.host}:{launch.port} is in use by another process, not this demo's emulator: stop it, "
                    "or change pangolin.url in the stack's config"
                )
        self.directory.mkdir(parents=True, exist_ok=True)
        # The emulator binds a free port itself and names it in its ready line: a port picked here and bound there
        # could be taken by another process in between.
        launch.internal_port = 0
        spec = ProcessSpec(
            name="the Pangolin emulator",
            argv=tuple(launch.argv(self._api_key)),
            log=self.log_file,
            env=_env(),
            pid_file=self._pid,
            error=EmulatorError,
        )
        pid, _ = _run(launch, spec, timeout, detach=True)
        self._internal_port_file.write_text(f"{launch.internal_port}\n")
        return pid

    def stop(self, timeout: float = 10.0) -> bool:
        """Stops the emulator this directory started, if it runs; True if it was running."""
        process, self._launch.process = self._launch.process, None
        if process is None:
            return self._pid.terminate(timeout)
        return process.stop(timeout)
