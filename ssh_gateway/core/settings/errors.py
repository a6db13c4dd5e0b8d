"""The settings' edge: Pulumi's flat config decoded, validated, and pydantic's errors rendered as one line
each, naming the config key, the value and what is allowed, with a "did you mean" for a misspelt key or tag.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic import (
    BaseModel,
    ValidationError,
)

from ssh_gateway.core.credentials import API_KEY_CONFIG
from ssh_gateway.core.instance_keys import ROUTINGS, TARGETS

from .schema import Settings
from .sections import (
    CONNECT_STATIC_TAG,
    CONNECT_TAG,
    INSTANCE_MODELS,
    KINDS,
    NAMESPACE,
    VIAS,
    Connect,
    ConnectServiceInstance,
    DirectPublic,
    Discovery,
    EnvoyGatewaySettings,
    FirewallOn,
    Gateway,
    HostCa,
    HostIdentityOn,
    IstioGatewaySettings,
    Kubernetes,
    Pangolin,
    PangolinPublic,
    Ports,
)


class SettingsError(ValueError):
    """Config that cannot be used; the message lists every problem, each naming its key and value."""


_TAGS: Final = frozenset(
    {*TARGETS, "on", "off", CONNECT_TAG, CONNECT_STATIC_TAG, "via=pangolin", "via=direct", "kind=istio", "kind=envoy"}
)
_TARGET_MODELS: Final = INSTANCE_MODELS[: len(TARGETS)]
"""The port-mode instance models, in the order of `TARGETS`."""
_SECTIONS: Final[Mapping[str, tuple[type[BaseModel], ...]]] = {
    "": (Settings,),
    "ports": (Ports,),
    "pangolin": (Pangolin,),
    "kubernetes": (Kubernetes,),
    "firewall": (FirewallOn,),
    "gateway": (Gateway,),
    "hostIdentity": (HostIdentityOn,),
    "hostIdentity.ca": (HostCa,),
    "instances": INSTANCE_MODELS,
    "connect": (Connect,),
    "connect.gateway": (IstioGatewaySettings, EnvoyGatewaySettings),
    "connect.public": (PangolinPublic, DirectPublic),
    "discovery": (Discovery,),
}


def _keys_at(loc: Sequence[int | str], models: tuple[type[BaseModel], ...] | None = None) -> list[str]:
    """The keys allowed where `loc` (an unknown key's location) points, or in the given models."""
    section = ".".join(p for p in loc[:-1] if isinstance(p, str) and p not in _TAGS and not p.startswith("function-"))
    models = _SECTIONS.get(section, ()) if models is None else models
    return sorted({str(f.alias or n) for model in models for n, f in model.model_fields.items()})


_KINDS: Final[Mapping[str, type[BaseModel]]] = {"istio": IstioGatewaySettings, "envoy": EnvoyGatewaySettings}
_KIND_WHY: Final = {
    "istio": "an Istio gateway is patched by EnvoyFilters, where the stack's own Envoy config does not apply",
    "envoy": "a standalone Envoy has no Istio: no selector, namespace or Service of its own",
}


_REMOVED_KEYS = {
    ("kubernetes", "skipAwait"): "removed: every ssh Service skips pulumi-kubernetes' readiness wait by itself, "
    "and nothing else needs it (docs/cluster-instances.md, what an up waits for); delete the key",
}
"""Keys a stack file may still hold from an earlier version, and what to do instead."""


def _unknown_key(loc: Sequence[int | str]) -> str:
    """ "unknown key", with the key meant, or the targets (gateway kinds) a key belongs to when it is another's."""
    key = str(loc[-1])
    if (removed := _REMOVED_KEYS.get((str(loc[0]), key))) is not None and len(loc) == 2:
        return removed
    tag = next((p for p in loc if isinstance(p, str) and p in TARGETS), None)
    if tag is not None and key in _keys_at(loc):
        owners = [t for t, m in zip(TARGETS, _TARGET_MODELS, strict=True) if key in _keys_at(loc, (m,))]
        return f"not a key of target {tag}; it belongs to target {' and '.join(owners)}"
    if CONNECT_STATIC_TAG in loc and key in _keys_at(loc, (ConnectServiceInstance,)):
        return "not a key of target static; a static connect-mode instance is at staticHost:staticPort (no Service)"
    kind = next((p.removeprefix("kind=") for p in loc if isinstance(p, str) and p.startswith("kind=")), None)
    if kind is not None:
        others = [k for k, m in _KINDS.items() if k != kind and key in _keys_at(loc, (m,))]
        if others:
            return f"only for connect.gateway.kind {others[0]}; {_KIND_WHY[kind]}"
    return f"unknown key{_did_you_mean(key, _keys_at(loc))}"


def _without_tags(loc: Sequence[int | str]) -> list[int | str]:
    """The location without pydantic's union tags."""
    out: list[int | str] = []
    for index, part in enumerate(loc):
        after = loc[index - 1] if index else None
        # A target's tag follows an instance's index; on/off (firewall, hostIdentity) and the `name=value` tags
        # (routing=connect, via=...) are never field names.
        tag = isinstance(part, str) and (
            part in ("on", "off") or "=" in part or (part in _TAGS and isinstance(after, int))
        )
        if not tag and not (isinstance(part, str) and part.startswith("function-")):
            out.append(part)
    return out


def _key(loc: Sequence[int | str]) -> str:
    """`('instances', 2, 'static', 'staticHost')` -> `ssh-gateway:instances[2].staticHost` (union tags dropped)."""
    parts = _without_tags(loc)
    out = f"{NAMESPACE}:{parts[0]}" if parts else NAMESPACE
    for part in parts[1:]:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _value_at(raw: Any, loc: Sequence[int | str]) -> Any:
    for part in _without_tags(loc):
        try:
            raw = raw[part]
        except (KeyError, IndexError, TypeError):
            return None
    return raw


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _describe(err: Any, raw: Mapping[str, Any]) -> str:
    loc = tuple(err["loc"])
    message = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "settings":  # a cross-field problem names its own key
        key, _, message = message.partition(": ")
        return f"{NAMESPACE}:{key}: {message}"
    value = _value_at(raw, loc)
    if err["type"] == "extra_forbidden" and "off" in loc:  # e.g. hostIdentity: {enabled: false, validDays: 30}
        return f"{_key(loc)}: not allowed with enabled: false"
    if err["type"] == "extra_forbidden":
        return f"{_key(loc)}: {_unknown_key(loc)}"
    if err["type"] == "unknown_instance_kind":
        routing = _value_at(raw, (*loc, "routing"))
        if routing is not None and routing not in ROUTINGS:
            allowed = f"unknown routing; allowed: {', '.join(ROUTINGS)}"
            return f"{_key(loc)}.routing = {json.dumps(routing)}: {allowed}{_did_you_mean(str(routing), ROUTINGS)}"
        target = _value_at(raw, (*loc, "target"))
        return f"{_key(loc)}.target = {json.dumps(target)}: {message}{_did_you_mean(str(target), TARGETS)}"
    if err["type"] == "unknown_gateway_kind":
        kind = _value_at(raw, (*loc, "kind"))
        return f"{_key(loc)}.kind = {json.dumps(kind)}: {message}{_did_you_mean(str(kind), KINDS)}"
    if err["type"] == "unknown_via":
        via = _value_at(raw, (*loc, "via"))
        return f"{_key(loc)}.via = {json.dumps(via)}: {message}{_did_you_mean(str(via), VIAS)}"
    if err["type"] == "missing":
        return f"{_key(loc)}: required, but not set"
    shown = f" = {json.dumps(value)}" if value is not None else ""
    return f"{_key(loc)}{shown}: {message}"


def parse_settings(raw: Mapping[str, Any]) -> Settings:
    """Validates the `ssh-gateway:*` config (keys without the namespace, values already JSON-decoded)."""
    try:
        return Settings.model_validate(dict(raw))
    except ValidationError as exc:
        problems = [_describe(err, raw) for err in exc.errors()]
        raise SettingsError("invalid stack config:\n  " + "\n  ".join(dict.fromkeys(problems))) from None


def decode_config(config: Mapping[str, str]) -> dict[str, Any]:
    """Pulumi's flat config (`"ssh-gateway:ports" -> JSON text`) -> this namespace, decoded.

    A key of the `pangolin` namespace other than `pangolin:apiKey` is refused here: it is a typo.
    """
    unknown = sorted(k for k in config if k.startswith("pangolin:") and k != API_KEY_CONFIG)
    if unknown:
        hint = _did_you_mean(unknown[0], [API_KEY_CONFIG])
        raise SettingsError(f"invalid stack config:\n  {unknown[0]}: unknown key{hint}")
    prefix = f"{NAMESPACE}:"
    out: dict[str, Any] = {}
    for key, text in config.items():
        if key.startswith(prefix):
            try:
                out[key[len(prefix) :]] = json.loads(text)
            except (json.JSONDecodeError, TypeError):
                out[key[len(prefix) :]] = text
    return out
