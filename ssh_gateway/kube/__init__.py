"""Reading the cluster for instances discovered from it (#28): the program and `ssh-gateway reconcile` both use
it, with the kubeconfig and context of the stack's kubernetes provider. Pulumi-free.

- `api_client(kubeconfig, context)`: a client of the official kubernetes library, found as pulumi-kubernetes
  finds its cluster.
- `list_selected(...)`: every selected pod or Service of every selected namespace, from complete paged listings;
  `ended(obj)`: one that will not run again (being deleted, or a finished pod), which counts as gone.
- `read_status(...)`, `read_statuses(...)`: a stack's status ConfigMap, and every stack's in a namespace.
- `read_occupants(...)`: the objects already holding names the stack would create, with their stack marks.

Every failure (forbidden, timed out, a 5xx, a listing expired between its pages, a page without metadata, an
unreadable kubeconfig) is one `KubeError` with a one-line message and no credential: a caller never gets a
partial answer, so a failure to read can never be taken for objects that are gone.
"""

from .client import LEASE_REQUEST_TIMEOUT, REQUEST_TIMEOUT, api_client
from .errors import KubeError
from .listing import PAGE_SIZE, collect_pages, ended, list_selected
from .occupants import read_occupants
from .status import read_status, read_statuses

__all__ = [
    "LEASE_REQUEST_TIMEOUT",
    "PAGE_SIZE",
    "REQUEST_TIMEOUT",
    "KubeError",
    "api_client",
    "collect_pages",
    "ended",
    "list_selected",
    "read_occupants",
    "read_status",
    "read_statuses",
]
