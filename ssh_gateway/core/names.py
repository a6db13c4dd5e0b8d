"""Names: of Pangolin resources, Services and ssh aliases, of each instance's children, and the type tokens.

An instance's resources are found again - by the preview summary, the drift check, the doctor and the policy
pack - in one way only: `instance_of(urn)`, from the URN's type chain and the child's role suffix.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

__all__ = [
    "ALLOCATION_KIND",
    "ALLOCATION_MODULE",
    "ALLOCATION_TYPE",
    "COMPONENT_TYPE",
    "CONFIG_MAP_TYPE",
    "CONNECT_ENTRY",
    "CONNECT_ENTRY_TYPE",
    "CONNECT_INSTANCE_TYPE",
    "DEAD_HOLDERS_ANNOTATION",
    "DISCOVERY_ANNOTATED_KEYS",
    "DISCOVERY_PREFIX",
    "ENVOY_FILTER_TYPE",
    "FIREWALL",
    "FIREWALL_TYPE",
    "HOST_CA_KIND",
    "HOST_CA_TYPE",
    "HOST_IDENTITY_MODULE",
    "HOST_KEY_ROOT_KIND",
    "HOST_KEY_ROOT_NAME",
    "HOST_KEY_ROOT_TYPE",
    "HOST_KEY_TYPE",
    "INSTANCE_LABEL",
    "INSTANCE_PLACEHOLDER",
    "INSTANCE_TYPES",
    "ISTIO_GATEWAY_TYPE",
    "LAST_UP_ANNOTATION",
    "MANAGED_BY",
    "MANAGED_BY_LABEL",
    "NSG_RULE_TYPE",
    "NSG_TYPE",
    "PANGOLIN_KIND",
    "PANGOLIN_MODULE",
    "PANGOLIN_TYPE",
    "PORT_CHECK_KIND",
    "PORT_CHECK_TYPE",
    "SECRET_TYPE",
    "SERVICE_TYPE",
    "STACK_LABEL",
    "STACK_MARK",
    "STACK_TYPE",
    "STATUS_HELD_KEY",
    "STATUS_KEY_MAX",
    "STATUS_PORTS_KEY",
    "STATUS_RESOURCE_NAME",
    "STATUS_SELECTION_KEY",
    "STATUS_UNLISTED_KEY",
    "DiscoverFrom",
    "Role",
    "StackName",
    "child_name",
    "connect_resource_name",
    "connect_rule_name",
    "discovery_annotation",
    "entry_of",
    "entry_point_name",
    "entry_point_port",
    "host_ca_name",
    "host_key_secret_name",
    "instance_of",
    "merged_rule_key",
    "merged_rule_name",
    "merged_rule_resource",
    "nsg_rule_name",
    "owner_prefix",
    "pangolin_resource_name",
    "public_host",
    "reconcile_lease_name",
    "service_name",
    "ssh_alias",
    "stack_label",
    "stack_mark",
    "stack_marked",
    "status_config_map_name",
    "status_instance_key",
    "status_refused_key",
    "type_chain",
    "urn_name",
    "urn_type",
]

INSTANCE_PLACEHOLDER: Final = "{instance}"
"""The placeholder of `gateway.hostTemplate`, replaced by each instance's name."""

COMPONENT_TYPE: Final = "ssh-gateway:index:SshInstance"
"""The component that is one instance (routing `port`: a public port of its own)."""

CONNECT_INSTANCE_TYPE: Final = "ssh-gateway:index:ConnectSshInstance"
"""The component that is one instance with routing `connect` (behind the stack's CONNECT entry)."""

INSTANCE_TYPES: Final = (COMPONENT_TYPE, CONNECT_INSTANCE_TYPE)
"""An instance is one of these components, whichever its routing."""

CONNECT_ENTRY_TYPE: Final = "ssh-gateway:index:ConnectEntry"
"""The stack's one CONNECT entry: the gateway's EnvoyFilter and the public way in."""

CONNECT_ENTRY: Final = "connect"
"""The Pulumi name of the stack's `ConnectEntry`; its children are `connect-<role>`."""

FIREWALL_TYPE: Final = "ssh-gateway:index:PortFirewall"
"""The stack's merged NSG rules (`firewall.rules: merged`): one per set of sources, each for many ports."""

FIREWALL: Final = "firewall"
"""The Pulumi name of the stack's `PortFirewall`; its rules are `firewall-ports` and `firewall-ports-<key>`."""

ENVOY_FILTER_TYPE: Final = "kubernetes:networking.istio.io/v1alpha3:EnvoyFilter"
"""Istio's EnvoyFilter, as pulumi-kubernetes types a CustomResource of that apiVersion and kind."""

ISTIO_GATEWAY_TYPE: Final = "kubernetes:networking.istio.io/v1:Gateway"
"""Istio's Gateway (the CONNECT entry's, where the stack creates one)."""

PANGOLIN_MODULE: Final = "pangolin"
PANGOLIN_KIND: Final = "TcpResource"
PANGOLIN_TYPE: Final = f"pulumi-python:dynamic/{PANGOLIN_MODULE}:{PANGOLIN_KIND}"
"""A Pangolin raw TCP/UDP resource with its target (a Python dynamic resource)."""
PORT_CHECK_KIND: Final = "PortCheck"
PORT_CHECK_TYPE: Final = f"pulumi-python:dynamic/{PANGOLIN_MODULE}:{PORT_CHECK_KIND}"
"""The once-per-run check that none of the stack's Pangolin ports is bound twice."""

ALLOCATION_MODULE: Final = "ssh-gateway"
ALLOCATION_KIND: Final = "PortAllocation"
ALLOCATION_TYPE: Final = f"pulumi-python:dynamic/{ALLOCATION_MODULE}:{ALLOCATION_KIND}"
"""The stack's port table."""

HOST_IDENTITY_MODULE: Final = "ssh-gateway"
HOST_CA_KIND: Final = "SshHostCa"
HOST_CA_TYPE: Final = f"pulumi-python:dynamic/{HOST_IDENTITY_MODULE}:{HOST_CA_KIND}"
"""A generation of the stack's SSH host CA."""
HOST_KEY_KIND: Final = "SshHostKey"
HOST_KEY_TYPE: Final = f"pulumi-python:dynamic/{HOST_IDENTITY_MODULE}:{HOST_KEY_KIND}"
"""An instance's host key and its certificate, as stacks kept them before the keys were derived (the program
registers none now; the engine deletes those it finds)."""
HOST_KEY_ROOT_KIND: Final = "SshHostKeyRoot"
HOST_KEY_ROOT_TYPE: Final = f"pulumi-python:dynamic/{HOST_IDENTITY_MODULE}:{HOST_KEY_ROOT_KIND}"
"""The stack's host-key root, from which every instance's host key is derived."""

NSG_RULE_TYPE: Final = "azure-native:network:SecurityRule"
NSG_TYPE: Final = "azure-native:network:NetworkSecurityGroup"
CONFIG_MAP_TYPE: Final = "kubernetes:core/v1:ConfigMap"
SECRET_TYPE: Final = "kubernetes:core/v1:Secret"  # noqa: S105 - a type token, not a password
SERVICE_TYPE: Final = "kubernetes:core/v1:Service"
STACK_TYPE: Final = "pulumi:pulumi:Stack"


class Role(StrEnum):
    """What a child of an instance is for; its Pulumi name is `<instance>-<role>`."""

    SERVICE = "service"
    PANGOLIN = "pangolin"
    NSG_RULE = "nsg-rule"
    ROUTE = "route"
    """A connect-mode instance's EnvoyFilter: its virtual host on the gateway."""
    GATEWAY_FILTER = "gateway-filter"
    """The CONNECT entry's EnvoyFilter that turns CONNECT on in the gateway's listener."""
    GATEWAY = "gateway"
    """The CONNECT entry's Istio `Gateway`, where the stack creates one (`connect.gateway.createGateway`)."""
    HOST_KEY = "host-key"
    HOST_KEY_SECRET = "host-key-secret"  # noqa: S105 - a role, not a password


def child_name(instance: str, role: Role) -> str:
    """The Pulumi name of an instance's child, e.g. `gpu-01-pangolin`."""
    return f"{instance}-{role}"


STACK_MARK: Final = "ssh-gateway/stack"
"""The annotation on each Kubernetes object the program makes (its Services and Secrets), holding the owning
stack's `stack_mark`. `recover` adopts an object that no state holds only when it carries this stack's mark:
the name alone is no proof (another stack, or a person, may have made an object of that name)."""


@dataclass(frozen=True)
class StackName:
    """A stack by its project and its name: the names of the stack's resources, rules and marks are built from
    both (`pulumi.get_project()`, `pulumi.get_stack()` in the program)."""

    project: str
    stack: str


def stack_mark(project: str, stack: str) -> str:
    """The owning stack as the marks write it: `<project>/<stack>`, e.g. `ssh-gateway/prod`."""
    return f"{project}/{stack}"


def stack_marked(description: str, project: str, stack: str) -> str:
    """An NSG rule's description with the owning stack's mark (a rule has no labels; its description is the
    one free-text field Azure keeps), e.g. `... [stack ssh-gateway/prod]`."""
    return f"{description} [stack {stack_mark(project, stack)}]"


def owner_prefix(project: str, stack: str) -> str:
    """Prefix of every Pangolin resource name this stack owns, e.g. `ssh-gateway/prod/`."""
    return f"{project}/{stack}/"


def pangolin_resource_name(project: str, stack: str, instance: str) -> str:
    """The Pangolin resource name of an instance: it identifies the stack and the instance."""
    return f"{owner_prefix(project, stack)}{instance}"


def connect_resource_name(project: str, stack: str) -> str:
    """The Pangolin resource of the stack's CONNECT entry, `<project>/<stack>/@connect`: the `@` keeps it apart
    from every instance's (an instance name is a DNS label)."""
    return f"{owner_prefix(project, stack)}@{CONNECT_ENTRY}"


def service_name(instance: str) -> str:
    """The Kubernetes Service in front of an instance's sshd."""
    return f"ssh-{instance}"


def public_host(template: str, instance: str) -> str:
    """The public name users ssh to, from `gateway.hostTemplate`."""
    return template.replace(INSTANCE_PLACEHOLDER, instance)


_ENTRY_POINT: Final = re.compile(r"tcp-(\d{1,5})")


def entry_point_name(port: int) -> str:
    """The Traefik entry point of a public port, `tcp-<port>`: the name Pangolin's routers give it, which only
    Traefik's static configuration can create."""
    return f"tcp-{port}"


def entry_point_port(name: str) -> int | None:
    """The port of an entry point named by `entry_point_name`, else None."""
    found = _ENTRY_POINT.fullmatch(name)
    return int(found[1]) if found else None


def host_key_secret_name(instance: str) -> str:
    """The Kubernetes Secret holding an instance's host key and certificate, next to its Service."""
    return f"ssh-{instance}-host-key"


def nsg_rule_name(instance: str) -> str:
    """The Azure NSG inbound rule of an instance's public port (the CONNECT port's is `connect_rule_name`)."""
    return f"ssh-gateway-{instance}"


def merged_rule_name(project: str, stack: str, key: str) -> str:
    """A merged NSG rule of the stack, `<project>.<stack>.ports` for its default sources and
    `<project>.<stack>.ports-<key>` for another set: unique per stack in an NSG that shards share, and apart from
    instances' rules (`ssh-gateway-<instance>`: an instance name has no dot)."""
    return f"{project}.{stack}.ports" + (f"-{key}" if key else "")


def connect_rule_name(project: str, stack: str) -> str:
    """The stack's NSG rule of its CONNECT port, `<project>.<stack>.connect`: unique per stack in an NSG that
    shards share, beside its merged rules' `<project>.<stack>.ports`."""
    return f"{project}.{stack}.connect"


def merged_rule_key(rule_name: str, project: str, stack: str) -> str | None:
    """The key of one of this stack's merged rules from its NSG rule name (`""` for the default sources), or None
    for any other rule."""
    prefix = merged_rule_name(project, stack, "")
    if rule_name == prefix:
        return ""
    return rule_name.removeprefix(f"{prefix}-") if rule_name.startswith(f"{prefix}-") else None


def merged_rule_resource(key: str) -> str:
    """The Pulumi name of a merged rule, a child of the stack's `PortFirewall`."""
    return f"{FIREWALL}-ports" + (f"-{key}" if key else "")


HOST_KEY_ROOT_NAME: Final = "host-key-root"
"""The Pulumi name of the stack's host-key root (one per stack, no instance owns it)."""


def host_ca_name(generation: int) -> str:
    """The Pulumi name of one generation of the stack's SSH host CA, e.g. `host-ca-g1`."""
    return f"host-ca-g{generation}"


def ssh_alias(instance: str) -> str:
    """The `Host` alias in the generated ssh config (one per instance, so VS Code lists each)."""
    return f"ssh-{instance}"


def urn_name(urn: str) -> str:
    """The resource's own name, the URN's last part."""
    return urn.rsplit("::", 1)[-1]


def type_chain(urn: str) -> list[str]:
    """The URN's types, outermost parent first: `[SshInstance, TcpResource]` for an instance's child."""
    parts = urn.split("::")
    return parts[2].split("$") if len(parts) >= 4 else []


def urn_type(urn: str) -> str:
    """The resource's own type token (the last of the URN's type chain)."""
    chain = type_chain(urn)
    return chain[-1] if chain else ""


def instance_of(urn: str) -> str | None:
    """The instance a resource belongs to: the instance's component itself (`SshInstance` or
    `ConnectSshInstance`), or one of its children; else None."""
    chain = type_chain(urn)
    if not chain or not any(t in chain for t in INSTANCE_TYPES):
        return None
    name = urn_name(urn)
    if chain[-1] in INSTANCE_TYPES:
        return name
    for role in Role:
        if name.endswith(f"-{role}"):
            return name.removesuffix(f"-{role}")
    return None


def entry_of(urn: str) -> bool:
    """Whether a resource is the stack's CONNECT entry or one of its children."""
    return CONNECT_ENTRY_TYPE in type_chain(urn)


# --- instances discovered from the cluster (docs/cluster-instances.md) ---------------------------------------


class DiscoverFrom(StrEnum):
    """What `ssh-gateway:discovery.from` lists: the objects an instance is discovered from."""

    SERVICES = "services"
    """The platform's own Services (e.g. an `ssh-*` NodePort Service per instance): the target, not owned."""
    PODS = "pods"
    """The pods themselves: the stack makes the `ssh-<instance>` Service in front of each."""


DISCOVERY_PREFIX: Final = "ssh-gateway.io/"
"""The prefix of every label and annotation ssh-gateway reads on, or writes to, the cluster's objects."""

DISCOVERY_ANNOTATED_KEYS: Final = ("user", "routing", "sourceCidrs", "hostKeyGeneration", "hostKey", "port", "podPort")
"""The instance keys a discovered object may set, each as the annotation `ssh-gateway.io/<key>`; the others (name,
target, selector, nodePort, staticHost/Port) come from the object itself."""


def discovery_annotation(key: str) -> str:
    """The annotation of a discovered object that sets the instance key `key`, e.g. `ssh-gateway.io/user`."""
    return f"{DISCOVERY_PREFIX}{key}"


MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "ssh-gateway"
"""The value of `MANAGED_BY_LABEL` on the objects the program makes."""
INSTANCE_LABEL: Final = "ssh-gateway/instance"
"""The label naming the instance an object the program makes is for (its Service, Secret and EnvoyFilter)."""

STACK_LABEL: Final = f"{DISCOVERY_PREFIX}stack"
"""The label of a stack's status ConfigMap holding `stack_label`: how stacks find each other's selections."""

STATUS_TYPE: Final = CONFIG_MAP_TYPE
"""The stack's status ConfigMap (one per stack with `ssh-gateway:discovery`)."""

STATUS_RESOURCE_NAME: Final = "discovery-status"
"""The Pulumi name of the stack's status ConfigMap (one per stack, no instance owns it)."""

STATUS_SELECTION_KEY: Final = "selection.json"
"""The status key holding the stack's selection (`from`, namespaces, selector): other stacks read it."""

STATUS_HELD_KEY: Final = "held.json"
"""The status key holding the removals the guard (`discovery.maxRemovals`) held back, while it holds them."""

STATUS_PORTS_KEY: Final = "ports.json"
"""The status key holding the port range and how many of its ports are free after the run (the reconciler's gauge)."""

STATUS_UNLISTED_KEY: Final = "refused-unlisted.json"
"""The status key counting the refused objects whose lines did not fit in the ConfigMap, while some do not."""


def stack_label(project: str, stack: str) -> str:
    """The stack as its status ConfigMap's `STACK_LABEL` names it: `<project>.<stack>` (a label value has no '/')."""
    return f"{project}.{stack}"


def status_config_map_name(stack: str) -> str:
    """The stack's status ConfigMap, e.g. `ssh-gateway-status-prod`."""
    return f"ssh-gateway-status-{stack}"


def reconcile_lease_name(stack: str) -> str:
    """The stack's Lease (coordination.k8s.io), held by `ssh-gateway reconcile` while it runs the stack's `up`."""
    return f"ssh-gateway-reconcile-{stack}"


LAST_UP_ANNOTATION: Final = f"{DISCOVERY_PREFIX}last-up"
"""The annotation of a stack's Lease recording the last `up` run under it: when it started, its exit code, who."""

DEAD_HOLDERS_ANNOTATION: Final = f"{DISCOVERY_PREFIX}dead-holders"
"""The annotation of a stack's Lease naming the holders it was taken over from (they stopped renewing mid-`up`)
since the last `up` that succeeded: each may have left a stack lock that only `recover --gone-host` clears."""


def status_instance_key(instance: str) -> str:
    """The status key of a discovered instance: its object, accepted annotations, endpoint and `missingSince`."""
    return f"instance.{instance}.json"


STATUS_KEY_MAX: Final = 253
"""The longest ConfigMap key Kubernetes takes."""


def status_refused_key(namespace: str, name: str) -> str:
    """The status key of a refused object: the one-line reason (ConfigMap keys allow `[-._a-zA-Z0-9]`, at most
    253). An object name may be 253 characters alone: a key that would be longer keeps a prefix of it and a hash
    of the whole, so one tenant's long name can never make the status unwritable."""
    key = f"refused.{namespace}.{name}.json"
    if len(key) <= STATUS_KEY_MAX:
        return key
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:12]
    keep = STATUS_KEY_MAX - len(f"refused.{namespace}.-{digest}.json")
    return f"refused.{namespace}.{name[:keep]}-{digest}.json"
