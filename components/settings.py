"""Stack settings: the `ssh-gateway:*` config keys, validated before any resource is registered.

Every key is parsed into one pydantic model; an unknown key, a bad value or a cross-field conflict fails with
a message that names the config key, the value and what is allowed. No Pulumi resources live here.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pulumi.runtime.config import CONFIG
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from providers.port_allocation.allocate import PortRange

NAMESPACE = "ssh-gateway"
_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


def _dns_label(value: str) -> str:
    if not _DNS_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a DNS label: use 1-63 lowercase letters, digits and '-', starting and ending "
            "with a letter or digit"
        )
    return value


def _host(value: str) -> str:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        if not _HOSTNAME.match(value):
            raise ValueError(f"{value!r} is neither an IP address nor a hostname") from None
    return value


def _cidr(value: str) -> str:
    if value in ("*", "Internet"):  # Azure service tags, allowed but flagged by policy in production
        return value
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a CIDR such as 203.0.113.0/24 ({exc})") from None


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
Host = Annotated[str, AfterValidator(_host)]
Cidr = Annotated[str, AfterValidator(_cidr)]
Port = Annotated[int, Field(ge=1, le=65535)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=False)


class Ports(_Model):
    """`ssh-gateway:ports`: the public port range instances are allocated from."""

    range: str = Field(description='"start-end", inclusive, e.g. "40000-40099"')
    reserved: tuple[Port, ...] = ()

    @field_validator("range")
    @classmethod
    def _range(cls, value: str) -> str:
        match = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", value)
        if not match:
            raise ValueError(f'{value!r} is not a range "start-end" such as "40000-40099"')
        start, end = int(match[1]), int(match[2])
        if not 1 <= start <= end <= 65535:
            raise ValueError(f"{value!r} must satisfy 1 <= start <= end <= 65535 (start {start}, end {end})")
        return f"{start}-{end}"

    @property
    def port_range(self) -> PortRange:
        start, end = self.range.split("-")
        return PortRange(start=int(start), end=int(end))


class Pangolin(_Model):
    """`ssh-gateway:pangolin`: where the gateway's Integration API is. The key is `pangolin:apiKey` (secret)."""

    url: str = Field(description="Integration API base, e.g. https://api.example.com/v1")
    org_id: str = Field(alias="orgId", min_length=1, max_length=32)
    site_id: int = Field(alias="siteId", ge=1)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.match(r"^https?://[^/\s]+(/\S*)?$", value):
            raise ValueError(f"{value!r} is not an http(s) URL such as https://api.example.com/v1")
        return value.rstrip("/")


class Kubernetes(_Model):
    """`ssh-gateway:kubernetes`: where the instances' SSH Services go."""

    namespace: DnsLabel = "default"
    render_dir: str | None = Field(default=None, alias="renderDir", description="render YAML instead of applying")
    kubeconfig: str | None = None
    context: str | None = None
    node_ip: Host | None = Field(default=None, alias="nodeIp", description="target of NodePort instances")
    cluster_domain: str = Field(default="cluster.local", alias="clusterDomain")
    skip_await: bool = Field(
        default=False,
        alias="skipAwait",
        description="for control-plane-only test clusters; leave off in real stacks",
    )


class Firewall(_Model):
    """`ssh-gateway:firewall`: one Azure NSG inbound rule per allocated port."""

    enabled: bool = True
    resource_group: str | None = Field(default=None, alias="resourceGroup")
    nsg_name: str | None = Field(default=None, alias="nsgName")
    source_cidrs: tuple[Cidr, ...] = Field(default=(), alias="sourceCidrs")
    priority_base: int = Field(default=1000, alias="priorityBase", ge=100, le=4096)

    @model_validator(mode="after")
    def _complete_when_enabled(self) -> Firewall:
        if self.enabled:
            missing = [k for k, v in (("resourceGroup", self.resource_group), ("nsgName", self.nsg_name)) if not v]
            if missing:
                raise ValueError(f"firewall is enabled but {', '.join(missing)} is not set; set it or enabled: false")
            if not self.source_cidrs:
                raise ValueError("firewall is enabled but sourceCidrs is empty; list the CIDRs allowed to ssh in")
        return self


class Gateway(_Model):
    """`ssh-gateway:gateway`: the public side that Pangolin's Gerbil and Traefik publish (not owned here)."""

    host_template: str = Field(alias="hostTemplate", description='public name, e.g. "ssh-{instance}.example.com"')
    published_range: str | None = Field(
        default=None, alias="publishedRange", description="ports Gerbil publishes; defaults to ports.range"
    )

    @field_validator("host_template")
    @classmethod
    def _template(cls, value: str) -> str:
        _host(value.replace("{instance}", "x"))
        return value

    @field_validator("published_range")
    @classmethod
    def _published(cls, value: str | None) -> str | None:
        return None if value is None else Ports(range=value).range


TargetMode = Literal["nodePort", "clusterIp", "static"]


class Instance(_Model):
    """One entry of `ssh-gateway:instances`."""

    name: DnsLabel
    user: str = Field(default="root", pattern=r"^[A-Za-z_][A-Za-z0-9._-]{0,31}$")
    target: TargetMode = "nodePort"
    port: Port | None = Field(default=None, description="pin the public port")
    selector: dict[str, str] | None = Field(default=None, description='pod selector; default {"app": name}')
    pod_port: Port = Field(default=22, alias="podPort")
    node_port: Annotated[int, Field(ge=30000, le=32767)] | None = Field(default=None, alias="nodePort")
    static_host: Host | None = Field(default=None, alias="staticHost")
    static_port: Port | None = Field(default=None, alias="staticPort")
    source_cidrs: tuple[Cidr, ...] | None = Field(default=None, alias="sourceCidrs")
    host_key: str | None = Field(default=None, alias="hostKey", description="pinned public host key")

    @model_validator(mode="after")
    def _target_complete(self) -> Instance:
        if self.target == "static" and not (self.static_host and self.static_port):
            raise ValueError(f"instance {self.name!r} has target static but no staticHost/staticPort")
        if self.target != "static" and (self.static_host or self.static_port):
            raise ValueError(f"instance {self.name!r} sets staticHost/staticPort but its target is {self.target}")
        return self


class Settings(_Model):
    """All of a stack's `ssh-gateway:*` config."""

    production: bool = False
    pangolin: Pangolin
    ports: Ports
    gateway: Gateway
    kubernetes: Kubernetes = Kubernetes()
    firewall: Firewall = Firewall(enabled=False)
    instances: tuple[Instance, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        names = [i.name for i in self.instances]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"instances: duplicate name(s) {', '.join(dupes)}; each instance needs its own name")
        for inst in self.instances:
            if inst.target == "nodePort" and self.kubernetes.render_dir and inst.node_port is None:
                raise ValueError(
                    f"instance {inst.name!r}: NodePort targets need nodePort pinned when kubernetes.renderDir is set "
                    "(a rendered Service gets no server-assigned nodePort)"
                )
            if inst.target == "nodePort" and not self.kubernetes.node_ip:
                raise ValueError(f"instance {inst.name!r} has target nodePort but kubernetes.nodeIp is not set")
        published = Ports(range=self.gateway.published_range or self.ports.range).port_range
        own = self.ports.port_range
        if own.start < published.start or own.end > published.end:
            raise ValueError(
                f"ports.range {own} is not inside gateway.publishedRange {published}: Gerbil/Traefik would not "
                "publish every allocatable port; narrow ports.range or publish more"
            )
        return self

    @property
    def published_range(self) -> PortRange:
        return Ports(range=self.gateway.published_range or self.ports.range).port_range


class SettingsError(ValueError):
    """Config that cannot be used; the message lists every problem, each naming its key and value."""


def _key(loc: tuple[int | str, ...]) -> str:
    """`('instances', 2, 'name')` -> `ssh-gateway:instances[2].name`."""
    out = f"{NAMESPACE}:{loc[0]}" if loc else NAMESPACE
    for part in loc[1:]:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _value_at(raw: Any, loc: tuple[int | str, ...]) -> Any:
    for part in loc:
        try:
            raw = raw[part]
        except (KeyError, IndexError, TypeError):
            return None
    return raw


def parse_settings(raw: Mapping[str, Any]) -> Settings:
    """Validates the `ssh-gateway:*` config (keys without the namespace, values already JSON-decoded)."""
    try:
        return Settings.model_validate(dict(raw))
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            value = _value_at(raw, loc) if loc else None
            shown = f" = {json.dumps(value)}" if value is not None else ""
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                message = "unknown key; check its spelling against the README's config table"
            problems.append(f"{_key(loc)}{shown}: {message}")
        raise SettingsError("invalid stack config:\n  " + "\n  ".join(problems)) from None


def decode_config(config: Mapping[str, str]) -> dict[str, Any]:
    """Takes Pulumi's flat config (`"ssh-gateway:ports" -> JSON text`) and returns this namespace, decoded."""
    prefix = f"{NAMESPACE}:"
    out: dict[str, Any] = {}
    for key, text in config.items():
        if key.startswith(prefix):
            try:
                out[key[len(prefix) :]] = json.loads(text)
            except (json.JSONDecodeError, TypeError):
                out[key[len(prefix) :]] = text
    return out


def load_settings() -> Settings:
    """The running stack's settings, from its config (the program's entry point)."""
    # The SDK has no public way to list config keys, and unknown keys can only be found by listing them.
    config: dict[str, str] = dict(CONFIG.get())
    return parse_settings(decode_config(config))
