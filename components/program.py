"""The program: stack settings in, every resource registered, the stack outputs out.

`__main__.py` calls `run`, which loads the settings, lists the org and calls `build`; the unit tests call
`build` under mocks with settings and an org view of their own. A config problem is one clean error.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from functools import partial
from typing import Final

import pulumi
import pulumi_kubernetes as k8s
from pulumi.runtime.config import CONFIG

from providers.host_identity import SshHostCa, SshHostCaArgs, SshHostKeyRoot
from providers.pangolin.errors import PangolinError
from providers.pangolin.org import read_org
from providers.pangolin.port_check import CONNECT_KEY
from providers.pangolin.port_check_resource import PortCheck, PortCheckArgs
from providers.port_allocation.resource import PortAllocation, PortAllocationArgs
from providers.sdk_patches import patch_the_sdk
from ssh_gateway.core.connect import PangolinEntry, StandaloneEnvoy, envoy_bootstrap_yaml
from ssh_gateway.core.credentials import find_api_key
from ssh_gateway.core.host_identity import cert_authority_lines, private_seed
from ssh_gateway.core.issued_identity import issued_identity
from ssh_gateway.core.names import (
    CONNECT_ENTRY,
    HOST_KEY_ROOT_NAME,
    StackName,
    connect_resource_name,
    connect_rule_name,
    host_ca_name,
    owner_prefix,
    pangolin_resource_name,
    public_host,
)
from ssh_gateway.core.org import OrgView
from ssh_gateway.core.outputs import (
    connect_endpoint,
    connect_output,
    envoy_gateway_output,
    gateway_output,
    host_ca_entry,
    istio_gateway_output,
    port_endpoint,
    stack_outputs,
)
from ssh_gateway.core.refusal_note import note_refusal
from ssh_gateway.core.settings import (
    Connect,
    ConnectModeInstance,
    EnvoyGatewaySettings,
    HostIdentityOn,
    Instance,
    PortModeInstance,
    Settings,
    SettingsError,
    read_config,
)
from ssh_gateway.core.stack_plan import ConnectPlan, StackPlan
from ssh_gateway.core.trust import (
    ca_comment,
    ca_patterns,
    host_key_alias,
    known_hosts_file,
)

from .cluster_instances import read_discovered, register_status
from .connect_entry import ConnectEntry, ConnectEntryArgs
from .connect_ssh_instance import ConnectSshInstance, ConnectSshInstanceArgs
from .firewall_rule import connect_rule_args, instance_rule_args
from .host_identity import HostIdentityArgs, SecretPlace, Signing
from .nsg_check import checked_plan
from .pangolin_tcp import PangolinTargetArgs
from .port_firewall import merged_firewall
from .refused import StackRefused
from .ssh_instance import SshInstance, SshInstanceArgs

__all__ = ["build", "check_connect_port", "run"]

# The exit code by which pulumi's Python language host says "the error was already shown to the user": the
# engine then adds no "Program exited with non-zero exit code" line of its own.
_ALREADY_SHOWN: Final = 32


def run(*, project: str, stack: str) -> None:
    """The whole program: what the stack reads, its plan, every resource, the outputs exported."""
    patch_the_sdk()
    name = StackName(project, stack)
    try:
        settings = load_settings()
        org = read_pangolin_org(settings)
        check_connect_port(settings, org, name)
        discovered = read_discovered(settings, org, project=project, stack=stack)
        plan = checked_plan(settings, org=org, name=name, discovered=discovered)
    except pulumi.RunError as problem:
        if isinstance(problem, StackRefused):
            note_refusal(str(problem))
        pulumi.log.error(str(problem))  # synchronous: sent before the exit below
        sys.exit(_ALREADY_SHOWN)
    for key, value in build(plan).items():
        pulumi.export(key, value)


def _config() -> dict[str, str]:
    # The SDK has no public way to list config keys, and unknown keys can only be found by listing them.
    return dict(CONFIG.get())


def load_settings() -> Settings:
    """The running stack's settings; a config problem is a `RunError` naming the key and value."""
    try:
        return read_config(_config())
    except SettingsError as exc:
        raise StackRefused(str(exc)) from None


def read_pangolin_org(settings: Settings) -> OrgView:
    """The org's raw resources, listed once (read-only, so previews do it too)."""
    pangolin = settings.pangolin
    try:
        key, _ = find_api_key(_config(), os.environ)
        return read_org(pangolin.url, pangolin.org_id, key)
    except ValueError as exc:  # no API key, or not one: Pangolin unreachable is a PangolinError, and may heal
        raise StackRefused(str(exc)) from None
    except PangolinError as exc:
        raise pulumi.RunError(
            f"cannot list Pangolin org {pangolin.org_id!r} at {pangolin.url} to find the ports in use: {exc}"
        ) from None


def check_connect_port(settings: Settings, org: OrgView, name: StackName) -> None:
    """A `RunError` when another Pangolin resource already binds the CONNECT port: Pangolin accepts a second
    resource on a bound port, and the two would then share it."""
    if settings.connect is None:
        return
    entry = settings.connect_entry()
    if not isinstance(entry, PangolinEntry):
        return
    ours = connect_resource_name(name.project, name.stack)
    others = [b for b in org.held_in([entry.port]).get(entry.port, []) if b.name != ours]
    if others:
        raise StackRefused(
            f"ssh-gateway:connect.public.port {entry.port} is already bound by Pangolin resource "
            f"{others[0].resource_id} {others[0].name!r}: choose a free port for the CONNECT entry, or remove that "
            "resource"
        )


def build(plan: StackPlan) -> dict[str, object]:
    """Carries the plan out: registers the allocation, every instance (the configured ones, then the discovered),
    the CONNECT entry, their providers and, with discovery, the status ConfigMap; returns the outputs."""
    settings = plan.settings
    _warn(plan)
    allocation = _allocation(plan)
    k8s_provider = _kubernetes_provider(settings)
    k8s_opts = pulumi.ResourceOptions(providers=[k8s_provider] if k8s_provider else None)
    authorities = _host_authorities(settings)
    signing = _signing(settings, authorities)
    by_port = _port_instances(plan, allocation, signing, k8s_opts)
    connected = _connect_side(plan, plan.connect, signing, k8s_opts) if plan.connect is not None else None
    by_connect = connected.instances if connected is not None else {}
    # The settings order, whatever the routing (the settings refuse connect-mode instances without `connect`).
    instances: dict[str, SshInstance | ConnectSshInstance] = {
        i.name: by_port.get(i.name) or by_connect[i.name] for i in settings.instances
    }
    endpoints: dict[str, object] = {name: _port_endpoint(i) for name, i in by_port.items()}
    endpoints.update(connected.endpoints if connected is not None else {})
    _port_check(plan, allocation, by_port, connected)
    if plan.discovered is not None:
        register_status(
            settings,
            plan.discovered,
            endpoints,
            instances,
            free_ports=_free_ports(settings, plan.org, allocation),
            provider=k8s_provider,
            project=plan.name.project,
            stack=plan.name.stack,
        )
    return stack_outputs(
        endpoints={i.name: endpoints[i.name] for i in settings.instances},
        pangolin_url=settings.pangolin.url,
        pangolin_org_id=settings.pangolin.org_id,
        ssh_config=pulumi.Output.all(*[i.ssh_config for i in instances.values()]).apply("\n".join),
        known_hosts=_known_hosts(settings, authorities, instances, stack=plan.name.stack),
        # A dict of Outputs, not one `Output.all`: that would wrap every line in two more Outputs, and each
        # pending Output costs the SDK's wait loop a callback per resource that completes (quadratic in N).
        host_keys={i.name: instances[i.name].host_key_line for i in settings.instances if _has_host_key(settings, i)},
        host_ca=_host_ca(settings, authorities),
        allocations=_allocated(allocation),
        released_ports=allocation.released if allocation is not None else [],
        port_range=settings.ports.range,
        gateway=_gateway_output(
            settings, plan.connect, publish_range=bool(_port_mode(settings)) or settings.connect is None
        ),
        connect=connected.output if connected is not None else None,
        envoy_config=connected.envoy_config if connected is not None else None,
    )


@dataclass(frozen=True, kw_only=True)
class _Connected:
    """The stack's CONNECT side as registered: the entry, the connect-mode instances and what they output."""

    entry: ConnectEntry
    instances: dict[str, ConnectSshInstance]
    endpoints: dict[str, object]
    output: dict[str, object]
    envoy_config: str | None
    """The standalone Envoy's bootstrap; None behind Istio, or with no connect-mode instance."""


def _warn(plan: StackPlan) -> None:
    """Discovery's warnings, then the settings'."""
    for warning in plan.discovered.warnings() if plan.discovered is not None else ():
        pulumi.log.warn(warning)
    for warning in plan.settings.warnings():
        pulumi.log.warn(warning)


def _port_mode(settings: Settings) -> list[PortModeInstance]:
    return [i for i in settings.instances if not isinstance(i, ConnectModeInstance)]


def _allocation(plan: StackPlan) -> PortAllocation | None:
    """The port-mode instances' ports. None without a range (the settings allow that only when every instance is
    connect-mode): nothing to allocate."""
    settings = plan.settings
    port_range = settings.ports.range
    if port_range is None:
        return None
    port_mode = _port_mode(settings)
    return PortAllocation(
        "ports",
        PortAllocationArgs(
            instances=[i.name for i in port_mode],
            port_range=port_range,
            pins={i.name: i.port for i in port_mode if i.port is not None},
            reserved=settings.ports.reserved,
            held=plan.org.held_in(port_range),
            owner_prefix=owner_prefix(plan.name.project, plan.name.stack),
        ),
    )


def _allocated(allocation: PortAllocation | None) -> pulumi.Input[dict[str, int]]:
    return allocation.ports if allocation is not None else {}


def _port_instances(
    plan: StackPlan, allocation: PortAllocation | None, signing: Signing | None, opts: pulumi.ResourceOptions
) -> dict[str, SshInstance]:
    """The port-mode instances and, with merged rules, the one `PortFirewall` over their ports."""
    if allocation is None:
        return {}
    by_port = {
        inst.name: SshInstance(inst.name, _instance_args(plan, inst, allocation, signing), opts)
        for inst in _port_mode(plan.settings)
    }
    pangolin = {name: i.pangolin for name, i in by_port.items()}
    merged_firewall(plan.firewall, allocation.ports, pangolin, project=plan.name.project, stack=plan.name.stack)
    return by_port


def _connect_side(
    plan: StackPlan, connect: ConnectPlan, signing: Signing | None, opts: pulumi.ResourceOptions
) -> _Connected:
    """The CONNECT entry, then every connect-mode instance behind it."""
    settings = plan.settings
    entry = ConnectEntry(CONNECT_ENTRY, _entry_args(plan, connect), opts)
    instances = {
        inst.name: ConnectSshInstance(inst.name, _connect_instance_args(plan, connect, inst, signing), opts)
        for inst in settings.instances
        if isinstance(inst, ConnectModeInstance)
    }
    envoy_config = None
    if isinstance(connect.gateway, StandaloneEnvoy) and instances:
        # The operator's Envoy runs exactly this (README, CONNECT routing): `envoy --config-yaml "$(pulumi stack
        # output envoyConfig)"`. Pure config from the settings, so a preview shows it too.
        envoy_config = envoy_bootstrap_yaml(connect.gateway, settings.envoy_routes())
    return _Connected(
        entry=entry,
        instances=instances,
        endpoints={name: _connect_endpoint(i, entry) for name, i in instances.items()},
        output=_connect_output(connect.settings, entry),
        envoy_config=envoy_config,
    )


def _port_check(
    plan: StackPlan, allocation: PortAllocation | None, by_port: dict[str, SshInstance], connected: _Connected | None
) -> PortCheck:
    """After every create: no port of this stack bound twice by overlapping runs (providers/pangolin/port_check.py),
    the CONNECT entry's included. It depends on the Pangolin resources themselves, not their components: the SDK
    expands a component into every child's URN, all recorded in the check's state."""
    connect_port = _checked_connect_port(plan.connect)
    entry_pangolin = connected.entry.pangolin if connected is not None else None
    pangolin = plan.settings.pangolin
    return PortCheck(
        "port-check",
        PortCheckArgs(
            api_url=pangolin.url,
            org_id=pangolin.org_id,
            owner_prefix=owner_prefix(plan.name.project, plan.name.stack),
            ports=pulumi.Output.from_input(_allocated(allocation)).apply(lambda ports: {**ports, **connect_port}),
        ),
        pulumi.ResourceOptions(
            depends_on=[
                *(i.pangolin for i in by_port.values()),
                *([entry_pangolin] if entry_pangolin is not None else []),
            ]
        ),
    )


def _free_ports(
    settings: Settings, org: OrgView, allocation: PortAllocation | None
) -> pulumi.Output[tuple[str, int]] | None:
    """The range and how many of its ports are neither reserved, allocated, nor bound in Pangolin as the run
    found it (the status ConfigMap's `ports.json`, the reconciler's gauge); None without a range."""
    port_range = settings.ports.range
    if allocation is None or port_range is None:
        return None
    taken = {*settings.ports.reserved, *org.held_in(port_range)}
    return allocation.ports.apply(lambda ports: (str(port_range), port_range.free({*taken, *ports.values()})))


def _checked_connect_port(plan: ConnectPlan | None) -> dict[str, int]:
    """The CONNECT entry's Pangolin port, under its key in the port check; nothing when it is reached directly."""
    entry = plan.entry if plan is not None else None
    return {CONNECT_KEY: entry.port} if isinstance(entry, PangolinEntry) else {}


def _port_endpoint(inst: SshInstance) -> dict[str, object]:
    return port_endpoint(
        host=inst.host,
        port=inst.port,
        user=inst.user,
        ssh=inst.ssh_command,
        pangolin_resource_id=inst.pangolin_resource_id,
    )


def _connect_endpoint(inst: ConnectSshInstance, entry: ConnectEntry) -> dict[str, object]:
    return connect_endpoint(
        host=entry.host,
        port=entry.port,
        authority=inst.authority,
        route=inst.route,
        user=inst.user,
        ssh=inst.ssh_command,
        pangolin_resource_id=entry.pangolin_resource_id,
    )


def _gateway_output(settings: Settings, plan: ConnectPlan | None, *, publish_range: bool) -> dict[str, object]:
    """What the gateway host must publish; Pangolin creates neither (docs/pangolin-api.md §2.4). The range only
    when some instance has a port of its own (or the stack has no CONNECT entry); the CONNECT port, one for every
    connect-mode instance, when it goes through Pangolin."""
    entry = plan.entry if plan is not None else None
    return gateway_output(
        published=settings.published_range if publish_range else None,
        connect_port=entry.port if isinstance(entry, PangolinEntry) else None,
    )


def _connect_output(connect: Connect, entry: ConnectEntry) -> dict[str, object]:
    """The stack's CONNECT entry, for the doctor and for people: how it is reached and which gateway it is."""
    gateway = connect.gateway
    if isinstance(gateway, EnvoyGatewaySettings):
        described = envoy_gateway_output(
            listener_port=gateway.listener_port,
            target_host=gateway.target_host,
            service_port=gateway.service_port or gateway.listener_port,
        )
    else:
        described = istio_gateway_output(
            listener_port=gateway.listener_port,
            namespace=gateway.namespace,
            selector=gateway.selector,
            service=gateway.service,
            service_port=gateway.service_port,
            create_gateway=gateway.create_gateway,
        )
    return connect_output(
        via=connect.public.via,
        host=entry.host,
        port=entry.port,
        pangolin_resource_id=entry.pangolin_resource_id,
        accept_http10=connect.accept_http10,
        server_alive_interval=connect.server_alive_interval,
        gateway=described,
    )


def _pangolin_args(settings: Settings, org: OrgView, name: str) -> PangolinTargetArgs:
    """The Pangolin resource `name` of this stack, adopting a leftover of that name that the listing found."""
    pangolin = settings.pangolin
    return PangolinTargetArgs(
        api_url=pangolin.url,
        org_id=pangolin.org_id,
        site_id=pangolin.site_id,
        resource_name=name,
        leftover_id=org.leftover(name, "tcp"),
    )


def _entry_args(plan: StackPlan, connect: ConnectPlan) -> ConnectEntryArgs:
    project, stack = plan.name.project, plan.name.stack
    return ConnectEntryArgs(
        gateway=connect.gateway,
        entry=connect.entry,
        pangolin=_pangolin_args(plan.settings, plan.org, connect_resource_name(project, stack)),
        firewall=connect_rule_args(plan.firewall),
        firewall_rule_name=connect_rule_name(project, stack),
    )


def _connect_instance_args(
    plan: StackPlan, connect: ConnectPlan, inst: ConnectModeInstance, signing: Signing | None
) -> ConnectSshInstanceArgs:
    settings = plan.settings
    return ConnectSshInstanceArgs(
        instance=inst.name,
        user=inst.user,
        target=settings.connect_target(inst),
        route=settings.connect_instance(inst),
        gateway=connect.gateway,
        entry=connect.entry,
        server_alive_interval=connect.settings.server_alive_interval,
        host_key=inst.host_key,
        host_identity=_host_identity_args(settings, inst, signing, plan.name),
        known_hosts_file=_known_hosts_file(settings, inst, plan.name),
    )


def _kubernetes_provider(settings: Settings) -> k8s.Provider | None:
    # None when nothing is Kubernetes (static targets behind a standalone Envoy): the stack then needs neither
    # the kubernetes plugin nor a cluster.
    if not settings.needs_kubernetes():
        return None
    kube = settings.kubernetes
    return k8s.Provider(
        "kubernetes",
        # Relative to the project directory (the program's), whichever directory the provider plugin runs in.
        render_yaml_to_directory=os.path.abspath(kube.render_dir) if kube.render_dir else None,
        kubeconfig=kube.kubeconfig,
        context=kube.context,
        namespace=kube.namespace,
        # The status ConfigMap and the host-key Secrets are updated in place, never deleted and created again: a
        # platform reading or watching the status finds it in every read, a pod starting during a key's rotation
        # finds its Secret (docs/cluster-instances.md, what an up waits for).
        enable_config_map_mutable=True,
        enable_secret_mutable=True,
    )


def _instance_args(
    plan: StackPlan, inst: PortModeInstance, allocation: PortAllocation, signing: Signing | None
) -> SshInstanceArgs:
    settings = plan.settings
    port = allocation.ports.apply(lambda ports: int(ports[inst.name]))
    name = pangolin_resource_name(plan.name.project, plan.name.stack, inst.name)
    return SshInstanceArgs(
        instance=inst.name,
        public_host=public_host(settings.gateway.host_template, inst.name),
        public_port=port,
        user=inst.user,
        pangolin=_pangolin_args(settings, plan.org, name),
        target=settings.target_of(inst),
        firewall=instance_rule_args(plan.firewall, inst.name, port),
        host_key=inst.host_key,
        host_identity=_host_identity_args(settings, inst, signing, plan.name),
        host_key_alias=host_key_alias(settings.gateway.host_template, inst.name),
        known_hosts_file=_known_hosts_file(settings, inst, plan.name),
    )


def _known_hosts_file(settings: Settings, inst: Instance, name: StackName) -> str | None:
    """The known_hosts file the instance's ssh command names, when the stack vouches for its key."""
    return known_hosts_file(name.stack) if _has_host_key(settings, inst) else None


def _has_host_key(settings: Settings, inst: Instance) -> bool:
    """Whether the instance serves a key that the stack vouches for: pinned, or issued."""
    return inst.host_key is not None or settings.issues_host_key(inst)


def _ca_line(patterns: tuple[str, ...], comment: str, ca_public_key: str) -> str:
    (line,) = cert_authority_lines(patterns, [ca_public_key], comment)
    return line


def _host_authorities(settings: Settings) -> dict[int, SshHostCa]:
    """One SshHostCa per published generation, at stack level (no instance owns the CA)."""
    identity = settings.host_identity
    if not isinstance(identity, HostIdentityOn):
        return {}
    return {g: SshHostCa(host_ca_name(g), SshHostCaArgs(generation=g)) for g in identity.ca.generations}


def _signing(settings: Settings, authorities: dict[int, SshHostCa]) -> Signing | None:
    """The stack's host-key root and its signing CA's seed, which every instance's identity is derived from."""
    identity = settings.host_identity
    if not isinstance(identity, HostIdentityOn) or not any(settings.issues_host_key(i) for i in settings.instances):
        return None
    ca_seed = authorities[identity.ca.signer].private_key.apply(lambda key: private_seed(key, name="host CA"))
    root = SshHostKeyRoot(HOST_KEY_ROOT_NAME, SshHostCaArgs(generation=1))
    return Signing(root=root.private_key, ca_seed=pulumi.Output.secret(ca_seed), now=int(time.time()))


def _host_identity_args(
    settings: Settings, inst: Instance, signing: Signing | None, name: StackName
) -> HostIdentityArgs | None:
    issued = issued_identity(settings, inst, project=name.project, stack=name.stack)
    if issued is None or signing is None:
        return None
    place = None
    if settings.delivers_secret(inst):
        place = SecretPlace(namespace=settings.namespace_of(inst))
    return HostIdentityArgs(issued=issued, signing=signing, secret=place)


def _host_ca(settings: Settings, authorities: dict[int, SshHostCa]) -> list[object]:
    """The published CAs: generation, public key, fingerprint, and whether it is the one that signs."""
    identity = settings.host_identity
    signer = identity.ca.signer if isinstance(identity, HostIdentityOn) else None
    return [
        host_ca_entry(generation=g, public_key=ca.public_key, fingerprint=ca.fingerprint, signing=g == signer)
        for g, ca in authorities.items()
    ]


def _known_hosts(
    settings: Settings,
    authorities: dict[int, SshHostCa],
    instances: dict[str, SshInstance | ConnectSshInstance],
    *,
    stack: str,
) -> pulumi.Output[str]:
    """One `@cert-authority` line per published CA, covering every instance's names on every port (today's
    and tomorrow's; with connect-mode instances, their aliases), then a plain line per pinned `hostKey`."""
    connected = any(isinstance(i, ConnectModeInstance) for i in settings.instances)
    patterns = ca_patterns(settings.gateway.host_template, aliases=connected)
    ca_lines = [ca.public_key.apply(partial(_ca_line, patterns, ca_comment(stack, g))) for g, ca in authorities.items()]
    pinned = [instances[i.name].known_hosts for i in settings.instances if i.host_key is not None]
    return pulumi.Output.all(*ca_lines, *pinned).apply(lambda lines: "\n".join(line for line in lines if line))
