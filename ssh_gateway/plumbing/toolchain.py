"""The offline Pulumi environment that scripts/bootstrap writes to .toolchain.env.

Every Pulumi call made by the project's tools and tests goes through `pulumi_env()`, so none of them checks
for updates, downloads a plugin, or touches a backend outside the repo's ignored .pulumi-state/.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENV_FILE = REPO / ".toolchain.env"
DEFAULTS_FILE = REPO / "scripts" / "pulumi.env"
"""The project's defaults for every pulumi run (docs/scaling.md); the environment overrides them."""


class ToolchainMissing(RuntimeError):
    """scripts/bootstrap has not been run in this checkout."""


def _env_lines(path: Path) -> dict[str, str]:
    """The `KEY=value` lines of an env file (blank lines and `#` comments skipped)."""
    settings: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            settings[key] = value
    return settings


def _toolchain_settings() -> dict[str, str]:
    """The `KEY=value` lines of .toolchain.env."""
    if not ENV_FILE.exists():
        raise ToolchainMissing(f"{ENV_FILE} is missing: run scripts/bootstrap first")
    return _env_lines(ENV_FILE)


def pulumi_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a pulumi process: `base` (default: ours), the toolchain's settings, and the project's
    defaults (scripts/pulumi.env) for what `base` does not set."""
    env = dict(os.environ if base is None else base)
    env.update(_toolchain_settings())
    for key, value in _env_lines(DEFAULTS_FILE).items():
        env.setdefault(key, value)
    env["PATH"] = f"{env.pop('SSH_GATEWAY_TOOLCHAIN_PATH')}{os.pathsep}{env.get('PATH', '')}"
    return env


def toolchain_binary(key: str) -> Path:
    """A binary the bootstrap built, by its .toolchain.env key, e.g. `toolchain_binary("SSH_GATEWAY_ETCD")`."""
    path = _toolchain_settings().get(key)
    if not path:
        raise ToolchainMissing(f"{ENV_FILE} has no {key}: run scripts/bootstrap again (it builds that binary)")
    if not os.access(path, os.X_OK):
        raise ToolchainMissing(f"{key}={path} is not an executable file: run scripts/bootstrap again")
    return Path(path)


def toolchain_file(key: str) -> Path:
    """A file the bootstrap fetched, by its .toolchain.env key, e.g. `toolchain_file("SSH_GATEWAY_ISTIO_CRDS")`."""
    path = _toolchain_settings().get(key)
    if not path:
        raise ToolchainMissing(f"{ENV_FILE} has no {key}: run scripts/bootstrap again (it fetches that file)")
    if not os.path.isfile(path):
        raise ToolchainMissing(f"{key}={path} is not a file: run scripts/bootstrap again")
    return Path(path)


def pulumi_root() -> Path:
    """The directory whose bin/ holds the pinned pulumi CLI (what the Automation API calls `root`)."""
    first = pulumi_env()["PATH"].split(os.pathsep)[0]
    return Path(first).parent


def require_pulumi() -> None:
    """The pinned CLI that scripts/bootstrap builds (piece `cli`), or ToolchainMissing naming the fix."""
    path = pulumi_env()["PATH"].split(os.pathsep)[0]
    if not os.access(Path(path) / "pulumi", os.X_OK):
        raise ToolchainMissing(f"no pulumi CLI in {path}: run scripts/bootstrap venv cli")


def other_backend_hint(command: str) -> str:
    """The sentence for a `command` that ran with the offline toolchain (whose PULUMI_BACKEND_URL, the local file
    backend, overrides the environment's) while the environment names another backend: it says so and names
    --ambient. Empty when the environment names none, names the same, or there is no toolchain."""
    wanted = os.environ.get("PULUMI_BACKEND_URL", "")
    try:
        used = pulumi_env().get("PULUMI_BACKEND_URL", "")
    except ToolchainMissing:
        return ""
    if not wanted or wanted == used:
        return ""
    # Up to any `?`: a backend URL's query can carry account settings, never worth echoing.
    return (
        f"PULUMI_BACKEND_URL in the environment names {wanted.split('?')[0]}, but `{command}` used the offline "
        f"toolchain's backend ({used.split('?')[0]}): add --ambient to use the environment's"
    )
