"""The benchmark's floors: the engine's own cost for N instances, with providers that do nothing.

`shape: bare` is N no-op dynamic resources. `shape: graph` is this project's resource graph for static
instances with the host identity on (the benchmark's config), with no-op providers (noop.py): the port table
and the host CA; per instance a component (no registered outputs) with its Pangolin resource as its child,
each recorded with one stack frame as the project's are, the instance's public key derived from the root; the
port check after every Pangolin resource; the stack outputs of the same keys and sizes. What only the project
does - settings, the org's listing, real API calls, keys, certificates - is left out.
"""

import pulumi

# A module beside this program (the floor's own project dir, not a package): mypy checks it as benchmarks.floor.noop.
from noop import (  # type: ignore[import-not-found]
    PUBLIC_KEY,
    Noop,
    NoopAllocation,
    NoopHostCa,
    NoopHostCaResource,
    NoopHostKeyRoot,
    NoopHostKeyRootResource,
    NoopPangolin,
    NoopPangolinResource,
    NoopPortCheck,
    NoopResource,
    NoopTable,
)

from providers.sdk_patches import declaration_site_only, unwrap_batch_setitems
from ssh_gateway.core.names import (
    COMPONENT_TYPE,
    HOST_KEY_ROOT_NAME,
    Role,
    child_name,
    host_ca_name,
    owner_prefix,
    public_host,
    ssh_alias,
)
from ssh_gateway.core.outputs import gateway_output, host_ca_entry, port_endpoint, stack_outputs
from ssh_gateway.core.ports import PortRange

config = pulumi.Config()
count = config.require_int("count")
shape = config.require("shape")

# The emulator's address and ids as the project's stacks get them, to make the inputs as long.
API_URL = "http://127.0.0.1:40000/v1"
ORG_ID = "org-bench"
SECRET = pulumi.ResourceOptions(additional_secret_outputs=["privateKey"])


def bare() -> dict[str, object]:
    for index, name in enumerate(f"i{n:05d}" for n in range(count)):
        # As the project's resources do: without it the N-th pickle nests N wrappers (providers/sdk_patches.py).
        unwrap_batch_setitems()
        NoopResource(Noop(), name, {"index": index, "port": None})
    return {}


class Instance(pulumi.ComponentResource):
    """One instance as `SshInstance` registers it for a static target."""

    def __init__(self, name: str, table: NoopAllocation, root: NoopHostKeyRootResource, template: str) -> None:
        with declaration_site_only():
            super().__init__(COMPONENT_TYPE, name)
            child = pulumi.ResourceOptions(parent=self)
            prefix = owner_prefix(pulumi.get_project(), pulumi.get_stack())
            port = table.ports.apply(lambda ports: int(ports[name]))
            unwrap_batch_setitems()
            pangolin = NoopPangolinResource(
                NoopPangolin(),
                child_name(name, Role.PANGOLIN),
                {
                    **{"apiUrl": API_URL, "orgId": ORG_ID, "siteId": 1, "name": f"{prefix}{name}"},
                    **{"protocol": "tcp", "proxyPort": port, "enabled": True, "targetIp": "127.0.0.1"},
                    **{"targetPort": 2222, "adoptResourceId": None},
                    **dict.fromkeys(("resourceId", "targetId", "niceId")),
                },
                child,
            )
            host = public_host(template, name)
            # The public key is derived in the program from the root (no resource): a string as long.
            public = pulumi.Output.secret(root.privateKey).apply(lambda _: PUBLIC_KEY)
        user = "root"
        self.port = port
        self.host = host
        self.ssh = port.apply(lambda p: f"ssh -p {p} {user}@{host}")
        self.ssh_config = port.apply(lambda p: _host_block(name, host, p, user))
        self.host_key_line = pulumi.Output.unsecret(public.apply(lambda key: f"{host},[{host}]:* {key}"))
        self.resource_id = pangolin.resourceId
        self.pangolin = pangolin
        self.register_outputs({})


def _host_block(name: str, host: str, port: int, user: str) -> str:
    stack = pulumi.get_stack()
    return (
        f"Host {ssh_alias(name)}\n    HostName {host}\n    Port {port}\n    User {user}\n"
        f"    UserKnownHostsFile ~/.ssh/known_hosts.d/ssh-gateway-{stack}\n    StrictHostKeyChecking yes\n"
    )


def graph() -> dict[str, object]:
    # The project's config, read as the project reads it: the default provider records it in state too.
    names = [str(i["name"]) for i in config.require_object("instances")]
    first, last = (int(p) for p in config.require("ports").split("-"))
    template = config.require("hostTemplate")
    prefix = owner_prefix(pulumi.get_project(), pulumi.get_stack())
    unwrap_batch_setitems()
    table = NoopAllocation(
        NoopTable(),
        "ports",
        {
            **{"instances": sorted(names), "start": first, "end": last, "pins": {}, "reserved": []},
            **{"ownerPrefix": prefix, "ports": None, "released": None},
        },
    )
    unwrap_batch_setitems()
    ca = NoopHostCaResource(
        NoopHostCa(),
        host_ca_name(1),
        {"generation": 1, **dict.fromkeys(("publicKey", "privateKey", "fingerprint"))},
        SECRET,
    )
    unwrap_batch_setitems()
    root = NoopHostKeyRootResource(NoopHostKeyRoot(), HOST_KEY_ROOT_NAME, {"generation": 1, "privateKey": None}, SECRET)
    instances = {name: Instance(name, table, root, template) for name in names}
    unwrap_batch_setitems()
    NoopPortCheck(
        Noop(),
        "port-check",
        {"apiUrl": API_URL, "orgId": ORG_ID, "ownerPrefix": prefix, "ports": table.ports},
        pulumi.ResourceOptions(depends_on=[i.pangolin for i in instances.values()]),
    )
    patterns = f"{public_host(template, '*')},[{public_host(template, '*')}]:*"
    port_range = PortRange(start=first, end=last)
    return stack_outputs(
        endpoints={
            n: port_endpoint(host=i.host, port=i.port, user="root", ssh=i.ssh, pangolin_resource_id=i.resource_id)
            for n, i in instances.items()
        },
        pangolin_url=API_URL,
        pangolin_org_id=ORG_ID,
        ssh_config=pulumi.Output.all(*[i.ssh_config for i in instances.values()]).apply("\n".join),
        known_hosts=ca.publicKey.apply(
            lambda public: f"@cert-authority {patterns} {public} ssh-gateway host CA g1 (stack {pulumi.get_stack()})"
        ),
        host_keys={n: i.host_key_line for n, i in instances.items()},
        host_ca=[host_ca_entry(generation=1, public_key=ca.publicKey, fingerprint=ca.fingerprint, signing=True)],
        allocations=table.ports,
        released_ports=table.released,
        port_range=port_range,
        gateway=gateway_output(published=port_range, connect_port=None),
    )


if shape not in ("bare", "graph"):
    raise pulumi.RunError(f"shape={shape!r} is not allowed: expected bare or graph")
for key, value in (bare() if shape == "bare" else graph()).items():
    pulumi.export(key, value)
pulumi.export("count", count)
