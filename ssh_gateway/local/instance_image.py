"""The instance image on this machine, run as a node runs the instance pod (root, umoci, runc; no kubelet).

`build_instance_image()` runs scripts/build-instance-image, cached by content outside the work tree (and writes the
archive a node's containerd imports: `kubelet_node.KubeletNode.load_image`).
`kubelet_volumes()` lays a pod's Secret and ConfigMap volumes out as the kubelet does: the atomic writer's
`..data` and per-key symlinks (`sshd_identity.mount_secret`), the volume's `defaultMode` on each file, and the
volume's own directory as the kubelet leaves it, 0777 (an emptyDir's) or 1777 for a Secret (a tmpfs's root).
`running_instance()` runs the image's own entry point (`sshd -D -e`) with runc as containerd runs a pod's container:
root, containerd's default capabilities, a network namespace of its own (runc makes it, loopback up), and each
volume bind-mounted read-only at its mount path. Nothing reaches it but through that namespace
(`nsenter --net=<netns>`), so it listens on port 22 as in a pod, beside anything else on this machine.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ssh_gateway.plumbing.toolchain import REPO

from . import oci_image
from .oci_image import ImageError
from .sshd_identity import mount_secret

__all__ = ["RunningInstance", "build_instance_image", "kubelet_volumes", "running_instance"]

BUILD_SCRIPT = REPO / "scripts" / "build-instance-image"

CONTAINERD_CAPABILITIES: Final = (
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
)
"""What a pod's container gets from containerd without a securityContext (its default Unix capabilities); sshd
needs SETUID, SETGID and SYS_CHROOT of them for privilege separation."""

_VOLUME_ROOT_MODES: Final = {"secret": 0o1777, "configMap": 0o777}
"""The mode of a volume's own directory: a Secret is a tmpfs (its root 1777), a ConfigMap an emptyDir (0777)."""

_LISTENING: Final = "Server listening on"


def build_instance_image(archive: Path | None = None) -> str:
    """The instance image, `LAYOUT:TAG` (an OCI layout in the cache); with `archive`, also written there as a docker
    archive of `instance_pod.IMAGE_NAME:TAG`, for a node's containerd to import."""
    return oci_image.build_image(BUILD_SCRIPT, *(["--archive", str(archive)] if archive else []))


def kubelet_volumes(pod: Mapping[str, Any], data: Mapping[str, Mapping[str, str]], directory: Path) -> dict[str, Path]:
    """The pod's Secret and ConfigMap volumes under `directory`, with `data` as each object's content (by the
    object's name); the first container's mount path -> its volume's directory."""
    spec = pod["spec"]
    made: dict[str, Path] = {}
    for volume in spec["volumes"]:
        kind = next(k for k in _VOLUME_ROOT_MODES if k in volume)
        source = volume[kind]
        name = source["secretName"] if kind == "secret" else source["name"]
        if name not in data:
            raise ImageError(f"volume {volume['name']}: no data given for {kind} {name}")
        path = mount_secret(directory / volume["name"], data[name], mode=source["defaultMode"])
        path.chmod(_VOLUME_ROOT_MODES[kind])
        made[volume["name"]] = path
    return {mount["mountPath"]: made[mount["name"]] for mount in spec["containers"][0]["volumeMounts"]}


@dataclass(frozen=True)
class RunningInstance:
    """The image's sshd, running in a container."""

    pid: int
    """The container's first process, sshd."""
    log: Path
    """sshd's stdout and stderr (`-e`: its log)."""

    @property
    def netns(self) -> Path:
        """The container's network namespace: `nsenter --net=<this>` reaches its port 22 on 127.0.0.1."""
        return Path(f"/proc/{self.pid}/ns/net")

    def logged(self) -> str:
        """What sshd has logged so far."""
        return self.log.read_text(errors="replace")


def _spec(spec: dict[str, Any], volumes: Mapping[str, Path]) -> dict[str, Any]:
    """The image's own runtime config (entry point, namespaces: a network one among them) as containerd sets a
    pod's container: containerd's capabilities, privilege escalation allowed, the volumes bind-mounted read-only."""
    process = spec["process"]
    process["terminal"] = False
    process["noNewPrivileges"] = False
    process["capabilities"] = {
        kind: list(CONTAINERD_CAPABILITIES) for kind in ("bounding", "effective", "permitted")
    } | {"inheritable": [], "ambient": []}
    spec["mounts"] += [
        {"destination": target, "type": "bind", "source": str(source), "options": ["rbind", "ro"]}
        for target, source in volumes.items()
    ]
    return spec


def _wait_listening(running: RunningInstance, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _LISTENING not in running.logged():
        if time.monotonic() >= deadline:
            raise ImageError(f"sshd did not listen within {timeout:.0f} s; its log:\n{running.logged()[-3000:]}")
        time.sleep(0.05)


@contextmanager
def running_instance(
    image: str, work: Path, *, volumes: Mapping[str, Path], timeout: float = 10.0
) -> Iterator[RunningInstance]:
    """`image` running with `volumes` (mount path -> directory) until the block ends, once sshd listens."""
    bundle, log, container = work / "bundle", work / "sshd.log", f"instance-{uuid.uuid4().hex[:12]}"
    spec = oci_image.unpack(image, bundle)
    try:
        oci_image.write_spec(bundle, _spec(spec, volumes))
        with log.open("w") as out:
            # create, then start: runc leaves sshd running, its pid in the pid file, its output going to `log`.
            created = subprocess.run(  # noqa: S603
                ["runc", "create", "--bundle", str(bundle), "--pid-file", str(work / "pid"), container],  # noqa: S607
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                check=False,
            )
        if created.returncode != 0:
            raise ImageError(f"runc create failed ({created.returncode}): {log.read_text()[-3000:]}")
        running = RunningInstance(int((work / "pid").read_text()), log)
        oci_image.run_tool(["runc", "start", container], "runc start")
        _wait_listening(running, timeout)
        yield running
    finally:
        subprocess.run(["runc", "delete", "--force", container], capture_output=True, check=False)  # noqa: S603, S607
        shutil.rmtree(bundle, ignore_errors=True)
