"""The one reader of a stack's settings: its flat config, or its stack file, in; `Settings` or a `SettingsError` out.

Every reader of a stack's settings comes here, so that all of them accept and refuse the same config: the
program (the config the engine hands it), the tools (a stack's config as the Automation API, `pulumi config
--json` or a preview shows it) and those that read `stacks/Pulumi.<stack>.yaml` itself (`instances`, the
reconciler). A refusal is one `SettingsError`, each line naming the key, the value and what is allowed, the
names derived from an instance included (`derived_names`).

A stack file is read with ruamel.yaml (YAML 1.2, as Pulumi's own Go parser reads it: `on` is a string, not a
boolean) and each value handed on as the engine hands it to the program: objects as JSON, scalars as text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from .derived_names import check_derived_names
from .errors import SettingsError, decode_config, parse_settings
from .schema import Settings
from .sections import NAMESPACE

__all__ = ["read_config", "read_stack_file", "stack_file_config"]


def read_config(config: Mapping[str, str]) -> Settings:
    """The settings of a stack's flat config (`"ssh-gateway:ports" -> its text`, every namespace's keys)."""
    settings = parse_settings(decode_config(config))
    check_derived_names(settings)
    return settings


def read_stack_file(text: str) -> Settings:
    """The settings of a stack file's text (`stacks/Pulumi.<stack>.yaml`), as the program would read them."""
    return read_config({key: _as_the_engine_passes_it(key, value) for key, value in stack_file_config(text).items()})


def stack_file_config(text: str) -> dict[str, Any]:
    """A stack file's `config:` mapping, its values plain JSON values (a `secure:` value as `{"secure": ...}`)."""
    try:
        tree = YAML(typ="rt").load(text)
    except YAMLError as exc:
        raise SettingsError(f"not valid YAML: {exc}") from None
    if tree is not None and not isinstance(tree, Mapping):
        raise SettingsError("not a Pulumi stack file: its top level is not a mapping")
    config = tree.get("config") if tree is not None else None
    return _plain(config) if isinstance(config, Mapping) else {}


def _plain(value: Any) -> Any:
    """ruamel's nodes as plain JSON values (its scalars subclass int/str/float/bool)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return None if value is None else str(value)


def _as_the_engine_passes_it(key: str, value: Any) -> str:
    """A config value as the Pulumi engine hands it to the program: objects as JSON, scalars as text."""
    if isinstance(value, Mapping) and set(value) == {"secure"}:
        if key.startswith(f"{NAMESPACE}:"):
            raise SettingsError(f"{key} is encrypted (secure:), so its value cannot be checked here")
        return str(value["secure"])  # another namespace's secret (pangolin:apiKey): only its key is read
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, (dict, list)) or value is None else str(value)
