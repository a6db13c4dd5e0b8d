"""Host identities as the ssh-gateway program will wire them, and nothing else.

Config (namespace `host-identity-test`):
- `caGenerations`: the CA generations published in knownHosts, e.g. `[1]`, `[1, 2]` while a rotation overlaps;
- `signingGeneration`: the one that signs the certificates;
- `hosts`: instance -> `{principals: [...], generation: n}`;
- `validDays`: the certificates' validity.
"""

from __future__ import annotations

from typing import Any

import pulumi

from providers.host_identity import SshHostCa, SshHostCaArgs, SshHostKey, SshHostKeyArgs
from ssh_gateway.core.host_identity import cert_authority_lines, host_patterns, instance_host_pattern

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
keys = {
    name: SshHostKey(
        f"{name}-host-key",
        SshHostKeyArgs(
            principals=host["principals"],
            generation=host.get("generation", 1),
            valid_days=valid_days,
            ca_private_key=signer.private_key,
            ca_public_key=signer.public_key,
        ),
    )
    for name, host in hosts.items()
}

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
        name: {
            "publicKey": key.public_key,
            "fingerprint": key.fingerprint,
            "certificate": key.certificate,
            "caFingerprint": key.ca_fingerprint,
        }
        for name, key in keys.items()
    },
)
