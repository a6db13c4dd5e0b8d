"""One managed process of the local rig: started, polled until ready, stopped (SIGTERM, then SIGKILL), its log
quoted in errors, and found again through a pid file by a later process when it was left running (detached).

    spec = ProcessSpec(name="etcd", argv=(str(etcd), ...), log=root / "etcd.log")
    with ManagedProcess(spec) as etcd:
        etcd.start(ready=http_ready(f"{client_url}/health"))

Every process of the rig (etcd, kube-apiserver, Envoy, Traefik, istiod, sshd, Azurite, the Pangolin emulator)
is one of these; a failure to come up is a `ProcessError` (or a piece's subclass of it) that names the process
and carries its log's tail.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

__all__ = [
    "ManagedProcess",
    "PidFile",
    "Probe",
    "ProcessError",
    "ProcessSpec",
    "http_ready",
    "log_excerpt",
    "path_ready",
    "process_alive",
    "stop_pid",
    "tcp_ready",
]

_POLL = 0.1
"""Seconds between two readiness checks, and between two looks at a stopping process (halved)."""
_KILL_WAIT = 5.0
"""Seconds a SIGKILLed process gets to disappear before it counts as unkillable."""


class ProcessError(RuntimeError):
    """A process did not start, exited while starting, did not become ready in time or survived SIGKILL; the
    message names it and carries its log's tail. The rig's pieces raise subclasses (`ProcessSpec.error`)."""


def process_alive(pid: int) -> bool:
    """Whether `pid` runs. Our own exited child is reaped here (a zombie would look alive); a zombie whose
    parent never reaps it (a daemon under an init that does not, in a container) counts as exited."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return False
    except ChildProcessError:
        pass  # not our child (found through a pid file or a state file): ask the kernel
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, but someone else's
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def stop_pid(pid: int, grace: float = 10.0, *, name: str = "process") -> bool:
    """SIGTERM `pid`, SIGKILL it after `grace` seconds; True if it was running. For a process known only by
    its pid (a state file); `ManagedProcess.stop` does the same for one it holds."""
    return _stop(pid, lambda: process_alive(pid), grace, name)


def _stop(pid: int, alive: Callable[[], bool], grace: float, name: str) -> bool:
    if not alive():
        return False
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, _KILL_WAIT)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not alive():
                return True
            time.sleep(_POLL / 2)
    raise ProcessError(f"{name} (pid {pid}) survived SIGKILL")


def _cmdline(pid: int) -> str | None:
    """The process's command line where /proc exists (Linux), else None (unknown)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


@dataclass(frozen=True)
class PidFile:
    """A pid file whose process is ours only while its command line still contains `marker` (a path of ours in
    its argv): a stale file whose pid now runs another program is never mistaken for (or killed as) ours."""

    path: Path
    marker: str

    def running_pid(self) -> int | None:
        try:
            pid = int(self.path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        if not process_alive(pid):
            return None
        cmdline = _cmdline(pid)
        if cmdline is not None and self.marker not in cmdline:
            return None
        return pid

    def write(self, pid: int) -> None:
        self.path.write_text(f"{pid}\n")

    def terminate(self, grace: float = 10.0) -> bool:
        """Stops the process (SIGTERM, SIGKILL after `grace`) and drops the file; True if it was running."""
        pid = self.running_pid()
        self.path.unlink(missing_ok=True)
        return pid is not None and stop_pid(pid, grace, name=f"the process of {self.path}")


def log_excerpt(log: Path, keep: Callable[[str], bool] | None, lines: int) -> str:
    """The log's last `lines` lines that `keep` keeps (or, if none, its last lines), indented under a header
    line, for an exception's text; "" when there are none."""
    try:
        logged = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    kept = [line for line in logged if keep(line)][-lines:] if keep else []
    tail = kept or logged[-lines:]
    return f"\n  last lines of {log}:\n    " + "\n    ".join(tail) if tail else ""


@dataclass(frozen=True, kw_only=True)
class ProcessSpec:
    """What to run and how: everything `ManagedProcess` needs, decided before it starts."""

    name: str
    """For messages, e.g. "kube-apiserver"."""
    argv: tuple[str, ...]
    """The command, its binary by absolute path."""
    log: Path
    """Its stdout and stderr, appended."""
    env: Mapping[str, str] | None = None
    """Its whole environment; None inherits ours."""
    cwd: Path | None = None
    pid_file: PidFile | None = None
    """Written on start, so a later process finds it again (`ManagedProcess.found`) and stops it."""
    stop_grace: float = 10.0
    """Seconds between SIGTERM and SIGKILL."""
    death_signal: signal.Signals | None = signal.SIGKILL
    """Sent to it when the process that started it (not detached) dies, even by SIGKILL (a killed pytest) when
    no finalizer runs; None: none."""
    own_log: Path | None = None
    """Where it writes its own log when told to (Envoy's --log-path, Traefik's log.filePath): what errors
    quote; None: `log`."""
    problems: Callable[[str], bool] | None = None
    """The log lines errors quote first (its warnings and errors); None, or none of them: the last lines."""
    error: type[ProcessError] = ProcessError
    """What `start` raises: a piece's own subclass, so its callers catch one type."""


class ManagedProcess:
    """One process run from a `ProcessSpec`; as a context manager, stopped on exit."""

    def __init__(self, spec: ProcessSpec) -> None:
        self.spec = spec
        self._popen: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None

    @classmethod
    def found(cls, spec: ProcessSpec) -> ManagedProcess | None:
        """The process an earlier (detached) start of `spec` left running, through its pid file; else None."""
        pid = spec.pid_file.running_pid() if spec.pid_file else None
        if pid is None:
            return None
        process = cls(spec)
        process._pid = pid
        return process

    @property
    def pid(self) -> int | None:
        """The pid it was started (or found) with; None before."""
        return self._popen.pid if self._popen is not None else self._pid

    def running(self) -> bool:
        if self._popen is not None:
            return self._popen.poll() is None  # reaps it: an exited child is no zombie of ours
        return self._pid is not None and process_alive(self._pid)

    def start(
        self,
        *,
        ready: Callable[[], bool] | None = None,
        timeout: float = 60.0,
        detach: bool = False,
        needs: Sequence[ManagedProcess] = (),
    ) -> int:
        """Launches it and returns its pid once `ready()` holds (at once without `ready`).

        `detach`: a session of its own and no death signal, so it outlives us (`scripts/demo --keep`, scripts/
        local-cluster). Raises `spec.error` with the log's tail, the process stopped again, when it exits
        first, when one of the processes it `needs` (kube-apiserver needs etcd) exits meanwhile (their error,
        their log), or when `ready()` does not hold within `timeout` seconds.
        """
        spec = self.spec
        argv = list(spec.argv)
        setpriv = shutil.which("setpriv")  # util-linux; it execs the binary, so the pid stays the binary's
        if not detach and spec.death_signal is not None and setpriv:
            # The signal comes when the thread that started it ends: start rig processes from a thread that lives
            # as long as they should.
            argv = [setpriv, "--pdeathsig", spec.death_signal.name.removeprefix("SIG"), "--", *argv]
        spec.log.parent.mkdir(parents=True, exist_ok=True)
        with spec.log.open("ab") as out:
            self._popen = subprocess.Popen(  # noqa: S603 - argv built by the rig from its own binaries
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=None if spec.env is None else dict(spec.env),
                cwd=spec.cwd,
                start_new_session=detach,
            )
        self._pid = None
        if spec.pid_file is not None:
            spec.pid_file.write(self._popen.pid)
        if ready is not None:
            try:
                self._wait(ready, time.monotonic() + timeout, timeout, needs)
            except BaseException:
                self.stop()
                raise
        return self._popen.pid

    def _wait(
        self, ready: Callable[[], bool], deadline: float, timeout: float, needs: Sequence[ManagedProcess]
    ) -> None:
        while True:
            for process in (self, *needs):
                process.check()
            if ready():
                return
            if time.monotonic() >= deadline:
                seen = f" ({ready})" if isinstance(ready, Probe) else ""
                raise self.spec.error(f"{self.spec.name} was not ready within {timeout:g}s{seen}{self.log_tail()}")
            time.sleep(_POLL)

    def check(self) -> None:
        """Raises `spec.error` with the log's tail if the process has exited (e.g. a dependency's, from the
        readiness check of the process that needs it)."""
        if self._popen is not None and self._popen.poll() is not None:
            raise self.spec.error(f"{self.spec.name} exited with {self._popen.returncode}{self.log_tail()}")
        if self._popen is None and not self.running():
            raise self.spec.error(f"{self.spec.name} is not running{self.log_tail()}")

    def stop(self, grace: float | None = None) -> bool:
        """SIGTERM, then SIGKILL after `grace` (default `spec.stop_grace`) seconds; the pid file is dropped.
        Not running itself, it stops the process its pid file names (one a detached start left). True if one
        was running."""
        grace = self.spec.stop_grace if grace is None else grace
        pid = self.pid
        if pid is None or not self.running():
            return self.spec.pid_file is not None and self.spec.pid_file.terminate(grace)
        if self.spec.pid_file is not None:
            self.spec.pid_file.path.unlink(missing_ok=True)
        return _stop(pid, self.running, grace, self.spec.name)

    def log_tail(self, lines: int = 30, keep: Callable[[str], bool] | None = None) -> str:
        """The log's last `lines` lines `keep` (default `spec.problems`) keeps, or else its last lines, under a
        header line (for an exception's text); "" for an empty log."""
        return log_excerpt(self.spec.own_log or self.spec.log, keep or self.spec.problems, lines)

    def __enter__(self) -> ManagedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- readiness checks ------------------------------------------------------------------------------------------


class Probe:
    """A readiness check that keeps what it saw last, which `ManagedProcess.start` quotes when it never holds.

    `look` returns None when ready, else what it saw instead (a status line, a refused connection)."""

    def __init__(self, what: str, look: Callable[[], str | None]) -> None:
        self.what = what
        self.last = "not checked yet"
        self._look = look

    def __call__(self) -> bool:
        seen = self._look()
        if seen is not None:
            self.last = seen
        return seen is None

    def __str__(self) -> str:
        return f"{self.what}: {self.last}"


def http_ready(url: str, *, verify: ssl.SSLContext | bool = True, status: int = 200) -> Probe:
    """Ready when GET `url` answers `status`."""
    # One context for every poll: httpx would load the CA bundle again on each call.
    context = ssl.create_default_context() if verify is True else verify

    def look() -> str | None:
        try:
            response = httpx.get(url, verify=context, timeout=2.0)
        except httpx.HTTPError as exc:
            return repr(exc)
        return None if response.status_code == status else f"{response.status_code} {response.text[:200]}"

    return Probe(f"GET {url}", look)


def tcp_ready(host: str, port: int) -> Probe:
    """Ready when `host:port` accepts a TCP connection."""

    def look() -> str | None:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return None
        except OSError as exc:
            return str(exc)

    return Probe(f"{host}:{port} accepting", look)


def path_ready(path: Path) -> Probe:
    """Ready when `path` (a file, a socket) exists."""
    return Probe(f"{path} exists", lambda: None if path.exists() else "missing")
