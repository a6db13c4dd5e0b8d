"""What both demos (scripts/demo, main_job.py; scripts/demo-cluster, cluster_demo.py) print and run: each step with
its time, the ssh files a laptop would have (the demo's key and the stack's `knownHosts` as the only known_hosts),
and the real ssh client through the stack's generated block."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ssh_gateway.core.outputs import StackOutputs
from ssh_gateway.local.sshd import ClientKey

__all__ = ["Answer", "say", "ssh_answer", "step", "write_ssh_files"]

_HEARTBEAT = 15.0
_SSH_TIMEOUT = 30.0


def say(line: str = "") -> None:
    print(line, flush=True)


@contextmanager
def step(label: str) -> Iterator[None]:
    """`==> label`, a heartbeat while it runs, and how long it took."""
    say(f"==> {label}")
    started = time.monotonic()
    done = threading.Event()

    def beat() -> None:
        while not done.wait(_HEARTBEAT):
            say(f"    ... {label}: {time.monotonic() - started:.0f}s")

    threading.Thread(target=beat, daemon=True).start()
    try:
        yield
    except BaseException:
        say(f"    failed after {time.monotonic() - started:.1f}s")
        raise
    finally:
        done.set()
    say(f"    done in {time.monotonic() - started:.1f}s")


def write_ssh_files(outputs: StackOutputs, state: Path, keys: ClientKey) -> Path:
    """`ssh_config` = the demo's key and known_hosts, then the program's `sshConfig` output, for `ssh -F`.

    The known_hosts is the stack's `knownHosts` output and nothing else: the CA line (plus a plain line per
    pinned key). The demo's block comes first because ssh takes the first value it finds for an option: it
    stands in for the blocks' `UserKnownHostsFile ~/.ssh/known_hosts.d/...`, so the demo never writes to ~/.ssh.
    """
    known_hosts = state / "known_hosts"
    lines = outputs.known_hosts
    known_hosts.write_text(lines.strip() + "\n" if lines.strip() else "")
    config = state / "ssh_config"
    config.write_text(
        "# Added by the demo: the demo's key, and the stack's knownHosts output as the only known_hosts.\n"
        + "Host *\n"
        + f'    IdentityFile "{keys.private}"\n'
        + "    IdentitiesOnly yes\n"
        + f'    UserKnownHostsFile "{known_hosts}"\n'
        + "    GlobalKnownHostsFile /dev/null\n"
        + "    StrictHostKeyChecking yes\n"
        + "    UpdateHostKeys no\n\n"
        + outputs.ssh_config.rstrip("\n")
        + "\n"
    )
    return config


@dataclass(frozen=True)
class Answer:
    instance: str
    ok: bool
    text: str


def ssh_answer(config: Path, instance: str, alias: str, where: str, *, who: str = "$(id -un)@$(hostname)") -> Answer:
    """The real ssh client, non-interactive, through the generated config's `Host` alias; the remote shell says
    `who` it is (a shell expression)."""
    remote = f'echo "hello from {instance}: {who}, reached through {where}"'
    argv = [
        "ssh", "-F", str(config), "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR",
        alias, remote,
    ]  # fmt: skip
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=_SSH_TIMEOUT, check=False)  # noqa: S603
    except subprocess.TimeoutExpired:
        return Answer(instance, False, f"ssh did not finish within {_SSH_TIMEOUT:.0f}s")
    if result.returncode != 0:
        # ssh's last line is the verdict ("Host key verification failed.", "Permission denied (publickey).").
        lines = result.stderr.strip().splitlines()
        return Answer(instance, False, lines[-1] if lines else f"ssh exited {result.returncode}")
    return Answer(instance, True, result.stdout.strip())
