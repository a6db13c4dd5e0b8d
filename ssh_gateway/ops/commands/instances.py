"""`ssh-gateway instances`: add, remove or list a stack's instances, by ssh_gateway/ops/tools/instance_edits.py
(`list_stack_instances`, `edit_stack_instances`), then show the preview of the edit."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from ssh_gateway.core.instance_keys import INSTANCE_KEYS, ROUTINGS, TARGETS
from ssh_gateway.ops.command import Command, ExitCodes, exit_codes
from ssh_gateway.ops.exit_codes import ExitCode

if TYPE_CHECKING:
    from ssh_gateway.ops.command import Commands

__all__ = ["COMMAND"]


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
    options = _instance_options()
    for key in INSTANCE_KEYS[1:]:
        option = options[key]
        if "choices" not in option:
            option.setdefault("metavar", _flag(key)[2:].upper().replace("-", "_"))
        parser.add_argument(*_OPTION_ALIASES.get(key, ()), _flag(key), dest=key, **option)


def _entry(args: argparse.Namespace) -> dict[str, Any]:
    values = {key: getattr(args, key, None) for key in INSTANCE_KEYS}
    if values["selector"] is not None:
        values["selector"] = dict(values["selector"])
    return {key: value for key, value in values.items() if value is not None}


def _run(args: argparse.Namespace) -> int:
    from ssh_gateway.ops.tools import instance_edits as instances

    stack = str(args.stack)
    if args.action == "list":
        return instances.list_stack_instances(stack, json_output=bool(args.json))
    if args.action == "add":
        edit = partial(instances.add_instance, entry=_entry(args))
    else:
        edit = partial(instances.remove_instance, name=str(args.name))
    return instances.edit_stack_instances(
        stack, edit, dry_run=bool(args.dry_run), preview=not args.no_preview, json_output=bool(args.json)
    )


_EXAMPLES: Final = (
    "ssh-gateway instances list --stack dev",
    "ssh-gateway instances add gpu-dave --stack dev --user dave",
    "ssh-gateway instances add gpu-vm --stack dev --target static --static-host 10.0.0.7 --static-port 22",
    "ssh-gateway instances add gpu-eve --stack dev --user eve --port 40042 --source-cidr 203.0.113.9/32",
    "ssh-gateway instances add gpu-c --stack dev --routing connect   # through ssh-gateway:connect",
    "ssh-gateway instances remove gpu-dave --stack dev --json",
)


_CODES: Final = {
    ExitCode.OK: "written, and its preview succeeded (or --dry-run / --no-preview)",
    ExitCode.FAILED: "written, but its preview reports errors (shown in the summary)",
    ExitCode.CANNOT_RUN: "no stacks/Pulumi.STACK.yaml, or the preview did not run (the file is written)",
    ExitCode.REFUSED: "refused, the file unchanged byte for byte: the settings model rejects the result (the key and "
    "value are named), the name exists already (add) or does not (remove)",
}


def _action(
    actions: Commands, name: str, summary: str, examples: Sequence[int], codes: ExitCodes = _CODES
) -> argparse.ArgumentParser:
    epilog = "examples:\n" + "\n".join(f"  {_EXAMPLES[i]}" for i in examples) + "\n\n" + exit_codes(codes)
    return actions.add_parser(
        name, help=summary, description=summary, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def _arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="{add,remove,list}")
    add = _action(actions, "add", "append an instance (keys as in the README's config table)", (1, 2, 3, 4))
    remove = _action(actions, "remove", "remove an instance by name", (5,))
    listing = _action(
        actions,
        "list",
        "the instances as written in the file",
        (0,),
        {ExitCode.OK: "listed", ExitCode.CANNOT_RUN: "no such stack file"},
    )
    for sub in (add, remove, listing):
        sub.add_argument("--stack", required=True, help="edits stacks/Pulumi.STACK.yaml")
        sub.add_argument("--json", action="store_true", help="machine-readable output")
    for sub in (add, remove):
        sub.add_argument("name", help="the instance (a DNS label)")
        sub.add_argument("--no-preview", action="store_true", help="write the file, skip the preview")
        sub.add_argument("--dry-run", action="store_true", help="validate and show the diff, write nothing")
    _add_instance_options(add)


COMMAND: Final = Command(
    name="instances",
    summary="add, remove or list a stack's instances in stacks/Pulumi.STACK.yaml",
    description="Edits ssh-gateway:instances in stacks/Pulumi.STACK.yaml, keeping its comments and order, "
    "after validating the whole resulting config with the program's settings model (a refused edit leaves the "
    "file unchanged byte for byte), then shows the preview summary of the change. This is the seam a "
    "provisioning platform calls; from Python, see ssh_gateway.ops.tools.instance_edits.",
    examples=_EXAMPLES,
    codes=_CODES,
    run=_run,
    arguments=_arguments,
)
