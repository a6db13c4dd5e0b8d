"""Adopt, by `pulumi import`, the objects a lost run made and no state holds: Services, Secrets, the discovery
status ConfigMap and NSG rules.

A killed `up` leaves such objects in two ways. With checkpoints, each create it began but never finished is a
pending operation, whose object may or may not exist. With `PULUMI_SKIP_CHECKPOINTS` (a large first `up`
writes its checkpoint once, at the end), nothing at all: every object the run made is unknown to the state.
The real providers refuse to create what exists - pulumi-azure-native checks before each PUT (`cannot create
already existing resource`), pulumi-kubernetes from v4.29 without `upsertExistingObjects` answers
`AlreadyExists` - so the next `up` cannot just make them again.

Both cases look the same from the program: its preview plans a create for a resource whose object exists.
So `adopt`:

1. previews the stack (`pulumi preview --json`) and takes the planned creates of the adoptable types;
2. reads each object by its deterministic id (`<namespace>/<name>`, or the NSG rule's ARM id) through its
   provider (`provider_probe`), configured with the inputs the preview plans for it or, when the preview
   leaves it unchanged (and so shows no step for it), the state holds: absent objects are left to the next
   `up` to create, and one absent object must not fail the batch, which `pulumi import` would;
3. keeps the objects that carry this stack's mark (`STACK_MARK` annotation on a Kubernetes object, the
   `[stack <project>/<stack>]` end of an NSG rule's description): an object of that name without it is
   someone else's, never adopted by its name alone (reported as `foreign`);
4. imports those in one `pulumi import --file`, each under the URN, parent and provider the program gives it,
   unprotected; parents and providers the state lacks (after a run without checkpoints: all) are first put
   into the state as the program registers them;
5. narrows each imported Kubernetes object's recorded inputs to the fields the program sets, as a finished
   create would have recorded them: an import records every field of the live object, the API server's
   defaults too (a Service's `clusterIP`, its `nodePort`), and the program, which sets none of them, would
   then plan to remove them, and a `clusterIP` removed forces pulumi-kubernetes to replace the Service (a new
   NodePort, the Pangolin target moved, the Secret's pod briefly without its key).

The next `up` then updates what differs instead of creating. Pangolin resources need none of this: their
provider adopts a resource of the same name on create.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from ssh_gateway.core.names import (
    ALLOCATION_TYPE,
    FIREWALL_TYPE,
    HOST_CA_TYPE,
    HOST_KEY_ROOT_TYPE,
    HOST_KEY_TYPE,
    INSTANCE_TYPES,
    NSG_RULE_TYPE,
    PANGOLIN_TYPE,
    PORT_CHECK_TYPE,
    SECRET_TYPE,
    SERVICE_TYPE,
    STACK_MARK,
    STACK_TYPE,
    STATUS_TYPE,
    stack_mark,
    stack_marked,
)
from ssh_gateway.ops.preview.steps import Step, parse_preview
from ssh_gateway.plumbing.pulumi_cli import SECRET_SIG, SECRET_SIG_KEY, PulumiFailed, revealed, run_pulumi

__all__ = [
    "ADOPTABLE_TYPES",
    "AdoptError",
    "Adoption",
    "adopt",
    "planned_creates",
    "skip_checkpoints_is_recoverable",
]

ADOPTABLE_TYPES: Final = (SERVICE_TYPE, SECRET_TYPE, STATUS_TYPE, NSG_RULE_TYPE)
"""What a lost run can leave behind that its provider refuses to create again."""

RECOVERABLE_TYPES: Final = frozenset(
    {
        *ADOPTABLE_TYPES,
        PANGOLIN_TYPE,  # adopted by name by its own provider's create
        ALLOCATION_TYPE,  # rebuilt from the ports the Pangolin resources bind (providers/port_allocation)
        PORT_CHECK_TYPE,  # a check: data only
        HOST_CA_TYPE,  # generated again; nothing was published from the lost run (its outputs were never saved)
        HOST_KEY_TYPE,  # issued again; the adopted Secret is updated with it
        HOST_KEY_ROOT_TYPE,  # made again, and every key derived from it
        *INSTANCE_TYPES,
        FIREWALL_TYPE,  # a component, registered again; its merged rules are adoptable NSG rules
        STACK_TYPE,
    }
)
"""The resource types whose creates a lost run may leave made but unknown, and `recover` + `up` then heal."""


def skip_checkpoints_is_recoverable(planned_types: Iterable[str], *, stack_has_resources: bool) -> bool:
    """Whether an `up` may run with `PULUMI_SKIP_CHECKPOINTS=true` and stay safe: if it is killed, `recover`
    then `up` leave no orphan, twin or pending operation and keep the ports of what was made.

    True for a first `up` (the stack holds no resources yet: a lost run then loses only creates) whose planned
    creates (`planned_types`, e.g. the types of a preview's create steps) are all of `RECOVERABLE_TYPES` or
    providers. Never for a stack that holds resources: a lost run would lose its updates and deletes too.
    """
    if stack_has_resources:
        return False
    return all(t in RECOVERABLE_TYPES or t.startswith("pulumi:providers:") for t in planned_types)


_AZURE_CLIENT_CONFIG: Final = "azure-native:authorization:getClientConfig"
"""azure-native's function that returns the subscription, tenant and client it is configured with."""

Outcome = Literal["adopted", "absent", "foreign"]


class AdoptError(Exception):
    """A step failed (the preview, a provider, the import); nothing was imported, the message says why."""


@dataclass(frozen=True)
class Adoption:
    """What `adopt` found for one planned create."""

    urn: str
    type: str
    object_id: str
    outcome: Outcome


def planned_creates(preview: Mapping[str, Any]) -> dict[str, Step]:
    """Every resource of `pulumi preview --json`'s steps by URN (creates and the rest)."""
    return {step.urn: step for step in parse_preview(preview).steps if step.urn}


def adopt(stack: str, project: str, work_dir: Path, env: Mapping[str, str]) -> list[Adoption]:
    """Import every planned create of an adoptable type whose object exists with this stack's mark."""
    planned = planned_creates(_preview(stack, work_dir, env))
    creates = [p for p in planned.values() if p.op == "create" and p.type in ADOPTABLE_TYPES]
    if not creates:
        return []
    # Here, not at the top: the probe loads grpc and the Pulumi SDK's protos, and `ssh-gateway --help` imports
    # this module (through recover's parser) without them.
    from .provider_probe import ProbeError, provider_probe

    mark = stack_mark(project, stack)
    found: list[Adoption] = []
    by_provider: dict[str, list[Step]] = {}
    for resource in creates:
        by_provider.setdefault(_provider_urn(resource), []).append(resource)
    held: dict[str, dict[str, Any]] | None = None
    for provider_urn, resources in by_provider.items():
        package = provider_urn.split("::")[2].removeprefix("pulumi:providers:")
        provider = planned.get(provider_urn)
        if provider is None or not provider.inputs:
            # A provider the preview leaves unchanged is in no step (a preview lists only what changes): its
            # inputs, the same ones the program gives, are the state's.
            held = _held_inputs(stack, work_dir, env) if held is None else held
        config = _provider_config(provider, (held or {}).get(provider_urn), package, stack, work_dir, env)
        try:
            with provider_probe(package, _version(config), config, env) as probe:
                if any(r.type == NSG_RULE_TYPE for r in resources) and not config.get("subscriptionId"):
                    # The subscription azure-native found by itself (ARM_SUBSCRIPTION_ID, the az CLI's account):
                    # its own function says which.
                    config = {**config, "subscriptionId": probe.invoke(_AZURE_CLIENT_CONFIG).get("subscriptionId")}
                for resource in resources:
                    object_id = _object_id(resource, config)
                    live = probe.read(resource.urn, object_id)
                    outcome: Outcome = "absent" if live is None else "adopted" if _marked(live, mark) else "foreign"
                    found.append(Adoption(resource.urn, resource.type, object_id, outcome))
        except ProbeError as exc:
            raise AdoptError(str(exc)) from None
    adopted = {a.urn: a.object_id for a in found if a.outcome == "adopted"}
    if adopted:
        missing = _missing_ancestors(planned, adopted)
        if missing:
            _edit_state(stack, work_dir, env, lambda resources: _scaffold(resources, missing))
        _import(stack, work_dir, env, _import_file(planned, adopted))
        shapes = {urn: planned[urn].inputs for urn in adopted if planned[urn].type in _KUBERNETES_TYPES}
        if shapes:
            _edit_state(stack, work_dir, env, lambda resources: _narrow_inputs(resources, shapes))
    return found


# --- ids and marks -----------------------------------------------------------------------------------------------


def _object_id(resource: Step, provider_config: Mapping[str, Any]) -> str:
    """The deterministic id the provider imports the object by."""
    inputs = resource.inputs
    if resource.type == NSG_RULE_TYPE:
        subscription = provider_config.get("subscriptionId")
        if not subscription:
            raise AdoptError(
                "cannot name the NSG rules' ARM ids: the azure-native provider knows no subscription "
                "(set `pulumi config set azure-native:subscriptionId <id>`)"
            )
        return (
            f"/subscriptions/{subscription}/resourceGroups/{inputs['resourceGroupName']}/providers/"
            f"Microsoft.Network/networkSecurityGroups/{inputs['networkSecurityGroupName']}/securityRules/"
            f"{inputs['securityRuleName']}"
        )
    metadata = inputs.get("metadata") or {}
    namespace = metadata.get("namespace") or provider_config.get("namespace") or "default"
    return f"{namespace}/{metadata['name']}"


def _marked(live: Mapping[str, Any], mark: str) -> bool:
    """Whether a live object carries this stack's mark (see `ssh_gateway.core.names.STACK_MARK`)."""
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    if annotations.get(STACK_MARK) == mark:
        return True
    project, _, stack = mark.partition("/")
    return str(live.get("description") or "").endswith(stack_marked("", project, stack))


# --- the preview, the providers' config, the import --------------------------------------------------------------


def _preview(stack: str, work_dir: Path, env: Mapping[str, str]) -> dict[str, Any]:
    # Secrets shown, in this process only: a provider's inputs (a kubeconfig) may be secret.
    done = _run(["preview", "--json", "--show-secrets", "--stack", stack], work_dir, env)
    try:
        return dict(json.loads(done))
    except ValueError:
        raise AdoptError("`pulumi preview --json` printed no JSON") from None


def _provider_urn(resource: Step) -> str:
    reference = resource.provider or ""
    urn = reference.rpartition("::")[0]
    if not urn:
        raise AdoptError(f"{resource.urn} has no provider in the preview")
    return urn


def _provider_config(
    provider: Step | None,
    held: Mapping[str, Any] | None,
    package: str,
    stack: str,
    work_dir: Path,
    env: Mapping[str, str],
) -> dict[str, Any]:
    """The provider's inputs as the preview plans them, else as the state `held` them; for a default provider
    in neither, the stack's `<package>:*` config."""
    inputs = provider.inputs if provider is not None and provider.inputs else held
    if inputs:
        return {k: v for k, v in inputs.items() if not k.startswith("__")}
    shown = json.loads(_run(["config", "--show-secrets", "--json", "--stack", stack], work_dir, env) or "{}")
    prefix = f"{package}:"
    return {
        key.removeprefix(prefix): value.get("value")
        for key, value in shown.items()
        if key.startswith(prefix) and isinstance(value, dict)
    }


def _held_inputs(stack: str, work_dir: Path, env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The inputs of each provider in the stack's state, by URN, secrets revealed (in this process only)."""
    exported = json.loads(_run(["stack", "export", "--show-secrets", "--stack", stack], work_dir, env) or "{}")
    resources = (exported.get("deployment") or {}).get("resources") or []
    return {
        str(r["urn"]): {k: revealed(v) for k, v in (r.get("inputs") or {}).items()}
        for r in resources
        if str(r.get("type", "")).startswith("pulumi:providers:")
    }


def _version(config: Mapping[str, Any]) -> str | None:
    version = config.get("version")
    return str(version) if version else None


def _import_file(planned: Mapping[str, Step], adopted: Mapping[str, str]) -> dict[str, Any]:
    """The `pulumi import --file` document: each adopted object under its URN's name, parent and provider (each
    named in the name table; `_scaffold` has put them into the state)."""
    name_table: dict[str, str] = {}
    keys: dict[str, str] = {}

    def reference(urn: str | None) -> str | None:
        if urn is None or urn.split("::")[2] == STACK_TYPE:
            return None  # the root stack: the import's default parent
        if urn not in keys:
            keys[urn] = f"r{len(keys)}"
            name_table[keys[urn]] = urn
        return keys[urn]

    resources = []
    for number, (urn, object_id) in enumerate(adopted.items()):
        resource = planned[urn]
        entry = {
            "type": resource.type,
            "name": f"o{number}",
            "logicalName": urn.rsplit("::", 1)[-1],
            "id": object_id,
            "parent": reference(resource.parent),
            "provider": _provider_reference(planned, _provider_urn(resource), reference),
            "version": _default_version(planned, _provider_urn(resource)),
        }
        resources.append({k: v for k, v in entry.items() if v is not None})
    return {"nameTable": name_table, "resources": resources}


def _provider_reference(
    planned: Mapping[str, Step], provider_urn: str, reference: Callable[[str | None], str | None]
) -> str | None:
    # A default provider the preview does not show is in no state yet: left out, the import makes it.
    if provider_urn not in planned and provider_urn.rsplit("::", 1)[-1].startswith("default"):
        return None
    return reference(provider_urn)


def _default_version(planned: Mapping[str, Step], provider_urn: str) -> str | None:
    # The default provider an import makes must be the program's, `default_<version>`: a provider of another
    # URN would make the next `up` move the object to the program's one.
    name = provider_urn.rsplit("::", 1)[-1]
    if provider_urn in planned or not name.startswith("default_"):
        return None
    return name.removeprefix("default_").replace("_", ".", 2)


def _missing_ancestors(planned: Mapping[str, Step], adopted: Iterable[str]) -> list[Step]:
    """The parents (up to the root stack) and providers of the adopted objects that the state lacks: all of them
    after a killed first `up` without checkpoints. Parents first, so the state stays in dependency order."""
    missing: dict[str, Step] = {}

    def visit(urn: str | None) -> None:
        resource = planned.get(urn or "")
        if resource is None or resource.op != "create" or resource.urn in missing:
            return
        visit(resource.parent)
        missing[resource.urn] = resource

    for urn in adopted:
        visit(planned[urn].parent)
        visit(_provider_urn(planned[urn]))
    return list(missing.values())


def _edit_state(
    stack: str, work_dir: Path, env: Mapping[str, str], edit: Callable[[list[dict[str, Any]]], None]
) -> None:
    """The state's resources exported, changed in place by `edit`, and imported again. Secrets stay encrypted:
    no edit reads one."""
    with tempfile.TemporaryDirectory(prefix="ssh-gateway-adopt-") as scratch:
        path = Path(scratch) / "deployment.json"
        _run(["stack", "export", "--stack", stack, "--file", str(path)], work_dir, env)
        document = json.loads(path.read_text())
        deployment = document["deployment"]
        resources: list[dict[str, Any]] = list(deployment.get("resources") or [])
        edit(resources)
        deployment["resources"] = resources
        path.write_text(json.dumps(document))
        _run(["stack", "import", "--stack", stack, "--file", str(path)], work_dir, env)


def _scaffold(resources: list[dict[str, Any]], missing: list[Step]) -> None:
    """Put the root stack, the components and the providers the imports need into the state's `resources`, as
    the program registers them. An import names its parent and provider, which must be in the state already; a
    component is only its URN and parent, a provider its inputs (kept secret: a kubeconfig may be one) and an id."""
    held = {r["urn"] for r in resources}
    for resource in missing:
        if resource.urn in held:
            continue
        entry: dict[str, Any] = {"urn": resource.urn, "custom": False, "type": resource.type}
        if resource.parent:
            entry["parent"] = resource.parent
        if resource.type.startswith("pulumi:providers:"):
            # The engine's own keys (`version`, `__internal`) stay as they are; the rest is the user's config.
            inputs = {k: v if _engine_key(k) else _secret(v) for k, v in resource.inputs.items()}
            entry |= {"custom": True, "id": str(uuid.uuid4()), "inputs": inputs, "outputs": inputs}
        resources.append(entry)


_KUBERNETES_TYPES: Final = frozenset({SERVICE_TYPE, SECRET_TYPE, STATUS_TYPE})
"""The adoptable types whose provider diffs the live object, pruned to the recorded inputs, against the program's."""


def _narrow_inputs(resources: list[dict[str, Any]], shapes: Mapping[str, Mapping[str, Any]]) -> None:
    """Each imported object's recorded inputs (`inputs`, and the copy pulumi-kubernetes keeps in its outputs'
    `__inputs`) cut to the fields the program sets (`shapes`: its planned inputs by URN), values kept."""
    for resource in resources:
        shape = shapes.get(resource["urn"])
        if shape is None:
            continue
        resource["inputs"] = _narrowed(resource.get("inputs") or {}, shape)
        outputs = resource.get("outputs") or {}
        if "__inputs" in outputs:
            outputs["__inputs"] = _narrowed(outputs["__inputs"], shape)


def _narrowed(held: Any, shape: Any) -> Any:
    """`held` without the keys `shape` lacks, in every object and in lists of the same length. A secret is a leaf
    (its envelope's keys are not the object's); so is a value where the shape has none to compare."""
    if isinstance(held, dict) and isinstance(shape, dict) and SECRET_SIG_KEY not in held | shape:
        return {k: _narrowed(v, shape[k]) for k, v in held.items() if k in shape or k.startswith("__")}
    if isinstance(held, list) and isinstance(shape, list) and len(held) == len(shape):
        return [_narrowed(v, s) for v, s in zip(held, shape, strict=True)]
    return held


def _engine_key(key: str) -> bool:
    return key == "version" or key.startswith("__")


def _secret(value: Any) -> Any:
    # The form `pulumi stack import` encrypts with the stack's secrets provider.
    if value is None:
        return None
    return {SECRET_SIG_KEY: SECRET_SIG, "plaintext": json.dumps(value)}


def _import(stack: str, work_dir: Path, env: Mapping[str, str], document: Mapping[str, Any]) -> None:
    with tempfile.TemporaryDirectory(prefix="ssh-gateway-adopt-") as scratch:
        path = Path(scratch) / "import.json"
        path.write_text(json.dumps(document))
        _run(
            [
                "import",
                "--file",
                str(path),
                "--stack",
                stack,
                "--yes",
                "--skip-preview",
                "--protect=false",
                "--generate-code=false",
            ],
            work_dir,
            env,
        )


def _run(args: Sequence[str], work_dir: Path, env: Mapping[str, str]) -> str:
    try:
        return run_pulumi(args, work_dir=work_dir, env=env)
    except PulumiFailed as exc:
        raise AdoptError(str(exc)) from None
