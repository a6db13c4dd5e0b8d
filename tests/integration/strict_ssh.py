"""Real `ssh` that trusts only the known_hosts lines it is given: no prompt, no learning on first use.

It runs with `StrictHostKeyChecking=yes`, `BatchMode=yes` and a known_hosts file holding only those lines,
so any prompt or unknown key is a failure. It dials an instance's public name on a non-22 port through a
ProxyCommand relay (standing in for DNS + the gateway, or the CONNECT tunnel), which makes it look the host
up under `[<name>]:<port>` as in production (the bare name on port 22); or 127.0.0.1 with a HostKeyAlias, as the
CONNECT-mode ssh config does. With `netns`, the relay runs in that network namespace (a container's), so its
127.0.0.1 is the container's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ssh_gateway.local.sshd import ClientKey

__all__ = ["GREETING", "strict_ssh"]

GREETING = "connected-without-a-prompt"

# Relays the session to the loopback sshd, whatever name was dialled.
_RELAY = """\
import socket, sys, threading
upstream = socket.create_connection((sys.argv[1], int(sys.argv[2])))
def forward():
    while chunk := sys.stdin.buffer.read1(65536):
        upstream.sendall(chunk)
    upstream.shutdown(socket.SHUT_WR)
threading.Thread(target=forward, daemon=True).start()
while chunk := upstream.recv(65536):
    sys.stdout.buffer.write(chunk)
    sys.stdout.buffer.flush()
"""


def strict_ssh(
    directory: Path,
    client: ClientKey,
    known_hosts: list[str],
    *,
    host: str,
    port: int,
    alias: bool = False,
    netns: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """`ssh -v host` on `port` (relayed to 127.0.0.1, in `netns` if given), or with `alias`
    `ssh -o HostKeyAlias=host 127.0.0.1`."""
    directory.mkdir(parents=True, exist_ok=True)
    known = directory / "known_hosts"
    known.write_text("".join(f"{line}\n" for line in known_hosts))
    relay = directory / "relay.py"
    relay.write_text(_RELAY)
    enter = f"nsenter --net={netns} " if netns else ""
    route = (
        ["-o", f"HostKeyAlias={host}", "127.0.0.1"]
        if alias
        else ["-o", f"ProxyCommand={enter}{sys.executable} {relay} 127.0.0.1 {port}", host]
    )
    options = {
        "IdentitiesOnly": "yes",
        "BatchMode": "yes",
        "StrictHostKeyChecking": "yes",
        "UserKnownHostsFile": str(known),
        "GlobalKnownHostsFile": "/dev/null",
        "UpdateHostKeys": "no",
        "ConnectTimeout": "10",
    }
    argv = ["ssh", "-v", "-F", "/dev/null", "-p", str(port), "-i", str(client.private)]
    for key, value in options.items():
        argv += ["-o", f"{key}={value}"]
    result = subprocess.run(
        [*argv, *route, f"echo {GREETING}"], capture_output=True, text=True, timeout=60, check=False
    )
    # Nothing was learnt on first use: the client never wrote to known_hosts.
    assert known.read_text() == "".join(f"{line}\n" for line in known_hosts)
    return result
