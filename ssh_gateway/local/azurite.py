"""Azurite, Microsoft's Azure Storage emulator, as a real `azblob://` state backend on loopback.

`azurite-blob` (npm `azurite`, installed and cached by `scripts/bootstrap azurite`, found through
.toolchain.env) serves the Blob API on 127.0.0.1 with a data directory of its own. It knows one account,
`devstoreaccount1`, whose key Microsoft publishes for the emulator; the pulumi CLI reaches it through gocloud's
azureblob driver with `azblob://<container>?localemu=true&domain=127.0.0.1:<port>&protocol=http` and that
account and key in `AZURE_STORAGE_ACCOUNT` / `AZURE_STORAGE_KEY` (what a team sets for a real storage account,
docs/shared-backends.md). The container must exist before `pulumi login`; `start_azurite` creates it.

The tests (`running_azurite`, a context manager) and `ssh-gateway local-backend` (this module's `main`) share
`start_azurite` and `stop_azurite`; both stop the process by its own pid.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from ssh_gateway.plumbing.process import ManagedProcess, Probe, ProcessError, ProcessSpec, process_alive, stop_pid
from ssh_gateway.plumbing.toolchain import REPO, ToolchainMissing, toolchain_binary

if TYPE_CHECKING:
    from azure.storage.blob import ContainerClient

__all__ = [
    "Azurite",
    "AzuriteError",
    "run",
    "running_azurite",
    "start_azurite",
    "stop_azurite",
]

ACCOUNT: Final = "devstoreaccount1"
"""The emulator's one account (Azurite's default, the same in every installation)."""
ACCOUNT_KEY: Final = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
"""Its key, published by Microsoft for the emulator only (it opens nothing anywhere else)."""
CONTAINER: Final = "pulumi-state"


class AzuriteError(ProcessError):
    """azurite-blob did not start, or its container could not be made (the message carries its log's tail)."""


@dataclass(frozen=True, kw_only=True)
class Azurite:
    """A running azurite-blob with its container."""

    root: Path
    """Its data directory (`data/`) and log (`azurite.log`)."""
    port: int
    """The Blob API's port on 127.0.0.1."""
    container: str
    """The container the stacks live in."""
    pid: int
    """azurite-blob's process id (node's: the script execs it)."""
    startup_seconds: float
    """From launching it until the container existed."""
    process: ManagedProcess | None = field(default=None, repr=False, compare=False)
    """The process when this process started it (its handle kept so it is not reaped behind our back)."""

    @property
    def blob_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    @property
    def backend_url(self) -> str:
        """What `pulumi login` takes (and PULUMI_BACKEND_URL holds): the container on the emulator."""
        return f"azblob://{self.container}?localemu=true&domain=127.0.0.1:{self.port}&protocol=http"

    def env(self) -> dict[str, str]:
        """The variables that point the pulumi CLI, and this project's tools with `--ambient`, at the backend."""
        return {
            "AZURE_STORAGE_ACCOUNT": ACCOUNT,
            "AZURE_STORAGE_KEY": ACCOUNT_KEY,
            "PULUMI_BACKEND_URL": self.backend_url,
        }

    def container_client(self) -> ContainerClient:
        from azure.storage.blob import ContainerClient

        return ContainerClient(self.blob_endpoint, self.container, credential=_credential())

    def to_json(self) -> str:
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "process"}
        return json.dumps({k: str(v) if isinstance(v, Path) else v for k, v in values.items()}, indent=2)

    @classmethod
    def from_json(cls, text: str) -> Azurite:
        values: dict[str, Any] = json.loads(text)
        return cls(**{**values, "root": Path(values["root"])})


def start_azurite(
    root: Path,
    *,
    port: int | None = None,
    container: str = CONTAINER,
    detach: bool = False,
    timeout: float = 120.0,
) -> Azurite:
    """Starts azurite-blob on 127.0.0.1 (on a free port it binds itself by default) with its data under `root`,
    creates `container` and returns once it exists.

    `detach` puts the process in a session of its own, so it outlives the caller (`ssh-gateway local-backend`);
    otherwise it dies with the caller, even by SIGKILL. On any failure it is stopped again. Raises
    `ToolchainMissing` when the bootstrap has not installed it, `AzuriteError` when it does not come up.
    """
    binary = toolchain_binary("SSH_GATEWAY_AZURITE_BLOB")
    root.mkdir(parents=True, exist_ok=True)
    log = root / "azurite.log"
    offset = log.stat().st_size if log.exists() else 0  # a restarted local backend appends to its log
    args = [
        "--blobHost=127.0.0.1",
        # 0: azurite binds a free port and says which (`_listening_port`); a port picked here and bound there
        # could be taken by another process in between.
        f"--blobPort={port or 0}",
        f"--location={root / 'data'}",
        # Azurite rejects API versions newer than it knows; the CLI's Go SDK and the Python SDK move faster.
        "--skipApiVersionCheck",
        # Ignore headers and parameters it does not implement instead of failing the request.
        "--loose",
        # It would otherwise send usage data off the machine.
        "--disableTelemetry",
    ]
    # The script execs node, so the pid is node's.
    spec = ProcessSpec(name="azurite-blob", argv=(str(binary), *args), log=log, error=AzuriteError)
    process = ManagedProcess(spec)
    started = time.monotonic()
    pid = process.start(ready=_container_created(log, offset, container), timeout=timeout, detach=detach)
    bound = _listening_port(log, offset)
    if bound is None:  # the probe held only once it was there
        raise AzuriteError(f"azurite-blob: no 'successfully listens on' line in {log}")
    return Azurite(
        root=root,
        port=bound,
        container=container,
        pid=pid,
        startup_seconds=time.monotonic() - started,
        process=process,
    )


def stop_azurite(azurite: Azurite, *, remove_data: bool = False) -> None:
    """Stops azurite-blob by its pid (SIGTERM, then SIGKILL after 10 s); `remove_data` deletes its blobs."""
    stop_pid(azurite.pid, name="azurite-blob")
    if remove_data:
        shutil.rmtree(azurite.root / "data", ignore_errors=True)


def azurite_running(azurite: Azurite) -> bool:
    return process_alive(azurite.pid)


@contextmanager
def running_azurite(root: Path, *, container: str = CONTAINER) -> Iterator[Azurite]:
    """An Azurite with `container` for the duration of the block; its data is removed afterwards."""
    azurite = start_azurite(root, container=container)
    try:
        yield azurite
    finally:
        stop_azurite(azurite, remove_data=True)


# --- the container --------------------------------------------------------------------------------------------


def _credential() -> dict[str, str]:
    return {"account_name": ACCOUNT, "account_key": ACCOUNT_KEY}


def _container_client(port: int, container: str) -> ContainerClient:
    from azure.storage.blob import ContainerClient

    return ContainerClient(
        f"http://127.0.0.1:{port}/{ACCOUNT}",
        container,
        credential=_credential(),
        retry_total=0,  # the readiness poll is the retry: a refused connection only means "not listening yet"
        connection_timeout=2,
        read_timeout=10,
    )


def _listening_port(log: Path, offset: int) -> int | None:
    """The port azurite-blob says it listens on, in what it logged after `offset`; None before it has."""
    try:
        with log.open("rb") as logged:
            logged.seek(offset)
            text = logged.read().decode(errors="replace")
    except OSError:
        return None
    found = re.search(r"successfully listens on https?://127\.0\.0\.1:(\d+)", text)
    return int(found.group(1)) if found else None


def _container_created(log: Path, offset: int, container: str) -> Probe:
    """Ready once azurite-blob listens (its log says where) and the container exists there: created here, or kept
    from before (a restarted local backend)."""
    from azure.core.exceptions import ResourceExistsError, ServiceRequestError

    def look() -> str | None:
        port = _listening_port(log, offset)
        if port is None:
            return f"no 'successfully listens on' line in {log} yet"
        with _container_client(port, container) as client:
            try:
                client.create_container()
            except ResourceExistsError:
                pass
            except ServiceRequestError as exc:  # not listening yet
                return str(exc).splitlines()[0]
        return None

    return Probe(f"create container {container}", look)


# --- ssh-gateway local-backend ----------------------------------------------------------------------------------

BACKEND_ROOT = REPO / ".pulumi-state" / "local-backend"
BACKEND_STATE = BACKEND_ROOT / "state.json"
BACKEND_PORT = 10000
"""Azurite's own default Blob port, kept fixed so the local backend's URL never changes across restarts."""


def _local() -> Azurite | None:
    return Azurite.from_json(BACKEND_STATE.read_text()) if BACKEND_STATE.exists() else None


def _how_to_use(azurite: Azurite) -> str:
    exports = "\n".join(f"export {key}='{value}'" for key, value in azurite.env().items())
    return "\n".join(
        [
            f"azurite-blob: {azurite.blob_endpoint}  (pid {azurite.pid}; container {azurite.container})",
            f"data and log: {azurite.root}/data, {azurite.root}/azurite.log",
            "Use it (the emulator's published dev account; the pinned pulumi and the tools with --ambient):",
            exports,
        ]
    )


def _start() -> int:
    azurite = _local()
    if azurite is not None and azurite_running(azurite):
        print(f"already running\n{_how_to_use(azurite)}")
        return 0
    try:
        azurite = start_azurite(BACKEND_ROOT, port=BACKEND_PORT, detach=True)
    except (ToolchainMissing, AzuriteError) as exc:
        print(f"local-backend: {exc}", file=sys.stderr)
        return 1
    BACKEND_STATE.write_text(azurite.to_json())
    print(f"started in {azurite.startup_seconds:.1f}s\n{_how_to_use(azurite)}")
    return 0


def _stop() -> int:
    azurite = _local()
    if azurite is None:
        print("not running (no state file)")
        return 0
    stop_azurite(azurite)  # keeps the data: a restart finds the stacks again
    BACKEND_STATE.unlink()
    print(f"stopped azurite-blob (pid {azurite.pid}); data kept in {azurite.root / 'data'}")
    return 0


def _status() -> int:
    azurite = _local()
    if azurite is None or not azurite_running(azurite):
        print("not running: ssh-gateway local-backend start")
        return 3
    from azure.core.exceptions import AzureError

    try:
        with azurite.container_client() as client:
            ready = client.exists()
    except AzureError:
        ready = False
    print(f"running, {'ready' if ready else 'NOT ready (no container)'}\n{_how_to_use(azurite)}")
    return 0 if ready else 1


def run(action: Literal["start", "stop", "status"]) -> int:
    """`ssh-gateway local-backend ACTION`: starts, stops or reports the local Azure Blob backend; its exit code."""
    return {"start": _start, "stop": _stop, "status": _status}[action]()
