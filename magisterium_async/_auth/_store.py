"""Where a sign-in is kept: its format, and the two stores behind one seam.

A location (:func:`credentials_location`) is a file path, a Redis URL of any form of
:mod:`magisterium_async._redis`, or a redis-py asyncio client; any other URL scheme is
refused, never taken for a file name. What ``login`` obtained (the authorization server's
endpoints, the client registered there, the tokens) is one JSON document,
:class:`Credentials`.

:class:`FileStore` and :class:`RedisStore` do the same things, so the refresh logic and
the sign-in commands are written once. A refresh runs inside ``refreshing()`` (a lock
every process naming the store respects), reads the store again (another process may
have refreshed), and writes what the server answered with ``replace(old, new)``: a
compare-and-set on the tokens it was refreshed from, so a writer whose lock lapsed cannot
overwrite what another wrote since. :class:`StoreUnavailableError` marks a failure that
may pass (Redis down, a lock held too long, a full disk): the caller decides whether the
token in hand still serves. Redis refusing the URL's password, user or TLS is a
:class:`CredentialsError`: waiting will not change it.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import datetime as dt
import errno
import functools
import hashlib
import os
import re
import secrets
import shlex
import stat
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import filelock
import msgspec
import platformdirs

from magisterium_async._config import CREDENTIALS_ENV
from magisterium_async._errors import CredentialsError, masked_url
from magisterium_async._files import describe, kind_of, text_of
from magisterium_async._redis import FORMS, RedisUnavailable, connect, is_client
from magisterium_async._redis import describe as describe_redis

if TYPE_CHECKING:
    from magisterium_async._auth._oauth import TokenResponse

T = TypeVar("T")

APP_NAME = "magisterium-async"  # the configuration directory's name, and the OAuth client's
_VERSION = 1
_MAX_SIZE = 1 << 20  # a credentials file is a few hundred bytes
_ROOM = 16 * 1024  # bytes written before a refresh: more than any new file needs
LOCK_TIMEOUT = 120.0  # the longest a process waits for another's refresh of a file
PREFIX = "magisterium:signin"
TIMEOUT = 2.0  # bounds each Redis step: a command, a connection
LEASE = 30.0  # the Redis lock's lease: a token request (15 s at most) and its writes
LOCK_WAIT = LEASE + 2.0  # long enough for a lease whose holder died to lapse
_POLL = 0.05  # how often a process waiting for the Redis lock tries it
# A URL scheme: two characters at least, so that C:/ (a Windows drive) stays a path.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:/")
_REDIS_URL = re.compile(r"(rediss?|unix|rediss?\+cluster|rediss?\+sentinel)://", re.IGNORECASE)

# KEYS: the sign-in. ARGV: the fence expected, the new credentials, their fence.
_REPLACE = """
if redis.call('HGET', KEYS[1], 'fence') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'credentials', ARGV[2], 'fence', ARGV[3])
return 1
"""

# KEYS: the lock. ARGV: this store's token, the lease (ms). Taken when free, or when the
# lease is this store's already (one it could not give back while Redis was away).
_TAKE = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

# KEYS: the lock. ARGV: this store's token. Given back if the lease is still this store's.
_GIVE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class StoreUnavailableError(CredentialsError):
    """The store cannot be used now (Redis does not answer, another process has held the
    lock too long, the disk is full): a failure that may pass, unlike a store that answers
    with something unusable."""


class UnreadableCredentialsError(CredentialsError):
    """The store holds something that is not a sign-in this version can read (a damaged
    file, another version's): ``login`` sets it aside and signs in anew, ``logout`` removes
    it. Only for a store that is this SDK's own (the default file, a Redis key, any file
    some version wrote): a file the user named holding something else may be any file of
    theirs, and is a plain :class:`CredentialsError`, left as it is."""


@dataclass(frozen=True)
class Credentials:
    """What a login stored: the server, the registered client and the current tokens.

    ``origin`` is the service's origin the login was made for (tokens go nowhere else);
    ``expires_at`` is the access token's expiry in seconds since the epoch (``None``: the
    server did not say) and ``lifetime`` its ``expires_in`` when issued. The tokens are
    left out of ``repr``.
    """

    origin: str
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    client_id: str
    redirect_uri: str
    access_token: str = field(repr=False)
    refresh_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None
    lifetime: float | None = None
    scope: str | None = None
    registration_endpoint: str | None = None
    revocation_endpoint: str | None = None
    version: int = _VERSION

    def renewed(self, tokens: TokenResponse) -> Credentials:
        """These credentials with the tokens the server just issued (what it did not say
        anew, a refresh token or the scope, is kept)."""
        lifetime = tokens.expires_in
        return replace(
            self,
            access_token=tokens.access_token,
            refresh_token=self.refresh_token
            if tokens.refresh_token is None
            else tokens.refresh_token,
            expires_at=None if lifetime is None else time.time() + lifetime,
            lifetime=lifetime,
            scope=self.scope if tokens.scope is None else tokens.scope,
        )

    @property
    def scopes(self) -> list[str]:
        """The granted scopes, as a list (empty when the server named none)."""
        return self.scope.split() if self.scope else []


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(Credentials)


class _Versioned(msgspec.Struct):
    """What every version of the credentials file holds: a JSON object with its format."""

    version: int


_VERSIONED = msgspec.json.Decoder(_Versioned)


def _encode(credentials: Credentials) -> bytes:
    return msgspec.json.format(_ENCODER.encode(credentials), indent=2) + b"\n"


def _decode(raw: bytes, where: str, flag: str, *, named: bool) -> Credentials | None:
    """The sign-in ``raw`` holds (``None`` when it is blank: no sign-in yet), else an
    error naming ``where`` and the commands that get out (``flag``: the ``--credentials``
    they need). ``named``: a file the user named, which may be any file of theirs unless
    some version of this SDK wrote it."""
    ours = True
    try:
        text = text_of(raw, where, "the credentials file")
        if not text.strip():
            return None
        credentials = _DECODER.decode(text)
    except ValueError as exc:  # msgspec's names a field, never a value: no token leaks
        what = f"is not a magisterium-async credentials file ({exc})"
        try:
            _VERSIONED.decode(raw.removeprefix(codecs.BOM_UTF8))
        except ValueError:
            ours = not named
    else:
        if credentials.version == _VERSION:
            return credentials
        what = f"was written by another version (format {credentials.version})"
    if not ours:
        raise CredentialsError(
            f"{where} {what}; no command moves or deletes a file you named: check the path (if "
            "it really is a damaged sign-in, remove it yourself and sign in again), or sign in "
            "to another file with `magisterium-async login --credentials PATH`",
            path=where,
        )
    raise UnreadableCredentialsError(
        f"{where} {what}; `magisterium-async login{flag}` replaces it (keeping it aside), "
        f"`magisterium-async logout{flag}` removes it",
        path=where,
    )


def fence(credentials: Credentials) -> str:
    """A digest of the tokens: what a compare-and-set compares (no token is compared,
    logged or stored anew through it)."""
    tokens = f"{credentials.access_token}\0{credentials.refresh_token or ''}"
    return hashlib.sha256(tokens.encode()).hexdigest()[:32]


def default_credentials_path() -> Path:
    """``credentials.json`` in the user's configuration directory for this application."""
    return platformdirs.user_config_path(APP_NAME) / "credentials.json"


def credentials_location(location: str | os.PathLike[str] | Any = None) -> Path | str | Any:
    """Where the credentials live: ``location``, else ``$MAGISTERIUM_CREDENTIALS``, else
    the user's configuration directory; a :class:`Path`, a Redis URL as given (any form
    of :mod:`magisterium_async._redis`), or a redis-py asyncio client as given.

    Any other URL scheme (``http://``, ``file:/``, a typo) raises :class:`ValueError`
    naming it: it is never taken for a file name.
    """
    if is_client(location):
        return location
    if location is not None:
        if not isinstance(location, (str, os.PathLike)):
            raise TypeError(
                "credentials must be a path, a Redis URL or a redis-py asyncio client, "
                f"not {type(location).__name__}"
            )
        raw, source = os.fspath(location), "credentials"
        if not raw.strip():  # "$UNSET_VARIABLE": never the current directory
            raise ValueError("the credentials location is empty: give a file path or a Redis URL")
    else:
        raw, source = os.environ.get(CREDENTIALS_ENV, ""), f"${CREDENTIALS_ENV}"
        if not raw.strip():
            return default_credentials_path()
    if not _SCHEME.match(raw):
        return Path(raw).expanduser()
    if _REDIS_URL.match(raw):
        return raw
    raise ValueError(
        f"{source}: unsupported location {masked_url(raw)!r}: give a file path, or one of: {FORMS}"
    )


def signin_key(origin: str) -> str:
    """The Redis key of the sign-in for the service at ``origin`` (its issuer)."""
    digest = hashlib.sha256(f"{origin}\n{APP_NAME}".encode()).hexdigest()[:16]
    return f"{PREFIX}:{{{digest}}}"


def _stamp() -> str:
    """The UTC time now, to the microsecond: what tells apart what was set aside."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


def _quiet(at_most: float) -> None:
    """Where the news of a wait for another process's refresh goes when no one listens."""


class FileStore:
    """The credentials file at ``path``, and the lock file beside it.

    ``lock_timeout``: how long a refresh or a save waits for another process's refresh
    before :class:`StoreUnavailableError`.
    """

    def __init__(self, path: Path, *, lock_timeout: float = LOCK_TIMEOUT) -> None:
        self.path = path
        self.where = str(path)
        self.named = path != default_credentials_path()
        """Whether the user named the file (the default one every command finds alone)."""
        self.flag = f" --credentials {shlex.quote(self.where)}" if self.named else ""
        """What a command needs to find this store: `` --credentials PATH``, or nothing."""
        self._lock_timeout = lock_timeout
        self._lock = filelock.AsyncFileLock(self.where + ".lock", timeout=lock_timeout, mode=0o600)
        self._room: Path | None = None  # the file the next write fills

    def read(self) -> Credentials | None:
        """The stored sign-in; ``None`` when there is no file, or an empty one (made by
        ``mktemp`` to hold one). Raises :class:`CredentialsError` when the path is not a
        file, group or others may use the file, or it cannot be read, and
        :class:`UnreadableCredentialsError` when it holds no sign-in this version reads."""
        kind = kind_of(self.path)
        if kind == "missing":
            return None
        if kind != "file":
            raise CredentialsError(
                f"the credentials path {self.path} is {describe(kind)}, not a file: a sign-in "
                "is kept in a file, rewritten at each refresh; name one with --credentials "
                f"PATH (or ${CREDENTIALS_ENV})",
                path=self.where,
            )
        try:
            with open(self.path, "rb") as file:
                mode = os.fstat(file.fileno()).st_mode
                # POSIX bits mean nothing on Windows: the ACLs decide there.
                if os.name != "nt" and mode & (stat.S_IRWXG | stat.S_IRWXO):
                    raise CredentialsError(
                        f"refusing the credentials file {self.path}: group or others can read "
                        f"or write it (mode {stat.S_IMODE(mode):04o}); make it private with: "
                        f"chmod 600 {shlex.quote(self.where)}",
                        path=self.where,
                    )
                raw = file.read(_MAX_SIZE + 1)
        except FileNotFoundError:
            return None  # gone since it was looked at
        except OSError as exc:
            raise self._failed("read", exc) from None
        return _decode(raw, self.where, self.flag, named=self.named)

    def _failed(self, doing: str, exc: OSError) -> CredentialsError:
        error, why = CredentialsError, exc.strerror or type(exc).__name__
        hint = f"check the path and who may use {self.path.parent}"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # a failure that may pass
            error, why, hint = StoreUnavailableError, "the disk is full", "free some space there"
        return error(
            f"cannot {doing} the credentials file {self.path}: {why}; {hint}, or keep the "
            "sign-in elsewhere with --credentials PATH",
            path=self.where,
        )

    async def load(self) -> Credentials | None:
        """The stored sign-in, read in a thread (:meth:`read`)."""
        return await asyncio.to_thread(self.read)

    async def save(self, credentials: Credentials) -> None:
        """Store a new sign-in, replacing whatever was there (``login``), under the lock:
        a process refreshing the old one must not write over it."""
        async with self.refreshing():
            await self.replace(credentials, credentials)

    async def delete(self) -> bool:
        """Remove the sign-in and its lock file (``logout``); whether there was one."""
        with contextlib.suppress(OSError):
            await asyncio.to_thread(os.unlink, self.where + ".lock")
        try:
            await asyncio.to_thread(os.unlink, self.path)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise self._failed("delete", exc) from None
        return True

    async def set_aside(self) -> str:
        """Move an unreadable sign-in out of the way, beside it as
        ``<name>.corrupt-<UTC time>`` (``login``); where it went."""
        aside = self.path.with_name(f"{self.path.name}.corrupt-{_stamp()}")
        try:
            await asyncio.to_thread(os.replace, self.path, aside)
        except OSError as exc:
            raise self._failed("move aside", exc) from None
        return str(aside)

    @contextlib.asynccontextmanager
    async def refreshing(self, waiting: Callable[[float], None] = _quiet) -> AsyncIterator[None]:
        """Held while one process refreshes: every process of this file waits for it
        (``waiting`` is told how long at most, when it must). Inside, the room for the
        new file is taken already."""
        try:
            await asyncio.to_thread(self.path.parent.mkdir, mode=0o700, parents=True, exist_ok=True)
            try:
                await self._lock.acquire(blocking=False)
            except filelock.Timeout:
                waiting(self._lock_timeout)
                await self._lock.acquire()
        except filelock.Timeout:
            raise StoreUnavailableError(
                f"another process has held the lock on {self.where} for {self._lock_timeout:g} s",
                path=self.where,
            ) from None
        except OSError as exc:
            raise self._failed("lock", exc) from None
        try:
            room = self.path.with_name(f".{self.path.name}.{secrets.token_hex(8)}.tmp")
            await asyncio.to_thread(self._write, room, b" " * _ROOM, os.O_CREAT | os.O_EXCL)
            self._room = room
            yield
        finally:
            if self._room is not None:
                with contextlib.suppress(OSError):
                    os.unlink(self._room)
                self._room = None
            await self._lock.release()

    def _write(self, temp: Path, data: bytes, flags: int = 0) -> None:
        """``data`` into ``temp`` (made private, with ``flags``) and synced; then, unless
        it is made now, renamed over the file, the rename made durable."""
        try:
            with os.fdopen(os.open(temp, os.O_WRONLY | flags, 0o600), "wb") as file:
                file.write(data)
                file.truncate()
                file.flush()
                os.fsync(file.fileno())
            if not flags:
                os.replace(temp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise self._failed("write", exc) from None
        if not flags and os.name != "nt":
            with contextlib.suppress(OSError):
                directory = os.open(self.path.parent, os.O_RDONLY)
                try:
                    os.fsync(directory)
                finally:
                    os.close(directory)

    async def replace(self, old: Credentials, new: Credentials) -> bool:
        """Write ``new`` into the room :meth:`refreshing` took, renamed over the file (the
        lock already excludes every other writer of it); whether it wrote: always."""
        room, self._room = self._room, None
        assert room is not None, "replace() outside refreshing()"
        await asyncio.to_thread(self._write, room, _encode(new))
        return True

    async def aclose(self) -> None:
        """Nothing to release: the lock is held only inside :meth:`refreshing`."""


class RedisStore:
    """The sign-in for the service at ``origin`` in the Redis at ``target`` (a URL or a
    redis-py asyncio client); connects at first use, an invalid URL refused at once."""

    named = False

    def __init__(self, target: str | Any, origin: str) -> None:
        self.where = describe_redis(target)
        self.flag = f" --credentials {self.where if isinstance(target, str) else 'REDIS_URL'}"
        self.key = signin_key(origin)
        self._token = secrets.token_hex(16)  # this store's, in the lock it holds
        self._connection = connect(target, TIMEOUT, ValueError, "the credentials store")
        self._connection.error = functools.partial(CredentialsError, path=self.where)

    def _redis(self) -> Any:
        return self._connection.client

    async def _step(self, step: Awaitable[T]) -> T:
        """``step``, bounded by :data:`TIMEOUT`: a refusal raised as one, any other failure
        as :class:`StoreUnavailableError`."""
        try:
            return await self._connection.run(step)
        except RedisUnavailable as exc:
            raise StoreUnavailableError(str(exc), path=self.where) from None

    async def load(self) -> Credentials | None:
        data: Any = await self._step(self._redis().hget(self.key, "credentials"))
        if data is None:
            return None
        return _decode(bytes(data), f"the sign-in at {self.where}", self.flag, named=False)

    async def save(self, credentials: Credentials) -> None:
        # One HSET: a reader sees the old sign-in or the new one. A refresher of the old
        # one then fails its compare-and-set and adopts this one.
        mapping = {"credentials": _encode(credentials), "fence": fence(credentials)}
        await self._step(self._redis().hset(self.key, mapping=mapping))

    async def delete(self) -> bool:
        removed: Any = await self._step(self._redis().delete(self.key))
        await self._step(self._redis().delete(f"{self.key}:lock"))
        return bool(removed)

    async def set_aside(self) -> str:
        aside = f"{self.key}:corrupt-{_stamp()}"  # the same hash tag: the same cluster slot
        await self._step(self._redis().rename(self.key, aside))
        return f"{self.where} (key {aside})"

    @contextlib.asynccontextmanager
    async def refreshing(self, waiting: Callable[[float], None] = _quiet) -> AsyncIterator[None]:
        lock, loop = f"{self.key}:lock", asyncio.get_running_loop()
        take = self._redis().register_script(_TAKE)
        give_up = None
        while not await self._step(take(keys=[lock], args=[self._token, int(LEASE * 1000)])):
            if give_up is None:
                waiting(LOCK_WAIT)
                give_up = loop.time() + LOCK_WAIT
            elif loop.time() >= give_up:
                raise StoreUnavailableError(
                    f"another process has held the refresh lock at {self.where} for "
                    f"{LOCK_WAIT:g} s",
                    path=self.where,
                )
            await asyncio.sleep(_POLL)
        try:
            yield
        finally:
            # Redis away: the lease lapses, or this store takes it again at its next refresh.
            with contextlib.suppress(CredentialsError):
                give = self._redis().register_script(_GIVE)
                await self._step(give(keys=[lock], args=[self._token]))

    async def replace(self, old: Credentials, new: Credentials) -> bool:
        script = self._redis().register_script(_REPLACE)
        args = [fence(old), _encode(new), fence(new)]
        wrote: Any = await self._step(script(keys=[self.key], args=args))
        return bool(wrote)

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self._connection.aclose()


Store: TypeAlias = "FileStore | RedisStore"
"""Where one sign-in lives, as the refresh logic and the sign-in commands use it."""


def open_store(credentials: str | os.PathLike[str] | Any, origin: str) -> Store:
    """The store at ``credentials`` (or the default places, :func:`credentials_location`),
    holding the sign-in for the service at ``origin``."""
    location = credentials_location(credentials)
    if isinstance(location, Path):
        return FileStore(location)  # one sign-in, whatever its service
    return RedisStore(location, origin)  # a sign-in per service: the issuer names the key
