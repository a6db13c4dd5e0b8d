"""The managed process of the local rig, with real short-lived Python processes: ready, exited early, not ready in
time, stopped (SIGTERM, SIGKILL after the grace), found again through its pid file, killed with its parent."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ssh_gateway.plumbing.loopback import free_port
from ssh_gateway.plumbing.process import (
    ManagedProcess,
    PidFile,
    ProcessError,
    ProcessSpec,
    http_ready,
    path_ready,
    process_alive,
    tcp_ready,
)

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def python(
    tmp_path: Path,
    code: str,
    *args: str,
    name: str = "sleeper",
    pid_file: PidFile | None = None,
    error: type[ProcessError] = ProcessError,
) -> ProcessSpec:
    """A spec running `code` (its sys.argv[1:] are `args`), logging to tmp_path/<name>.log."""
    argv = (sys.executable, "-c", code, *args)
    return ProcessSpec(name=name, argv=argv, log=tmp_path / f"{name}.log", pid_file=pid_file, error=error)


# Touches argv[1] once up (and, with TERM, when SIGTERM comes, which it then ignores), then sleeps.
SLEEPER = "import sys, time, pathlib; pathlib.Path(sys.argv[1]).touch(); time.sleep(30)"
STUBBORN = (
    "import signal, sys, time, pathlib\n"
    "signal.signal(signal.SIGTERM, lambda *_: pathlib.Path(sys.argv[1] + '.term').touch())\n"
    "pathlib.Path(sys.argv[1]).touch()\n"
    "while True: time.sleep(0.05)\n"
)


def test_start_returns_once_ready_and_stop_ends_it(tmp_path: Path) -> None:
    flag = tmp_path / "up"
    late = "import sys, time, pathlib; time.sleep(0.3); pathlib.Path(sys.argv[1]).touch(); time.sleep(30)"
    with ManagedProcess(python(tmp_path, late, str(flag))) as process:
        process.start(ready=path_ready(flag), timeout=10)
        assert flag.exists()
        assert process.running()
    assert not process.running()
    assert process.pid is not None and not process_alive(process.pid)


def test_an_early_exit_fails_at_once_with_the_name_and_the_log(tmp_path: Path) -> None:
    class PieceError(ProcessError):
        pass

    spec = python(tmp_path, "print('bad flag --nope'); raise SystemExit(3)", name="etcd", error=PieceError)
    started = time.monotonic()
    with pytest.raises(PieceError) as caught:
        ManagedProcess(spec).start(ready=lambda: False, timeout=20)
    assert time.monotonic() - started < 5  # not the timeout
    assert "etcd exited with 3" in str(caught.value)
    assert f"last lines of {spec.log}:\n    bad flag --nope" in str(caught.value)


def test_not_ready_in_time_fails_with_what_it_saw_and_stops_the_process(tmp_path: Path) -> None:
    flag = tmp_path / "up"
    process = ManagedProcess(python(tmp_path, "print('still starting', flush=True); import time; time.sleep(30)"))
    with pytest.raises(ProcessError) as caught:
        process.start(ready=path_ready(flag), timeout=0.5)
    assert f"sleeper was not ready within 0.5s ({flag} exists: missing)" in str(caught.value)
    assert "still starting" in str(caught.value)
    assert not process.running()


def test_stop_sends_sigterm_then_sigkill_after_the_grace(tmp_path: Path) -> None:
    flag = tmp_path / "up"
    process = ManagedProcess(python(tmp_path, STUBBORN, str(flag)))
    process.start(ready=path_ready(flag), timeout=10)
    started = time.monotonic()
    assert process.stop(grace=0.5)
    took = time.monotonic() - started
    assert Path(f"{flag}.term").exists()  # SIGTERM first ...
    assert 0.5 <= took < 3  # ... SIGKILL once the grace is over
    assert not process.running()
    assert not process.stop()


def test_a_detached_process_is_found_again_through_its_pid_file(tmp_path: Path) -> None:
    flag = tmp_path / "up"
    pid_file = PidFile(tmp_path / "sleeper.pid", marker=str(flag))
    spec = python(tmp_path, SLEEPER, str(flag), pid_file=pid_file)
    first = ManagedProcess(spec)
    first.start(ready=path_ready(flag), timeout=10, detach=True)
    try:
        assert os.getsid(first.pid or 0) == first.pid  # a session of its own
        found = ManagedProcess.found(spec)
        assert found is not None and found.pid == first.pid and found.running()
        assert ManagedProcess(spec).stop()  # never started itself: stops what the pid file names
        assert not first.running() and not pid_file.path.exists()
        assert ManagedProcess.found(spec) is None
    finally:
        first.stop()


def test_a_stale_pid_file_is_not_taken_for_ours(tmp_path: Path) -> None:
    pid_file = PidFile(tmp_path / "sleeper.pid", marker=str(tmp_path / "up"))
    spec = python(tmp_path, SLEEPER, str(tmp_path / "up"), pid_file=pid_file)
    pid_file.write(os.getpid())  # alive, but running another program (pytest)
    assert ManagedProcess.found(spec) is None
    assert not ManagedProcess(spec).stop()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    pid_file.write(int(dead.stdout))
    assert ManagedProcess.found(spec) is None


@pytest.mark.parametrize("detach", [False, True], ids=["attached", "detached"])
def test_an_attached_child_dies_with_its_parent_killed_by_sigkill(tmp_path: Path, detach: bool) -> None:
    parent_code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from ssh_gateway.plumbing.process import ManagedProcess, ProcessSpec\n"
        "spec = ProcessSpec(name='child', argv=(sys.executable, '-c', 'import time; time.sleep(30)'),"
        f" log=Path({str(tmp_path / 'child.log')!r}))\n"
        "child = ManagedProcess(spec)\n"
        f"child.start(detach={detach})\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(30)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], cwd=REPO, stdout=subprocess.PIPE)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 1.5
    while process_alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert process_alive(child) is detach
    finally:
        if process_alive(child):
            os.kill(child, signal.SIGKILL)


def test_http_and_tcp_readiness(tmp_path: Path) -> None:
    port = free_port()
    assert not tcp_ready("127.0.0.1", port)()
    argv = ("-m", "http.server", "--bind", "127.0.0.1", str(port), "--directory", str(tmp_path))
    spec = ProcessSpec(name="http.server", argv=(sys.executable, *argv), log=tmp_path / "http.log")
    with ManagedProcess(spec) as server:
        server.start(ready=http_ready(f"http://127.0.0.1:{port}/"), timeout=10)
        assert tcp_ready("127.0.0.1", port)()
        missing = http_ready(f"http://127.0.0.1:{port}/missing")
        assert not missing()
        assert str(missing).startswith(f"GET http://127.0.0.1:{port}/missing: 404 ")
        assert http_ready(f"http://127.0.0.1:{port}/missing", status=404)()
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0


def test_log_tail_quotes_the_kept_lines_else_the_last_ones(tmp_path: Path) -> None:
    process = ManagedProcess(python(tmp_path, "", name="p"))
    assert process.log_tail(3) == ""
    (tmp_path / "p.log").write_text("a\nERR b\nc\nERR d\n")
    log = tmp_path / "p.log"
    assert process.log_tail(1, keep=lambda line: "ERR" in line) == f"\n  last lines of {log}:\n    ERR d"
    assert process.log_tail(2, keep=lambda line: "FTL" in line) == f"\n  last lines of {log}:\n    c\n    ERR d"


def test_a_needed_process_that_exits_fails_the_start_at_once(tmp_path: Path) -> None:
    flag = tmp_path / "up"
    needed = ManagedProcess(python(tmp_path, "import time; time.sleep(0.3); print('etcd: disk full')", name="etcd"))
    needed.start()
    started = time.monotonic()
    with ManagedProcess(python(tmp_path, SLEEPER, str(flag), name="kube-apiserver")) as needing:
        with pytest.raises(ProcessError) as caught:
            needing.start(ready=lambda: False, timeout=20, needs=[needed])
        assert not needing.running()
    assert time.monotonic() - started < 5
    assert "etcd exited with 0" in str(caught.value) and "etcd: disk full" in str(caught.value)
