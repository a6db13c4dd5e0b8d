"""The Pangolin emulator as a detached process with its data plane, for the main job on one machine.

Unlike `pangolin_emulator.harness` (a context manager that always stops the process, for tests), this one
can outlive its caller (`scripts/demo --keep`) and be stopped later from its pid file, and it is seeded with
the key the stack already holds (`pangolin:apiKey`), so the stack's secret and the emulator agree.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from ssh_gateway.ops.toolchain import REPO

from .pidfile import PidFile
from .sshd import wait_for_port

__all__ = ["EmulatorError", "LocalEmulator"]


class EmulatorError(RuntimeError):
    """The emulator cannot start where the stack expects it; the message says why."""


class LocalEmulator:
    """`python -m pangolin_emulator --data-plane` at the stack's `pangolin.url`, with state in `directory`."""

    def __init__(self, directory: Path, *, url: str, org_id: str, api_key: str) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost") or parts.port is None:
            raise EmulatorError(
                f"pangolin.url {url!r} is not a local emulator address (http://127.0.0.1:PORT/v1): "
                "the demo only runs against the emulator"
            )
        self.directory = directory
        self.url = url.rstrip("/")
        self.host = parts.hostname
        self.port = parts.port
        self.org_id = org_id
        self._api_key = api_key
        self.db = directory / "pangolin-emulator.db"
        self.pid_file = directory / "emulator.pid"
        self.log_file = directory / "emulator.log"
        self._pid = PidFile(self.pid_file, marker=str(self.db))
        self._process: subprocess.Popen[bytes] | None = None

    def healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def running_pid(self) -> int | None:
        """The pid of the emulator this directory started, if it still runs."""
        return self._pid.running_pid()

    def start(self, timeout: float = 20.0) -> int:
        """Starts the emulator in its own session (so it survives us with --keep); returns its pid."""
        if wait_for_port(self.host, self.port, 0):
            raise EmulatorError(
                f"{self.host}:{self.port} is in use by another process, not this demo's emulator: stop it, or change "
                "pangolin.url in the stack's config"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
        argv = [
            sys.executable, "-m", "pangolin_emulator",
            "--host", self.host, "--port", str(self.port), "--db", str(self.db),
            "--seed-org", self.org_id, "--seed-key", self._api_key, "--data-plane",
        ]  # fmt: skip
        with self.log_file.open("ab") as log:
            process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True
            )
        self._process = process
        self._pid.write(process.pid)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                break
            if self.healthy():
                return process.pid
            time.sleep(0.1)
        self.stop()
        raise EmulatorError(f"the Pangolin emulator did not come up at {self.url}{self._log_tail()}")

    def stop(self, timeout: float = 10.0) -> bool:
        """Stops the emulator this directory started, if it runs; True if it was running."""
        stopped = self._pid.terminate(timeout)
        process, self._process = self._process, None
        if process is not None:
            process.wait(timeout)  # reap our own child
        return stopped

    def _log_tail(self, lines: int = 15) -> str:
        if not self.log_file.exists():
            return ""
        tail = self.log_file.read_text(errors="replace").splitlines()[-lines:]
        return f"\n  last lines of {self.log_file}:\n    " + "\n    ".join(tail) if tail else ""
