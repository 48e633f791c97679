"""``login``, ``logout`` and ``auth status``: signing in with the user's account.

The flows are the library's (:mod:`.._auth._login`); these commands only parse and print. What
they say goes to stderr, the status to stdout; none prints a token, nor the password of a
Redis URL given as ``--credentials``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import TYPE_CHECKING

from magisterium_async._auth._credentials import credentials_location, location_text
from magisterium_async._cli._command import Command, Group, Invocation
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._cli._output import Output
from magisterium_async._config import TOKEN_ENV, token_from_env

if TYPE_CHECKING:  # the sign-in flows (and aiohttp) load when a command runs
    from magisterium_async._auth._login import AuthStatus

__all__ = ["COMMANDS"]


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _expiry(status: AuthStatus) -> str:
    if status.expires_at is None:
        return "not stated by the server"
    left = (status.expires_at - dt.datetime.now(dt.timezone.utc)).total_seconds()
    if left > 0:
        how = f"in {_duration(left)}"
    else:
        how = "expired; renewed at the next call" if status.refreshable else "expired"
    return f"{status.expires_at.isoformat()} ({how})"


def _show(status: AuthStatus, output: Output) -> None:
    def lines() -> None:
        rows = [
            ("issuer", status.issuer),
            ("expires", _expiry(status)),
            ("scopes", " ".join(status.scopes) or "(none named)"),
            ("refresh", "yes" if status.refreshable else "no: sign in again when it expires"),
            ("client", status.client_id),
            ("stored", status.where),
        ]
        print(f"signed in to {status.origin}")
        for name, value in rows:
            print(f"  {name:<8} {value}")

    output.result(status.as_json(), lines)


def _stdin_fd() -> int | None:
    try:
        return sys.stdin.fileno() if sys.stdin is not None else None
    except (OSError, ValueError):
        return None


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
    from magisterium_async._auth._login import auth_status, login, stdin_lines

    args = invocation.args
    fd = _stdin_fd()
    location, _ = await login(
        args.base_url,
        args.credentials,
        open_browser=not args.no_browser,
        pasted=stdin_lines(fd) if fd is not None else None,
        say=_say,
    )
    status = await auth_status(location, args.base_url)
    assert status is not None
    _say(f"Signed in to {status.issuer}; the credentials are in {status.where}")
    if invocation.output.json:
        _show(status, invocation.output)
    return ExitCode.OK


async def _logout(invocation: Invocation) -> int:
    from magisterium_async._auth._login import logout

    args = invocation.args
    result = await logout(args.credentials, args.base_url)
    if not result.removed:
        _say(f"not signed in (no credentials at {result.where})")
        return ExitCode.OK
    if result.unreadable:
        _say(
            f"Signed out: {result.where} held no readable sign-in, so nothing was revoked; "
            "deleted it"
        )
        return ExitCode.OK
    if result.revoked is False:
        raise CliError(
            f"deleted {result.where}, but the server could not revoke the tokens: "
            f"{result.revoke_error}",
            ExitCode.ERROR,
        )
    how = "the tokens were revoked" if result.revoked else "the server offers no revocation"
    _say(f"Signed out: {how}; deleted {result.where}")
    return ExitCode.OK


async def _status(invocation: Invocation) -> int:
    from magisterium_async._auth._login import auth_status

    args = invocation.args
    status = await auth_status(args.credentials, args.base_url)
    if status is None:
        where = location_text(credentials_location(args.credentials))
        again = f" --credentials {where}" if args.credentials is not None else ""
        raise CliError(
            f"not signed in: no credentials at {where}; run `magisterium-async login{again}`",
            ExitCode.AUTH,
        )
    _show(status, invocation.output)
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
