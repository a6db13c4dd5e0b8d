"""`PangolinTcpProvider`: the dynamic provider behind `PangolinTcpResource`.

One Pulumi resource is one raw TCP/UDP Pangolin resource plus its single target. Property keys
are camelCase, as Pangolin spells them, so `pulumi preview --diff` reads `~ proxyPort: 1 => 2`.

The provider instance is pickled into every resource's `__provider` input (with dill, by
reference: this module has no import-time side effects) and unpickled in the provider process.
It holds only plain numbers and strings; the API key arrives later through `configure`, is
never pickled, and the HTTP client is built inside each call.

Do not move or rename this module or its provider class: each resource's `__provider` in every stack's state is a
pickle of `providers.pangolin.provider` `PangolinTcpProvider` (providers/__init__.py; pinned by
tests/unit/test_provider_paths.py).
"""

from __future__ import annotations

import functools
import sys
from typing import Annotated, Any, Final

from pulumi import dynamic
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
)

from providers.unknowns import is_unknown
from ssh_gateway.core.addresses import check_host, check_http_url
from ssh_gateway.core.fields import Port
from ssh_gateway.core.org import Binding, OrgView, losers
from ssh_gateway.core.ports import PORT_MAX, PORT_MIN

from .client import Dialect, PangolinClient
from .credentials import ApiKeyFromConfig
from .errors import PangolinConflict, PangolinError, PangolinNotFound, may_have_applied
from .ledger import OrgLedger, OrgLedgers
from .models import Protocol, Resource, Target
from .policy import DEFAULT_POLICY, HttpPolicy

__all__ = ["PangolinTcpProvider"]


# --- inputs ----------------------------------------------------------------------------------


def _no_bool_or_str(value: object) -> object:
    # pydantic's lax int takes True and "5"; the engine only ever sends real numbers (as floats,
    # which lax int narrows: 40001.0 -> 40001, 40001.5 -> error).
    if isinstance(value, bool | str):
        raise ValueError(f"expected a number, got {type(value).__name__}")
    return value


_Int = Annotated[int, BeforeValidator(_no_bool_or_str)]
_Id = Annotated[_Int, Field(gt=0)]
_Port = Annotated[Port, BeforeValidator(_no_bool_or_str)]


class TcpInputs(BaseModel):
    """The validated inputs of one `PangolinTcpResource`."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    apiUrl: Annotated[str, Field(strict=True), AfterValidator(check_http_url)]
    orgId: Annotated[str, Field(strict=True, min_length=1)]
    siteId: _Id
    name: Annotated[str, Field(strict=True, min_length=1, max_length=255)]
    protocol: Protocol = "tcp"
    proxyPort: _Port
    enabled: Annotated[bool, Field(strict=True)] = True
    targetIp: Annotated[str, Field(strict=True), AfterValidator(check_host)]
    targetPort: _Port
    adoptResourceId: _Id | None = None


_ALLOWED: Final[dict[str, str]] = {
    "apiUrl": "an http(s) URL of the Integration API, e.g. https://api.example.com/v1",
    "orgId": "a non-empty Pangolin org id",
    "siteId": "a positive integer site id",
    "name": "a string of 1 to 255 characters",
    "protocol": '"tcp" or "udp"',
    "proxyPort": f"an integer from {PORT_MIN} to {PORT_MAX}",
    "enabled": "true or false",
    "targetIp": "an IPv4 or IPv6 address, or a hostname",
    "targetPort": f"an integer from {PORT_MIN} to {PORT_MAX}",
    "adoptResourceId": "a positive integer resource id, or null",
}

INPUT_KEYS: Final = tuple(TcpInputs.model_fields)

# `adoptResourceId` only steers `create`; changing or removing it later is not a change.
_DIFF_KEYS: Final = tuple(key for key in INPUT_KEYS if key != "adoptResourceId")
# Pangolin cannot change a resource's mode, and a resource cannot move between orgs or servers. A new port is a
# new claim, which only a create makes (see `_claim`): so a port change replaces the resource too.
_REPLACE_KEYS: Final = ("apiUrl", "orgId", "protocol", "proxyPort")
_TARGET_KEYS: Final = ("siteId", "targetIp", "targetPort")


@functools.cache
def _adapter(key: str) -> TypeAdapter[Any]:
    return TypeAdapter(TcpInputs.model_fields[key].rebuild_annotation())


def _default(key: str) -> Any:
    field = TcpInputs.model_fields[key]
    return None if field.is_required() else field.get_default(call_default_factory=True)


def _differs(old: object, new: object) -> bool:
    # 40001.0 == 40001, so numbers the engine turned into floats compare equal.
    return is_unknown(new) or old != new


def _int_or_none(value: object) -> int | None:
    # State read back from the engine holds numbers as floats.
    return int(value) if isinstance(value, int | float) else None


def _parse(props: dict[str, Any]) -> TcpInputs:
    try:
        return TcpInputs.model_validate(props)
    except ValidationError as exc:
        raise ValueError(f"invalid PangolinTcpResource properties: {exc}") from None


# --- provider --------------------------------------------------------------------------------


class PangolinTcpProvider(ApiKeyFromConfig, dynamic.ResourceProvider):
    """Creates, updates, reads and deletes a raw TCP/UDP Pangolin resource and its target.

    Thread-safe: the engine runs up to 4 calls at once on one shared instance. No method mutates it
    (`configure` runs once, before any of them) but for what its calls learn of each org's resources
    (`ledger.OrgLedgers`, thread-safe, never pickled), which spares each create a listing of the org.
    """

    # The pickled provider captures no secrets (the key comes through `configure`), so making the
    # whole `__provider` blob a secret only costs an encryption per resource (pulumi/pulumi#15539).
    serialize_as_secret_always = False

    # Defaults as class attributes: the pickled `__provider`, stored twice per instance and rewritten at every
    # checkpoint, then carries only what a caller changed (~380 -> ~96 characters).
    _policy: HttpPolicy = DEFAULT_POLICY
    _dialect: Dialect = "auto"

    def __init__(self, *, policy: HttpPolicy = DEFAULT_POLICY, dialect: Dialect = "auto") -> None:
        super().__init__()
        if policy != DEFAULT_POLICY:
            self._policy = policy
        if dialect != "auto":
            self._dialect = dialect
        self._ledgers = OrgLedgers()

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in super().__getstate__().items() if k != "_ledgers"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._ledgers = OrgLedgers()

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.CheckResult:
        """Validate and normalise the inputs; unknowns (preview) pass through unchecked.

        `adoptResourceId` only steers a create: once the resource is in state, the stored value is kept, so the
        program's listing (which finds the resource itself every run) never shows up as a changed input.
        """
        inputs: dict[str, Any] = {}
        failures: list[dynamic.CheckFailure] = []
        for key, field in TcpInputs.model_fields.items():
            value = news.get(key)
            if is_unknown(value):
                inputs[key] = value
            elif value is None and not field.is_required():
                inputs[key] = _default(key)
            elif value is None:
                failures.append(dynamic.CheckFailure(key, f"{key} is required: expected {_ALLOWED[key]}"))
            else:
                try:
                    inputs[key] = _adapter(key).validate_python(value)
                except ValidationError as exc:
                    reason = "; ".join(error["msg"].removeprefix("Value error, ") for error in exc.errors())
                    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
                    failures.append(
                        dynamic.CheckFailure(key, f"{key}={shown} is not allowed ({reason}): expected {_ALLOWED[key]}")
                    )
        if olds:
            inputs["adoptResourceId"] = olds.get("adoptResourceId")
        return dynamic.CheckResult(inputs, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        """Compare only the real properties: never `__provider`, outputs or `adoptResourceId`."""
        changed = [key for key in _DIFF_KEYS if _differs(olds.get(key, _default(key)), news.get(key))]
        # A refresh that found the target deleted out of band leaves targetId null: recreate it.
        target_lost = "resourceId" in olds and olds.get("targetId") is None
        if not changed and not target_lost:
            return dynamic.DiffResult(changes=False)
        # Enabling a disabled resource claims its port anew (a disabled one claims nothing): a create's job too.
        enabling = "enabled" in changed and news.get("enabled") is not False and olds.get("enabled") is False
        return dynamic.DiffResult(
            changes=True,
            replaces=[key for key in changed if key in _REPLACE_KEYS or (key == "enabled" and enabling)],
            # The old and new resource must never hold the same proxyPort at once.
            delete_before_replace=True,
        )

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        """Create the resource, claim its port, then add its target: 2 writes, and for the claim a read of each
        resource someone else made since the ledger last looked (a listing of the org, a page per 100
        resources, when the ledger is new or far behind); 3 writes when `enabled` is false (no claim then).

        The resource never serves a port it lost, not even for a moment: Pangolin (and Traefik) route a resource
        only once it has an enabled target, and the target is added only after the claim was won (`_claim`). A
        lost claim deletes the resource again and fails, naming the owner; the next run moves the instance.

        `adoptResourceId` is what the program's one listing of the org found under this resource's name and
        protocol: a resource an interrupted run left behind. It is adopted instead of twinned, unless it has
        gone or changed since the listing. A write whose answer is lost is looked up before it is sent
        again (`PangolinClient.create_resource`), so a retried create never twins either.
        """
        desired = _parse(props)
        ledger = self._ledgers.of(desired.apiUrl, desired.orgId)
        with self._client(desired.apiUrl) as client:
            made = _adopt(client, ledger, desired, desired.adoptResourceId) if desired.adoptResourceId else None
            resource, target = made or _create(client, ledger, desired)
        outputs = _outputs(desired, resource.resourceId, target.targetId, resource.niceId)
        return dynamic.CreateResult(str(resource.resourceId), outputs)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.UpdateResult:
        """Change the name, disable, or change the target in place; return the full outputs. (A new port and
        enabling again are replacements: see `diff`.)"""
        desired = _parse(news)
        resource_id = int(id_)
        target_id = olds.get("targetId")
        nice_id: str | None = olds.get("niceId")
        with self._client(desired.apiUrl) as client:
            name = desired.name if _differs(olds.get("name"), desired.name) else None
            enabled = desired.enabled if _differs(olds.get("enabled"), desired.enabled) else None
            if name is not None or enabled is not None:
                try:
                    resource = client.update_resource(resource_id, name=name, enabled=enabled)
                    self._ledgers.of(desired.apiUrl, desired.orgId).changed(resource)
                except PangolinNotFound as exc:
                    raise exc.with_advice(
                        f"Resource {resource_id} was deleted outside Pulumi: run `pulumi refresh` to drop it from "
                        "the stack, then `pulumi up` to create it again"
                    ) from exc
                nice_id = resource.niceId
            if target_id is None or any(_differs(olds.get(key), getattr(desired, key)) for key in _TARGET_KEYS):
                # A target that comes back (deleted out of band) needs no new claim: the resource stayed enabled
                # on its port all along, so every create since saw it and yielded.
                target = _put_target(client, resource_id, None if target_id is None else int(target_id), desired)
                target_id = target.targetId
        return dynamic.UpdateResult(_outputs(desired, resource_id, int(target_id), nice_id))

    def read(self, id_: str, props: dict[str, Any]) -> dynamic.ReadResult:
        """The live resource and target, as outputs and as inputs (so refresh shows drift)."""
        api_url = props.get("apiUrl")
        if not isinstance(api_url, str):
            raise ValueError(f"cannot read Pangolin resource {id_}: its state has no apiUrl")
        with self._client(api_url) as client:
            try:
                resource = client.get_resource(int(id_))
            except PangolinNotFound:
                # Gone: an empty id makes the engine drop it from state.
                return dynamic.ReadResult("", {})
            targets = client.list_targets(resource.resourceId)
        target = next((t for t in targets if t.targetId == props.get("targetId")), None)
        if target is None and targets:
            target = targets[0]
        inputs = {
            "apiUrl": api_url,
            "orgId": resource.orgId or props.get("orgId"),
            "siteId": target.siteId if target else _int_or_none(props.get("siteId")),
            "name": resource.name,
            "protocol": resource.raw_protocol or props.get("protocol"),
            "proxyPort": resource.proxyPort,
            "enabled": resource.enabled,
            "targetIp": target.ip if target else props.get("targetIp"),
            "targetPort": target.port if target else _int_or_none(props.get("targetPort")),
            "adoptResourceId": _int_or_none(props.get("adoptResourceId")),
        }
        outputs = {
            **inputs,
            "resourceId": resource.resourceId,
            "targetId": target.targetId if target else None,
            "niceId": resource.niceId,
        }
        return dynamic.ReadResult(str(resource.resourceId), outputs, inputs)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        """Delete the resource (its targets cascade); already gone counts as deleted."""
        with self._client(props["apiUrl"]) as client:
            _delete(client, self._ledgers.of(props["apiUrl"], str(props.get("orgId"))), int(id_))

    def _client(self, api_url: str) -> PangolinClient:
        return PangolinClient(api_url, self.api_key(), policy=self._policy, dialect=self._dialect)


# --- steps -----------------------------------------------------------------------------------


def _outputs(desired: TcpInputs, resource_id: int, target_id: int, nice_id: str | None) -> dict[str, Any]:
    return {**desired.model_dump(), "resourceId": resource_id, "targetId": target_id, "niceId": nice_id}


def _create(client: PangolinClient, ledger: OrgLedger, desired: TcpInputs) -> tuple[Resource, Target]:
    resource = _create_resource(client, ledger, desired)
    try:
        # What a lookup after a lost answer found may be another's leftover of this name, on another port or
        # disabled: it is no claim of this create's, so it is deleted and the resource made anew, once.
        if resource.proxyPort != desired.proxyPort or not resource.enabled:
            _delete(client, ledger, resource.resourceId)
            resource = _create_resource(client, ledger, desired)
            if resource.proxyPort != desired.proxyPort or not resource.enabled:
                raise PangolinConflict(
                    f"Pangolin holds '{desired.name}' on port {resource.proxyPort} (enabled: {resource.enabled}), "
                    f"not as just created on {desired.proxyPort}",
                    call="PUT /org/{orgId}/resource",
                )
        if desired.enabled:
            _claim(client, ledger, desired, resource)
        else:
            # The raw create schema has no `enabled` (an update-only field): disable before the target exists.
            resource = client.update_resource(resource.resourceId, enabled=False)
            ledger.changed(resource)
        target = client.create_target(
            resource.resourceId, site_id=desired.siteId, ip=desired.targetIp, port=desired.targetPort
        )
    except Exception as exc:
        _delete_half_made(client, ledger, resource.resourceId, desired, exc)
        raise
    return resource, target


def _create_resource(client: PangolinClient, ledger: OrgLedger, desired: TcpInputs) -> Resource:
    """The resource, without a target yet: enabled, so it claims its port, but with no router, so it serves
    nothing (a resource with no enabled target has none: `../shared/reference/pangolin-traefik-config.md`)."""
    try:
        resource = client.create_resource(
            desired.orgId, name=desired.name, protocol=desired.protocol, proxy_port=desired.proxyPort
        )
        ledger.created(resource)
        return resource
    except PangolinError as exc:
        if not may_have_applied(exc):
            raise
        raise exc.with_advice(
            f"Pangolin may have created '{desired.name}' all the same: run `pulumi up` again, which finds a "
            "resource of that name and adopts it instead of making a second one"
        ) from exc


def _claim(client: PangolinClient, ledger: OrgLedger, desired: TcpInputs, resource: Resource) -> None:
    """Win the resource's port or fail: the lowest-id rule (`ssh_gateway.core.org.losers`) over the resources
    made before it, which the ledger knows (`ledger.OrgLedger.older_rivals`: a listing, or what it already had).

    The resource is enabled on its port and has no target while this runs. Pangolin's ids grow with creation, so
    the resources with lower ids are every enabled resource on the port made before it, with or without its
    target, and each of those claimed the port first. If there is one, this resource lost: the caller deletes it,
    having never served. Every resource made after it counts it among its older rivals and yields, so the
    decision holds: the port is served once (a resource keeps its claim only as long as it stays enabled on that
    port, which is why a new port or enabling again is a replacement, i.e. a new claim).
    """
    mine = Binding(
        port=desired.proxyPort, resource_id=resource.resourceId, name=desired.name, protocol=desired.protocol
    )
    conflicts = losers([mine], OrgView(tuple(ledger.older_rivals(client, mine))))
    if conflicts:
        owner = conflicts[0].owner
        raise PangolinConflict(
            f"port {desired.proxyPort} was claimed by {owner.describe()} first (overlapping runs on one org and "
            f"range): '{desired.name}' lost it and was deleted again without ever serving it. Run `pulumi up` "
            "again: it moves the instance to a free port",
            call="GET /org/{orgId}/resources",
        )


def _delete(client: PangolinClient, ledger: OrgLedger, resource_id: int) -> None:
    """Delete a resource (its targets cascade), already gone counting as deleted, and tell the ledger."""
    try:
        client.delete_resource(resource_id)
    except PangolinNotFound:
        pass
    ledger.gone(resource_id)


def _delete_half_made(
    client: PangolinClient, ledger: OrgLedger, resource_id: int, desired: TcpInputs, failure: Exception
) -> None:
    """Undo a create whose later step failed, so `create` stays all-or-nothing."""
    try:
        _delete(client, ledger, resource_id)
    except PangolinError as cleanup:
        raise cleanup.with_advice(
            f"{failure}; deleting the half-made resource {resource_id} ('{desired.name}') failed too: run "
            "`pulumi up` again, which adopts it by name, or delete it in Pangolin"
        ) from failure


def _adopt(
    client: PangolinClient, ledger: OrgLedger, desired: TcpInputs, resource_id: int
) -> tuple[Resource, Target] | None:
    """Take over a resource a failed earlier run created, instead of creating a twin; None if it is gone or is
    no longer this resource's (another name or protocol) since the program listed the org.

    Only an enabled leftover on the wanted port is adopted: it has claimed that port since it was made, but an
    interrupted create may never have checked the claim, so it is checked here (`_claim`) before a target is
    added. A leftover on another port or disabled claims nothing there: it is deleted, and the resource created
    anew (a new claim). The workaround for dynamic resources not supporting import (pulumi/pulumi#16175, #7534).
    """
    try:
        resource = client.get_resource(resource_id)
    except PangolinNotFound:
        return None
    if resource.name != desired.name or resource.raw_protocol != desired.protocol:
        return None
    if resource.proxyPort != desired.proxyPort or resource.enabled != desired.enabled:
        _delete(client, ledger, resource_id)
        print(
            f"pangolin: deleted leftover resource {resource_id} ({desired.name!r}) to create it anew", file=sys.stderr
        )
        return None
    try:
        if desired.enabled:
            _claim(client, ledger, desired, resource)
    except PangolinConflict as exc:
        _delete_half_made(client, ledger, resource_id, desired, exc)
        raise

    targets = client.list_targets(resource_id)
    wanted = (desired.siteId, desired.targetIp, desired.targetPort)
    targets.sort(key=lambda t: (t.siteId, t.ip, t.port) != wanted)  # keep an exact match if any
    for extra in targets[1:]:
        client.delete_target(extra.targetId)
    if targets:
        target = targets[0]
        if (target.siteId, target.ip, target.port) != wanted:
            target = _put_target(client, resource_id, target.targetId, desired)
    else:
        target = _put_target(client, resource_id, None, desired)
    print(f"pangolin: adopted existing resource {resource_id} ({desired.name!r})", file=sys.stderr)
    return resource, target


def _put_target(client: PangolinClient, resource_id: int, target_id: int | None, desired: TcpInputs) -> Target:
    """Update the target in place, or create it when there is none (or it was deleted)."""
    if target_id is not None:
        try:
            return client.update_target(target_id, site_id=desired.siteId, ip=desired.targetIp, port=desired.targetPort)
        except PangolinNotFound as exc:
            if (exc.server_message or "").startswith("Site "):
                raise  # "Site with ID 9 not found": creating the target would fail the same way
    return client.create_target(resource_id, site_id=desired.siteId, ip=desired.targetIp, port=desired.targetPort)
