"""Dynamic providers that do nothing, for the benchmark's floors.

In their own module, so they are pickled by reference as the project's providers are; a class defined in
`__main__` is pickled by value together with the program's globals (every resource made so far), which would
make the floor slower the bigger N is.

Each `graph` provider stands for one of the project's and returns outputs of the same keys and about the same
sizes as it, made without any work: the inputs again (the dynamic-provider contract), plus fixed strings as
long as the real keys, certificate and ids.
"""

from typing import Any, ClassVar

from pulumi.dynamic import CheckResult, CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult

from ssh_gateway.core.names import (
    ALLOCATION_KIND,
    ALLOCATION_MODULE,
    HOST_CA_KIND,
    HOST_IDENTITY_MODULE,
    HOST_KEY_ROOT_KIND,
    PANGOLIN_KIND,
    PANGOLIN_MODULE,
)

# As long as the real ones: an OpenSSH Ed25519 private key file, `ssh-ed25519 AAAA...`, `SHA256:...`
# (providers/host_identity).
PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + ("b" * 70 + "\n") * 5 + "-----END OPENSSH PRIVATE KEY-----\n"
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA" + "I" * 44
FINGERPRINT = "SHA256:" + "f" * 43


class Echo(ResourceProvider):
    """Creates nothing: the outputs are the inputs and the class's `computed` outputs."""

    serialize_as_secret_always = False
    computed: ClassVar[dict[str, Any]] = {}
    resource_id: ClassVar[str] = "noop"

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # Per property, as the project's providers compare theirs.
        changed = [key for key in news if key != "__provider" and olds.get(key) != news.get(key)]
        return DiffResult(changes=bool(changed))

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(self.resource_id, {**props, **self.computed})

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult({**news, **{key: olds[key] for key in self.computed}})


class Noop(Echo):
    """The bare floor's resource, and the stand-in for the port check (nothing computed)."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(f"noop-{props.get('index', 0)}", props)


class NoopPangolin(Echo):
    """Stands for `PangolinTcpProvider`: the inputs and Pangolin's ids."""

    computed: ClassVar[dict[str, Any]] = {"resourceId": 1234, "targetId": 1234, "niceId": "spotted-hyena"}


class NoopHostCa(Echo):
    """Stands for `SshHostCaProvider`: a CA's keys."""

    computed: ClassVar[dict[str, Any]] = {
        "publicKey": PUBLIC_KEY,
        "privateKey": PRIVATE_KEY,
        "fingerprint": FINGERPRINT,
    }


class NoopHostKeyRoot(Echo):
    """Stands for `SshHostKeyRootProvider`: the stack's host-key root, a 32-byte seed in base64."""

    computed: ClassVar[dict[str, Any]] = {"privateKey": "r" * 44}


class NoopTable(Echo):
    """The floor's allocation: one resource whose `check` hands instance i port start + i, so the ports are
    known at preview as the real allocation's are."""

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        start = int(news["start"])
        ports = {name: start + i for i, name in enumerate(news["instances"])}
        return CheckResult({**news, "ports": ports, "released": []}, [])


class NoopResource(Resource, module="bench", name="Noop"):
    """The bare floor's resource."""

    port: Any


class NoopAllocation(Resource, module=ALLOCATION_MODULE, name=ALLOCATION_KIND):
    """The port table (the type tokens are the project's, so URNs are as long)."""

    ports: Any
    released: Any


class NoopPangolinResource(Resource, module=PANGOLIN_MODULE, name=PANGOLIN_KIND):
    """An instance's Pangolin resource."""

    proxyPort: Any
    resourceId: Any


class NoopHostCaResource(Resource, module=HOST_IDENTITY_MODULE, name=HOST_CA_KIND):
    """The stack's host CA."""

    publicKey: Any
    privateKey: Any
    fingerprint: Any


class NoopHostKeyRootResource(Resource, module=HOST_IDENTITY_MODULE, name=HOST_KEY_ROOT_KIND):
    """The stack's host-key root."""

    privateKey: Any


class NoopPortCheck(Resource, module=PANGOLIN_MODULE, name="PortCheck"):
    """The once-per-run port check."""
