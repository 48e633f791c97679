"""The credentials: where they live, their format, and the file that holds them.

A location is a file path or a ``redis://`` / ``rediss://`` URL
(:func:`credentials_location`; any other URL scheme is refused, never taken for a file
name). One JSON document holds what ``magisterium-async login`` obtained: the
authorization server's endpoints, the client registered there, and the current tokens. As
a file it is created with mode 0600 in a directory created 0700, replaced atomically (a
temporary file in the same directory, fsynced, then renamed over it), and refused when
group or others may read or write it, before anything is sent. The Redis store is
:mod:`._redis_store`.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shlex
import stat
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeAlias
from urllib.parse import urlsplit

import msgspec
import platformdirs

from magisterium_async._config import CREDENTIALS_ENV
from magisterium_async._errors import CredentialsError
from magisterium_async._errors import masked_url as mask_url
from magisterium_async._redis import FORMS, describe, is_client

__all__ = [
    "APP_NAME",
    "CREDENTIALS_ENV",
    "REDIS_SCHEMES",
    "Credentials",
    "Location",
    "UnreadableCredentialsError",
    "credentials_flag",
    "credentials_location",
    "decode_credentials",
    "default_credentials_path",
    "delete_credentials",
    "encode_credentials",
    "load_credentials",
    "location_text",
    "lock_path",
    "mask_url",
    "origin_of",
    "save_credentials",
    "set_aside",
    "way_out",
]

APP_NAME = "magisterium-async"
_VERSION = 1
_MAX_SIZE = 1 << 20  # a credentials file is a few hundred bytes
REDIS_SCHEMES = (
    "redis",
    "rediss",
    "unix",
    "redis+cluster",
    "rediss+cluster",
    "redis+sentinel",
    "rediss+sentinel",
)
# A URL scheme: two characters at least, so that C:/ (a Windows drive) stays a path.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):/")

Location: TypeAlias = "Path | str | Any"
"""Where credentials live: a file, a Redis URL (a ``str``), or a redis-py asyncio client
the application owns."""


class UnreadableCredentialsError(CredentialsError):
    """The store holds something that is not a sign-in this version can read (a damaged
    file, another version's, far too large): ``login`` sets it aside and signs in anew,
    ``logout`` removes it, where the store is this SDK's own (the default file, a Redis
    key, any file another version wrote). A file the user named holding something else
    (``foreign``) may be any file of theirs: it is left as it is, and the error says so."""

    def __init__(self, message: str, *, path: str, foreign: bool = False) -> None:
        super().__init__(message, path=path)
        self.foreign = foreign


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
    token_type: str = "Bearer"
    expires_at: float | None = None
    lifetime: float | None = None
    scope: str | None = None
    registration_endpoint: str | None = None
    revocation_endpoint: str | None = None
    version: int = _VERSION

    def with_tokens(
        self,
        access_token: str,
        refresh_token: str | None,
        *,
        expires_at: float | None,
        lifetime: float | None,
        scope: str | None,
    ) -> Credentials:
        """These credentials with new tokens (a refresh keeps what it was not told anew)."""
        return replace(
            self,
            access_token=access_token,
            refresh_token=refresh_token if refresh_token is not None else self.refresh_token,
            expires_at=expires_at,
            lifetime=lifetime,
            scope=scope if scope is not None else self.scope,
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


def _versioned(data: bytes) -> bool:
    """Whether ``data`` is a credentials file of some version (this SDK's, if damaged or
    another version's), not a file of the user's that happens to sit at the path."""
    try:
        _VERSIONED.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False
    return True


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, lower-cased: what a token is bound to."""
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def default_credentials_path() -> Path:
    """``credentials.json`` in the user's configuration directory for this application."""
    return platformdirs.user_config_path(APP_NAME) / "credentials.json"


def credentials_location(location: str | os.PathLike[str] | None = None) -> Location:
    """Where the credentials live: ``location``, else ``$MAGISTERIUM_CREDENTIALS``, else
    the user's configuration directory; a :class:`Path`, a Redis URL as given (any form
    of :mod:`magisterium_async._redis`: ``redis://``, ``rediss://``, ``unix://``,
    ``redis+cluster://``, ``redis+sentinel://``), or a redis-py asyncio client as given.

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
    else:
        raw, source = os.environ.get(CREDENTIALS_ENV, ""), f"${CREDENTIALS_ENV}"
        if not raw:
            return default_credentials_path()
    match = _SCHEME.match(raw)
    if match is None:
        return Path(raw).expanduser()
    if match.group(1).lower() in REDIS_SCHEMES and raw[match.end() :].startswith("/"):
        return raw
    raise ValueError(
        f"{source}: unsupported location {mask_url(raw)!r}: give a file path, or one of: {FORMS}"
    )


def credentials_flag(location: Location) -> str:
    """`` --credentials LOCATION`` for a command that must name ``location``; empty for
    the default file, which every command finds by itself."""
    if isinstance(location, Path):
        if location == default_credentials_path():
            return ""
        return f" --credentials {shlex.quote(str(location))}"
    if not isinstance(location, str):
        return " --credentials REDIS_URL"  # the application's client: the URL is its own
    return f" --credentials {mask_url(location)}"


def way_out(location: Location, *, foreign: bool = False) -> str:
    """The commands that get out of a store holding no usable sign-in, for a message;
    ``foreign``: a file the user named that holds something else (no command touches it)."""
    if foreign:
        return (
            "no command moves or deletes a file you named: check the path (if it really is "
            "a damaged sign-in, remove it yourself and sign in again), or sign in to "
            "another file with `magisterium-async login --credentials PATH`"
        )
    flag = credentials_flag(location)
    return (
        f"`magisterium-async login{flag}` replaces it (keeping it aside), "
        f"`magisterium-async logout{flag}` removes it"
    )


def location_text(location: Location) -> str:
    """``location`` for a message: the path, or the URL with its password masked."""
    return str(location) if isinstance(location, Path) else describe(location)


def lock_path(path: Path) -> Path:
    """The lock file beside ``path`` that serialises refreshes between processes."""
    return path.with_name(path.name + ".lock")


def _check_private(path: Path, mode: int) -> None:
    if os.name == "nt":  # POSIX permission bits mean nothing there; the ACLs decide
        return
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise CredentialsError(
            f"refusing the credentials file {path}: group or others can read or write it "
            f"(mode {stat.S_IMODE(mode):04o}); make it private with: chmod 600 {path}",
            path=str(path),
        )


def encode_credentials(credentials: Credentials) -> bytes:
    """The stored form of ``credentials``: indented JSON (it holds the tokens)."""
    return msgspec.json.format(_ENCODER.encode(credentials), indent=2) + b"\n"


def decode_credentials(data: bytes, where: str, location: Location) -> Credentials:
    """Credentials from their stored form; :class:`UnreadableCredentialsError` naming
    ``where`` (and the commands that get out, for ``location``) when ``data`` is not a
    credentials document of this version."""

    # What is not a credentials file at all, at a path the user named, may be theirs.
    named = isinstance(location, Path) and location != default_credentials_path()

    def unreadable(what: str, *, foreign: bool = False) -> UnreadableCredentialsError:
        way = way_out(location, foreign=foreign)
        return UnreadableCredentialsError(f"{where} {what}; {way}", path=where, foreign=foreign)

    if len(data) > _MAX_SIZE:
        raise unreadable("is too large to be a credentials file", foreign=named)
    try:
        credentials = _DECODER.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        # The decoder's message names a field, never a value: no token leaks through it.
        what = f"is not a magisterium-async credentials file ({exc})"
        raise unreadable(what, foreign=named and not _versioned(data)) from None
    if credentials.version != _VERSION:
        raise unreadable(f"was written by another version (format {credentials.version})")
    return credentials


def load_credentials(path: Path) -> Credentials | None:
    """The credentials stored at ``path``; ``None`` when there is no file.

    Raises :class:`CredentialsError` when the file is readable or writable by group or
    others (nothing is sent with such a file), cannot be read, or is not a regular file,
    and :class:`UnreadableCredentialsError` when it is not a credentials file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO: no hang
    except FileNotFoundError:
        return None
    except IsADirectoryError:  # Windows: a directory cannot be opened at all
        raise _not_a_file(path, "a directory") from None
    except OSError as exc:
        raise CredentialsError(
            f"cannot read the credentials file {path}: {exc.strerror}; check who owns it "
            f"(ls -l {shlex.quote(str(path))}), or sign in elsewhere with "
            "`magisterium-async login --credentials PATH`",
            path=str(path),
        ) from None
    try:
        # Looked at before it is wrapped: a directory opens, but cannot be read as a file.
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _not_a_file(path, "a directory" if stat.S_ISDIR(info.st_mode) else None)
        _check_private(path, info.st_mode)
        with os.fdopen(fd, "rb") as file:
            fd = -1
            data = file.read(_MAX_SIZE + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if not data.strip():  # an empty file (``mktemp``, say): no sign-in yet, nothing to keep
        return None
    return decode_credentials(data, str(path), path)


def _not_a_file(path: Path, what: str | None) -> CredentialsError:
    quoted = shlex.quote(str(path))
    remove = f"rmdir {quoted}" if what == "a directory" else f"rm {quoted}"
    return CredentialsError(
        f"the credentials path {path} is {what or 'not a regular file'}, not a credentials "
        f"file: remove it ({remove}) or keep the sign-in elsewhere with --credentials PATH",
        path=str(path),
    )


def set_aside(path: Path, now: float | None = None) -> Path:
    """Move the unreadable credentials file at ``path`` out of the way, beside it as
    ``<name>.corrupt-<UTC time>``; where it went."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    serial = 1
    while aside.exists():
        serial += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{serial}")
    try:
        os.replace(path, aside)
    except OSError as exc:
        raise CredentialsError(
            f"cannot move the unreadable credentials file {path} aside: "
            f"{exc.strerror or exc}; remove it (rm {shlex.quote(str(path))}) and sign in again",
            path=str(path),
        ) from None
    return aside


def _fsync_dir(directory: Path) -> None:
    if os.name == "nt":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def save_credentials(path: Path, credentials: Credentials) -> None:
    """Write ``credentials`` to ``path`` atomically, mode 0600 from the first byte.

    The parent directory is created (0700) if missing. A reader sees the old file or the
    new one, never a part of either.
    """
    directory = path.parent
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        temp = directory / f".{path.name}.{secrets.token_hex(8)}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(encode_credentials(credentials))
                file.flush()
                os.fsync(file.fileno())
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
    except OSError as exc:
        raise CredentialsError(
            f"cannot write the credentials file {path}: {exc.strerror or exc}; check the "
            f"permissions of {directory}, or keep the sign-in elsewhere with "
            "--credentials PATH",
            path=str(path),
        ) from None
    _fsync_dir(directory)


def delete_credentials(path: Path) -> bool:
    """Remove the credentials file (and its lock file); whether there was one."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(lock_path(path))
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise CredentialsError(
            f"cannot delete the credentials file {path}: {exc.strerror}; check the "
            f"permissions of {path.parent}",
            path=str(path),
        ) from None
    return True
