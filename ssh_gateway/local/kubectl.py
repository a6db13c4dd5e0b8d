"""kubectl, as docs/reconciler.md has a platform team run it: `kubectl kustomize` renders an overlay of
deploy/reconciler/ with kubectl's built-in kustomize, `kubectl apply --server-side` sends it to a cluster.

The binary is the one scripts/bootstrap builds with the Kubernetes binaries (piece control-plane, .toolchain.env's
SSH_GATEWAY_KUBECTL), never a kubectl on PATH: the tests then render with the same kustomize on every machine.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from ssh_gateway.plumbing.toolchain import REPO, toolchain_binary

__all__ = ["OVERLAYS", "KubectlError", "apply", "render", "run"]

OVERLAYS = REPO / "deploy" / "reconciler" / "overlays"
TIMEOUT = 60.0
"""Seconds for one kubectl run: a render takes about 0.1 s, an apply under a second."""


class KubectlError(RuntimeError):
    """kubectl exited non-zero (the message carries its stderr)."""


def _kubectl(args: Sequence[str], *, stdin: str = "") -> subprocess.CompletedProcess[str]:
    argv = [str(toolchain_binary("SSH_GATEWAY_KUBECTL")), *args]
    done = subprocess.run(  # noqa: S603 - the bootstrap's own binary
        argv, input=stdin, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    if done.returncode != 0:
        raise KubectlError(f"kubectl {' '.join(args[:2])} failed ({done.returncode}): {done.stderr.strip()[-3000:]}")
    return done


def render(overlay: Path) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize OVERLAY` makes, in its order."""
    out = _kubectl(["kustomize", str(overlay)]).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def apply(docs: Sequence[dict[str, Any]], kubeconfig: Path, *, dry_run: bool) -> str:
    """`kubectl apply --server-side` of `docs`, with strict field validation (and with `dry_run`, the server's dry
    run: every admission step, nothing stored). Returns stderr, where kubectl prints the server's warnings."""
    args = ["apply", "--server-side", "--validate=strict", "-f", "-", "--kubeconfig", str(kubeconfig)]
    # Discovery's cache next to the kubeconfig: nothing written under $HOME.
    args += ["--cache-dir", str(kubeconfig.parent / "kubectl-cache")]
    if dry_run:
        args.append("--dry-run=server")
    return _kubectl(args, stdin=yaml.safe_dump_all(docs)).stderr


def run(args: Sequence[str], kubeconfig: Path) -> str:
    """`kubectl ARGS` against the cluster of `kubeconfig`, as a person types it; returns stdout."""
    cache = ["--cache-dir", str(kubeconfig.parent / "kubectl-cache")]
    return _kubectl([*args, "--kubeconfig", str(kubeconfig), *cache]).stdout
