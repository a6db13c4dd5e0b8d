"""The names the program derives from an instance, checked against the rules of the system that takes each one.

An instance name is a DNS label of at most 63 characters, but the program builds longer names from it, and each
goes to a system with rules of its own. A name that breaks one is refused here, at preview, before anything is
made; otherwise the API server (or Azure) refuses it in the middle of `up`, after Pangolin resources were made,
or (a public host name) nothing refuses it and no DNS can serve it.

- `ssh-<name>`, the Service (every target but static): a DNS-1035 label, `[a-z]([-a-z0-9]*[a-z0-9])?`, at most 63.
- `ssh-<name>-host-key`, the host-key Secret beside it: a DNS-1123 subdomain (lowercase labels joined by '.'), at
  most 253.
- `ssh-gateway-<name>`, the NSG rule (firewall on, routing port): Azure's rule for `securityRules`, 1-80 letters,
  digits, '_', '.' and '-', starting with a letter or digit and ending with one or '_'.
- `gateway.hostTemplate` with the name, the public host (routing port), and with `connect`, the CONNECT entry's
  (unless `connect.public.host` is set): a DNS name, labels of at most 63 and at most 253 in all.
- `ssh-<name>.<namespace>.svc.<domain>`, the CONNECT authority (routing connect): a DNS name too.

With instance names DNS labels of at most 63, only the Service, the public host and the authority can break
their rules today (the Secret and the NSG rule are at most 75 characters); the other two are checked all the
same, so that a longer prefix or a wider instance name cannot slip through.

Sources: Kubernetes' `IsDNS1035Label` and `IsDNS1123Subdomain` (k8s.io/apimachinery `pkg/util/validation`; a
Secret's name is a subdomain, a Service's a DNS-1035 label), Azure's "Naming rules and restrictions for Azure
resources" (Microsoft.Network, `networkSecurityGroups / securityRules`), RFC 1035 §2.3.4 for DNS names.

Pangolin resource names (`<project>/<stack>/<name>`) are no reason to refuse: Pangolin takes 1-255 characters, and
although its Traefik feed cuts names at 50, the resource id in each router's name keeps them apart
(`../shared/reference/pangolin-traefik-config.md`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from ssh_gateway.core.addresses import DNS_LABEL_MAX, DNS_NAME_MAX
from ssh_gateway.core.names import CONNECT_ENTRY, host_key_secret_name, nsg_rule_name, public_host, service_name
from ssh_gateway.core.targets import cluster_dns_name

from .errors import SettingsError
from .schema import Settings
from .sections import NAMESPACE, ConnectModeInstance, Instance

__all__ = [
    "check_derived_names",
    "dns_name_problem",
    "instance_name_problem",
    "nsg_rule_problem",
    "secret_problem",
    "service_problem",
]

_DNS_1035_LABEL: Final = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS_1123_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_AZURE_RULE_NAME: Final = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9_])?")
AZURE_RULE_MAX: Final = 80


@dataclass(frozen=True)
class NameProblem:
    """A derived name that breaks its rule: the config key to blame and one line saying why."""

    key: str
    """The key the name comes from, without the namespace, e.g. `instances[3].name`."""
    message: str
    """Names the instance, the derived name and the limit."""


def service_problem(name: str) -> str | None:
    """Why the instance's Service name breaks Kubernetes' rule, or None."""
    derived = service_name(name)
    if len(derived) > DNS_LABEL_MAX:
        return (
            f"instance {name!r} makes the Service name {derived!r} ({len(derived)} characters), over the "
            f"{DNS_LABEL_MAX} of a Kubernetes Service name (a DNS-1035 label): use at most "
            f"{DNS_LABEL_MAX - len(derived) + len(name)} characters"
        )
    if not _DNS_1035_LABEL.fullmatch(derived):
        return f"instance {name!r} makes the Service name {derived!r}, which is not a DNS-1035 label"
    return None


def secret_problem(name: str) -> str | None:
    """Why the instance's host-key Secret name breaks Kubernetes' rule, or None."""
    derived = host_key_secret_name(name)
    if len(derived) > DNS_NAME_MAX or not _DNS_1123_SUBDOMAIN.fullmatch(derived):
        return (
            f"instance {name!r} makes the host-key Secret name {derived!r}, which is not a DNS-1123 subdomain of at "
            f"most {DNS_NAME_MAX} characters"
        )
    return None


def nsg_rule_problem(name: str) -> str | None:
    """Why the instance's NSG rule name breaks Azure's rule, or None."""
    derived = nsg_rule_name(name)
    if len(derived) > AZURE_RULE_MAX or not _AZURE_RULE_NAME.fullmatch(derived):
        return (
            f"instance {name!r} makes the NSG rule name {derived!r} ({len(derived)} characters), which Azure refuses: "
            f"1-{AZURE_RULE_MAX} letters, digits, '_', '.' and '-', starting with a letter or digit"
        )
    return None


def dns_name_problem(what: str, value: str) -> str | None:
    """Why `value` (named `what` in the message) is no DNS name a resolver can serve, or None if it is one."""
    long = [label for label in value.split(".") if len(label) > DNS_LABEL_MAX]
    if long:
        return f"{what} {value!r}, whose label {long[0]!r} has {len(long[0])} characters, over DNS's {DNS_LABEL_MAX}"
    if len(value) > DNS_NAME_MAX:
        return f"{what} {value!r}, of {len(value)} characters, over DNS's {DNS_NAME_MAX} for a name"
    return None


def instance_name_problem(settings: Settings, inst: Instance) -> str | None:
    """Why a name derived from the instance breaks its rule, or None (a discovered instance is checked alone)."""
    name = inst.name
    checks: list[str | None] = []
    if inst.target != "static":
        checks.append(service_problem(name))
    if settings.delivers_secret(inst):
        checks.append(secret_problem(name))
    if isinstance(inst, ConnectModeInstance):
        kube = settings.kubernetes
        authority = cluster_dns_name(service_name(name), settings.namespace_of(inst), kube.cluster_domain)
        checks.append(dns_name_problem(f"instance {name!r} makes the CONNECT authority", authority))
    else:
        host = public_host(settings.gateway.host_template, name)
        checks.append(dns_name_problem(f"instance {name!r} makes the public host (gateway.hostTemplate)", host))
        if settings.firewall.enabled:
            checks.append(nsg_rule_problem(name))
    return next((c for c in checks if c is not None), None)


def derived_name_problem(settings: Settings) -> NameProblem | None:
    """The first derived name of the stack that breaks its rule, or None when every one is fine."""
    for index, inst in enumerate(settings.instances):
        problem = instance_name_problem(settings, inst)
        if problem is not None:
            return NameProblem(f"instances[{index}].name", problem)
    connect = settings.connect
    if connect is not None and connect.public.via == "pangolin" and connect.public.host is None:
        host = public_host(settings.gateway.host_template, CONNECT_ENTRY)
        problem = dns_name_problem("the CONNECT entry's public host (gateway.hostTemplate)", host)
        if problem is not None:
            return NameProblem("gateway.hostTemplate", problem)
    return None


def check_derived_names(settings: Settings) -> None:
    """Raise a `SettingsError` (as `parse_settings` does) naming the first derived name that breaks its rule."""
    problem = derived_name_problem(settings)
    if problem is not None:
        raise SettingsError(f"invalid stack config:\n  {NAMESPACE}:{problem.key}: {problem.message}")
