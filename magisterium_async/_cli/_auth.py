"""``login``, ``logout`` and ``auth status``: signing in with the user's account.

The flows are the library's (:mod:`magisterium_async._auth`); these commands only parse and
print. What they say goes to stderr, the status to stdout; none prints a token, nor the
password of a Redis URL given as ``--credentials``. A Redis that keeps the sign-in is asked
once before anything is done, as in every command: a refusal is exit 2.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import shlex
import sys
import threading
import time
import webbrowser
from collections.abc import Iterator
from typing import TYPE_CHECKING

from magisterium_async._cli._client import check_redis
from magisterium_async._cli._command import Command
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._cli._output import Output, at_clock, duration
from magisterium_async._config import CREDENTIALS_ENV, TOKEN_ENV, from_env
from magisterium_async._files import read_in_thread

if TYPE_CHECKING:
    from magisterium_async._auth import Credentials

__all__ = ["COMMANDS"]


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _open_browser(url: str) -> None:
    with contextlib.suppress(Exception):  # no browser is no error: the URL is shown
        webbrowser.open(url)


def _arguments(parser: argparse.ArgumentParser, login: bool = False) -> None:
    parser.add_argument(
        "--base-url",
        metavar="URL",
        default=argparse.SUPPRESS,
        help="the A2A endpoint; its origin serves the sign-in, and names it in a Redis "
        "store (default: $MAGISTERIUM_BASE_URL, then the service)",
    )
    if login:
        parser.add_argument(
            "--no-browser",
            action="store_true",
            help="do not open a browser: open the printed URL yourself (on a host without "
            "one, paste back the URL the browser was sent to)",
        )


async def _login(args: argparse.Namespace, output: Output) -> int:
    from magisterium_async._auth import DEFAULT_LOGIN_TIMEOUT, login

    await check_redis((args.credentials, "--credentials", CREDENTIALS_ENV))
    try:
        stdin = sys.stdin.fileno() if sys.stdin is not None else None
    except (OSError, ValueError):  # no stdin to paste into (closed, or not a file)
        stdin = None

    def typed() -> Iterator[str]:
        # Its own reader of the descriptor: never sys.stdin's, whose lock the interpreter
        # takes as it shuts down.
        assert stdin is not None
        with contextlib.suppress(OSError, ValueError), open(stdin, "rb", closefd=False) as lines:
            yield from (line.decode("utf-8", "replace") for line in lines)

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
        pasted=None if stdin is None else read_in_thread(typed, "magisterium-login-stdin"),
    )
    _say(f"Signed in to {stored.issuer}; the credentials are in {where}")
    if output.json:
        output.result(_status_of(where, stored), lambda: None)
    return ExitCode.OK


async def _logout(args: argparse.Namespace, output: Output) -> int:
    from magisterium_async._auth import logout

    await check_redis((args.credentials, "--credentials", CREDENTIALS_ENV))
    _say(await logout(args.credentials, args.base_url))
    return ExitCode.OK


def _status_of(where: str, stored: Credentials) -> dict[str, object]:
    """The sign-in's status as ``--json`` prints it: never a token."""
    expires = None
    if stored.expires_at is not None:
        expires = dt.datetime.fromtimestamp(int(stored.expires_at), dt.timezone.utc).isoformat()
    return {
        "path": where,
        "origin": stored.origin,
        "issuer": stored.issuer,
        "client_id": stored.client_id,
        "expires_at": expires,
        "expired": stored.expires_at is not None and stored.expires_at <= time.time(),
        "scopes": stored.scopes,
        "refreshable": stored.refresh_token is not None,
    }


async def _status(args: argparse.Namespace, output: Output) -> int:
    from magisterium_async._auth import auth_status

    await check_redis((args.credentials, "--credentials", CREDENTIALS_ENV))
    where, stored = await auth_status(args.credentials, args.base_url)
    if stored is None:
        named = where if "://" in where else shlex.quote(where)  # a URL is masked already
        again = "" if args.credentials is None else f" --credentials {named}"
        raise CliError(
            f"not signed in: no credentials at {where}; run `magisterium-async login{again}`",
            ExitCode.AUTH,
        )
    status = _status_of(where, stored)
    when = "not stated by the server"
    if stored.expires_at is not None:
        left = stored.expires_at - time.time()
        renewed = "; renewed at the next call" if status["refreshable"] else ""
        when = f"in {duration(left)}" if left > 0 else f"expired{renewed}"
        when = f"{status['expires_at']} ({when})"
    lines = [
        f"signed in to {stored.origin}",
        f"  issuer   {stored.issuer}",
        f"  expires  {when}",
        f"  scopes   {' '.join(stored.scopes) or '(none named)'}",
        f"  refresh  {'yes' if status['refreshable'] else 'no: sign in again when it expires'}",
        f"  client   {stored.client_id}",
        f"  stored   {where}",
    ]
    output.result(status, lambda: print("\n".join(lines)))
    if from_env(TOKEN_ENV):
        output.note(f"note: {TOKEN_ENV} is set: commands use it, not these credentials")
    return ExitCode.OK


COMMANDS = (
    Command(
        "login",
        "sign in with your account (OAuth in a browser); the sign-in is kept and renewed",
        _login,
        lambda parser: _arguments(parser, login=True),
        connects=False,
    ),
    Command(
        "logout", "revoke the stored sign-in and delete it", _logout, _arguments, connects=False
    ),
    Command(
        "auth status",
        "issuer, expiry and scopes of the stored sign-in (never a token); sends nothing",
        _status,
        _arguments,
        connects=False,
    ),
)
