"""The reconciler's image on this machine, as the Deployment runs it (root, umoci, runc).

`build_image()` runs scripts/build-reconciler-image, whose layers are cached by content outside the work tree;
`run_image()` unpacks the image with umoci and runs its entry point with runc, as deploy/reconciler/base/'s
Deployment does: uid 65532, a read-only root, a tmpfs `/tmp`, `--ambient`. The container shares the host's
network (the API server and the Pangolin emulator listen on loopback) and a directory of the host, `share`, at
the same path: a kubeconfig the container's user can read, and a `file://` backend it can write.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ssh_gateway.plumbing.toolchain import REPO

from . import oci_image
from .control_plane import ControlPlane
from .oci_image import ImageError

__all__ = ["ImageError", "ImageRun", "build_image", "image_archive", "run_image", "shared_dir"]

BUILD_SCRIPT = REPO / "scripts" / "build-reconciler-image"


@dataclass(frozen=True)
class ImageRun:
    """How one run of the image ended."""

    code: int
    """runc's exit code: the entry point's."""
    seconds: float
    output: str
    """stdout and stderr, in that order."""


def build_image() -> str:
    """The image of the work tree's tracked files, `LAYOUT:TAG` (an OCI layout in the cache)."""
    return oci_image.build_image(BUILD_SCRIPT)


def image_archive(work: Path) -> tuple[Path, str]:
    """docs/reconciler.md's way to load the image into a node without a registry:
    `scripts/build-reconciler-image --archive FILE`, a docker archive that `ctr images import` names
    `docker.io/library/ssh-gateway-reconciler:TAG`, what the base's `image:` asks for with the overlay's `newTag`.
    Returns the archive and the tag."""
    archive = work / "reconciler.tar"
    return archive, oci_image.build_image(BUILD_SCRIPT, "--archive", str(archive)).rsplit(":", 1)[1]


def shared_dir(plane: ControlPlane, share: Path) -> tuple[Path, Path]:
    """`share` made for the container's user: a kubeconfig of `plane` (its CA inline) and a backend directory.
    Returns both paths."""
    share.mkdir(mode=0o777)
    share.chmod(0o777)
    kubeconfig: dict[str, Any] = yaml.safe_load(plane.kubeconfig.read_text())
    cluster = kubeconfig["clusters"][0]["cluster"]
    ca = Path(cluster.pop("certificate-authority")).read_bytes()
    cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    (share / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    (share / "kubeconfig").chmod(0o644)
    backend = share / "backend"
    backend.mkdir(mode=0o777)
    backend.chmod(0o777)
    return share / "kubeconfig", backend


def _spec(
    spec: dict[str, Any], args: Sequence[str], env: Mapping[str, str], share: Path, stack_file: Path
) -> dict[str, Any]:
    """The image's own runtime config, with the run's arguments, environment and mounts."""
    process = spec["process"]
    process["args"] = [*process["args"][:3], *args]  # the entry point (python -m ssh_gateway.ops), then ours
    process["env"] += [f"{key}={value}" for key, value in env.items()]
    process["terminal"] = False
    spec["linux"]["namespaces"] = [n for n in spec["linux"]["namespaces"] if n["type"] != "network"]
    spec["root"]["readonly"] = True
    spec["mounts"] += [
        {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev"]},  # noqa: S108
        {"destination": str(share), "type": "bind", "source": str(share), "options": ["rbind", "rw"]},
        {
            "destination": f"/opt/ssh-gateway/stacks/{stack_file.name}",
            "type": "bind",
            "source": str(stack_file),
            "options": ["rbind", "ro"],
        },
    ]
    return spec


def run_image(
    image: str, work: Path, *, args: Sequence[str], env: Mapping[str, str], share: Path, stack_file: Path
) -> ImageRun:
    """Runs `image` once with `args` after its entry point, `env` added, `share` and the stack file mounted.
    The stack file and everything under `share` must be readable (and the backend writable) by uid 65532."""
    bundle = work / "bundle"
    spec = oci_image.unpack(image, bundle)
    try:
        oci_image.write_spec(bundle, _spec(spec, args, env, share, stack_file))
        started = time.monotonic()
        done = subprocess.run(  # noqa: S603
            ["runc", "run", "--bundle", str(bundle), f"reconciler-{work.name}"],  # noqa: S607
            capture_output=True,
            text=True,
            check=False,
        )
        return ImageRun(done.returncode, time.monotonic() - started, done.stdout + done.stderr)
    finally:
        shutil.rmtree(bundle, ignore_errors=True)
