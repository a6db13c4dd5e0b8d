"""`scripts/demo-cluster` end to end (its own code, `python -m ssh_gateway.ops demo-cluster`): the cluster with one
real node, the reconciler deployed with kubectl, a user's pod, and ssh into that pod through the gateway with
only the stack's @cert-authority line; then its stack is gone. Needs root (the real node)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ssh_gateway.ops.shared.automation import stack_file
from ssh_gateway.ops.tools.cluster_demo import STACK
from ssh_gateway.plumbing.toolchain import REPO

pytestmark = pytest.mark.integration


def test_the_cluster_demo_reaches_the_pods_sshd_and_leaves_nothing(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "ssh_gateway.ops", "demo-cluster", "--state-dir", str(tmp_path / "state")]
    run = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    print(run.stdout)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    # The pod's own shell answered: its hostname is the pod's name.
    assert re.search(r"hello from alice: root@alice, reached through Traefik", run.stdout), run.stdout[-2000:]
    assert re.search(r"==> demo-cluster OK", run.stdout)
    assert not stack_file(STACK).exists()
