"""Images for the real node's containerd, with no registry: Kubernetes' own pause made into the sandbox image,
and any OCI archive (the instance image) imported as it is.

The pause binary is bootstrap's (compiled from the pinned Kubernetes module's build/pause); umoci packs it into an
OCI layout and skopeo writes the archive that `ctr images import` reads, both from Debian.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ssh_gateway.plumbing.toolchain import toolchain_binary

__all__ = ["K8S_NAMESPACE", "PAUSE_IMAGE", "import_image", "pause_archive"]

PAUSE_IMAGE = "ssh-gateway.local/pause:node"
"""The sandbox image containerd is told to use: a name no registry serves, so a missing import fails at once."""
K8S_NAMESPACE = "k8s.io"
"""containerd's namespace for the kubelet's images and containers."""


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} failed ({done.returncode}): {done.stderr.strip()[-500:]}")


def pause_archive(work: Path) -> Path:
    """An OCI archive of `PAUSE_IMAGE` in `work` (made again each time: about a second)."""
    layout, bundle, archive = work / "pause-oci", work / "pause-bundle", work / "pause.tar"
    for stale in (layout, bundle):
        shutil.rmtree(stale, ignore_errors=True)
    archive.unlink(missing_ok=True)
    image = f"{layout}:pause"
    _run("umoci", "init", "--layout", str(layout))
    _run("umoci", "new", "--image", image)
    _run("umoci", "unpack", "--image", image, str(bundle))
    shutil.copy2(toolchain_binary("SSH_GATEWAY_PAUSE"), bundle / "rootfs" / "pause")
    _run("umoci", "repack", "--image", image, str(bundle))
    _run("umoci", "config", "--image", image, "--config.entrypoint", "/pause", "--config.user", "65535:65535")
    _run("skopeo", "copy", "--quiet", f"oci:{image}", f"oci-archive:{archive}:{PAUSE_IMAGE}")
    shutil.rmtree(bundle, ignore_errors=True)
    shutil.rmtree(layout, ignore_errors=True)
    return archive


def import_image(socket: Path, archive: Path) -> None:
    """Loads an OCI (or docker) archive into containerd's Kubernetes namespace, under the name it carries."""
    _run("ctr", "--address", str(socket), "--namespace", K8S_NAMESPACE, "images", "import", str(archive))
