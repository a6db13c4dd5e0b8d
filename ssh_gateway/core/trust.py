"""Which names a client checks an instance's host key under, and the known_hosts lines that vouch for them.

The client side of host identity, as OpenSSH does it (see `host_identity`'s docstring for the rules): ssh looks
a host up in known_hosts under `[host]:port` (the bare host on port 22), or under `HostKeyAlias` exactly when
one is set, and matches a certificate's principals against the host name or that alias.

- With a `gateway.hostTemplate` that names the instance (`ssh-{instance}.example.com`), every instance has a
  name of its own: one `@cert-authority` line for `ssh-*.example.com` on every port covers them all.
- With a template that does not (`127.0.0.1` in the local stack, or one gateway name for all), every instance,
  today's and tomorrow's, shares that HostName: their entries would collide, so each ssh config block sets
  `HostKeyAlias ssh-<instance>` (the ssh alias, also a principal), and the CA line covers the aliases too.
- A connect-mode instance's HostName is its CONNECT authority and every one of them goes through the same
  entry, so its block always sets `HostKeyAlias ssh-<instance>`; a stack with connect-mode instances has the
  aliases in its CA line whatever its template, and their principals are the authority and the alias.

The program writes these lines, the doctor reads them back (`parse_known_hosts`, `KnownHostsEntry.matches`)
the way ssh does, so it checks exactly what a user's client will check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from .host_identity import host_patterns, instance_host_pattern, normalize_principals
from .names import INSTANCE_PLACEHOLDER, public_host, ssh_alias

__all__ = [
    "ca_comment",
    "ca_patterns",
    "connect_principals",
    "host_key_alias",
    "known_hosts_file",
    "lookup_key",
    "parse_known_hosts",
    "plain_line",
    "principals",
    "shares_host_name",
]

KNOWN_HOSTS_DIR: Final = "~/.ssh/known_hosts.d"
"""Where a user keeps each stack's `knownHosts` output, one file per stack."""


def known_hosts_file(stack: str) -> str:
    """The `UserKnownHostsFile` the stack's ssh config blocks name, e.g. `~/.ssh/known_hosts.d/ssh-gateway-dev`."""
    return f"{KNOWN_HOSTS_DIR}/ssh-gateway-{stack}"


def shares_host_name(host_template: str) -> bool:
    """True when every instance gets the same public name (the template has no `{instance}`)."""
    return INSTANCE_PLACEHOLDER not in host_template


def host_key_alias(host_template: str, instance: str) -> str | None:
    """The instance's `HostKeyAlias` where instances share a HostName (its ssh alias), else None."""
    return ssh_alias(instance) if shares_host_name(host_template) else None


def principals(host_template: str, instance: str) -> tuple[str, ...]:
    """Every name a client checks the instance's certificate against: the public host and the ssh alias.

    Never a port: the certificate, like the key, must outlive a port change.
    """
    return normalize_principals([public_host(host_template, instance), ssh_alias(instance)])


def connect_principals(authority: str, instance: str) -> tuple[str, ...]:
    """The names a client checks a connect-mode instance's certificate against: its authority (the HostName)
    and its ssh alias (the HostKeyAlias)."""
    return normalize_principals([authority, ssh_alias(instance)])


def ca_patterns(host_template: str, *, aliases: bool = False) -> tuple[str, ...]:
    """The host patterns of the stack's `@cert-authority` lines: every instance's names on every port; with
    `aliases` (a stack with connect-mode instances) the ssh aliases too, whatever the template."""
    alias_patterns = host_patterns(instance_host_pattern(ssh_alias(INSTANCE_PLACEHOLDER)))
    if shares_host_name(host_template):
        return (*host_patterns(host_template), *alias_patterns)
    own = host_patterns(instance_host_pattern(host_template))
    return (*own, *alias_patterns) if aliases else own


def ca_comment(stack: str, generation: int) -> str:
    """The comment of a CA line, so a user can tell the stacks' and the generations' lines apart."""
    return f"ssh-gateway host CA g{generation} (stack {stack})"


def plain_line(name: str, public_key: str) -> str:
    """A plain known_hosts line pinning `public_key` (`type base64`) for `name` on every port."""
    key = " ".join(public_key.split()[:2])
    return f"{','.join(host_patterns(name))} {key}"


@dataclass(frozen=True)
class KnownHostsEntry:
    """One line of a known_hosts file."""

    marker: Literal["", "@cert-authority", "@revoked"]
    patterns: tuple[str, ...]
    key: str
    """`type base64`."""

    def matches(self, name: str) -> bool:
        """Whether ssh would use this line for `name` (`[host]:port`, a bare host, or a HostKeyAlias)."""
        lowered = name.lower()
        negated = [p[1:] for p in self.patterns if p.startswith("!")]
        if any(_wildcard(p).fullmatch(lowered) for p in negated):
            return False
        return any(_wildcard(p).fullmatch(lowered) for p in self.patterns if not p.startswith("!"))


def _wildcard(pattern: str) -> re.Pattern[str]:
    # known_hosts patterns have `*` and `?` only; `[` and `]` are plain characters (unlike fnmatch).
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern.lower()))


def parse_known_hosts(text: str) -> list[KnownHostsEntry]:
    """The lines of a known_hosts file; comments, blank and hashed (`|1|...`) lines are left out."""
    entries = []
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        marker: Literal["", "@cert-authority", "@revoked"] = ""
        if fields[0] in ("@cert-authority", "@revoked"):
            marker = "@cert-authority" if fields[0] == "@cert-authority" else "@revoked"
            fields = fields[1:]
        if len(fields) < 3 or fields[0].startswith("|"):
            continue
        entries.append(KnownHostsEntry(marker, tuple(fields[0].split(",")), f"{fields[1]} {fields[2]}"))
    return entries


def lookup_key(host: str, port: int, alias: str | None) -> str:
    """The string ssh searches known_hosts for: the alias as is, else `[host]:port` (the bare host on 22)."""
    if alias is not None:
        return alias
    return host if port == 22 else f"[{host}]:{port}"
