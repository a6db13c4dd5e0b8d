"""What the rig's images share on this machine: a build script's image reference, and its runtime bundle.

Each image is built by its script under scripts/ (sourcing scripts/oci-image.sh), which prints `LAYOUT:TAG` last;
`unpack` makes a runc bundle of it with umoci and hands back the image's own runtime config (config.json: its
entry point, environment, namespaces), for the caller to adjust as the platform that runs the image would and to
`write_spec` back before `runc` runs it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["ImageError", "build_image", "run_tool", "unpack", "write_spec"]


class ImageError(RuntimeError):
    """The image could not be built, unpacked or run (the message carries the tool's last lines)."""


def run_tool(argv: Sequence[str], what: str) -> str:
    """`argv`'s stdout; an `ImageError` naming `what` and the end of its stderr when it fails."""
    done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603 - our own tools
    if done.returncode != 0:
        raise ImageError(f"{what} failed ({done.returncode}): {done.stderr[-3000:]}")
    return done.stdout


def build_image(script: Path, *options: str) -> str:
    """The image `script` builds (cached by content), as `LAYOUT:TAG`: an OCI layout in the cache. `options`: the
    script's, e.g. `--archive FILE`."""
    return run_tool([str(script), *options], f"scripts/{script.name}").strip().splitlines()[-1]


def unpack(image: str, bundle: Path) -> dict[str, Any]:
    """`image` unpacked into the runc bundle `bundle`; its runtime config."""
    run_tool(["umoci", "unpack", "--image", image, str(bundle)], "umoci unpack")
    spec: dict[str, Any] = json.loads((bundle / "config.json").read_text())
    return spec


def write_spec(bundle: Path, spec: dict[str, Any]) -> None:
    """The bundle's runtime config, as runc reads it."""
    (bundle / "config.json").write_text(json.dumps(spec))
