"""A throwaway Pulumi project in a temp dir (its own file backend), for what the ssh-gateway program never
registers: a Pangolin resource with another protocol, ports outside the range, a LoadBalancer Service..."""

from __future__ import annotations

import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ssh_gateway.plumbing.toolchain import REPO

from .cli import pulumi

PRELUDE = """\
import os

import pulumi
from providers.pangolin import PangolinTcpResource, PangolinTcpResourceArgs
from providers.pangolin.org import read_org
from ssh_gateway.core.org import OrgView

config = pulumi.Config("probe")
API_URL = config.get("apiUrl") or "http://127.0.0.1:9/v1"
# As the real program does: list the org once, and hand each create what it may adopt.
ORG = read_org(API_URL, "acme", os.environ["PANGOLIN_API_KEY"]) if config.get("apiUrl") else OrgView()


def pangolin(name, port, *, protocol="tcp", opts=None):
    return PangolinTcpResource(
        name,
        PangolinTcpResourceArgs(
            api_url=API_URL, org_id="acme", site_id=1,
            name=f"probe/{name}", protocol=protocol, proxy_port=port, target_ip="127.0.0.1", target_port=2222,
            adopt_resource_id=ORG.leftover(f"probe/{name}", protocol),
        ),
        opts,
    )
"""


@dataclass(frozen=True)
class Probe:
    """A project with one stack, `probe`."""

    directory: Path
    env: dict[str, str]

    def pulumi(self, *args: str) -> subprocess.CompletedProcess[str]:
        return pulumi(*args, "--stack", "probe", "--non-interactive", cwd=self.directory, env=self.env)

    def configure(self, config: dict[str, Any]) -> None:
        (self.directory / "Pulumi.probe.yaml").write_text(yaml.safe_dump({"config": config}))


def make_probe(tmp_path: Path, body: str, config: dict[str, Any] | None = None, **env: str) -> Probe:
    """Writes the project (the prelude, then `body`), creates its stack and sets its config."""
    directory = tmp_path / "probe"
    directory.mkdir()
    (directory / "Pulumi.yaml").write_text(
        yaml.safe_dump({"name": "probe", "runtime": {"name": "python", "options": {"virtualenv": str(REPO / ".venv")}}})
    )
    (directory / "__main__.py").write_text(PRELUDE + "\n" + textwrap.dedent(body))
    (tmp_path / "backend").mkdir()
    probe = Probe(directory, {"PULUMI_BACKEND_URL": f"file://{tmp_path / 'backend'}", **env})
    created = pulumi("stack", "init", "probe", "--non-interactive", cwd=directory, env=probe.env)
    assert created.returncode == 0, created.stderr
    probe.configure(config or {})
    return probe
