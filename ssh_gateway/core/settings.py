"""Stack settings: every `ssh-gateway:*` config key as one pydantic model, validated before any resource exists.

Values are parsed once here (a port range into a `PortRange`, sources into `Cidrs | ServiceTag`, an instance
into the shape its `target` calls for) and passed on typed. `parse_settings` reports every problem at once,
each naming the config key, the value and what is allowed, with a "did you mean" for a misspelt key.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PlainValidator,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .addresses import check_host, check_hostname, check_http_url
from .credentials import API_KEY_CONFIG
from .firewall import (
    AZURE_PRIORITY_MAX,
    AZURE_PRIORITY_MIN,
    DEFAULT_PRIORITY_BASE,
    Sources,
    check_priorities,
    parse_sources,
)
from .host_identity import MAX_VALID_DAYS
from .ports import EPHEMERAL, PortRange
from .targets import ClusterIpTarget, NodePortTarget, StaticTarget, Target, service_spec

__all__ = [
    "NAMESPACE",
    "ClusterIpInstance",
    "FirewallOff",
    "FirewallOn",
    "HostCa",
    "HostIdentityOff",
    "HostIdentityOn",
    "Instance",
    "NodePortInstance",
    "Settings",
    "SettingsError",
    "StaticInstance",
    "decode_config",
    "parse_settings",
]

NAMESPACE: Final = "ssh-gateway"

_DNS_LABEL: Final = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_ORG_ID: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
_HOST_KEY: Final = re.compile(r"(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+={0,2}")
_AZURE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.()-]{0,79}")


def _dns_label(value: str) -> str:
    if not _DNS_LABEL.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a DNS label: use 1-63 lowercase letters, digits and '-', starting and ending "
            "with a letter or digit"
        )
    return value


def _org_id(value: str) -> str:
    if not _ORG_ID.fullmatch(value):
        raise ValueError(f"{value!r} is not a Pangolin org id: 1-32 lowercase letters, digits, '-' or '_'")
    return value


def _host_key(value: str) -> str:
    if not _HOST_KEY.fullmatch(value.strip()):
        raise ValueError(f"{value[:40]!r}... is not a public host key such as 'ssh-ed25519 AAAAC3Nza...'")
    return value.strip()


def _azure_name(value: str) -> str:
    if not _AZURE_NAME.fullmatch(value) or value.endswith("."):
        raise ValueError(f"{value!r} is not an Azure resource name (letters, digits, '_', '.', '-', 1-80)")
    return value


def _host_template(value: str) -> str:
    try:
        check_host(value.replace("{instance}", "x"))
    except ValueError:
        raise ValueError(
            f"{value!r} is not a host name with an optional {{instance}}, e.g. ssh-{{instance}}.example.com"
        ) from None
    return value


def _port_range(value: object) -> PortRange:
    return value if isinstance(value, PortRange) else PortRange.parse(value)


def _sources(value: object) -> Sources:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{value!r} is not a list of CIDRs such as [203.0.113.0/24]")
    return parse_sources(list(value))


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
Host = Annotated[str, AfterValidator(check_host)]
Port = Annotated[int, Field(ge=1, le=65535)]
Generation = Annotated[int, Field(ge=1, le=2**31 - 1)]
Range = Annotated[PortRange, PlainValidator(_port_range)]
SourceList = Annotated[Sources, PlainValidator(_sources)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Ports(_Model):
    """`ssh-gateway:ports`: the public port range instances are allocated from."""

    range: Range = Field(description='"start-end", inclusive, e.g. "40000-40099"')
    reserved: tuple[Port, ...] = ()


class Pangolin(_Model):
    """`ssh-gateway:pangolin`: where the gateway's Integration API is. The key is `pangolin:apiKey` (secret)."""

    url: Annotated[str, AfterValidator(check_http_url)] = Field(description="e.g. https://api.example.com/v1")
    org_id: Annotated[str, AfterValidator(_org_id)] = Field(alias="orgId")
    site_id: int = Field(alias="siteId", ge=1)


class Kubernetes(_Model):
    """`ssh-gateway:kubernetes`: where the instances' SSH Services go."""

    namespace: DnsLabel = "default"
    render_dir: str | None = Field(default=None, alias="renderDir", description="render YAML instead of applying")
    kubeconfig: str | None = None
    context: str | None = None
    node_ip: Host | None = Field(default=None, alias="nodeIp", description="target of NodePort instances")
    cluster_domain: Annotated[str, AfterValidator(check_hostname)] = Field(
        default="cluster.local", alias="clusterDomain"
    )
    skip_await: bool = Field(default=False, alias="skipAwait", description="only for control-plane-only clusters")


class FirewallOff(_Model):
    """`ssh-gateway:firewall` with `enabled: false`: no NSG rules (the local stack)."""

    enabled: Literal[False]


class FirewallOn(_Model):
    """`ssh-gateway:firewall`: one Azure NSG inbound rule per allocated port."""

    enabled: Literal[True] = True
    resource_group: Annotated[str, AfterValidator(_azure_name)] = Field(alias="resourceGroup")
    nsg_name: Annotated[str, AfterValidator(_azure_name)] = Field(alias="nsgName")
    source_cidrs: SourceList = Field(alias="sourceCidrs")
    priority_base: int = Field(
        default=DEFAULT_PRIORITY_BASE, alias="priorityBase", ge=AZURE_PRIORITY_MIN, le=AZURE_PRIORITY_MAX
    )


def _enabled_tag(value: Any) -> str:
    enabled = value.get("enabled", True) if isinstance(value, Mapping) else getattr(value, "enabled", True)
    return "off" if enabled is False else "on"


Firewall = Annotated[Annotated[FirewallOn, Tag("on")] | Annotated[FirewallOff, Tag("off")], Discriminator(_enabled_tag)]


class HostCa(_Model):
    """`ssh-gateway:hostIdentity.ca`: the SSH host CA generations published in knownHosts, and the signer.

    A rotation with overlap is three `up`s: publish `[1, 2]`, sign with 2, publish `[2]` (docs/host-identity.md).
    """

    generations: tuple[Generation, ...] = (1,)
    signing: Generation | None = Field(default=None, description="default: the last of generations")

    @model_validator(mode="after")
    def _signing_is_published(self) -> HostCa:
        key = "hostIdentity.ca"
        if not self.generations:
            raise _problem(f"{key}.generations", "is empty: publish at least one CA generation, e.g. [1]")
        dupes = sorted({g for g in self.generations if self.generations.count(g) > 1})
        if dupes:
            raise _problem(f"{key}.generations", f"lists {', '.join(map(str, dupes))} twice; each generation once")
        if self.signing is not None and self.signing not in self.generations:
            raise _problem(
                f"{key}.signing",
                f"{self.signing} is not one of {key}.generations {list(self.generations)}: sign with a published CA",
            )
        return self

    @property
    def signer(self) -> int:
        """The generation that signs the certificates: `signing`, else the last published one."""
        return self.signing if self.signing is not None else self.generations[-1]


class HostIdentityOn(_Model):
    """`ssh-gateway:hostIdentity`: each instance gets a host key and a certificate from the stack's SSH host CA."""

    enabled: Literal[True] = True
    valid_days: int = Field(default=365, alias="validDays", ge=1, le=MAX_VALID_DAYS)
    ca: HostCa = HostCa()


class HostIdentityOff(_Model):
    """`ssh-gateway:hostIdentity` with `enabled: false`: no keys issued (only pinned `hostKey`s are published)."""

    enabled: Literal[False]


HostIdentity = Annotated[
    Annotated[HostIdentityOn, Tag("on")] | Annotated[HostIdentityOff, Tag("off")], Discriminator(_enabled_tag)
]


class Gateway(_Model):
    """`ssh-gateway:gateway`: the public side that Pangolin's Gerbil and Traefik publish (not owned here)."""

    host_template: Annotated[str, AfterValidator(_host_template)] = Field(
        alias="hostTemplate", description='public name, e.g. "ssh-{instance}.example.com"'
    )
    published_range: Range | None = Field(default=None, alias="publishedRange", description="default ports.range")


class _InstanceBase(_Model):
    name: DnsLabel
    user: str = Field(default="root", pattern=r"^[A-Za-z_][A-Za-z0-9._-]{0,31}$")
    port: Port | None = Field(default=None, description="pin the public port")
    source_cidrs: SourceList | None = Field(default=None, alias="sourceCidrs")
    host_key: Annotated[str, AfterValidator(_host_key)] | None = Field(default=None, alias="hostKey")
    host_key_generation: Generation = Field(
        default=1, alias="hostKeyGeneration", description="bump to rotate the instance's issued host key"
    )


class _ServiceInstance(_InstanceBase):
    selector: dict[str, str] | None = Field(default=None, description='pod selector; default {"app": name}')
    pod_port: Port = Field(default=22, alias="podPort")


class NodePortInstance(_ServiceInstance):
    """An instance reached at the node's IP and its Service's nodePort (the default target)."""

    target: Literal["nodePort"] = "nodePort"
    node_port: Annotated[int, Field(ge=30000, le=32767)] | None = Field(default=None, alias="nodePort")


class ClusterIpInstance(_ServiceInstance):
    """An instance reached at its Service's cluster DNS name (a Newt site inside the cluster)."""

    target: Literal["clusterIp"]


class StaticInstance(_InstanceBase):
    """An instance at a fixed host:port (a VM, or any host outside Kubernetes)."""

    target: Literal["static"]
    static_host: Host = Field(alias="staticHost")
    static_port: Port = Field(alias="staticPort")


TARGETS: Final = ("nodePort", "clusterIp", "static")


def _target_tag(value: Any) -> str:
    return str(value.get("target", "nodePort") if isinstance(value, Mapping) else getattr(value, "target"))  # noqa: B009


Instance = Annotated[
    Annotated[NodePortInstance, Tag("nodePort")]
    | Annotated[ClusterIpInstance, Tag("clusterIp")]
    | Annotated[StaticInstance, Tag("static")],
    Discriminator(
        _target_tag,
        custom_error_type="unknown_target",
        custom_error_message=f"unknown target; allowed: {', '.join(TARGETS)}",
    ),
]


class Settings(_Model):
    """All of a stack's `ssh-gateway:*` config."""

    production: bool = False
    pangolin: Pangolin
    ports: Ports
    gateway: Gateway
    kubernetes: Kubernetes = Kubernetes()
    firewall: Firewall = FirewallOff(enabled=False)
    host_identity: HostIdentity = Field(default=HostIdentityOn(), alias="hostIdentity")
    instances: tuple[Instance, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        names = [i.name for i in self.instances]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise _problem("instances", f"duplicate name(s) {', '.join(dupes)}; each instance needs its own name")
        for index, inst in enumerate(self.instances):
            if isinstance(inst, NodePortInstance) and self.kubernetes.render_dir and inst.node_port is None:
                raise _problem(
                    f"instances[{index}].nodePort",
                    f"instance {inst.name!r} needs nodePort pinned when kubernetes.renderDir is set "
                    "(a rendered Service gets no server-assigned nodePort)",
                )
            try:
                self.target_of(inst)
            except ValueError as exc:
                raise _problem(f"instances[{index}].target", str(exc)) from None
            if inst.host_key is not None and "host_key_generation" in inst.model_fields_set:
                raise _problem(
                    f"instances[{index}].hostKeyGeneration",
                    f"instance {inst.name!r} pins hostKey, so it is issued no host key to rotate: drop one of the two",
                )
        if not self.published_range.covers(self.ports.range):
            raise _problem(
                "gateway.publishedRange",
                f"ports.range {self.ports.range} is not inside gateway.publishedRange {self.published_range}: "
                "Gerbil/Traefik would not publish every allocatable port; narrow ports.range or publish more",
            )
        if isinstance(self.firewall, FirewallOn):
            try:
                check_priorities(self.ports.range, self.firewall.priority_base)
            except ValueError as exc:
                raise _problem("firewall.priorityBase", str(exc)) from None
        return self

    def target_of(self, inst: Instance) -> Target:
        """Where the instance's Pangolin target points, with the cluster's settings filled in."""
        kube = self.kubernetes
        if isinstance(inst, StaticInstance):
            return StaticTarget(host=inst.static_host, port=inst.static_port)
        service = service_spec(inst.name, kube.namespace, inst.selector, inst.pod_port, skip_await=kube.skip_await)
        if isinstance(inst, ClusterIpInstance):
            return ClusterIpTarget(service=service, cluster_domain=kube.cluster_domain)
        if kube.node_ip is None:
            raise ValueError(f"instance {inst.name!r} has target nodePort, so set kubernetes.nodeIp (or use clusterIp)")
        return NodePortTarget(service=service, node_ip=kube.node_ip, node_port=inst.node_port)

    def issues_host_key(self, inst: Instance) -> bool:
        """Whether the program issues the instance a host key and certificate: host identity is on and no
        `hostKey` is pinned (a pinned key keeps the plain known_hosts line, as before)."""
        return isinstance(self.host_identity, HostIdentityOn) and inst.host_key is None

    def delivers_secret(self, inst: Instance) -> bool:
        """Whether the issued identity goes into a Kubernetes Secret next to the instance's Service: not for a
        static target (the operator installs it from `hostIdentities`), nor when manifests are rendered to disk
        (a rendered Secret is a private key in plaintext on disk)."""
        return self.issues_host_key(inst) and not isinstance(inst, StaticInstance) and not self.kubernetes.render_dir

    @property
    def published_range(self) -> PortRange:
        """The ports the gateway publishes: `gateway.publishedRange`, else `ports.range`."""
        return self.gateway.published_range or self.ports.range

    def warnings(self) -> Iterator[str]:
        """What is allowed but likely to hurt, one line each, naming the key."""
        if self.ports.range.overlaps(EPHEMERAL):
            yield (
                f"{NAMESPACE}:ports.range {self.ports.range} overlaps Linux's ephemeral ports {EPHEMERAL} "
                "(net.ipv4.ip_local_port_range): the gateway host's own outgoing connections can take a port "
                "before Gerbil binds it; prefer a range below 32768"
            )
        undelivered = [i.name for i in self.instances if self.issues_host_key(i) and not isinstance(i, StaticInstance)]
        if self.kubernetes.render_dir and undelivered:
            yield (
                f"{NAMESPACE}:kubernetes.renderDir is set, so the host-key Secrets of {', '.join(undelivered)} are not "
                "rendered (they would be private keys in plaintext on disk): create them from the secret output "
                "hostIdentities (docs/host-identity.md)"
            )


def _problem(key: str, message: str) -> PydanticCustomError:
    """A cross-field problem whose message starts with the key it is about (see `_key_of`)."""
    return PydanticCustomError("settings", "{key}: {message}", {"key": key, "message": message})


class SettingsError(ValueError):
    """Config that cannot be used; the message lists every problem, each naming its key and value."""


_TAGS: Final = frozenset({*TARGETS, "on", "off"})
_SECTIONS: Final[Mapping[str, tuple[type[BaseModel], ...]]] = {
    "hostIdentity": (HostIdentityOn,),
    "hostIdentity.ca": (HostCa,),
    "": (Settings,),
    "ports": (Ports,),
    "pangolin": (Pangolin,),
    "kubernetes": (Kubernetes,),
    "firewall": (FirewallOn,),
    "gateway": (Gateway,),
    "instances": (NodePortInstance, ClusterIpInstance, StaticInstance),
}


def _keys_at(loc: Sequence[int | str], models: tuple[type[BaseModel], ...] | None = None) -> list[str]:
    """The keys allowed where `loc` (an unknown key's location) points, or in the given models."""
    section = ".".join(p for p in loc[:-1] if isinstance(p, str) and p not in _TAGS and not p.startswith("function-"))
    models = _SECTIONS.get(section, ()) if models is None else models
    return sorted({str(f.alias or n) for model in models for n, f in model.model_fields.items()})


def _unknown_key(loc: Sequence[int | str]) -> str:
    """ "unknown key", with the key meant, or the targets a key belongs to when it is another target's."""
    key = str(loc[-1])
    tag = next((p for p in loc if isinstance(p, str) and p in TARGETS), None)
    if tag is not None and key in _keys_at(loc):
        owners = [t for t, m in zip(TARGETS, _SECTIONS["instances"], strict=True) if key in _keys_at(loc, (m,))]
        return f"not a key of target {tag}; it belongs to target {' and '.join(owners)}"
    return f"unknown key{_did_you_mean(key, _keys_at(loc))}"


def _without_tags(loc: Sequence[int | str]) -> list[int | str]:
    """The location without pydantic's union tags."""
    out: list[int | str] = []
    for index, part in enumerate(loc):
        after = loc[index - 1] if index else None
        # A target's tag follows an instance's index; on/off (firewall, hostIdentity) are never field names.
        tag = isinstance(part, str) and (part in ("on", "off") or (part in _TAGS and isinstance(after, int)))
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
    if err["type"] == "unknown_target":
        target = _value_at(raw, (*loc, "target"))
        return f"{_key(loc)}.target = {json.dumps(target)}: {message}{_did_you_mean(str(target), TARGETS)}"
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
