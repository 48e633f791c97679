"""What a user configures to share a client's quota through Redis: :class:`SharedQuota`."""

from __future__ import annotations

from dataclasses import dataclass

from magisterium_async._config import REDIS_URL_ENV, positive_number, redis_url, whole_number
from magisterium_async._errors import SharedQuotaError

__all__ = ["SharedQuota"]


@dataclass(frozen=True)
class SharedQuota:
    """Share the client's rate limits with every process on the same token, through Redis.

    ``url`` falls back to ``$MAGISTERIUM_REDIS_URL``. ``workers`` is how many processes you
    expect to share the quota: if Redis goes away, each falls back to ``limit / workers``
    per period on its own (or fewer, when Redis had seen more clients lately).
    ``timeout`` bounds every Redis call; ``retry_interval`` is how often a client that
    lost Redis tries it again. Needs ``pip install 'magisterium-async[redis]'``.
    """

    url: str | None = None
    workers: int = 1
    timeout: float = 0.5
    retry_interval: float = 1.0
    prefix: str = "magisterium"

    def __post_init__(self) -> None:
        url = redis_url(self.url)
        if not url:
            raise SharedQuotaError(f"no Redis URL: pass url= or set ${REDIS_URL_ENV}")
        object.__setattr__(self, "url", url)
        whole_number("workers", self.workers)
        positive_number("timeout", self.timeout)
        positive_number("retry_interval", self.retry_interval)

    @classmethod
    def of(cls, value: SharedQuota | str) -> SharedQuota:
        """A ``SharedQuota`` from a user's ``shared_quota=``: a URL or the object itself."""
        if isinstance(value, SharedQuota):
            return value
        if isinstance(value, str):
            return cls(value)
        raise TypeError(f"shared_quota must be a Redis URL or SharedQuota, not {type(value)}")
