"""Host identities as the ssh-gateway program wires them, and nothing else: a CA per generation, the host-key
root, and each host's key and certificate derived from them (no resource per host).

Config (namespace `host-identity-test`):
- `caGenerations`: the CA generations published in knownHosts, e.g. `[1]`, `[1, 2]` while a rotation overlaps;
- `signingGeneration`: the one that signs the certificates;
- `hosts`: instance -> `{principals: [...], generation: n}`;
- `validDays`: the certificates' validity.
"""

from __future__ import annotations

import time
from typing import Any

import pulumi

from providers.host_identity import SshHostCa, SshHostCaArgs, SshHostKeyRoot
from ssh_gateway.core.derived_identity import DerivedIdentity, derive_identity
from ssh_gateway.core.host_identity import (
    cert_authority_lines,
    fingerprint,
    host_patterns,
    instance_host_pattern,
    private_seed,
)

config = pulumi.Config()
ca_generations: list[int] = config.require_object("caGenerations")
signing = config.require_int("signingGeneration")
hosts: dict[str, dict[str, Any]] = config.require_object("hosts")
valid_days = config.get_int("validDays") or 30

authorities = {
    generation: SshHostCa(f"host-ca-g{generation}", SshHostCaArgs(generation=generation))
    for generation in ca_generations
}
signer = authorities[signing]
root = SshHostKeyRoot("host-key-root", SshHostCaArgs(generation=1))
ca_seed = signer.private_key.apply(private_seed)
now = int(time.time())


def _derived(name: str, host: dict[str, Any]) -> pulumi.Output[DerivedIdentity]:
    return pulumi.Output.all(root.private_key, ca_seed).apply(
        lambda secrets: derive_identity(
            root=secrets[0],
            ca_seed=secrets[1],
            instance=name,
            generation=host.get("generation", 1),
            principals=tuple(host["principals"]),
            key_id=f"{name}-host-key",
            valid_days=valid_days,
            now=now,
        )
    )


identities = {name: _derived(name, host) for name, host in hosts.items()}

patterns = host_patterns(instance_host_pattern("ssh-{instance}.example.test"))
pulumi.export(
    "knownHosts",
    pulumi.Output.all(*(ca.public_key for ca in authorities.values())).apply(
        lambda published: "".join(f"{line}\n" for line in cert_authority_lines(patterns, published, "ssh-gateway test"))
    ),
)
pulumi.export("caFingerprints", {str(generation): ca.fingerprint for generation, ca in authorities.items()})
pulumi.export(
    "hosts",
    {
        name: pulumi.Output.unsecret(
            identity.apply(
                lambda d: {
                    "publicKey": d.public_key,
                    "fingerprint": fingerprint(d.public_key),
                    "certificate": d.certificate,
                }
            )
        )
        for name, identity in identities.items()
    },
)
pulumi.export("privateKeys", {name: identity.apply(lambda d: d.private_key) for name, identity in identities.items()})
