"""The program: stack settings in, every resource registered, the stack outputs out.

`__main__.py` calls `run`, which loads the settings, lists the org and calls `build`; the unit tests call
`build` under mocks with settings and an org view of their own. A config problem is one clean error.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from functools import partial
from typing import Final

import pulumi
import pulumi_kubernetes as k8s
from pulumi.runtime.config import CONFIG

from providers.host_identity import SshHostCa, SshHostCaArgs
from providers.pangolin.errors import PangolinError
from providers.pangolin.org import read_org
from providers.pangolin.port_check_resource import PortCheck, PortCheckArgs
from providers.port_allocation.resource import PortAllocation, PortAllocationArgs
from ssh_gateway.core.credentials import find_api_key
from ssh_gateway.core.firewall import nsg_priority
from ssh_gateway.core.host_identity import cert_authority_lines
from ssh_gateway.core.names import host_ca_name, owner_prefix, pangolin_resource_name, public_host
from ssh_gateway.core.org import OrgView
from ssh_gateway.core.settings import (
    FirewallOn,
    HostIdentityOn,
    Instance,
    Settings,
    SettingsError,
    decode_config,
    parse_settings,
)
from ssh_gateway.core.targets import StaticTarget
from ssh_gateway.core.trust import ca_comment, ca_patterns, host_key_alias, known_hosts_file, principals

from .ssh_instance import FirewallRuleArgs, HostIdentityArgs, PangolinTargetArgs, SshInstance, SshInstanceArgs

__all__ = ["build", "load_settings", "read_pangolin_org", "run"]

# The exit code by which pulumi's Python language host says "the error was already shown to the user": the
# engine then adds no "Program exited with non-zero exit code" line of its own.
_ALREADY_SHOWN: Final = 32


def run(*, project: str, stack: str) -> None:
    """The whole program: settings, the org's listing, every resource, the outputs exported."""
    try:
        settings = load_settings()
        org = read_pangolin_org(settings)
    except pulumi.RunError as problem:
        pulumi.log.error(str(problem))  # synchronous: sent before the exit below
        sys.exit(_ALREADY_SHOWN)
    for key, value in build(settings, org=org, project=project, stack=stack).items():
        pulumi.export(key, value)


def _config() -> dict[str, str]:
    # The SDK has no public way to list config keys, and unknown keys can only be found by listing them.
    return dict(CONFIG.get())


def load_settings() -> Settings:
    """The running stack's settings; a config problem is a `RunError` naming the key and value."""
    try:
        return parse_settings(decode_config(_config()))
    except SettingsError as exc:
        raise pulumi.RunError(str(exc)) from None


def read_pangolin_org(settings: Settings) -> OrgView:
    """The org's raw resources, listed once (read-only, so previews do it too)."""
    pangolin = settings.pangolin
    try:
        key, _ = find_api_key(_config(), os.environ)
        return read_org(pangolin.url, pangolin.org_id, key)
    except ValueError as exc:
        raise pulumi.RunError(str(exc)) from None
    except PangolinError as exc:
        raise pulumi.RunError(
            f"cannot list Pangolin org {pangolin.org_id!r} at {pangolin.url} to find the ports in use: {exc}"
        ) from None


def build(settings: Settings, *, org: OrgView, project: str, stack: str) -> dict[str, pulumi.Input[object]]:
    """Registers the allocation, every instance and their providers; returns the stack outputs."""
    for warning in settings.warnings():
        pulumi.log.warn(warning)
    port_range = settings.ports.range
    allocation = PortAllocation(
        "ports",
        PortAllocationArgs(
            instances=[i.name for i in settings.instances],
            port_range=port_range,
            pins={i.name: i.port for i in settings.instances if i.port is not None},
            reserved=settings.ports.reserved,
            held=org.held_in(port_range),
            owner_prefix=owner_prefix(project, stack),
        ),
    )
    k8s_provider = _kubernetes_provider(settings)
    authorities = _host_authorities(settings)
    instances = {
        inst.name: SshInstance(
            inst.name,
            _instance_args(settings, inst, allocation, org, authorities, project=project, stack=stack),
            pulumi.ResourceOptions(providers=[k8s_provider] if k8s_provider else None),
        )
        for inst in settings.instances
    }
    # After every create: no port of this stack bound twice by overlapping runs (providers/pangolin/port_check.py).
    PortCheck(
        "port-check",
        PortCheckArgs(
            api_url=settings.pangolin.url,
            org_id=settings.pangolin.org_id,
            owner_prefix=owner_prefix(project, stack),
            ports=allocation.ports,
        ),
        pulumi.ResourceOptions(depends_on=list(instances.values())),
    )
    published = settings.published_range
    return {
        "endpoints": {
            name: {
                "host": i.host,
                "port": i.port,
                "user": i.user,
                "ssh": i.ssh_command,
                "pangolinResourceId": i.pangolin_resource_id,
            }
            for name, i in instances.items()
        },
        "pangolin": {"url": settings.pangolin.url, "orgId": settings.pangolin.org_id},
        "sshConfig": pulumi.Output.all(*[i.ssh_config for i in instances.values()]).apply("\n".join),
        "knownHosts": _known_hosts(settings, authorities, instances.values(), stack=stack),
        "hostKeys": pulumi.Output.all(**{n: i.host_key_line for n, i in instances.items()}).apply(
            lambda lines: {name: line for name, line in lines.items() if line}
        ),
        "hostCa": _host_ca(settings, authorities),
        "hostIdentities": _host_identities(instances),
        "allocations": allocation.ports,
        "releasedPorts": allocation.released,
        "portRange": str(port_range),
        # What the gateway host must publish; Pangolin creates neither (docs/pangolin-api.md §2.4).
        "gateway": {
            "gerbilPublishedPorts": f"{published}:{published}/tcp",
            "traefikEntryPoints": {f"tcp-{port}": {"address": f":{port}/tcp"} for port in published},
        },
    }


def _kubernetes_provider(settings: Settings) -> k8s.Provider | None:
    if all(isinstance(settings.target_of(i), StaticTarget) for i in settings.instances):
        return None
    kube = settings.kubernetes
    return k8s.Provider(
        "kubernetes",
        render_yaml_to_directory=kube.render_dir,
        kubeconfig=kube.kubeconfig,
        context=kube.context,
        namespace=kube.namespace,
    )


def _instance_args(
    settings: Settings,
    inst: Instance,
    allocation: PortAllocation,
    org: OrgView,
    authorities: dict[int, SshHostCa],
    *,
    project: str,
    stack: str,
) -> SshInstanceArgs:
    port = allocation.ports.apply(lambda ports: int(ports[inst.name]))
    fw = settings.firewall
    firewall = None
    if isinstance(fw, FirewallOn):
        firewall = FirewallRuleArgs(
            resource_group=fw.resource_group,
            nsg_name=fw.nsg_name,
            sources=inst.source_cidrs or fw.source_cidrs,
            priority=port.apply(lambda p: nsg_priority(p, settings.ports.range, fw.priority_base)),
        )
    name = pangolin_resource_name(project, stack, inst.name)
    return SshInstanceArgs(
        instance=inst.name,
        public_host=public_host(settings.gateway.host_template, inst.name),
        public_port=port,
        user=inst.user,
        pangolin=PangolinTargetArgs(
            api_url=settings.pangolin.url,
            org_id=settings.pangolin.org_id,
            site_id=settings.pangolin.site_id,
            resource_name=name,
            leftover_id=org.leftover(name, "tcp"),
        ),
        target=settings.target_of(inst),
        firewall=firewall,
        host_key=inst.host_key,
        host_identity=_host_identity_args(settings, inst, authorities, key_id=name),
        host_key_alias=host_key_alias(settings.gateway.host_template, inst.name),
        known_hosts_file=known_hosts_file(stack) if inst.host_key or settings.issues_host_key(inst) else None,
    )


def _host_identities(instances: dict[str, SshInstance]) -> pulumi.Output[dict[str, dict[str, str]]]:
    """The issued identities no Secret delivers (static targets, rendered manifests), for the operator to
    install: instance -> privateKey, publicKey, certificate. A secret output as a whole."""
    issued: pulumi.Output[dict[str, dict[str, str]]] = pulumi.Output.all(
        **{n: i.identity_files for n, i in instances.items()}
    ).apply(lambda files: {name: f for name, f in files.items() if f is not None})
    return pulumi.Output.secret(issued)


def _ca_line(patterns: tuple[str, ...], comment: str, ca_public_key: str) -> str:
    (line,) = cert_authority_lines(patterns, [ca_public_key], comment)
    return line


def _host_authorities(settings: Settings) -> dict[int, SshHostCa]:
    """One SshHostCa per published generation, at stack level (no instance owns the CA)."""
    identity = settings.host_identity
    if not isinstance(identity, HostIdentityOn):
        return {}
    return {g: SshHostCa(host_ca_name(g), SshHostCaArgs(generation=g)) for g in identity.ca.generations}


def _host_identity_args(
    settings: Settings, inst: Instance, authorities: dict[int, SshHostCa], *, key_id: str
) -> HostIdentityArgs | None:
    identity = settings.host_identity
    if not isinstance(identity, HostIdentityOn) or not settings.issues_host_key(inst):
        return None
    ca = authorities[identity.ca.signer]
    return HostIdentityArgs(
        principals=principals(settings.gateway.host_template, inst.name),
        ca_public_key=ca.public_key,
        ca_private_key=ca.private_key,
        valid_days=identity.valid_days,
        generation=inst.host_key_generation,
        key_id=key_id,
        secret=settings.delivers_secret(inst),
    )


def _host_ca(settings: Settings, authorities: dict[int, SshHostCa]) -> list[dict[str, pulumi.Input[object]]]:
    """The published CAs: generation, public key, fingerprint, and whether it is the one that signs."""
    identity = settings.host_identity
    signer = identity.ca.signer if isinstance(identity, HostIdentityOn) else None
    return [
        {"generation": g, "publicKey": ca.public_key, "fingerprint": ca.fingerprint, "signing": g == signer}
        for g, ca in authorities.items()
    ]


def _known_hosts(
    settings: Settings, authorities: dict[int, SshHostCa], instances: Iterable[SshInstance], *, stack: str
) -> pulumi.Output[str]:
    """One `@cert-authority` line per published CA, covering every instance's names on every port (today's
    and tomorrow's), then a plain line per pinned `hostKey`."""
    patterns = ca_patterns(settings.gateway.host_template)
    ca_lines = [ca.public_key.apply(partial(_ca_line, patterns, ca_comment(stack, g))) for g, ca in authorities.items()]
    return pulumi.Output.all(*ca_lines, *[i.known_hosts for i in instances]).apply(
        lambda lines: "\n".join(line for line in lines if line)
    )
