"""Stacks of this project driven through the Automation API, with the offline toolchain.

The stack's config is written as a `stacks/Pulumi.<stack>.yaml` file (the same file a person edits);
secrets go through `set_config(..., secret=True)`, i.e. `pulumi config set --secret`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pulumi import automation as auto

from ssh_gateway.plumbing.toolchain import REPO, pulumi_env, pulumi_root


def _project(work_dir: Path) -> dict[str, Any]:
    return dict(yaml.safe_load((work_dir / "Pulumi.yaml").read_text()))


def project_name(work_dir: Path = REPO) -> str:
    """The project's name (Pulumi.yaml), which its resources' names and URNs carry."""
    return str(_project(work_dir)["name"])


def stack_file(stack: str, work_dir: Path = REPO) -> Path:
    """Where a stack's config lives: the project's `stackConfigDir` (stacks/ here), else beside Pulumi.yaml."""
    return work_dir / str(_project(work_dir).get("stackConfigDir", ".")) / f"Pulumi.{stack}.yaml"


def stack_config(stack: str, work_dir: Path = REPO) -> dict[str, str]:
    """A stack's config, secrets decrypted, from the offline toolchain's backend."""
    selected = auto.select_stack(stack, work_dir=str(work_dir), opts=workspace_options(work_dir))
    return {key: value.value for key, value in selected.get_all_config().items()}


def workspace_options(work_dir: Path = REPO, env: Mapping[str, str] | None = None) -> auto.LocalWorkspaceOptions:
    """The offline toolchain's workspace; `env` goes over its variables, e.g. a shared backend's (`Azurite.env()`,
    ssh_gateway/local/azurite.py) and a `PULUMI_HOME` of its own, as a second CI runner has."""
    return auto.LocalWorkspaceOptions(
        work_dir=str(work_dir),
        env_vars={**pulumi_env(), **(env or {})},
        pulumi_command=auto.PulumiCommand(root=str(pulumi_root())),
    )


def open_stack(
    stack: str,
    config: Mapping[str, Any] | None = None,
    *,
    secrets: Mapping[str, str] | None = None,
    work_dir: Path = REPO,
    env: Mapping[str, str] | None = None,
) -> auto.Stack:
    """Selects (creating if needed) a stack of the project; `config` replaces its config file's `config:`; `env` as
    in `workspace_options`."""
    if config is not None:
        path = stack_file(stack, work_dir)
        # Keep the rest of the file (e.g. `encryptionsalt`, which the stack's secrets are sealed with).
        document: dict[str, Any] = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
        document["config"] = dict(config)
        path.write_text(yaml.safe_dump(document, sort_keys=False))
    result = auto.create_or_select_stack(stack, work_dir=str(work_dir), opts=workspace_options(work_dir, env))
    for key, value in (secrets or {}).items():
        result.set_config(key, auto.ConfigValue(value, secret=True))
    return result


def remove_stack(stack: auto.Stack) -> None:
    """Deletes the stack and its config file (its resources must already be destroyed)."""
    stack.workspace.remove_stack(stack.name)
    stack_file(stack.name, Path(stack.workspace.work_dir)).unlink(missing_ok=True)


def state_file(stack: auto.Stack) -> Path:
    """The stack's checkpoint in the local file backend, exactly as stored (secrets encrypted)."""
    backend = Path(pulumi_env()["PULUMI_BACKEND_URL"].removeprefix("file://"))
    project = stack.workspace.project_settings().name
    return backend / ".pulumi" / "stacks" / project / f"{stack.name}.json"
