"""`ssh-gateway host-identity --stack S --instance X [--write DIR]` (ssh_gateway/ops/commands/host_identity.py): an
instance's host key and certificate, derived on demand from what the stack keeps, for a host no Kubernetes Secret
serves (a static target, or a stack that renders its manifests).

The stack keeps no copy of them: every instance's key is derived from the stack's host-key root and its
certificate signed deterministically by the stack's CA (ssh_gateway/core/derived_identity.py), so a stack output
holding them would only add ~1.4 KB of state per instance, rewritten at every checkpoint. This command derives
the same bytes the program does, from the same inputs: the root and the CA keys out of the stack's state
(`pulumi stack export --show-secrets`), and the certificate's principals, key id, key generation and validity
out of the stack's config (`ssh_gateway.core.issued_identity`, which the program reads them from too). The
certificate is the one of the current validity window: the one the next `up` puts in a Secret.

Without `--write` it prints the three files as JSON (file name -> content); with `--write DIR` it writes them
there, mode 0600, as sshd's `HostKey` and `HostCertificate` lines expect them (docs/host-identity.md), and
prints only their paths and the key's fingerprint. No secret goes into a message: an error names the stack,
the instance or the resource, never a value.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from ssh_gateway.core.derived_identity import derive_identity, next_window_start
from ssh_gateway.core.host_identity import (
    HOST_CERTIFICATE_FILE,
    HostIdentityError,
    Validity,
    parse_host_certificate,
    private_seed,
    secret_files,
)
from ssh_gateway.core.issued_identity import issued_identity
from ssh_gateway.core.names import HOST_CA_TYPE, HOST_KEY_ROOT_NAME, HOST_KEY_ROOT_TYPE, host_ca_name
from ssh_gateway.core.settings import Settings, SettingsError, read_config
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.plumbing.pulumi_cli import PulumiFailed, revealed, run_pulumi
from ssh_gateway.plumbing.toolchain import REPO, ToolchainMissing, pulumi_env

__all__ = [
    "HostIdentityFilesError",
    "InstanceRefused",
    "host_identity",
    "identity_files",
    "read_stack",
    "stack_identity_files",
    "write_files",
]


class HostIdentityFilesError(ValueError):
    """The files cannot be derived: one line naming the stack, the instance or the resource (never a secret)."""


class InstanceRefused(HostIdentityFilesError):
    """The stack cannot give this instance files: it has no such instance, or issues it no host key."""


def _revealed(value: Any, where: str) -> str:
    """A secret output of a `--show-secrets` export, as its plain string."""
    value = revealed(value)
    if not isinstance(value, str) or not value:
        raise HostIdentityFilesError(f"{where} has no private key in the stack's state")
    return value


def _private_key(resources: Sequence[Mapping[str, Any]], typ: str, name: str, stack: str) -> str:
    """The `privateKey` output of the stack's resource `name` of type `typ`."""
    for resource in resources:
        if resource.get("type") == typ and str(resource.get("urn", "")).rsplit("::", 1)[-1] == name:
            return _revealed((resource.get("outputs") or {}).get("privateKey"), f"resource {name!r}")
    raise HostIdentityFilesError(
        f"stack {stack} has no resource {name!r} in its state: run `ssh-gateway up --stack {stack}` first"
    )


def identity_files(
    settings: Settings,
    deployment: Mapping[str, Any],
    instance: str,
    *,
    project: str,
    stack: str,
    now: int,
) -> dict[str, str]:
    """The instance's three files (file name -> content, as its Secret would hold them), derived from the
    stack's settings and its `--show-secrets` export, valid at `now`."""
    names = [i.name for i in settings.instances]
    inst = next((i for i in settings.instances if i.name == instance), None)
    if inst is None:
        raise InstanceRefused(
            f"--instance {instance!r}: stack {stack} has no such instance (it has: {', '.join(names) or 'none'})"
        )
    issued = issued_identity(settings, inst, project=project, stack=stack)
    if issued is None:
        raise InstanceRefused(
            f"--instance {instance!r}: stack {stack} issues it no host key (hostIdentity is off, or its hostKey "
            "is pinned): its sshd keeps its own key"
        )
    resources = list((deployment.get("deployment") or {}).get("resources") or [])
    root = _private_key(resources, HOST_KEY_ROOT_TYPE, HOST_KEY_ROOT_NAME, stack)
    ca_key = _private_key(resources, HOST_CA_TYPE, host_ca_name(issued.signer), stack)
    try:
        derived = derive_identity(
            root=root,
            ca_seed=private_seed(ca_key, name=host_ca_name(issued.signer)),
            instance=instance,
            generation=issued.generation,
            principals=issued.principals,
            key_id=issued.key_id,
            valid_days=issued.valid_days,
            now=now,
        )
    except HostIdentityError as exc:  # its messages never quote a private key
        raise HostIdentityFilesError(f"stack {stack}, instance {instance}: {exc}") from None
    return secret_files(private_key=derived.private_key, public_key=derived.public_key, certificate=derived.certificate)


def write_files(directory: Path, files: Mapping[str, str]) -> list[Path]:
    """Writes each file into `directory` (made 0700 if missing) with mode 0600, each atomically: a reader never
    sees half a key, and the key is never readable by others, not even for a moment."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    written = []
    for name, content in files.items():
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=directory)  # created 0600
        try:
            with os.fdopen(fd, "w") as out:
                out.write(content)
            os.chmod(tmp, 0o600)
            os.replace(tmp, directory / name)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        written.append(directory / name)
    return written


def _pulumi_json(args: list[str], stack: str, env: Mapping[str, str], work_dir: Path) -> Any:
    try:
        shown = run_pulumi([*args, "--stack", stack], work_dir=work_dir, env=env)
    except PulumiFailed as exc:  # names the command and its error lines, never its stdout (secrets)
        raise HostIdentityFilesError(str(exc)) from None
    try:
        return json.loads(shown or "{}")
    except json.JSONDecodeError:
        raise HostIdentityFilesError(f"`pulumi {' '.join(args[:2])} --stack {stack}` printed no JSON") from None


@dataclass(frozen=True)
class StackView:
    """What a stack's identities are derived from: its settings and its `--show-secrets` export."""

    project: str
    stack: str
    settings: Settings
    deployment: Mapping[str, Any] = field(repr=False)
    """Secret: holds the root and the CA keys."""

    def files(self, instance: str, *, now: int | None = None) -> dict[str, str]:
        """`identity_files` of `instance`, valid at `now` (default: the current time)."""
        at = int(time.time()) if now is None else now
        return identity_files(self.settings, self.deployment, instance, project=self.project, stack=self.stack, now=at)


def read_stack(stack: str, *, env: Mapping[str, str] | None = None, work_dir: Path = REPO) -> StackView:
    """A stack of the project in `work_dir`, read with the pulumi CLI (`env`: its environment, by default the
    offline toolchain's)."""
    environment = dict(env) if env is not None else pulumi_env()
    shown = _pulumi_json(["config", "--json"], stack, environment, work_dir)
    config = {key: str(value.get("value", "")) for key, value in shown.items() if isinstance(value, Mapping)}
    try:
        settings = read_config(config)
    except SettingsError as exc:
        raise HostIdentityFilesError(f"stack {stack}: {exc}") from None
    deployment = _pulumi_json(["stack", "export", "--show-secrets"], stack, environment, work_dir)
    project = str(yaml.safe_load((work_dir / "Pulumi.yaml").read_text())["name"])
    return StackView(project=project, stack=stack, settings=settings, deployment=deployment)


def stack_identity_files(
    stack: str, instance: str, *, env: Mapping[str, str] | None = None, work_dir: Path = REPO
) -> dict[str, str]:
    """`identity_files` of one instance of a stack, now (`read_stack`)."""
    return read_stack(stack, env=env, work_dir=work_dir).files(instance)


def host_identity(stack: str, instance: str, *, ambient: bool = False, write_dir: Path | None = None) -> int:
    """`ssh-gateway host-identity`: the instance's files as JSON, or written into `write_dir` with when to renew
    them; `ambient`: the pulumi on PATH with the environment's backend and secrets."""
    try:
        files = stack_identity_files(stack, instance, env=dict(os.environ) if ambient else None)
    except ToolchainMissing as exc:
        print(f"host-identity: {exc}", file=sys.stderr)
        return ExitCode.CANNOT_RUN
    except HostIdentityFilesError as exc:
        print(f"host-identity: {exc}", file=sys.stderr)
        return ExitCode.REFUSED if isinstance(exc, InstanceRefused) else ExitCode.CANNOT_RUN
    if write_dir is None:
        print(json.dumps(files, indent=2))
        return ExitCode.OK
    for path in write_files(write_dir, files):
        print(path)
    certificate = parse_host_certificate(files[HOST_CERTIFICATE_FILE])
    # From then on this command and the program issue the next certificate.
    renew = next_window_start(Validity(certificate.valid_after, certificate.valid_before))
    print(
        f"host key {certificate.fingerprint} of {instance} (stack {stack}), certified until "
        f"{_day(certificate.valid_before)}: run this again from {_day(renew)}, after a CA rotation or a "
        "hostKeyGeneration bump, then reload sshd",
        file=sys.stderr,
    )
    return ExitCode.OK


def _day(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")
