"""The reconciler's JSON log, one object a line (docs/reconciler.md): its events and the writer.

The reconciler writes them on stderr; the `ssh-gateway up` it starts writes its own phases into the same log when
`JSON_LOG_ENV` is set (the reconciler sets it for its steps), so one log holds a change's whole path: the watch saw
it, the `up` started, its `pulumi up` ran, it ended. `benchmarks/cluster.py` reads the same names.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final, TextIO

__all__ = ["JSON_LOG_ENV", "Log", "LogEvent", "json_log"]


class LogEvent(StrEnum):
    """The `event` of a line."""

    START = "start"
    STOP = "stop"
    CHANGE = "change"
    """The watch told a stack's worker that something that matters changed (`reason`)."""
    RECOVER = "recover"
    UP_START = "up-start"
    UP = "up"
    """A worker's `up` ended (`seconds`: the whole `ssh-gateway up` process, `code`)."""
    UP_COVERED = "up-covered"
    UP_RETRY = "up-retry"
    """A worker's `up` failed; the next try is in `seconds` (doubling from 2 s to 5 min: `failures` in a row)."""
    UP_REFUSED = "up-refused"
    """A worker's `up` was refused (exit 3, nothing written): logged once, not retried until a change, the resync
    or a grace expiry."""
    LEASE_WAIT = "lease-wait"
    LEASE_TAKEN_OVER = "lease-taken-over"
    LEASE_LOST = "lease-lost"
    STEP_ERROR = "step-error"
    WATCH_DOWN = "watch-down"
    WATCH_RESUMED = "watch-resumed"
    EVENT_ERROR = "event-error"
    """A Kubernetes Event could not be written (`error`); logged once until one is written again."""
    STATUS_UNREAD = "status-unread"
    """After a pass, the stack's status ConfigMap could not be read or understood (`error`): no gauges, no Events."""
    STACK_EXPORT = "stack-export"
    """Inside `ssh-gateway up`: its `pulumi stack export` (what tells a first `up`) ended (`seconds`)."""
    PULUMI_UP_START = "pulumi-up-start"
    PULUMI_UP = "pulumi-up"
    """Inside `ssh-gateway up`: its `pulumi up` process ended (`seconds`, `code`)."""


JSON_LOG_ENV: Final = "SSH_GATEWAY_JSON_LOG"
"""Set (to anything) in its environment, `ssh-gateway up` writes its phases as JSON lines on stderr."""

Log = Callable[..., None]
"""Writes one structured log line: `log(event, stack=..., **fields)`."""


def json_log(out: TextIO = sys.stderr) -> Log:
    """One JSON object a line: `{"ts": ..., "event": "up", "stack": "prod-a", "reason": ..., "seconds": ..., ...}`."""
    lock = threading.Lock()

    def log(event: LogEvent, **fields: Any) -> None:
        line = json.dumps({"ts": datetime.now(UTC).isoformat(timespec="milliseconds"), "event": event, **fields})
        with lock:
            print(line, file=out, flush=True)

    return log
