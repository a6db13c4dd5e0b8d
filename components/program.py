"""The program: stack settings in, every resource registered, the stack outputs out.

`__main__.py` calls `load_settings`, `read_pangolin_org` and `build`; the unit tests call `build` under mocks
with settings and an org view of their own. Problems with config surface as one `pulumi.RunError` line.
"""

from __future__ import annotations

import os

import pulumi
import pulumi_kubernetes as k8s
from pulumi.runtime.config import CONFIG

from providers.pangolin.errors import PangolinError
from providers.pangolin.org import read_org
from providers.pangolin.port_check_resource import PortCheck, PortCheckArgs
from providers.port_allocation.resource import PortAllocation, PortAllocationArgs
from ssh_gateway.core.credentials import find_api_key
from ssh_gateway.core.firewall import nsg_priority
from ssh_gateway.core.names import owner_prefix, pangolin_resource_name, public_host
from ssh_gateway.core.org import OrgView
from ssh_gateway.core.settings import FirewallOn, Instance, Settings, SettingsError, decode_config, parse_settings
from ssh_gateway.core.targets import StaticTarget

from .ssh_instance import FirewallRuleArgs, PangolinTargetArgs, SshInstance, SshInstanceArgs

__all__ = ["build", "load_settings", "read_pangolin_org"]


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
    instances = {
        inst.name: SshInstance(
            inst.name,
            _instance_args(settings, inst, allocation, org, project=project, stack=stack),
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
        "knownHosts": pulumi.Output.all(*[i.known_hosts for i in instances.values()]).apply(
            lambda lines: "\n".join(line for line in lines if line)
        ),
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
    settings: Settings, inst: Instance, allocation: PortAllocation, org: OrgView, *, project: str, stack: str
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
    )
