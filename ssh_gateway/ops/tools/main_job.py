"""The main job on one machine: a real `ssh` reaches a real sshd through a port the program allocated.

    scripts/demo            start the emulator, `pulumi up` the local stack, start a real Traefik on the stack's
                            entry points, one sshd per instance serving its issued host identity, ssh through
                            every instance's public port trusting only the stack's CA line, print the answers,
                            the endpoints, the ssh config and that line, then stop what it started
    scripts/demo --keep     the same, but leave the emulator, Traefik and the sshds running (scripts/demo down
                            stops them)
    scripts/demo down       destroy the stack's resources and stop whatever the demo left running

The path is the real one, minus the cloud and the tunnel: ssh client -> 127.0.0.1:PORT, the entry point tcp-PORT of
a real Traefik, whose static configuration is only the stack's output `gateway.traefikEntryPoints` (bound on
loopback) plus the emulator's HTTP-provider endpoint, as Pangolin's gateway host runs it -> the router Pangolin
made of the enabled TCP resource the stack created on PORT -> the resource's target 127.0.0.1:<staticPort> ->
that instance's sshd. (Gerbil, which needs kernel WireGuard, and Newt, which needs Gerbil, are left out: the
site is `local`, whose targets Traefik reaches directly.) Each sshd serves the host key and certificate the stack
issued to its instance (derived from the stack's state as `ssh-gateway host-identity` derives them), from files
laid out as a pod mounts its Secret, and ssh runs with `StrictHostKeyChecking yes` and a known_hosts holding only
the stack's `knownHosts` output: one `@cert-authority` line. An instance with a pinned `hostKey` gets the sshd's
fixed demo key instead, and its plain line. A connect-mode instance goes ssh -> proxytunnel -> Traefik's entry
point on the CONNECT port (the router of the stack's one Pangolin resource for it, as a connect stack has it) -> a
real Envoy, the stack's standalone CONNECT gateway (`connect.gateway.kind: envoy`), run from the stack's
`envoyConfig` output as an operator runs it -> its sshd at its staticHost:staticPort. No cluster, no Istio: the
local stack registers nothing of Kubernetes. State (keys, logs, pid files, the emulator's db, Traefik's and
Envoy's configs) lives in .pulumi-state/demo/.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pulumi import automation as auto

from pangolin_emulator.harness import DetachedEmulator, EmulatorError
from ssh_gateway.core.credentials import find_api_key
from ssh_gateway.core.host_identity import HOST_CERTIFICATE_FILE, SECRET_KEYS, fingerprint, parse_host_certificate
from ssh_gateway.core.names import entry_point_name
from ssh_gateway.core.outputs import EndpointOutput, Routing, StackOutputs, parse_stack_outputs
from ssh_gateway.core.settings import (
    ConnectModeInstance,
    DirectPublic,
    EnvoyGatewaySettings,
    Settings,
    SettingsError,
    read_config,
)
from ssh_gateway.core.targets import StaticTarget
from ssh_gateway.core.trust import known_hosts_file
from ssh_gateway.local import traefik
from ssh_gateway.local.envoy import EnvoyError, StandaloneEnvoyProcess, detached_envoy_pid, stop_detached_envoy
from ssh_gateway.local.sshd import LocalSshd, SshdError, ensure_client_keypair, login_user
from ssh_gateway.local.sshd_identity import IdentitySshd, mount_secret
from ssh_gateway.ops.doctor import diagnose, endpoints_from_outputs
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.ops.shared.automation import open_stack
from ssh_gateway.ops.tools.demo_steps import Answer, say, ssh_answer, step, write_ssh_files
from ssh_gateway.ops.tools.host_identity_files import HostIdentityFilesError, read_stack
from ssh_gateway.plumbing.toolchain import REPO

__all__ = ["run_demo"]


def default_state_dir(stack: str) -> Path:
    return REPO / ".pulumi-state" / ("demo" if stack == "local" else f"demo-{stack}")


@dataclass
class Machine:
    """What stands in for the gateway and the pods: the emulator and one sshd per instance (its static target)."""

    emulator: DetachedEmulator
    sshds: dict[str, LocalSshd]
    """Instance -> its sshd: an `IdentitySshd` serving its issued identity, or, with a pinned `hostKey`, a
    `LocalSshd` serving the fixed demo key."""
    started: list[Callable[[], bool]]
    """Stop functions of the processes this run started (not those an earlier --keep run left)."""
    traefik_dir: Path
    """Traefik's directory (static configuration, log, pid file)."""
    gateway: EnvoyGatewaySettings | None = None
    """The standalone Envoy of the connect-mode instances, if the stack has any."""
    envoy_dir: Path | None = None
    """Envoy's directory (config, log, pid file)."""


def _read_settings(stack: auto.Stack) -> tuple[Settings, str]:
    config = {key: value.value for key, value in stack.get_all_config().items()}
    try:
        api_key, _ = find_api_key(config, os.environ)
        return read_config(config), api_key
    except ValueError as exc:
        raise SystemExit(f"demo: stack {stack.name}: {exc}") from None


def _own_user(stack: auto.Stack, settings: Settings) -> Settings:
    """Makes every instance's `user` the user running the demo.

    A non-root sshd can log in only the user running it. Setting that user in the stack (rather than passing
    `ssh -l`) keeps what the program generates true: the endpoints, the ssh commands and the ssh config all name
    a user who can log in. As root (CI) the stack's default `root` is already right and nothing changes.
    """
    me = login_user()
    wrong = {f"ssh-gateway:instances[{i}].user": auto.ConfigValue(me) for i, inst in enumerate(settings.instances)
             if inst.user != me}  # fmt: skip
    if not wrong:
        return settings
    say(f"==> setting the instances' user to {me} in the stack config (sshd not run as root logs in only {me})")
    stack.set_all_config(wrong, path=True)
    return _read_settings(stack)[0]


def _machine(settings: Settings, api_key: str, state: Path, authorized_keys: list[str]) -> Machine:
    emulator = DetachedEmulator(
        state / "pangolin", url=settings.pangolin.url, org_id=settings.pangolin.org_id, api_key=api_key
    )
    gateway = _local_gateway(settings)
    sshds: dict[str, LocalSshd] = {}
    owners: dict[int, str] = {}
    for inst in settings.instances:
        target = settings.connect_target(inst) if isinstance(inst, ConnectModeInstance) else settings.target_of(inst)
        if not isinstance(target, StaticTarget):
            raise SystemExit(f"demo: instance {inst.name} must have target: static (a local sshd)")
        if target.host != "127.0.0.1":
            raise SystemExit(f"demo: staticHost {target.host} is not 127.0.0.1; the demo runs sshd on loopback only")
        port = target.port
        if port in owners:
            raise SystemExit(
                f"demo: instances {owners[port]} and {inst.name} share the sshd port {port} (staticPort); each needs "
                "an sshd of its own, which serves that instance's host identity"
            )
        owners[port] = inst.name
        directory = state / f"sshd-{port}"
        if settings.issues_host_key(inst):
            mount = state / "host-identity" / inst.name
            sshds[inst.name] = IdentitySshd(directory, mount_dir=mount, port=port, authorized_keys=authorized_keys)
        elif inst.host_key is not None:
            sshds[inst.name] = LocalSshd(directory, port=port, authorized_keys=authorized_keys)
        else:
            raise SystemExit(
                f"demo: instance {inst.name} has neither an issued host identity (hostIdentity.enabled) nor a pinned "
                "hostKey; the demo's ssh trusts only the stack's knownHosts"
            )
    return Machine(emulator, sshds, [], state / "traefik", gateway, state / "envoy" if gateway else None)


_LOOPBACK = ("127.0.0.1", "localhost")


def _local_gateway(settings: Settings) -> EnvoyGatewaySettings | None:
    """The standalone Envoy the connect-mode instances are behind, or None when the stack has none of them;
    `SystemExit` naming the key when the stack cannot run on this machine."""
    connect = settings.connect
    if connect is None or not any(isinstance(i, ConnectModeInstance) for i in settings.instances):
        return None
    gateway = connect.gateway
    if not isinstance(gateway, EnvoyGatewaySettings):
        raise SystemExit(
            "demo: ssh-gateway:connect.gateway.kind must be envoy here (no cluster and no Istio on this machine: the "
            "demo runs the stack's envoyConfig)"
        )
    if isinstance(connect.public, DirectPublic):
        raise SystemExit("demo: ssh-gateway:connect.public.via must be pangolin (through the demo's Traefik) here")
    if gateway.target_host not in _LOOPBACK or gateway.listen_address not in _LOOPBACK:
        raise SystemExit(
            f"demo: ssh-gateway:connect.gateway.targetHost ({gateway.target_host}) and listenAddress "
            f"({gateway.listen_address}) must be loopback: the demo's Envoy runs on this machine only"
        )
    if gateway.service_port not in (None, gateway.listener_port):
        raise SystemExit(
            f"demo: ssh-gateway:connect.gateway.servicePort {gateway.service_port} must be listenerPort "
            f"{gateway.listener_port} here (nothing maps one to the other: Envoy listens on it directly)"
        )
    return gateway


def _start_emulator(machine: Machine) -> None:
    emulator = machine.emulator
    with step(f"Pangolin emulator at {emulator.url}"):
        pid = emulator.running_pid()
        if pid is not None and emulator.healthy():
            say(f"    already running (pid {pid}, left by --keep): reusing it")
        else:
            pid = emulator.start()
            machine.started.append(emulator.stop)
            say(f"    started (pid {pid}, log {_rel(emulator.log_file)})")


def _mount_identity(sshd: IdentitySshd, data: dict[str, str]) -> bool:
    """Lays the instance's issued key and certificate out as a pod's Secret volume; True if they changed."""
    mounted = {name: (sshd.mount_dir / name).read_text() for name in SECRET_KEYS if (sshd.mount_dir / name).exists()}
    if mounted == data:
        return False
    mount_secret(sshd.mount_dir, data)
    return True


def _start_sshds(machine: Machine, stack_name: str) -> None:
    """One sshd per instance, serving what the stack says it serves: its issued identity, or the pinned key."""
    issued = [name for name, sshd in machine.sshds.items() if isinstance(sshd, IdentitySshd)]
    try:
        # One read of the stack for all of them: derived as `ssh-gateway host-identity` derives them.
        view = read_stack(stack_name) if issued else None
        identities = {name: view.files(name) for name in issued} if view is not None else {}
    except HostIdentityFilesError as exc:
        raise SshdError(f"cannot derive the instances' host identities: {exc}") from None
    for instance, sshd in sorted(machine.sshds.items()):
        with step(f"sshd for {instance} on {sshd.host}:{sshd.port}"):
            changed = False
            if isinstance(sshd, IdentitySshd):
                changed = _mount_identity(sshd, identities[instance])
            pid = sshd.running_pid()
            if pid is not None:
                before = sshd.config_file.read_text() if sshd.config_file.exists() else ""
                sshd.write_files()  # authorized_keys may have a new key, which sshd reads at each login
                if changed or sshd.config_file.read_text() != before:
                    sshd.stop()  # sshd reads its host keys at start: serve the new ones
                    say("    what it must serve changed since an earlier --keep run: restarting it")
                    pid = None
                else:
                    say(f"    already running (pid {pid}, left by --keep): reusing it")
            if pid is None:
                pid = sshd.start()
                machine.started.append(sshd.stop)
                say(f"    started (pid {pid}, log {_rel(sshd.log_file)})")
            if isinstance(sshd, IdentitySshd):
                certificate = parse_host_certificate(identities[instance][HOST_CERTIFICATE_FILE])
                say(
                    f"    serves its issued host key {certificate.fingerprint}, certified for "
                    f"{', '.join(certificate.principals)} by CA {fingerprint(certificate.ca_public_key)}"
                )
            else:
                say(f"    serves the fixed demo host key {fingerprint(sshd.host_public_key)} (hostKey is pinned)")


def _print_resource_steps(event: auto.EngineEvent) -> None:
    """One line per resource that changes; nothing for the ones that stay the same."""
    pre = event.resource_pre_event
    if pre is None or pre.metadata.op in (auto.OpType.SAME, auto.OpType.READ, auto.OpType.REFRESH):
        return
    name = pre.metadata.urn.rsplit("::", 1)[-1]
    say(f"    {pre.metadata.op.value:<8} {pre.metadata.type} {name}")


def _start_traefik(machine: Machine, outputs: StackOutputs) -> None:
    """(Re)starts Traefik as the gateway host runs it: the stack's entry points (Traefik reads them only at start-up,
    so a kept one may lack new ports) and the emulator's HTTP provider; waits until it holds a router on every
    endpoint's entry point, and prints what it loaded."""
    entry_points = dict(outputs.gateway.traefik_entry_points) if outputs.gateway is not None else {}
    gateway = traefik.TraefikProcess(machine.traefik_dir, entry_points, machine.emulator.traefik_config_url)
    with step(f"Traefik on the stack's {len(entry_points)} entry points (output gateway.traefikEntryPoints)"):
        if traefik.stop_detached_traefik(machine.traefik_dir):
            say("    stopped the one an earlier --keep run left (its entry points may be stale)")
        gateway.start(detach=True)
        machine.started.append(gateway.stop)
        wanted = {entry_point_name(ep.port) for ep in outputs.endpoints.values()}
        routers = gateway.wait_for_routers(lambda held: wanted <= {e for r in held for e in r["entryPoints"]})
        say(
            f"    started Traefik {gateway.version()} (pid {gateway.running_pid()}, log {_rel(gateway.log_file)}): "
            f"{len(routers)} TCP routers from Pangolin's HTTP provider {gateway.provider_endpoint}"
        )
        for router in sorted(routers, key=lambda r: str(r["name"])):
            on = ", ".join(router["entryPoints"])
            say(f"      {router['name']} on {on}: {router['rule']} -> {router['service']}")


def _start_gateway(machine: Machine, outputs: StackOutputs) -> None:
    """(Re)starts the standalone Envoy from the stack's `envoyConfig` output, as an operator runs it."""
    if machine.gateway is None or machine.envoy_dir is None:
        return
    config = outputs.envoy_config
    envoy = StandaloneEnvoyProcess(machine.envoy_dir, port=machine.gateway.listener_port, config=config)
    with step(f"Envoy, the stack's CONNECT gateway, on 127.0.0.1:{envoy.port} (the envoyConfig output)"):
        if stop_detached_envoy(machine.envoy_dir):
            say("    stopped the one an earlier --keep run left (its routes may be stale)")
        envoy.start(detach=True)
        machine.started.append(lambda: stop_detached_envoy(envoy.directory))
        [listener] = yaml.safe_load(config)["static_resources"]["listeners"]
        hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
        routes = [vh["name"] for vh in hcm["route_config"]["virtual_hosts"]]
        say(f"    started (pid {envoy.running_pid()}, log {_rel(envoy.log_file)}): {len(routes)} virtual hosts")
        for name in routes:
            say(f"      {name}")


def _ssh_all(outputs: StackOutputs, config: Path) -> list[Answer]:
    endpoints = outputs.endpoints
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(ssh_answer, config, name, f"ssh-{name}", _path(ep)) for name, ep in endpoints.items()]
        return [f.result() for f in futures]


def _path(endpoint: EndpointOutput) -> str:
    """How an instance is reached: its own port, or CONNECT to its authority through the stack's entry."""
    where = f"{endpoint.host}:{endpoint.port}"
    return f"CONNECT {endpoint.authority} via {where}" if endpoint.routing is Routing.CONNECT else where


def _print_endpoints(outputs: StackOutputs) -> None:
    rows = [("INSTANCE", "ENDPOINT", "ROUTING", "USER", "PANGOLIN RESOURCE", "SSH")]
    for name, ep in outputs.endpoints.items():
        rows.append((name, _path(ep), ep.routing.value, ep.user, str(ep.pangolin_resource_id), ep.ssh))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        say("    " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _diagnose_failures(stack: auto.Stack, outputs: dict[str, Any], api_key: str, failed: set[str]) -> None:
    """The doctor's verdict for each instance that did not answer, while the processes still run."""
    endpoints = endpoints_from_outputs(outputs, project=stack.workspace.project_settings().name, stack=stack.name)
    reports = diagnose(
        [ep for ep in endpoints if ep.instance in failed],
        api_url=parse_stack_outputs(outputs).pangolin_url or "",
        api_key=api_key,
        timeout=3.0,
    )
    for report in reports:
        broken = report.broken
        if broken is not None:
            say(f"    {report.endpoint.instance}: broken at {broken.layer}: {broken.detail}\n      fix: {broken.fix}")


def up(stack_name: str, state: Path, *, keep: bool) -> int:
    started = time.monotonic()
    state.mkdir(parents=True, exist_ok=True)
    with step(f"stack {stack_name}: read its config"):
        stack = open_stack(stack_name)
        settings, api_key = _read_settings(stack)
        pangolin, ports = settings.pangolin.url, settings.ports.range
        say(f"    {len(settings.instances)} instances, Pangolin at {pangolin}, public ports {ports}")
    settings = _own_user(stack, settings)
    keys = ensure_client_keypair(state / "id_ed25519", comment=f"ssh-gateway-demo {login_user()}")
    machine = _machine(settings, api_key, state, [keys.public_key])
    answers: list[Answer] = []
    error = False
    try:
        _start_emulator(machine)
        # refresh: if the emulator's db was reset since the last run, the stack learns it and recreates.
        with step(f"pulumi up --refresh (stack {stack_name})"):
            result = stack.up(refresh=True, on_event=_print_resource_steps, color="never")
            changes = {k: v for k, v in (result.summary.resource_changes or {}).items() if k != "same"}
            say(f"    {'changes: ' + str(changes) if changes else 'no changes'}")
        outputs = {key: value.value for key, value in result.outputs.items()}
        read = parse_stack_outputs(outputs)
        _start_sshds(machine, stack_name)
        _start_traefik(machine, read)
        _start_gateway(machine, read)
        config = write_ssh_files(read, state, keys)
        with step("ssh through every instance's public port (BatchMode, StrictHostKeyChecking yes, the CA line)"):
            answers = _ssh_all(read, config)
            for answer in answers:
                say(f"    {answer.instance}: {answer.text}" if answer.ok else f"!!! {answer.instance}: {answer.text}")
        failed = {a.instance for a in answers if not a.ok}
        if failed:
            with step("doctor: which layer is broken"):
                _diagnose_failures(stack, outputs, api_key, failed)
        say("==> endpoints")
        _print_endpoints(read)
        say(f"==> ~/.ssh/config blocks (in {_rel(config)} with the demo's key: ssh -F {_rel(config)} ssh-<instance>)")
        for line in read.ssh_config.rstrip("\n").splitlines():
            say(f"    {line}".rstrip())
        if read.known_hosts:
            say("==> known_hosts: what a laptop adds, once, to trust every instance of the stack on any port")
            say(
                f"    (the blocks above read it from {known_hosts_file(stack_name)}; the demo uses its copy in "
                f"{_rel(state / 'known_hosts')})"
            )
            for line in read.known_hosts.splitlines():
                say(f"    {line}")
    except (SshdError, EmulatorError, EnvoyError, traefik.TraefikError, auto.CommandError) as exc:
        say(f"!!! {exc}")
        error = True
    finally:
        _finish(machine, keep=keep)
    took = time.monotonic() - started
    answered = sum(a.ok for a in answers)
    total = len(settings.instances)
    if error or answered != total:
        say(f"!!! main job failed: {answered}/{total} instances answered ({took:.1f}s)")
        return ExitCode.FAILED
    say(f"==> main job OK: {answered}/{total} instances answered through their public ports ({took:.1f}s)")
    return ExitCode.OK


def _finish(machine: Machine, *, keep: bool) -> None:
    if keep:
        say(
            "==> --keep: the emulator, Traefik, the sshds (and Envoy) stay up; stop them (and destroy the stack) with: "
            "scripts/demo down"
        )
        return
    if machine.started:
        with step("stop the processes this run started"):
            for stop in reversed(machine.started):
                stop()
    envoy = detached_envoy_pid(machine.envoy_dir) if machine.envoy_dir else None
    sshd_pids = [s.running_pid() for s in machine.sshds.values()]
    gateway = traefik.detached_traefik_pid(machine.traefik_dir)
    leftovers = [p for p in (machine.emulator.running_pid(), gateway, *sshd_pids, envoy) if p]
    if leftovers:
        say("==> processes left by an earlier --keep run are still up: scripts/demo down stops them")


def down(stack_name: str, state: Path) -> int:
    with step(f"stack {stack_name}: read its config"):
        stack = open_stack(stack_name)
        settings, api_key = _read_settings(stack)
        resources = len((stack.export_stack().deployment or {}).get("resources", []))
    machine = _machine(settings, api_key, state, [])  # only to find and stop what runs
    status = ExitCode.OK
    if resources:
        emulator = machine.emulator
        try:
            if emulator.running_pid() is None or not emulator.healthy():
                with step("Pangolin emulator (destroy must reach it to delete the resources)"):
                    emulator.start()
            with step(f"pulumi destroy (stack {stack_name})"):
                stack.destroy(on_event=_print_resource_steps, color="never")
        except (EmulatorError, auto.CommandError) as exc:
            say(f"!!! {exc}")
            status = ExitCode.FAILED
    else:
        say(f"==> stack {stack_name} has no resources: nothing to destroy")
    stops: list[tuple[str, Callable[[], bool]]] = [("emulator", machine.emulator.stop)]
    stops.append(("traefik", lambda: traefik.stop_detached_traefik(machine.traefik_dir)))
    stops += [(f"sshd :{s.port}", s.stop) for s in machine.sshds.values()]
    if machine.envoy_dir is not None:
        envoy_dir = machine.envoy_dir
        stops.append(("envoy", lambda: stop_detached_envoy(envoy_dir)))
    with step("stop the demo's processes"):
        for name, stop in stops:
            say(f"    {name}: {'stopped' if stop() else 'was not running'}")
    return status


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def run_demo(
    action: Literal["up", "down"], *, stack: str = "local", state_dir: Path | None = None, keep: bool = False
) -> int:
    """`up` (`keep`: leave what it started running) or `down` the demo on `stack`, its keys, logs and pid files in
    `state_dir` (default: .pulumi-state/demo); its exit code."""
    if shutil.which("ssh") is None:
        say("!!! the ssh client is missing: run scripts/system-packages")
        return ExitCode.FAILED
    state = (state_dir or default_state_dir(stack)).resolve()
    try:
        if action == "down":
            return down(stack, state)
        return up(stack, state, keep=keep)
    except (SettingsError, SshdError, EmulatorError, traefik.TraefikError, auto.CommandError) as exc:
        say(f"!!! {exc}")
        return ExitCode.FAILED
