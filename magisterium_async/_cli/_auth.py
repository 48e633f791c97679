"""``login``, ``logout`` and ``auth status``: signing in with the user's account.

The flows are the library's (:mod:`magisterium_async._auth`); these commands only parse and
print. What they say goes to stderr, the status to stdout; none prints a token, nor the
password of a Redis URL given as ``--credentials``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import shlex
import sys
import threading
import time
import webbrowser
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from magisterium_async._cli._client import _check_redis as check_redis_named
from magisterium_async._cli._command import Command, Group, Invocation
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._cli._output import at_clock, duration
from magisterium_async._config import CREDENTIALS_ENV, TOKEN_ENV, token_from_env

if TYPE_CHECKING:
    from magisterium_async._auth import Credentials

__all__ = ["COMMANDS"]


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _open_browser(url: str) -> None:
    with contextlib.suppress(Exception):  # no browser is no error: the URL is shown
        webbrowser.open(url)


async def _typed_lines(fd: int) -> AsyncIterator[str]:
    """The lines typed on ``fd`` (stdin), read by a daemon thread: one still waiting on a
    terminal when the browser's redirect ends the login must not keep the process alive."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()

    def read() -> None:
        # Its own reader of the descriptor: never sys.stdin's, whose lock the interpreter
        # takes as it shuts down. The loop may have closed meanwhile: nobody waits then.
        with contextlib.suppress(Exception), open(fd, "rb", closefd=False) as typed:
            for line in typed:
                loop.call_soon_threadsafe(lines.put_nowait, line.decode("utf-8", "replace"))
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(lines.put_nowait, None)

    threading.Thread(target=read, name="magisterium-login-stdin", daemon=True).start()
    while (line := await lines.get()) is not None:
        yield line


def _show(where: str, stored: Credentials, invocation: Invocation) -> None:
    """The sign-in, never a token: lines for people, or one JSON document."""
    refreshable = stored.refresh_token is not None
    expires, left, when = None, 0.0, "not stated by the server"
    if stored.expires_at is not None:
        expires = dt.datetime.fromtimestamp(int(stored.expires_at), dt.timezone.utc).isoformat()
        left = stored.expires_at - time.time()
        renewed = "; renewed at the next call" if refreshable else ""
        when = f"{expires} ({f'in {duration(left)}' if left > 0 else 'expired' + renewed})"
    lines = [
        f"signed in to {stored.origin}",
        f"  issuer   {stored.issuer}",
        f"  expires  {when}",
        f"  scopes   {' '.join(stored.scopes) or '(none named)'}",
        f"  refresh  {'yes' if refreshable else 'no: sign in again when it expires'}",
        f"  client   {stored.client_id}",
        f"  stored   {where}",
    ]
    status = {
        "path": where,
        "origin": stored.origin,
        "issuer": stored.issuer,
        "client_id": stored.client_id,
        "expires_at": expires,
        "expired": expires is not None and left <= 0,
        "scopes": stored.scopes,
        "refreshable": refreshable,
    }
    invocation.output.result(status, lambda: print("\n".join(lines)))


async def _check_redis(args: argparse.Namespace) -> None:
    """A Redis that keeps the sign-in is asked once before anything is done, as in every
    command: a refusal (the password, an ACL, TLS) is exit 2."""
    await check_redis_named((args.credentials, "--credentials", CREDENTIALS_ENV))


def _base_url_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--base-url",
        metavar="URL",
        default=argparse.SUPPRESS,
        help="the A2A endpoint; its origin serves the sign-in, and names it in a Redis "
        "store (default: $MAGISTERIUM_BASE_URL, then the service)",
    )


def _login_arguments(parser: argparse.ArgumentParser) -> None:
    _base_url_argument(parser)
    parser.add_argument(
        "--no-browser",
        action="store_true",
        help="do not open a browser: open the printed URL yourself (on a host without one, "
        "paste back the URL the browser was sent to)",
    )


async def _login(invocation: Invocation) -> int:
    from magisterium_async._auth import DEFAULT_LOGIN_TIMEOUT, login

    args = invocation.args
    await _check_redis(args)
    try:
        stdin = sys.stdin.fileno() if sys.stdin is not None else None
    except (OSError, ValueError):  # no stdin to paste into (closed, or not a file)
        stdin = None

    def show_url(url: str) -> None:
        until, within = at_clock(DEFAULT_LOGIN_TIMEOUT), duration(DEFAULT_LOGIN_TIMEOUT)
        waiting = f"Waiting for the browser until {until} ({within})."
        if stdin is not None:
            waiting += (
                " If it runs on another machine, paste here the URL it was redirected to, "
                "then press Enter."
            )
        _say(f"Open this URL in a browser to sign in:\n{url}\n{waiting}")
        if not args.no_browser:
            # Not awaited: a console browser (lynx) runs until the person quits it, and the
            # redirect may well arrive first.
            threading.Thread(target=_open_browser, args=(url,), daemon=True).start()

    where, stored = await login(
        args.base_url,
        args.credentials,
        show_url=show_url,
        say=_say,
        pasted=None if stdin is None else _typed_lines(stdin),
    )
    _say(f"Signed in to {stored.issuer}; the credentials are in {where}")
    if invocation.output.json:
        _show(where, stored, invocation)
    return ExitCode.OK


async def _logout(invocation: Invocation) -> int:
    from magisterium_async._auth import logout

    await _check_redis(invocation.args)
    _say(await logout(invocation.args.credentials, invocation.args.base_url))
    return ExitCode.OK


async def _status(invocation: Invocation) -> int:
    from magisterium_async._auth import auth_status

    args = invocation.args
    await _check_redis(args)
    where, stored = await auth_status(args.credentials, args.base_url)
    if stored is None:
        named = where if "://" in where else shlex.quote(where)  # a URL is masked already
        again = "" if args.credentials is None else f" --credentials {named}"
        raise CliError(
            f"not signed in: no credentials at {where}; run `magisterium-async login{again}`",
            ExitCode.AUTH,
        )
    _show(where, stored, invocation)
    if token_from_env():
        invocation.output.note(f"note: {TOKEN_ENV} is set: commands use it, not these credentials")
    return ExitCode.OK


COMMANDS = (
    Command(
        "login",
        "sign in with your account (OAuth in a browser); the sign-in is kept and renewed",
        _login,
        _login_arguments,
        connects=False,
    ),
    Command(
        "logout",
        "revoke the stored sign-in and delete it",
        _logout,
        _base_url_argument,
        connects=False,
    ),
    Group("auth", "the stored sign-in"),
    Command(
        "auth status",
        "issuer, expiry and scopes of the stored sign-in (never a token); sends nothing",
        _status,
        _base_url_argument,
        connects=False,
    ),
)
