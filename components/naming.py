"""Names shared by the component, the allocator and the tools; pure functions, no resources."""

from __future__ import annotations


def owner_prefix(project: str, stack: str) -> str:
    """Prefix of every Pangolin resource name this stack owns, e.g. `ssh-gateway/prod/`."""
    return f"{project}/{stack}/"


def pangolin_resource_name(project: str, stack: str, instance: str) -> str:
    """The Pangolin resource name of an instance: it identifies the stack and the instance."""
    return f"{owner_prefix(project, stack)}{instance}"


def service_name(instance: str) -> str:
    """The Kubernetes Service in front of an instance's sshd."""
    return f"ssh-{instance}"


def public_host(template: str, instance: str) -> str:
    """The public name users ssh to, from `gateway.hostTemplate`."""
    return template.replace("{instance}", instance)


def ssh_alias(instance: str) -> str:
    """The `Host` alias in the generated ssh config (one per instance, so VS Code lists each)."""
    return f"ssh-{instance}"
