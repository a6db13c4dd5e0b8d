"""A kill -9 of a first `ssh-gateway up`, then `ssh-gateway recover` and `ssh-gateway up`: one trial, and what it
left (issue 19). The test (test_skip_checkpoints_kills.py) asserts on it; the benchmark (benchmarks/platform.py)
prints it. Pytest-free for that reason.

A first `up` runs with `PULUMI_SKIP_CHECKPOINTS` (ssh_gateway/ops/tools/pulumi_up.py), so a killed one leaves no
record at all: every Pangolin resource, NSG rule, Service and Secret it made is unknown to the state. The trial kills
the whole process tree once a given share of the fleet's creates has reached Pangolin (the emulator's create
counter) and Azure (the stand-in's): counted, not timed, so the kill lands at the same point on a fast machine
and a loaded one.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.names import NSG_RULE_TYPE, SECRET_TYPE, SERVICE_TYPE, nsg_rule_name, owner_prefix, stack_marked
from ssh_gateway.local.control_plane import ControlPlane
from ssh_gateway.ops.tools.pulumi_up import holds_resources
from ssh_gateway.plumbing.toolchain import REPO

from .cli import pulumi, run
from .fake_azure import SUBSCRIPTION, FakeAzure
from .reliability import PUT_RESOURCE, Audit, audit, kill_tree, start_in_session, wait_until

__all__ = ["FIREWALL_CONFIG", "KILL_POINTS", "KillTrial", "kill_first_up"]

KILL_POINTS: Final = (0.15, 0.5, 0.85)
"""The share of a first `up`'s creates made when the kill lands: early, half way, near the end."""

FIREWALL_CONFIG: Final = {
    # A rule per instance: each one's create is a step a kill can split from its Pangolin resource's.
    "ssh-gateway:firewall": {
        "resourceGroup": "rg-gw",
        "nsgName": "nsg-gw",
        "sourceCidrs": ["203.0.113.0/24"],
        "rules": "perInstance",
    },
    # The stand-in's subscription, named: `recover` builds each rule's ARM id from it to read the rule back.
    "azure-native:subscriptionId": SUBSCRIPTION,
}
"""Config over a stack's that gives each instance an NSG rule in the Azure stand-in (`fake_azure.py`)."""

_SSH_GATEWAY = str(REPO / ".venv" / "bin" / "ssh-gateway")
# A first `ssh-gateway up` previews once, to decide on the checkpoints, and skips pulumi's own preview; the `up`
# after `recover` is not a first one, and skips it by this flag (the program of 300 instances, once more).
_UP = (_SSH_GATEWAY, "up", "--stack")
_UP_FLAGS = ("--", "--skip-preview")
_SKIPPING = "the checkpoint is written once, at the end (PULUMI_SKIP_CHECKPOINTS)"


@dataclass(frozen=True)
class RuleAudit:
    """How the stack's state and the stand-in's NSG rules disagree."""

    orphans: list[str]
    """Rules marked for the stack that its state does not hold."""
    missing: list[str]
    """Instances without a rule in state, or whose rule is gone from the stand-in."""
    wrong_port: list[str]
    """Instances whose rule opens another port than the one their Pangolin resource binds."""

    @property
    def clean(self) -> bool:
        return not (self.orphans or self.missing or self.wrong_port)


@dataclass(frozen=True)
class Cluster:
    """Where the Services and Secrets of the fleet's Kubernetes instances are: a real kube-apiserver, a namespace."""

    plane: ControlPlane
    namespace: str


@dataclass(frozen=True)
class KubeAudit:
    """How the stack's state and the namespace's Services and Secrets disagree."""

    orphans: list[str]
    """`<kind>/<name>` in the namespace that the state does not hold."""
    missing: list[str]
    """`<kind>/<name>` the state holds that the namespace does not have."""

    @property
    def clean(self) -> bool:
        return not (self.orphans or self.missing)


@dataclass(frozen=True)
class KillTrial:
    """One trial: what the kill left, what `recover` did, and what the `up` after it left."""

    share: float
    planned: int
    """Creates of the whole first `up` that the trial counts: a Pangolin resource and an NSG rule per instance."""
    made_at_kill: tuple[int, int]
    """Of those, made when the kill landed: (Pangolin resources, NSG rules)."""
    processes_killed: int
    said_skipping: bool
    """`ssh-gateway up` said it writes the checkpoint once, at the end."""
    held_at_kill: bool
    """The state held a resource of the program (or a pending operation) after the kill."""
    moved: list[str]
    """Instances whose Pangolin resource the killed run made, and whose port is another one after the `up`: a
    port handed out (and perhaps already in someone's ssh config) must stay the instance's."""
    recover_exit: int
    recover_done: list[str]
    rules_adopted: int
    kube_adopted: int
    """Services and Secrets `recover` imported."""
    up_exit: int
    pangolin: Audit
    rules: RuleAudit
    kube: KubeAudit
    preview_clean: bool
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time of each phase: `until kill`, `recover`, `up`, `audit`."""
    logs: dict[str, str] = field(default_factory=dict)
    """The tails of the commands' output, for a failure's message."""

    @property
    def clean(self) -> bool:
        """Nothing left behind, the run really lost its checkpoints, and every command succeeded."""
        return (
            self.said_skipping
            and not self.held_at_kill
            and self.recover_exit == 0
            and self.up_exit == 0
            and not self.moved
            and self.pangolin.clean
            and self.rules.clean
            and self.kube.clean
            and self.preview_clean
        )

    def summary(self) -> str:
        """One line of counts."""
        p, r = self.pangolin, self.rules
        pangolin_made, rules_made = self.made_at_kill
        orphans = len(p.orphans) + len(r.orphans) + len(self.kube.orphans)
        return (
            f"kill -9 at {self.share:.0%} ({pangolin_made} Pangolin resources and {rules_made} NSG rules made of "
            f"{self.planned}; {self.processes_killed} processes; checkpoints skipped: "
            f"{self.said_skipping and not self.held_at_kill}); recover exit {self.recover_exit}, "
            f"{self.rules_adopted} NSG rules and {self.kube_adopted} Services and Secrets imported; "
            f"up exit {self.up_exit}: orphans {orphans}, twins {len(p.twins)}, pending {p.pending}, "
            f"ports bound twice {len(p.doubly_bound)}, ports moved {len(self.moved)}, instances not served "
            f"{len(p.missing)}, rules missing {len(r.missing)} or at the wrong port {len(r.wrong_port)}, "
            f"Kubernetes objects missing {len(self.kube.missing)}; "
            f"preview {'clean' if self.preview_clean else 'NOT clean'}; "
            + ", ".join(f"{phase} {seconds:.0f} s" for phase, seconds in self.seconds.items())
        )


def kill_first_up(
    emulator: EmulatorHandle,
    azure: FakeAzure,
    stack: auto.Stack,
    instances: list[str],
    share: float,
    logs: Path,
    *,
    env: dict[str, str] | None = None,
    cluster: Cluster | None = None,
    timeout: float = 900,
) -> KillTrial:
    """Run the trial on `stack` (new, its config with `FIREWALL_CONFIG`, `instances` its fleet): `ssh-gateway up`
    killed once `share` of its creates are made, `ssh-gateway recover`, `ssh-gateway up`. `env` over the offline
    toolchain's for every command (e.g. `PULUMI_DEBUG_PROVIDERS` naming the stand-in); `cluster` where the
    fleet's Services and Secrets are, if it has any."""
    planned = 2 * len(instances)
    target = max(1, math.ceil(share * planned))
    clock = _Phases()

    def made() -> tuple[int, int]:
        return emulator.counters().get(PUT_RESOURCE, 0), len(azure.creates)

    up_log = logs / "first-up.log"
    first = start_in_session([*_UP, stack.name], up_log, env=env)
    wait_until(lambda: sum(made()) >= target, f"{target} creates", process=first, timeout=timeout)
    killed = kill_tree(first)
    made_at_kill = made()
    ports_at_kill = _bound_ports(emulator, stack)
    clock.lap("until kill")
    held = holds_resources({"deployment": stack.export_stack().deployment or {}})

    recovered = run([_SSH_GATEWAY, "recover", "--json", "--stack", stack.name], env=env)
    report: dict[str, Any] = json.loads(recovered.stdout) if recovered.stdout.startswith("{") else {}
    clock.lap("recover")

    second = run([*_UP, stack.name, *_UP_FLAGS], env=env)
    clock.lap("up")

    bound = _bound_ports(emulator, stack)
    pangolin = audit(emulator, stack, instances)
    rules = _audit_rules(azure, stack, instances, bound)
    kube = _audit_kube(cluster, stack) if cluster is not None else KubeAudit(orphans=[], missing=[])
    preview = pulumi("preview", "--expect-no-changes", "--non-interactive", "--stack", stack.name, env=env)
    clock.lap("audit")
    return KillTrial(
        share=share,
        planned=planned,
        made_at_kill=made_at_kill,
        processes_killed=killed,
        said_skipping=_SKIPPING in up_log.read_text(),
        held_at_kill=held,
        moved=sorted(name for name, port in ports_at_kill.items() if bound.get(name) != port),
        recover_exit=recovered.returncode,
        recover_done=list(report.get("done") or [recovered.stderr.strip()[-500:]]),
        rules_adopted=_adopted(report, (NSG_RULE_TYPE,)),
        kube_adopted=_adopted(report, (SERVICE_TYPE, SECRET_TYPE)),
        up_exit=second.returncode,
        pangolin=pangolin,
        rules=rules,
        kube=kube,
        preview_clean=preview.returncode == 0,
        seconds=clock.laps,
        logs={
            "first up": up_log.read_text()[-1500:],
            "recover": (recovered.stdout + recovered.stderr)[-1500:],
            "up": (second.stdout + second.stderr)[-1500:],
            "preview": (preview.stdout + preview.stderr)[-1500:],
        },
    )


def _bound_ports(emulator: EmulatorHandle, stack: auto.Stack) -> dict[str, str]:
    """Instance -> the port its Pangolin resources bind (comma-joined, in case of twins, which `audit` counts)."""
    prefix = owner_prefix(stack.workspace.project_settings().name, stack.name)
    ports: dict[str, list[str]] = {}
    for resource in emulator.state()["resources"]:
        if str(resource["name"]).startswith(prefix):
            ports.setdefault(str(resource["name"]).removeprefix(prefix), []).append(str(resource["proxyPort"]))
    return {name: ",".join(sorted(found)) for name, found in ports.items()}


def _audit_rules(azure: FakeAzure, stack: auto.Stack, instances: list[str], bound: dict[str, str]) -> RuleAudit:
    project = stack.workspace.project_settings().name
    mark = stack_marked("", project, stack.name)
    with azure.lock:
        live = {arm_id: dict(props) for arm_id, props in azure.objects.items()}
    ours = {arm_id: props for arm_id, props in live.items() if str(props.get("description", "")).endswith(mark)}
    deployment = stack.export_stack().deployment or {}
    held = {str(r["id"]) for r in deployment.get("resources", []) if r["type"] == NSG_RULE_TYPE and r.get("id")}
    by_rule = {str(props["name"]): (arm_id, props) for arm_id, props in ours.items()}
    missing, wrong_port = [], []
    for instance in instances:
        arm_id, props = by_rule.get(nsg_rule_name(instance), ("", {}))
        if arm_id not in held:
            missing.append(instance)
        elif str(props.get("destinationPortRange")) != bound.get(instance):
            wrong_port.append(instance)
    return RuleAudit(orphans=sorted(set(ours) - held), missing=missing, wrong_port=wrong_port)


def _adopted(report: dict[str, Any], types: tuple[str, ...]) -> int:
    return sum(a["type"] in types and a["outcome"] == "adopted" for a in report.get("adopted", []))


_KINDS: Final = {SERVICE_TYPE: "services", SECRET_TYPE: "secrets"}


def _audit_kube(cluster: Cluster, stack: auto.Stack) -> KubeAudit:
    held = {
        f"{_KINDS[r['type']]}/{(r.get('outputs') or {}).get('metadata', {}).get('name')}"
        for r in (stack.export_stack().deployment or {}).get("resources", [])
        if r["type"] in _KINDS
    }
    live = set()
    with cluster.plane.client() as api:
        for kind in _KINDS.values():
            listed = api.get(f"/api/v1/namespaces/{cluster.namespace}/{kind}").raise_for_status().json()
            live |= {f"{kind}/{item['metadata']['name']}" for item in listed["items"]}
    return KubeAudit(orphans=sorted(live - held), missing=sorted(held - live))


class _Phases:
    """Wall time per phase, lap by lap."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._last = now()
        self.laps: dict[str, float] = {}

    def lap(self, phase: str) -> None:
        now = self._now()
        self.laps[phase] = now - self._last
        self._last = now
