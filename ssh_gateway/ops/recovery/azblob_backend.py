"""The Pulumi Azure Blob backend (`azblob://` URLs): a stack's checkpoint and lock blobs in their container.

Layout (the diy backend's, in the container instead of a directory):

    .pulumi/stacks/<project>/<stack>.json                          the checkpoint
    .pulumi/locks/organization/<project>/<stack>/<uuid>.json       a lock (ssh_gateway/ops/recovery/stack_lock.py)

The URL and the credentials are read as the CLI reads them (gocloud.dev's azureblob driver): the container is the
URL's host; `storage_account`, `domain`, `protocol`, `localemu` and `cdn` in its query override
AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_DOMAIN, AZURE_STORAGE_PROTOCOL, AZURE_STORAGE_IS_LOCAL_EMULATOR and
AZURE_STORAGE_IS_CDN; the credential is the account key (AZURE_STORAGE_KEY), a SAS token
(AZURE_STORAGE_SAS_TOKEN) or a connection string (AZURE_STORAGE_CONNECTION_STRING). The CLI's last resort, an
Entra ID login (az login, OIDC), is not read here: that needs the azure-identity package, which this project does
not install, so such a backend gets a clear error naming what to set instead.

Blob writes are atomic (a checkpoint is one upload), so nothing here repairs files as the file backend must: a
kill leaves at most a lock and pending operations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qs, urlsplit

from .stack_lock import Lock, read_lock

if TYPE_CHECKING:
    from azure.storage.blob import ContainerClient

__all__ = ["AzblobError", "AzblobStack", "azblob_stack"]

_QUERY: Final = ("storage_account", "domain", "protocol", "localemu", "cdn")


class AzblobError(RuntimeError):
    """The backend cannot be reached or read (its URL, credentials or an answer); the message says which."""


@dataclass(frozen=True)
class AzblobStack:
    """Where one stack's blobs are in an Azure Blob backend."""

    account_url: str
    """The storage account's Blob endpoint, e.g. `https://stsshgateway.blob.core.windows.net`."""
    container: str
    project: str
    stack: str
    credential: dict[str, str] | str | None = field(repr=False)
    """The account name and key, a SAS token, or None with a connection string."""
    connection_string: str | None = field(default=None, repr=False)

    @property
    def where(self) -> str:
        return f"azblob://{self.container} ({self.account_url})"

    @property
    def checkpoint(self) -> str:
        return f".pulumi/stacks/{self.project}/{self.stack}.json"

    def exists(self) -> bool:
        with self._client() as client:
            return bool(self._call(lambda: client.get_blob_client(self.checkpoint).exists()))

    def locks(self) -> list[Lock]:
        """The stack's lock blobs (project-scoped layout, and the older one without projects)."""
        found: list[Lock] = []
        with self._client() as client:
            for prefix in (f".pulumi/locks/organization/{self.project}/{self.stack}/", f".pulumi/locks/{self.stack}/"):
                names = self._call(lambda p=prefix: [b.name for b in client.list_blobs(name_starts_with=p)])
                for name in sorted(n for n in names if n.endswith(".json")):
                    content = self._call(lambda n=name: client.download_blob(n).readall())
                    found.append(read_lock(name, content))
        return found

    def remove_lock(self, lock: Lock) -> None:
        """Delete one lock blob (already gone is fine: its holder may just have ended)."""
        from azure.core.exceptions import ResourceNotFoundError

        with self._client() as client:
            try:
                self._call(lambda: client.delete_blob(lock.key))
            except AzblobError as exc:
                if not isinstance(exc.__cause__, ResourceNotFoundError):
                    raise

    def _client(self) -> ContainerClient:
        from azure.storage.blob import ContainerClient

        if self.connection_string is not None:
            return ContainerClient.from_connection_string(self.connection_string, self.container)
        return ContainerClient(self.account_url, self.container, credential=self.credential)

    def _call(self, request: Any) -> Any:
        """One request, with the SDK's errors as an AzblobError naming the backend (never a credential)."""
        from azure.core.exceptions import AzureError

        try:
            return request()
        except AzureError as exc:
            detail = str(getattr(exc, "reason", "") or exc).splitlines()[0][:200]
            raise AzblobError(f"{self.where}: {type(exc).__name__}: {detail}") from exc


def azblob_stack(backend_url: str, project: str, stack: str, env: Mapping[str, str]) -> AzblobStack:
    """The blobs of `stack` in the backend at `backend_url`, reached as the pulumi CLI would reach it with `env`."""
    parts = urlsplit(backend_url)
    if parts.scheme != "azblob" or not parts.netloc:
        raise AzblobError(f"{backend_url.split('?')[0]!r} is not an azblob://<container> URL")
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    unknown = sorted(set(query) - set(_QUERY))
    if unknown:
        raise AzblobError(f"PULUMI_BACKEND_URL has unknown query parameter(s) {unknown}: allowed are {list(_QUERY)}")
    account = query.get("storage_account") or env.get("AZURE_STORAGE_ACCOUNT", "")
    connection = env.get("AZURE_STORAGE_CONNECTION_STRING") or env.get("AZURE_STORAGEBLOB_CONNECTIONSTRING")
    key, sas = env.get("AZURE_STORAGE_KEY", ""), env.get("AZURE_STORAGE_SAS_TOKEN", "")
    if not account and not connection:
        raise AzblobError("no storage account: set AZURE_STORAGE_ACCOUNT or ?storage_account= in PULUMI_BACKEND_URL")
    credential: dict[str, str] | str | None
    if env.get("AZURE_STORAGE_ACCOUNT") and key:  # gocloud signs with the environment's account, as here
        credential = {"account_name": env["AZURE_STORAGE_ACCOUNT"], "account_key": key}
    elif sas:
        credential = sas
    elif connection:
        return AzblobStack("", parts.netloc, project, stack, None, connection)
    else:
        raise AzblobError(
            "no credential for the Azure Blob backend: set AZURE_STORAGE_KEY (with AZURE_STORAGE_ACCOUNT), "
            "AZURE_STORAGE_SAS_TOKEN or AZURE_STORAGE_CONNECTION_STRING (an Entra ID login is not read here)"
        )
    return AzblobStack(_account_url(account, query, env), parts.netloc, project, stack, credential)


def _account_url(account: str, query: Mapping[str, str], env: Mapping[str, str]) -> str:
    """The service URL as gocloud.dev's NewServiceURL builds it."""
    domain = query.get("domain") or env.get("AZURE_STORAGE_DOMAIN") or "blob.core.windows.net"
    protocol = query.get("protocol") or env.get("AZURE_STORAGE_PROTOCOL") or "https"
    if protocol not in ("http", "https"):
        raise AzblobError(f"protocol={protocol!r} in the backend URL: allowed are 'http' and 'https'")
    emulator = _true(query.get("localemu", env.get("AZURE_STORAGE_IS_LOCAL_EMULATOR", "")))
    if domain.startswith(("127.0.0.1", "localhost")) or emulator:
        return f"{protocol}://{domain}/{account}"
    if _true(query.get("cdn", env.get("AZURE_STORAGE_IS_CDN", ""))):
        return f"{protocol}://{domain}"
    return f"{protocol}://{account}.{domain}"


def _true(text: str) -> bool:
    # Go's strconv.ParseBool
    return text in ("1", "t", "T", "TRUE", "true", "True")
