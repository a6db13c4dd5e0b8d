"""`build(settings)`: the whole stack from validated settings; `__main__.py`, tests and tools call it."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from providers.port_allocation.allocate import check_priorities, nsg_priority
from providers.port_allocation.resource import PortAllocation, PortAllocationArgs

from .naming import owner_prefix, pangolin_resource_name, public_host
from .settings import Instance, Settings
from .ssh_instance import FirewallRuleArgs, PangolinTargetArgs, SshInstance, SshInstanceArgs


def build(settings: Settings, *, project: str, stack: str) -> dict[str, pulumi.Input[object]]:
    """Registers the allocation, every instance and their providers; returns the stack outputs."""
    port_range = settings.ports.port_range
    if settings.firewall.enabled:
        check_priorities(port_range, settings.firewall.priority_base)
    allocation = PortAllocation(
        "ports",
        PortAllocationArgs(
            instances=[i.name for i in settings.instances],
            port_range=str(port_range),
            pins={i.name: i.port for i in settings.instances if i.port is not None},
            reserved=settings.ports.reserved,
            api_url=settings.pangolin.url,
            org_id=settings.pangolin.org_id,
            owner_prefix=owner_prefix(project, stack),
        ),
    )
    k8s_provider = _kubernetes_provider(settings)
    instances = {
        inst.name: SshInstance(
            inst.name,
            _instance_args(settings, inst, allocation, project=project, stack=stack),
            pulumi.ResourceOptions(providers=[k8s_provider] if k8s_provider else None),
        )
        for inst in settings.instances
    }
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
        # What the gateway host must publish; Pangolin creates neither (pangolin-api.md §2.4).
        "gateway": {
            "gerbilPublishedPorts": f"{published.start}-{published.end}:{published.start}-{published.end}/tcp",
            "traefikEntryPoints": {
                f"tcp-{port}": {"address": f":{port}/tcp"} for port in range(published.start, published.end + 1)
            },
        },
    }


def _kubernetes_provider(settings: Settings) -> k8s.Provider | None:
    if not any(i.target != "static" for i in settings.instances):
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
    settings: Settings, inst: Instance, allocation: PortAllocation, *, project: str, stack: str
) -> SshInstanceArgs:
    port = allocation.ports.apply(lambda ports: int(ports[inst.name]))
    fw = settings.firewall
    firewall = None
    if fw.enabled:
        assert fw.resource_group and fw.nsg_name  # noqa: S101 - settings require both when enabled
        firewall = FirewallRuleArgs(
            resource_group=fw.resource_group,
            nsg_name=fw.nsg_name,
            source_cidrs=inst.source_cidrs or fw.source_cidrs,
            priority=port.apply(lambda p: nsg_priority(p, settings.ports.port_range, fw.priority_base)),
        )
    return SshInstanceArgs(
        instance=inst.name,
        public_host=public_host(settings.gateway.host_template, inst.name),
        public_port=port,
        user=inst.user,
        pangolin=PangolinTargetArgs(
            api_url=settings.pangolin.url,
            org_id=settings.pangolin.org_id,
            site_id=settings.pangolin.site_id,
            resource_name=pangolin_resource_name(project, stack, inst.name),
        ),
        target_mode=inst.target,
        namespace=settings.kubernetes.namespace,
        selector=inst.selector,
        pod_port=inst.pod_port,
        node_port=inst.node_port,
        node_ip=settings.kubernetes.node_ip,
        cluster_domain=settings.kubernetes.cluster_domain,
        skip_await=settings.kubernetes.skip_await,
        static_host=inst.static_host,
        static_port=inst.static_port,
        firewall=firewall,
        host_key=inst.host_key,
    )
