"""How every client of the Pangolin API waits and retries: one policy object, like httpx's DEFAULT_TIMEOUT_CONFIG."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

import httpx

__all__ = ["DEFAULT_POLICY", "HttpPolicy"]


@dataclass(frozen=True, kw_only=True)
class HttpPolicy:
    """Timeouts, retries and backoff for calls to Pangolin's Integration API."""

    connect_timeout: float = 5.0
    """Seconds to open a connection; a connect that fails never reached the server, so it is always retried."""
    read_timeout: float = 30.0
    """Seconds to wait for an answer (and to write, and for a pooled connection)."""
    max_retries: int = 4
    """Retries after the first attempt, for calls that are safe to send again."""
    backoff_base: float = 0.5
    """The first retry waits about this long; each further one doubles it, up to `backoff_max`."""
    backoff_max: float = 8.0
    """The longest wait between two attempts, unless the server asks for more with Retry-After."""
    retry_after_max: float = 30.0
    """The longest Retry-After honoured."""

    @property
    def timeout(self) -> httpx.Timeout:
        """The httpx timeouts, connect and read kept apart."""
        return httpx.Timeout(self.read_timeout, connect=self.connect_timeout)

    def backoff(self, attempt: int) -> float:
        """Seconds before retry `attempt` (0-based): "equal jitter", half the capped exponential delay plus up
        to the other half at random, so concurrent callers spread out but never retry at once."""
        cap = min(self.backoff_max, self.backoff_base * 2.0**attempt)
        return cap / 2 + random.uniform(0, cap / 2)  # noqa: S311 - jitter, not cryptography

    def retry_after(self, header: str | None) -> float | None:
        """A Retry-After in seconds, capped; None when absent or an HTTP date (then backoff applies)."""
        try:
            seconds = float(header or "")
        except ValueError:
            return None
        return min(max(seconds, 0.0), self.retry_after_max)


DEFAULT_POLICY: Final = HttpPolicy()
