"""Where a sign-in is kept, behind one seam: a file on this host, or a key in Redis.

:class:`StoredToken` (in :mod:`._tokens`) and ``login``/``logout``/``auth status`` (in
:mod:`._login`) see a :class:`CredentialStore` only, so the refresh logic is written once.
A refresh runs inside :meth:`CredentialStore.refreshing` (a lock every process naming the
same store respects), reads the store again, and writes what the server answered with
:meth:`CredentialStore.replace`: a compare-and-set on the tokens it was refreshed from,
so a writer whose lock lapsed cannot overwrite what another wrote since.

:class:`StoreUnreachableError` marks a failure that may pass (Redis down, a lock held too
long); the caller decides whether the token in hand still serves.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol

import anyio
import filelock

from magisterium_async._auth._credentials import (
    Credentials,
    credentials_flag,
    delete_credentials,
    load_credentials,
    lock_path,
    save_credentials,
    set_aside,
)
from magisterium_async._config import non_negative_number
from magisterium_async._errors import CredentialsError

__all__ = [
    "LOCK_TIMEOUT",
    "CredentialStore",
    "FileStore",
    "StoreUnreachableError",
    "fence",
    "waiting_for_another",
]

logger = logging.getLogger("magisterium_async.auth")

LOCK_TIMEOUT = 120.0  # the longest a process waits for another's refresh of a file


class StoreUnreachableError(CredentialsError):
    """The store did not answer in time (Redis down or unreachable, a lock held too long):
    a failure that may pass, unlike a store that answers with something unusable."""


class CredentialStore(Protocol):
    """Where one sign-in lives, as the refresh logic and the sign-in commands use it."""

    where: str
    """The store, for messages: the file's path, or the Redis URL with its password masked."""

    def login_command(self) -> str:
        """The command that signs in to this store again."""
        ...

    async def load(self) -> Credentials | None:
        """The stored sign-in; ``None`` when there is none (never signed in, or lost)."""
        ...

    async def save(self, credentials: Credentials) -> None:
        """Store a new sign-in, replacing whatever was there (``login``)."""
        ...

    async def delete(self) -> bool:
        """Remove the sign-in (``logout``); whether there was one."""
        ...

    async def set_aside(self) -> str:
        """Move an unreadable sign-in out of the way, kept (``login``); where it went."""
        ...

    def refreshing(self) -> AbstractAsyncContextManager[None]:
        """Held while one process refreshes: every process of this store waits for it."""
        ...

    async def replace(self, old: Credentials, new: Credentials) -> bool:
        """Write ``new`` if the store still holds ``old``'s tokens; whether it wrote."""
        ...

    async def aclose(self) -> None:
        """Release what the store holds (a connection)."""
        ...


def waiting_for_another(where: str, at_most: float) -> None:
    """Say (INFO) that this process waits for another's refresh of the sign-in at
    ``where``, ``at_most`` seconds; the record's ``status`` and ``wait_for`` are for a
    status line."""
    logger.info(
        "waiting for another process's refresh of the sign-in at %s (at most %g s)",
        where,
        at_most,
        extra={
            "status": "waiting for another process's refresh of the sign-in",
            "wait_for": at_most,
        },
    )


def fence(credentials: Credentials) -> str:
    """A digest of the tokens: what a compare-and-set compares (no token is compared,
    logged or stored anew through it)."""
    tokens = f"{credentials.access_token}\0{credentials.refresh_token or ''}"
    return hashlib.sha256(tokens.encode()).hexdigest()[:32]


class FileStore:
    """The credentials file: atomic writes, mode 0600, a file lock beside it.

    ``lock_timeout``: how long a refresh or a save waits for another process's refresh
    before :class:`StoreUnreachableError`.
    """

    def __init__(self, path: Path, *, lock_timeout: float = LOCK_TIMEOUT) -> None:
        self.path = path
        self.where = str(path)
        self._lock_timeout = non_negative_number("lock_timeout", lock_timeout)
        self._lock = filelock.AsyncFileLock(str(lock_path(path)), timeout=lock_timeout, mode=0o600)

    def __repr__(self) -> str:
        return f"FileStore({self.where!r})"

    def login_command(self) -> str:
        return f"magisterium-async login{credentials_flag(self.path)}"

    async def load(self) -> Credentials | None:
        return await anyio.to_thread.run_sync(load_credentials, self.path)

    async def save(self, credentials: Credentials) -> None:
        await anyio.to_thread.run_sync(self._save_locked, credentials)

    def _save_locked(self, credentials: Credentials) -> None:
        # Under the refresh lock: a process refreshing the old sign-in must not write over it.
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        lock = filelock.FileLock(str(lock_path(self.path)), timeout=self._lock_timeout, mode=0o600)
        try:
            lock.acquire()
        except filelock.Timeout:
            raise self._held() from None
        try:
            save_credentials(self.path, credentials)
        finally:
            lock.release()

    async def delete(self) -> bool:
        return await anyio.to_thread.run_sync(delete_credentials, self.path)

    async def set_aside(self) -> str:
        return str(await anyio.to_thread.run_sync(set_aside, self.path))

    @contextlib.asynccontextmanager
    async def refreshing(self) -> AsyncIterator[None]:
        try:
            await self._lock.acquire(blocking=False)
        except filelock.Timeout:
            waiting_for_another(self.where, self._lock_timeout)
            try:
                await self._lock.acquire()
            except filelock.Timeout:
                raise self._held() from None
        try:
            yield
        finally:
            await self._lock.release()

    def _held(self) -> StoreUnreachableError:
        return StoreUnreachableError(
            f"another process has held the lock on {self.where} for {self._lock_timeout:g} s",
            path=self.where,
        )

    async def replace(self, old: Credentials, new: Credentials) -> bool:
        # Only ever called inside refreshing(): the file lock already excludes other writers.
        await anyio.to_thread.run_sync(save_credentials, self.path, new)
        return True

    async def aclose(self) -> None:
        return None
