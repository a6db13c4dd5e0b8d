"""`ssh-gateway`: the operator's commands in one console script (`[project.scripts]` in pyproject.toml).

Each subcommand is a `Command` (ssh_gateway/ops/command.py): its --help, a function adding its arguments, and a
handler `(args) -> exit code`; `COMMANDS` lists them in --help's order. A new subcommand is one `Command` (here,
or in its own module, as `up` and `shards` keep theirs) plus one entry in `COMMANDS`.

argparse rather than click or typer: every tool this CLI wraps already parses its arguments with argparse and is
called with an argv list, the standard library keeps the console script free of a new dependency (and of its
version skew with the Pulumi SDK's), and its parsers type-check under mypy --strict without plugins.

The handlers import the tools they run when they run, and the modules imported here load no Pulumi SDK:
`ssh-gateway --help` then answers without it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ssh_gateway.plumbing.pulumi_cli import PulumiFailed, run_pulumi
from ssh_gateway.plumbing.toolchain import REPO, ToolchainMissing, pulumi_env

from . import gateway_config, host_identity_files, recover, shards, up
from .command import Command, ExitCodes, Handler, exit_codes
from .reconcile import COMMAND as RECONCILE

if TYPE_CHECKING:
    from .command import Commands

__all__ = ["COMMANDS", "EXIT_CODES", "build_parser", "main", "run_preview"]

OK: Final = 0
FINDING: Final = 1
CANNOT_RUN: Final = 2
REFUSED: Final = 3
EXIT_CODES: Final = (
    (OK, "success (for a check: healthy, no drift; for a dry run: the diff was shown)"),
    (FINDING, "the command ran and found a problem: a broken layer, drift, a preview with errors, a failed demo"),
    (CANNOT_RUN, "usage or environment error: bad arguments, no toolchain, no such stack, a preview that did not run"),
    (REFUSED, "refused, nothing written: an option from stack outputs that would run a command, or a config the "
     "settings model rejects"),
)  # fmt: skip


def _say_error(message: str) -> None:
    print(f"ssh-gateway: {message}", file=sys.stderr)


def _require_pulumi() -> None:
    """The pinned CLI that scripts/bootstrap builds (piece `cli`), or ToolchainMissing naming the fix."""
    path = pulumi_env()["PATH"].split(os.pathsep)[0]
    if not os.access(Path(path) / "pulumi", os.X_OK):
        raise ToolchainMissing(f"no pulumi CLI in {path}: run scripts/bootstrap venv cli")


# --- demo, doctor, drift-check, local-cluster: the existing tools, by their argv ------------------------------


def _run_demo(args: argparse.Namespace) -> int:
    _require_pulumi()
    from . import demo

    argv = [args.action, *(["--keep"] if args.keep else []), "--stack", args.stack]
    return demo.main(argv + (["--state-dir", str(args.state_dir)] if args.state_dir else []))


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=("up", "down"), default="up", help="default: %(default)s")
    parser.add_argument("--keep", action="store_true", help="leave the emulator and sshd running")
    parser.add_argument("--stack", default="local", help="a stack of static loopback targets (default: %(default)s)")
    parser.add_argument("--state-dir", type=Path, help="keys, logs, pid files (default: .pulumi-state/demo)")


DEMO: Final = Command(
    name="demo",
    summary="the main job on this machine: real ssh through ports the program allocated",
    description="Starts the Pangolin emulator with its data plane and a local sshd, runs `pulumi up` on the "
    "local stack, then the real ssh client through every instance's public port; prints the answers, the "
    "endpoints and the generated ssh config, and stops what it started. scripts/demo bootstraps first.",
    examples=[
        "ssh-gateway demo",
        "ssh-gateway demo --keep      # leave them running, e.g. for the doctor",
        "ssh-gateway demo down       # destroy the stack, stop what --keep left",
    ],
    codes={
        OK: "every instance answered through its public port",
        FINDING: "an instance did not answer (the doctor's verdict is printed) or a step failed",
        CANNOT_RUN: "bad arguments, or no toolchain (run scripts/bootstrap venv cli)",
    },
    run=_run_demo,
    arguments=_demo_arguments,
)


def _run_doctor(args: argparse.Namespace) -> int:
    from ssh_gateway.ops.doctor.__main__ import run as doctor

    return doctor(args)


def _doctor_arguments(parser: argparse.ArgumentParser) -> None:
    # The tool's own, defined once there (the module loads no Pulumi SDK).
    from .doctor.arguments import add_arguments

    add_arguments(parser)


DOCTOR: Final = Command(
    name="doctor",
    summary="name the first broken layer of each instance's ssh path",
    description="Checks every instance of a stack along the path, dns, tcp, banner, hostkey, then "
    "Pangolin's own view, and names the first broken layer with its likely fix.",
    examples=["ssh-gateway doctor --stack local", "ssh-gateway doctor --stack dev --instance gpu-alice --json"],
    codes={
        OK: "every instance is healthy",
        FINDING: "an instance is broken (its first broken layer is named)",
        CANNOT_RUN: "no such stack, no outputs (run pulumi up), or bad arguments",
    },
    run=_run_doctor,
    arguments=_doctor_arguments,
)


def _run_drift_check(args: argparse.Namespace) -> int:
    from . import drift_check

    return drift_check.run(args)


def _ambient(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ambient",
        action="store_true",
        help="the pulumi on PATH with the environment's backend and secrets (CI), not the offline toolchain",
    )


def _drift_check_arguments(parser: argparse.ArgumentParser) -> None:
    # The tool's own, defined once there (the module loads no Pulumi SDK).
    from . import drift_check

    drift_check.add_arguments(parser)


DRIFT_CHECK: Final = Command(
    name="drift-check",
    summary="has anyone changed Pangolin, Kubernetes or the NSG by hand?",
    description="Runs `pulumi preview --refresh --expect-no-changes` and names each drifted resource, its "
    "instance and what differs (live → declared). CI reads the exit code; the text is for the job log.",
    examples=["ssh-gateway drift-check dev", "ssh-gateway drift-check --ambient prod   # in CI"],
    codes={
        OK: "no drift",
        FINDING: "drift: each drifted resource is named, with live → declared values",
        CANNOT_RUN: "the preview itself failed (its errors are printed)",
    },
    run=_run_drift_check,
    arguments=_drift_check_arguments,
)


def _run_local_cluster(args: argparse.Namespace) -> int:
    from ssh_gateway.local.local_cluster import main as local_cluster

    return local_cluster([args.command])


def _start_stop_status(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("command", choices=("start", "stop", "status"))


LOCAL_CLUSTER: Final = Command(
    name="local-cluster",
    summary="a local etcd + kube-apiserver for the local stack's Kubernetes half",
    description="etcd + kube-apiserver (built by scripts/bootstrap control-plane) on 127.0.0.1:16443, no "
    "controllers; state, certificates, kubeconfig and logs under .pulumi-state/local-cluster/ "
    "(docs/local-cluster.md). `status` exits 3 when it is not running.",
    examples=[
        "ssh-gateway local-cluster start",
        "ssh-gateway local-cluster status",
        "ssh-gateway local-cluster stop",
    ],
    codes={
        OK: "started, stopped, or running and ready",
        FINDING: "it failed to start, or it runs but is not ready",
        REFUSED: "(status) it is not running",
    },
    run=_run_local_cluster,
    arguments=_start_stop_status,
)


def _run_local_backend(args: argparse.Namespace) -> int:
    from ssh_gateway.local.azurite import main as local_backend

    return local_backend([args.command])


LOCAL_BACKEND: Final = Command(
    name="local-backend",
    summary="a local Azure Blob state backend (Azurite) for the stacks, shared as a team shares one",
    description="azurite-blob (scripts/bootstrap azurite) on 127.0.0.1:10000 with the container pulumi-state, "
    "data and log under .pulumi-state/local-backend/; prints the AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY "
    "(the emulator's published dev account) and PULUMI_BACKEND_URL to export (docs/shared-backends.md). "
    "`status` exits 3 when it is not running.",
    examples=[
        "ssh-gateway local-backend start",
        "ssh-gateway local-backend status",
        "ssh-gateway local-backend stop",
    ],
    codes={
        OK: "started, stopped, or running with its container",
        FINDING: "it failed to start, or it runs without its container",
        REFUSED: "(status) it is not running",
    },
    run=_run_local_backend,
    arguments=_start_stop_status,
)


# --- preview-summary ------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Preview:
    """A `pulumi preview --json` run: its exit code and its document (None when it printed no JSON)."""

    code: int
    document: Mapping[str, Any] | None


def run_preview(stack: str, *, ambient: bool = False, extra: Sequence[str] = ()) -> Preview:
    """`pulumi preview --json --stack STACK` from the repo; its progress and errors go to our stderr."""
    env = dict(os.environ) if ambient else pulumi_env()
    argv = ["pulumi", "preview", "--json", "--stack", stack, *extra]
    result = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True, check=False)  # noqa: S603
    try:
        document = json.loads(result.stdout) if result.stdout.strip() else None
    except json.JSONDecodeError:
        document = None
    return Preview(result.returncode, document if isinstance(document, Mapping) else None)


def _summary_json(document: Mapping[str, Any]) -> dict[str, Any]:
    from ssh_gateway.ops.preview_summary import summarize

    return dataclasses.asdict(summarize(document))


def _summary_markdown(document: Mapping[str, Any]) -> str:
    from ssh_gateway.ops.preview_summary import render, summarize

    return render(summarize(document))


def _run_preview_summary(args: argparse.Namespace) -> int:
    if args.file is not None:
        text = sys.stdin.read() if str(args.file) == "-" else args.file.read_text()
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            _say_error(f"{args.file} is not the JSON of `pulumi preview --json` ({exc})")
            return CANNOT_RUN
        preview = Preview(0, document if isinstance(document, Mapping) else None)
    elif args.stack is None:
        _say_error("preview-summary needs a STACK (or --file)")
        return CANNOT_RUN
    else:
        preview = run_preview(args.stack, ambient=args.ambient, extra=args.preview_args)
    if preview.document is None:
        _say_error(f"pulumi preview printed no JSON (exit code {preview.code})")
        return CANNOT_RUN
    if args.json:
        print(json.dumps({"previewExitCode": preview.code, **_summary_json(preview.document)}, indent=2))
    else:
        sys.stdout.write(_summary_markdown(preview.document))
    return OK if preview.code == 0 else FINDING


def _preview_summary_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", nargs="?")
    parser.add_argument("preview_args", nargs="*", metavar="-- PREVIEW_ARG", help="passed to `pulumi preview`")
    parser.add_argument("--file", type=Path, help="render this `pulumi preview --json` document ('-': stdin)")
    parser.add_argument("--json", action="store_true", help="the summary as JSON, not Markdown")
    _ambient(parser)


PREVIEW_SUMMARY: Final = Command(
    name="preview-summary",
    summary="the reviewer's table of a preview: endpoints, ports, targets, NSG rules",
    description="Runs `pulumi preview --json` on a stack (or reads one from --file) and renders one row "
    "per instance the preview touches, then the warnings (range nearly full, ports freed, rules open to "
    "anyone, the preview's errors). A broken preview still renders what it could, and exits 1.",
    examples=[
        "ssh-gateway preview-summary dev",
        "ssh-gateway preview-summary dev -- --refresh       # more `pulumi preview` arguments after --",
        "ssh-gateway preview-summary --ambient dev > summary.md   # in CI",
        "ssh-gateway preview-summary --file preview.json --json",
    ],
    codes={
        OK: "the preview succeeded and its summary is printed",
        FINDING: "the preview failed; what it could show is rendered, with its errors",
        CANNOT_RUN: "the preview printed no JSON (no such stack, no toolchain), or --file is not its JSON",
    },
    run=_run_preview_summary,
    arguments=_preview_summary_arguments,
)


# --- ssh-config -----------------------------------------------------------------------------------------------


def _outputs_of(stack: str, outputs_file: Path | None, *, ambient: bool = False) -> dict[str, Any]:
    if outputs_file is not None or ambient:
        document = json.loads(outputs_file.read_text() if outputs_file is not None else _ambient_outputs(stack))
        if not isinstance(document, dict):
            raise ValueError(f"{outputs_file or stack}: not the JSON object `pulumi stack output --json` prints")
        return document
    from pulumi import automation as auto

    from .automation import workspace_options

    _require_pulumi()
    try:
        selected = auto.select_stack(stack, work_dir=str(REPO), opts=workspace_options())
    except auto.StackNotFoundError:
        raise ValueError(f"no stack {stack!r} in the backend ({pulumi_env()['PULUMI_BACKEND_URL']})") from None
    return {key: value.value for key, value in selected.outputs().items()}


def _ambient_outputs(stack: str) -> str:
    """`pulumi stack output --json` with the environment's pulumi and backend (a shared one, e.g. azblob://)."""
    try:
        return run_pulumi(["stack", "output", "--json", "--stack", stack], work_dir=REPO, env=os.environ)
    except PulumiFailed as exc:
        raise ValueError(str(exc)) from None


def _run_ssh_config(args: argparse.Namespace) -> int:
    from ssh_gateway.core.outputs import parse_stack_outputs

    from . import ssh_config

    if args.outputs is not None and len(args.stack) != 1:
        _say_error("--outputs holds one stack's outputs: give exactly one --stack with it")
        return CANNOT_RUN
    home = Path.home()  # $HOME, which the tests point at a temporary directory
    stacks: dict[str, ssh_config.StackSsh | None] = {}
    for stack in args.stack:
        if args.remove:
            stacks[stack] = None
            continue
        try:
            outputs = _outputs_of(stack, args.outputs, ambient=args.ambient)
        except (ValueError, OSError) as exc:
            _say_error(f"cannot read the outputs of stack {stack}: {exc}")
            return CANNOT_RUN
        try:
            read = parse_stack_outputs(outputs)
        except (KeyError, TypeError, ValueError) as exc:
            _say_error(f"cannot read the outputs of stack {stack}: not the outputs ssh-gateway writes ({exc!r})")
            return CANNOT_RUN
        if not read.has_ssh_config:
            _say_error(f"stack {stack} has no sshConfig output: run `pulumi up` on it first")
            return CANNOT_RUN
        stacks[stack] = ssh_config.StackSsh(read.ssh_config, read.known_hosts)
    try:
        plan = ssh_config.plan(home, stacks, include=args.include)
        ssh = shutil.which("ssh")
        if ssh is not None:  # without an ssh client here, nothing would read the file anyway
            ssh_config.verify_with_ssh(plan, ssh)
    except ssh_config.SshConfigError as exc:
        _say_error(str(exc))
        return REFUSED
    changes, changed = plan.changes, plan.changed
    shown = [_home_relative(c.path, home) for c in changes]
    written = ssh_config.apply(changed) if args.write else []
    if args.json:
        report = {
            "stacks": list(stacks),
            "layout": "include" if args.include else "section",
            "written": bool(written),
            "files": [
                {
                    "path": str(c.path),
                    "changed": c.changed,
                    "removed": c.after is None,
                    "diff": ssh_config.render_diff([c], home),
                }
                for c in changes
            ],
        }
        print(json.dumps(report, indent=2))
        return OK
    sys.stdout.write(ssh_config.render_diff(changed, home))
    names = ", ".join(args.stack)
    if not changed:
        print(f"no change: the ssh config of stack(s) {names} is up to date ({', '.join(shown)})")
    elif written:
        removed = {c.path for c in changed if c.after is None}
        wrote = ", ".join(_home_relative(p, home) for p in written if p not in removed)
        gone = ", ".join(_home_relative(p, home) for p in written if p in removed)
        done = "; ".join(part for part in (wrote and f"wrote {wrote}", gone and f"removed {gone}") if part)
        print(f"{done} (stack(s) {names})")
    else:
        print(f"dry run: {len(changed)} file(s) would change; run again with --write to apply")
    return OK


def _home_relative(path: Path, home: Path) -> str:
    try:
        return "~/" + str(path.relative_to(home))
    except ValueError:
        return str(path)


def _ssh_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", action="append", required=True, help="a stack to write (repeatable)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write the files (default: show the diff only)")
    mode.add_argument("--dry-run", action="store_true", help="show the diff, write nothing (the default)")
    parser.add_argument("--include", action="store_true", help="one file per stack under ~/.ssh/config.d/")
    parser.add_argument("--remove", action="store_true", help="remove the stacks' sections, files and known_hosts")
    parser.add_argument("--outputs", type=Path, help="the stack's `pulumi stack output --json`, for other backends")
    _ambient(parser)
    parser.add_argument("--json", action="store_true", help="the plan (files, changed, diff) as JSON")


SSH_CONFIG: Final = Command(
    name="ssh-config",
    summary="write the stacks' Host blocks and known_hosts lines into ~/.ssh (a managed section)",
    description="Reads each stack's sshConfig and knownHosts outputs and writes them between "
    "`# >>> ssh-gateway STACK >>>` and `# <<< ssh-gateway STACK <<<` at the top of ~/.ssh/config (or, with "
    "--include, to ~/.ssh/config.d/ssh-gateway-STACK plus one Include line), the known_hosts lines to "
    "~/.ssh/known_hosts.d/ssh-gateway-STACK. Shows the diff first; writes only with --write; never changes a "
    "line outside its sections; a second run changes nothing. Refuses options that would run commands on "
    "this machine (LocalCommand, KnownHostsCommand, Match exec, a ProxyCommand ssh-gateway does not generate).",
    examples=[
        "ssh-gateway ssh-config --stack dev                     # the diff only (a dry run)",
        "ssh-gateway ssh-config --stack dev --stack prod --write",
        "ssh-gateway ssh-config --stack dev --include --write   # ~/.ssh/config.d/ssh-gateway-dev",
        "ssh-gateway ssh-config --stack dev --remove --write    # take the stack out again",
        "ssh-gateway ssh-config --ambient --stack prod-a --stack prod-b --write   # shards on a shared backend",
        "pulumi stack output --json -s dev > out.json && ssh-gateway ssh-config --stack dev --outputs out.json",
    ],
    codes={
        OK: "written, already up to date (says so), or the dry run's diff shown",
        CANNOT_RUN: "a stack's outputs cannot be read (no such stack, not deployed), or bad arguments",
        REFUSED: "refused, nothing written: an option that would run a command on this machine, a Host pattern, "
        "a host alias of two stacks, or a managed section whose markers were edited by hand",
    },
    run=_run_ssh_config,
    arguments=_ssh_config_arguments,
)


# --- instances ------------------------------------------------------------------------------------------------


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def _flag(key: str) -> str:
    """A config key as its `instances add` option: `staticHost` -> `--static-host`."""
    return "--" + re.sub(r"(?<=[a-z])(?=[A-Z])", "-", key).lower()


def _instance_options() -> dict[str, dict[str, Any]]:
    """`instances add`'s option for each instance key of the settings model (`INSTANCE_KEYS`, `name` is the
    positional argument): its type and help; the choices are the model's own."""
    from ssh_gateway.core.settings import ROUTINGS, TARGETS

    return {
        "routing": {
            "choices": ROUTINGS,
            "help": "port: a public port of its own; connect: through ssh-gateway:connect",
        },
        "user": {"help": "login user (default: root)"},
        "target": {"choices": TARGETS, "help": "default: nodePort (routing connect: its Service, or static)"},
        "namespace": {"help": "of its Service and host-key Secret (default: kubernetes.namespace)"},
        "port": {"type": int, "help": "pin the public port"},
        "selector": {"type": _key_value, "action": "append", "metavar": "KEY=VALUE", "help": "pod selector"},
        "podPort": {"type": int, "help": "sshd's port in the pod (default: 22)"},
        "nodePort": {"type": int, "help": "pin the Service's nodePort"},
        "staticHost": {"help": "target host (with --target static)"},
        "staticPort": {"type": int, "help": "target port (with --target static)"},
        "sourceCidrs": {"action": "append", "metavar": "CIDR", "help": "who may connect (repeatable)"},
        "hostKey": {"help": "the pinned public host key, `ssh-ed25519 AAAA...`"},
        "hostKeyGeneration": {"type": int, "help": "bump to rotate the instance's issued host key"},
    }


_OPTION_ALIASES: Final = {"sourceCidrs": ("--source-cidr",)}
"""Option names kept from before the options were drawn from the model."""


def _add_instance_options(parser: argparse.ArgumentParser) -> None:
    from ssh_gateway.core.settings import INSTANCE_KEYS

    options = _instance_options()
    for key in INSTANCE_KEYS[1:]:
        option = options[key]
        if "choices" not in option:
            option.setdefault("metavar", _flag(key)[2:].upper().replace("-", "_"))
        parser.add_argument(*_OPTION_ALIASES.get(key, ()), _flag(key), dest=key, **option)


def _entry(args: argparse.Namespace) -> dict[str, Any]:
    from ssh_gateway.core.settings import INSTANCE_KEYS

    values = {key: getattr(args, key, None) for key in INSTANCE_KEYS}
    if values["selector"] is not None:
        values["selector"] = dict(values["selector"])
    return {key: value for key, value in values.items() if value is not None}


def _run_instances(args: argparse.Namespace) -> int:
    import difflib

    from . import instances
    from .automation import stack_file

    path = stack_file(args.stack)
    if not path.exists():
        _say_error(f"{path.relative_to(REPO)} does not exist: no stack {args.stack!r} in stacks/")
        return CANNOT_RUN
    before = path.read_bytes().decode("utf-8")
    try:
        if args.action == "list":
            entries = instances.list_instances(before)
            print(json.dumps(entries, indent=2) if args.json else "\n".join(instances.described(entries)))
            return OK
        after = (
            instances.add_instance(before, _entry(args))
            if args.action == "add"
            else instances.remove_instance(before, args.name)
        )
    except instances.InstanceError as exc:
        _say_error(f"refused, {path.relative_to(REPO)} is unchanged: {exc}")
        return REFUSED
    shown = str(path.relative_to(REPO))
    diff = "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), shown, shown))
    if not args.dry_run:
        path.write_bytes(after.encode("utf-8"))
    report: dict[str, Any] = {"stack": args.stack, "file": shown, "written": not args.dry_run, "diff": diff}
    if not args.json:
        sys.stdout.write(diff)
        print(f"{'dry run, not written' if args.dry_run else 'wrote'}: {shown}")
    if args.dry_run or args.no_preview:
        if args.json:
            print(json.dumps(report, indent=2))
        return OK
    if not args.json:
        print(f"==> pulumi preview --stack {args.stack} (the change as a reviewer sees it)", flush=True)
    preview = run_preview(args.stack)
    if preview.document is None:
        _say_error(f"{shown} was written, but its preview printed no JSON (exit code {preview.code})")
        return CANNOT_RUN
    if args.json:
        print(json.dumps({**report, "previewExitCode": preview.code, "preview": _summary_json(preview.document)}))
    else:
        sys.stdout.write(_summary_markdown(preview.document))
    return OK if preview.code == 0 else FINDING


_INSTANCES_EXAMPLES: Final = (
    "ssh-gateway instances list --stack dev",
    "ssh-gateway instances add gpu-dave --stack dev --user dave",
    "ssh-gateway instances add gpu-vm --stack dev --target static --static-host 10.0.0.7 --static-port 22",
    "ssh-gateway instances add gpu-eve --stack dev --user eve --port 40042 --source-cidr 203.0.113.9/32",
    "ssh-gateway instances add gpu-c --stack dev --routing connect   # through ssh-gateway:connect",
    "ssh-gateway instances remove gpu-dave --stack dev --json",
)


_INSTANCES_CODES: Final = {
    OK: "written, and its preview succeeded (or --dry-run / --no-preview)",
    FINDING: "written, but its preview reports errors (shown in the summary)",
    CANNOT_RUN: "no stacks/Pulumi.STACK.yaml, or the preview did not run (the file is written)",
    REFUSED: "refused, the file unchanged byte for byte: the settings model rejects the result (the key and value "
    "are named), the name exists already (add) or does not (remove)",
}


def _action(
    actions: Commands, name: str, summary: str, examples: Sequence[int], codes: ExitCodes = _INSTANCES_CODES
) -> argparse.ArgumentParser:
    epilog = "examples:\n" + "\n".join(f"  {_INSTANCES_EXAMPLES[i]}" for i in examples) + "\n\n" + exit_codes(codes)
    return actions.add_parser(
        name, help=summary, description=summary, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def _instances_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="{add,remove,list}")
    add = _action(actions, "add", "append an instance (keys as in the README's config table)", (1, 2, 3, 4))
    remove = _action(actions, "remove", "remove an instance by name", (5,))
    listing = _action(
        actions, "list", "the instances as written in the file", (0,), {OK: "listed", CANNOT_RUN: "no such stack file"}
    )
    for sub in (add, remove, listing):
        sub.add_argument("--stack", required=True, help="edits stacks/Pulumi.STACK.yaml")
        sub.add_argument("--json", action="store_true", help="machine-readable output")
    for sub in (add, remove):
        sub.add_argument("name", help="the instance (a DNS label)")
        sub.add_argument("--no-preview", action="store_true", help="write the file, skip the preview")
        sub.add_argument("--dry-run", action="store_true", help="validate and show the diff, write nothing")
    _add_instance_options(add)


INSTANCES: Final = Command(
    name="instances",
    summary="add, remove or list a stack's instances in stacks/Pulumi.STACK.yaml",
    description="Edits ssh-gateway:instances in stacks/Pulumi.STACK.yaml, keeping its comments and order, "
    "after validating the whole resulting config with the program's settings model (a refused edit leaves the "
    "file unchanged byte for byte), then shows the preview summary of the change. This is the seam a "
    "provisioning platform calls; from Python, see ssh_gateway.ops.instances.",
    examples=_INSTANCES_EXAMPLES,
    codes=_INSTANCES_CODES,
    run=_run_instances,
    arguments=_instances_arguments,
)


# --- the command line -----------------------------------------------------------------------------------------

Register = Callable[["Commands"], object]
"""Adds one subcommand: a `Command`, or the `register` of a module that builds its parser itself (recover)."""

COMMANDS: Final[tuple[Register, ...]] = (
    DEMO,
    DOCTOR,
    DRIFT_CHECK,
    PREVIEW_SUMMARY,
    SSH_CONFIG,
    host_identity_files.COMMAND,
    gateway_config.command(_outputs_of),
    INSTANCES,
    recover.register,
    up.COMMAND,
    RECONCILE,
    shards.COMMAND,
    LOCAL_CLUSTER,
    LOCAL_BACKEND,
)
"""Every subcommand, in the order --help lists them."""

_EXAMPLES: Final = """\
examples:
  scripts/demo                                   # a newcomer's first command (bootstraps, then `ssh-gateway demo`)
  ssh-gateway doctor --stack local
  ssh-gateway ssh-config --stack dev --write     # the stack's hosts in ~/.ssh/config
  ssh-gateway instances add gpu-dave --stack dev --user dave
  ssh-gateway <command> --help                   # each command's options, examples and exit codes
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ssh-gateway",
        description="Public ssh endpoints for GPU dev instances through Pangolin: the operator's commands.",
        epilog=_EXAMPLES + "\n" + exit_codes(dict(EXIT_CODES)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(title="commands", metavar="<command>")
    for register in COMMANDS:
        register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Handler | None = getattr(args, "run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return CANNOT_RUN
    try:
        return run(args)
    except ToolchainMissing as exc:
        _say_error(str(exc))
        return CANNOT_RUN
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
