"""`ssh-gateway recover --stack S [--json]` (ssh_gateway/ops/commands/recover.py): make a stack whose `pulumi up` was
killed usable again.

What a killed `up` leaves, and what this command does about each, in this order:

1. **A stale lock** (file and Azure Blob backends: ssh_gateway/ops/recovery/state_backend.py): `the stack is currently
   locked by 1 lock(s)`. The lock (a file, or a blob on Azure) names the pid and host of the `pulumi` process that
   took it. If that process is gone (or the pid now belongs to a process that started after the lock was taken),
   the lock is removed. If it is alive, or the lock is another host's and cannot be checked from here, nothing at
   all is changed and the command exits 3: an `up` that is really running is never disturbed. The one exception
   is a host named with `--gone-host`, whose processes the caller knows are gone: `ssh-gateway reconcile` names
   the pod whose Lease it took over once that pod no longer exists (docs/reconciler.md).
   Then the processes the killed `up` left (its language host, its dynamic providers: the engine starts each in a
   process group of its own, so a `pulumi` killed first leaves them running) are ended (`plumbing/run_mark.py`).
2. **Broken files** (file backend): a 0-byte or unreadable `<stack>.json.attrs` (every command then fails with
   `failed to load checkpoint: EOF`) is rewritten from the checkpoint; an empty or truncated checkpoint is
   replaced by its `.bak` when that is sound (the broken one is kept beside it).
3. **Pending operations**: each create the engine began but never finished. For a `PangolinTcpResource` the
   create may have reached Pangolin, so the org is listed once and the resource looked up by its name (unique
   per stack and instance) and protocol:

   - found: it is **adopted into state**, with outputs read from Pangolin by the provider's own `read` (the
     lowest id if there are several; the others are deleted, as twins that nothing owns);
   - not found: it is absent, and nothing needs doing.

   Adopting rather than deleting, because: the resource may already carry traffic (its port is allocated to
   that instance in the table, and the ssh endpoint works); deleting it would only make the next `up` create
   the same thing again; and once it is in state every command is right about it - `destroy` deletes it,
   `refresh` reads it, and `up` updates whatever differs (a create killed before its target was made is
   adopted with no target, which the provider's diff sees and the next `up` adds). Deleting is the fallback
   only where the state cannot hold it: when the resource's parent, provider or a dependency is not in state.
   Pending operations of any other kind or type are cleared (each is named in the report), and the fixed
   deployment is imported with `pulumi stack import`.
4. **Objects no state holds** (`adopt.py`): a pending create of a `Service`, a Secret, the discovery status
   ConfigMap or an NSG rule whose object exists, and every such object of a killed first `up` run with
   `PULUMI_SKIP_CHECKPOINTS` (which leaves no pending operation at all), is imported into the state by its
   deterministic id - when it carries this stack's mark; one without it is someone else's and is named, not
   adopted. The real providers refuse to create what exists, so the next `up` could not make them again.
   Pangolin resources of such a run need no step: their provider adopts them by name, and the port table takes
   their ports back.

It prints what it did (`--json`: one JSON object). Exit codes:

    0  the stack is usable: every step above succeeded, or there was nothing to do
    1  a step failed (Pangolin unreachable, a pulumi command failed, a broken checkpoint without a sound backup)
    2  it cannot run: bad arguments, no toolchain, no such stack, no API key
    3  refused, nothing changed: the stack's lock is held by a live process, or by one on another host

(1 also when an object the program would create exists without this stack's mark: it is named, and left.)
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ssh_gateway.core.names import PANGOLIN_TYPE
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.plumbing.pulumi_cli import PulumiFailed, run_pulumi
from ssh_gateway.plumbing.run_mark import end_orphans
from ssh_gateway.plumbing.toolchain import REPO, ToolchainMissing, pulumi_env

from .adopt import ADOPTABLE_TYPES, AdoptError, Adoption, adopt
from .file_backend import StackFiles
from .stack_lock import holder_state
from .state_backend import AzblobError, StackState, stack_state

if TYPE_CHECKING:
    from ssh_gateway.ops.shared.pangolin_api import Resource

__all__ = ["Report", "recover", "run_recover"]


@dataclass
class Report:
    """What `recover` found and did, in order."""

    stack: str
    done: list[str] = field(default_factory=list)
    """One line per action or finding, in the order they happened."""
    pending: list[dict[str, Any]] = field(default_factory=list)
    """Per pending operation: `urn`, `type`, `operation`, `outcome` (adopted/absent/deleted/cleared/foreign),
    `resourceId`."""
    adopted: list[dict[str, str]] = field(default_factory=list)
    """Per object the program would create that exists: `urn`, `type`, `objectId`, `outcome`
    (adopted/foreign); the pending ones among them too."""
    exit_code: int = ExitCode.OK


class _Stop(Exception):
    """Ends the run with an exit code and a reason."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code


def recover(
    stack: str, *, work_dir: Path = REPO, env: dict[str, str] | None = None, gone_hosts: frozenset[str] = frozenset()
) -> Report:
    """Run the three steps on `stack`; never raises for a problem it can name (see `Report.exit_code`).

    `env` is the pulumi environment (default: the offline toolchain's, whose backend is the local file one);
    `gone_hosts` are other hosts whose processes are known to be gone, so their locks are stale."""
    report = Report(stack)
    try:
        env = pulumi_env() if env is None else env
        project = str(yaml.safe_load((work_dir / "Pulumi.yaml").read_text())["name"])
        backend = env.get("PULUMI_BACKEND_URL", "")
        try:
            state = stack_state(backend, project, stack, env)
        except AzblobError as exc:
            raise _Stop(ExitCode.CANNOT_RUN, f"cannot reach the stack's backend: {exc}") from None
        if state is not None:
            _clear_stale_locks(state, report, gone_hosts)
        else:
            report.done.append(f"backend {backend.split('?')[0] or '(default)'} keeps its own locks: untouched")
        ended = end_orphans(stack, work_dir)  # after the lock: a live update was refused above
        if ended:
            report.done.append(f"ended {ended} processes a killed `up` of this stack left running (its plugins)")
        if isinstance(state, StackFiles):
            _repair_files(state, report)
        _settle_pending(stack, work_dir, env, report)
        _adopt_existing(stack, project, work_dir, env, report)
    except ToolchainMissing as exc:
        report.done.append(str(exc))
        report.exit_code = ExitCode.CANNOT_RUN
    except AzblobError as exc:
        report.done.append(f"cannot read the stack's locks, so nothing was changed: {exc}")
        report.exit_code = ExitCode.FAILED
    except _Stop as stop:
        report.done.append(str(stop))
        report.exit_code = stop.code
    return report


# --- 1. the lock -------------------------------------------------------------------------------------------------


def _clear_stale_locks(files: StackState, report: Report, gone_hosts: frozenset[str] = frozenset()) -> None:
    if not files.exists():
        raise _Stop(ExitCode.CANNOT_RUN, f"no stack {files.stack!r} of project {files.project!r} in {files.where}")
    locks = files.locks()
    for lock in locks:
        state = "gone" if lock.hostname in gone_hosts else holder_state(lock)
        if state == "alive":
            raise _Stop(
                ExitCode.REFUSED,
                f"stack {files.stack!r} is locked by pid {lock.pid} on {lock.hostname}, which is still running: "
                "an update is in progress; wait for it to end (nothing was changed)",
            )
        if state == "unknown":
            raise _Stop(
                ExitCode.REFUSED,
                f"stack {files.stack!r} is locked by pid {lock.pid} on host {lock.hostname!r}, which cannot be "
                f"checked from here: make sure no pulumi runs there, then `pulumi cancel --stack {files.stack}` "
                "(nothing was changed)",
            )
    for lock in locks:
        files.remove_lock(lock)
        why = "that host is gone" if lock.hostname in gone_hosts else "that process is gone"
        report.done.append(f"removed the lock of pid {lock.pid} on {lock.hostname}: {why}")


# --- 2. broken files ---------------------------------------------------------------------------------------------


def _repair_files(files: StackFiles, report: Report) -> None:
    kept = files.restore_checkpoint()
    if kept is not None:
        report.done.append(f"the checkpoint was empty or truncated: restored {files.backup.name} (kept {kept.name})")
    elif not files.checkpoint_is_sound():
        raise _Stop(
            ExitCode.FAILED,
            f"the checkpoint {files.checkpoint} is empty or truncated and there is no sound {files.backup.name} to "
            "restore: restore it from the backend's backups/ directory",
        )
    for attrs in files.repair_attrs():
        report.done.append(f"rewrote the empty or unreadable {attrs.name} from its file")


# --- 3. pending operations ---------------------------------------------------------------------------------------


def _settle_pending(stack: str, work_dir: Path, env: dict[str, str], report: Report) -> None:
    with tempfile.TemporaryDirectory(prefix="ssh-gateway-recover-") as scratch:
        exported = Path(scratch) / "deployment.json"
        _pulumi(["stack", "export", "--stack", stack, "--file", str(exported)], work_dir, env)
        document = json.loads(exported.read_text())
        deployment: dict[str, Any] = document["deployment"]
        pending: list[dict[str, Any]] = deployment.get("pending_operations") or []
        if not pending:
            report.done.append("no pending operations")
            return
        # Cleared here; those whose object exists are imported by the next step (`_adopt_existing`).
        creates = [op for op in pending if op.get("type") == "creating" and op["resource"].get("type") == PANGOLIN_TYPE]
        if creates:
            _settle_pangolin_creates(stack, work_dir, env, deployment, creates, report)
        for op in pending:
            if op not in creates:
                resource = op["resource"]
                report.pending.append(
                    {
                        "urn": resource["urn"],
                        "type": resource.get("type"),
                        "operation": op.get("type"),
                        "outcome": "cleared",
                    }
                )
                report.done.append(f"cleared the pending {op.get('type')} of {resource['urn']}")
        deployment["pending_operations"] = []
        exported.write_text(json.dumps(document))
        _pulumi(["stack", "import", "--stack", stack, "--file", str(exported)], work_dir, env)
        report.done.append(f"imported the deployment without its {len(pending)} pending operation(s)")


def _settle_pangolin_creates(
    stack: str,
    work_dir: Path,
    env: dict[str, str],
    deployment: dict[str, Any],
    creates: list[dict[str, Any]],
    report: Report,
) -> None:
    from ssh_gateway.ops.shared.pangolin_api import PangolinClient, PangolinError

    key = _api_key(stack, work_dir, env)
    resources: list[dict[str, Any]] = deployment["resources"]
    in_state = {r["urn"] for r in resources}
    owned_ids = {str(r.get("id")) for r in resources if r.get("type") == PANGOLIN_TYPE}
    listings: dict[tuple[str, str], list[Resource]] = {}
    try:
        for op in creates:
            resource = op["resource"]
            inputs: dict[str, Any] = resource["inputs"]
            where = (str(inputs["apiUrl"]), str(inputs["orgId"]))
            with PangolinClient(where[0], key) as client:
                if where not in listings:
                    listings[where] = client.list_all_resources(where[1])
                found = sorted(
                    (r for r in listings[where] if r.name == inputs["name"] and r.raw_protocol == inputs["protocol"]),
                    key=lambda r: r.resourceId,
                )
                outcome: dict[str, Any] = {"urn": resource["urn"], "type": PANGOLIN_TYPE, "operation": "creating"}
                if not found:
                    outcome["outcome"] = "absent"
                    report.done.append(f"{inputs['name']!r}: not in Pangolin, so its pending create made nothing")
                elif _can_hold(resource, in_state):
                    keep, twins = found[0], [r for r in found[1:] if str(r.resourceId) not in owned_ids]
                    resources.append(_adopted(resource, keep.resourceId, key))
                    in_state.add(resource["urn"])
                    outcome |= {"outcome": "adopted", "resourceId": keep.resourceId}
                    report.done.append(f"{inputs['name']!r}: adopted Pangolin resource {keep.resourceId} into state")
                    for twin in twins:
                        client.delete_resource(twin.resourceId)
                        report.done.append(f"{inputs['name']!r}: deleted twin resource {twin.resourceId}")
                else:
                    for leftover in found:
                        client.delete_resource(leftover.resourceId)
                    outcome |= {"outcome": "deleted", "resourceId": found[0].resourceId}
                    ids = ", ".join(str(r.resourceId) for r in found)
                    report.done.append(
                        f"{inputs['name']!r}: deleted Pangolin resource(s) {ids} (its parent, provider or a "
                        "dependency is not in state, so the state cannot hold it)"
                    )
                report.pending.append(outcome)
    except PangolinError as exc:
        raise _Stop(
            ExitCode.FAILED, f"cannot settle the pending Pangolin creates, so the state was left as it was: {exc}"
        ) from None


def _can_hold(resource: dict[str, Any], in_state: set[str]) -> bool:
    """Whether the state can take the resource: not there yet, and everything it refers to is."""
    needed = [resource.get("parent"), *(resource.get("dependencies") or [])]
    provider = str(resource.get("provider") or "")
    return (
        resource["urn"] not in in_state
        and all(u in in_state for u in needed if u)
        and (provider.rpartition("::")[0] in in_state)
    )


def _adopted(resource: dict[str, Any], resource_id: int, key: str) -> dict[str, Any]:
    """The state entry of a pending create whose resource Pangolin has: outputs as the provider reads them."""
    from ssh_gateway.ops.shared.pangolin_api import read_resource_outputs

    inputs: dict[str, Any] = resource["inputs"]
    outputs = {**read_resource_outputs(resource_id, inputs, key), "__provider": inputs.get("__provider")}
    return {**resource, "id": str(resource_id), "outputs": outputs}


def _api_key(stack: str, work_dir: Path, env: dict[str, str]) -> str:
    from ssh_gateway.core.credentials import API_KEY_CONFIG, find_api_key

    shown = _pulumi(["config", "--show-secrets", "--json", "--stack", stack], work_dir, env)
    config = {k: str(v.get("value", "")) for k, v in json.loads(shown or "{}").items() if isinstance(v, dict)}
    try:
        key, _ = find_api_key({API_KEY_CONFIG: config.get(API_KEY_CONFIG, "")}, os.environ)
    except ValueError as exc:
        raise _Stop(ExitCode.CANNOT_RUN, str(exc)) from None
    return key


def _pulumi(args: list[str], work_dir: Path, env: dict[str, str]) -> str:
    try:
        return run_pulumi(args, work_dir=work_dir, env=env)
    except PulumiFailed as exc:
        raise _Stop(ExitCode.CANNOT_RUN if "no stack named" in exc.stderr else ExitCode.FAILED, str(exc)) from None


# --- 4. objects no state holds -----------------------------------------------------------------------------------


def _adopt_existing(stack: str, project: str, work_dir: Path, env: dict[str, str], report: Report) -> None:
    try:
        found = adopt(stack, project, work_dir, env)
    except AdoptError as exc:
        raise _Stop(ExitCode.FAILED, f"cannot adopt the objects no state holds: {exc}") from None
    by_urn: dict[str, Adoption] = {a.urn: a for a in found}
    for entry in report.pending:
        if entry["type"] in ADOPTABLE_TYPES and entry["urn"] in by_urn:
            entry["outcome"] = by_urn[entry["urn"]].outcome
    for a in found:
        if a.outcome != "absent":
            report.adopted.append({"urn": a.urn, "type": a.type, "objectId": a.object_id, "outcome": a.outcome})
    adopted = [a for a in found if a.outcome == "adopted"]
    if adopted:
        report.done.append(
            f"imported {len(adopted)} object(s) that exist but that no state held: "
            + ", ".join(a.object_id.rsplit("/", 1)[-1] for a in adopted[:5])
            + (f" and {len(adopted) - 5} more" if len(adopted) > 5 else "")
        )
    foreign = [a for a in found if a.outcome == "foreign"]
    if foreign:
        raise _Stop(
            ExitCode.FAILED,
            f"{len(foreign)} object(s) the program would create exist without this stack's mark, so they are "
            f"someone else's and were not adopted: {', '.join(a.object_id for a in foreign[:3])}; delete or "
            "rename them (or import them by hand with `pulumi import` if they are this stack's)",
        )


# --- the command's output --------------------------------------------------------------------------------------


def run_recover(
    stack: str, *, ambient: bool = False, gone_hosts: frozenset[str] = frozenset(), json_output: bool = False
) -> int:
    """`ssh-gateway recover`: `recover`, its report printed (`json_output`: as one JSON object); its exit code.
    `ambient`: the pulumi on PATH with the environment's backend and secrets, not the offline toolchain."""
    report = recover(stack, env=dict(os.environ) if ambient else None, gone_hosts=gone_hosts)
    if json_output:
        print(json.dumps(asdict(report), indent=2))
    else:
        for line in report.done:
            print(f"recover {report.stack}: {line}", file=sys.stdout if report.exit_code == ExitCode.OK else sys.stderr)
    return report.exit_code
