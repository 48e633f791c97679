"""The ``emulator`` command: the offline emulator of :mod:`magisterium_async.testing` (imported
only when the command runs), served until Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import TYPE_CHECKING

from magisterium_async._cli._client import corpus
from magisterium_async._cli._command import Command, number
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._cli._output import Output, duration, plural

if TYPE_CHECKING:
    from magisterium_async.testing import EmulatorConfig

__all__ = ["COMMAND"]

_SECONDS = number(float, 0)


def _token(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty or blank")
    return text


def _latency(text: str) -> float | tuple[float, float]:
    """``--latency``: seconds, or a range ``LOW,HIGH``."""
    parts: list[float] = [_SECONDS(part) for part in text.split(",")]
    if len(parts) == 1:
        return parts[0]
    if len(parts) > 2 or parts[0] > parts[1]:
        raise argparse.ArgumentTypeError(
            f"expected S or LOW,HIGH with LOW <= HIGH, got {text[:50]}"
        )
    return (parts[0], parts[1])


def _arguments(parser: argparse.ArgumentParser) -> None:
    """The ``emulator`` command's own flags, in groups."""
    add = parser.add_argument
    add(
        "--synthetic",
        type=number(int, 0, above=True),
        metavar="N",
        default=argparse.SUPPRESS,
        help="serve N synthetic documents instead of the bundled corpus",
    )
    where = parser.add_argument_group("where").add_argument
    where("--host", default="127.0.0.1", help="interface to bind (default: %(default)s)")
    where(
        "--port",
        type=number(int, 0, 65535),
        default=8765,
        help="port; 0 picks a free one (default: %(default)s)",
    )
    where(
        "--token",
        type=_token,
        default="emu-token",
        help="the bearer token it accepts (default: %(default)s)",
    )
    where(
        "--protocol",
        choices=("0.2.6", "0.3", "1.0"),
        default="0.2.6",
        help="the A2A dialect it speaks, card included (default: %(default)s, the service's)",
    )
    where(
        "--token-lifetime",
        type=number(float, 0, above=True),
        default=3600.0,
        metavar="SECONDS",
        help="seconds an access token its OAuth server issues lives (default: 3600)",
    )
    limits = parser.add_argument_group("rate limits (per token; default: none)").add_argument
    limits(
        "--limits",
        action="store_true",
        help="enforce the Pro plan's quota: 15 requests a minute, 2 for catholic_qa",
    )
    for flag, dest, metavar, help in (
        ("--default-limit", "default", "N", "requests per period for all but catholic_qa (15)"),
        ("--expensive-limit", "expensive", "N", "catholic_qa requests per period (2)"),
        ("--period", "period", "SECONDS", "the period's length (60)"),
    ):
        limits(
            flag,
            dest=dest,
            type=number(float, 0, above=True),
            metavar=metavar,
            help=f"{help}; implies --limits",
        )
    limits(
        "--window",
        dest="algorithm",
        choices=("fixed", "sliding", "token_bucket"),
        help="how a period is counted (default: sliding, the strictest); implies --limits",
    )
    faults = parser.add_argument_group("latency and faults (random, repeatable with --seed)")
    faults.add_argument(
        "--latency",
        type=_latency,
        default=0.0,
        metavar="S|LOW,HIGH",
        help="seconds added to every answer, fixed or drawn from a range",
    )
    faults.add_argument(
        "--qa-latency",
        type=_SECONDS,
        default=0.0,
        metavar="S",
        help="seconds catholic_qa takes to answer",
    )
    for flag, help in (
        ("--error-rate", "share of HTTP 502/503 answers"),
        ("--drop-rate", "share of connections closed without an answer"),
        ("--rate-limit-rate", "share of 429s whatever the quota says (as MCP calls cause)"),
    ):
        faults.add_argument(flag, type=number(float, 0, 1), default=0.0, metavar="P", help=help)
    faults.add_argument(
        "--seed", type=number(int), default=0, help="seed of faults and --synthetic"
    )


def _config(args: argparse.Namespace) -> EmulatorConfig:
    """The emulator the flags describe. Flags right alone and wrong together (a limit under
    1 a period, which only a token bucket keeps; fault rates over 1) are the config's
    ``ValueError``, which main() says in the flags' words (:func:`._errors.cli_words`)."""
    from magisterium_async.testing import EmulatorConfig, FaultConfig, RateLimitConfig

    given = vars(args)
    limits = {k: given[k] for k in ("default", "expensive", "period", "algorithm") if given[k]}
    rates = {k: given[k] for k in ("error_rate", "drop_rate", "rate_limit_rate")}
    return EmulatorConfig(
        tokens={args.token: "pro"},
        rate_limits=RateLimitConfig(**limits) if args.limits or limits else None,
        faults=FaultConfig(seed=args.seed, latency=args.latency, **rates)
        if any(rates.values()) or args.latency
        else None,
        qa_latency=args.qa_latency,
        corpus=corpus(args.synthetic, args.seed),
        token_lifetime=args.token_lifetime,
        protocol=args.protocol,
    )


async def _serve(args: argparse.Namespace, output: Output) -> int:
    """Run the emulator until Ctrl-C or SIGTERM; exits 0 then. It prints how to use it:
    the ``MAGISTERIUM_QUOTA`` it prints is the quota it keeps, so a client told it paces
    itself to it (no 429 to wait out, no wait the server would not ask)."""
    from magisterium_async.testing import Emulator, SyntheticCorpus

    config = _config(args)
    try:
        emulator = await Emulator(config, host=args.host, port=args.port).start()
    except OSError as exc:
        # The address the user named cannot be had (taken, or no such host): a usage error.
        raise CliError(
            f"cannot listen on --host {args.host} --port {args.port}: {exc.strerror or exc}",
        ) from None
    try:
        limits, faults = config.rate_limits, config.faults
        quota = "unlimited" if limits is None else f"{limits.default:g}/{limits.expensive:g}"
        quota += "" if limits is None else f"/{limits.period:g}"
        record = {
            "base_url": emulator.base_url,
            "token": emulator.token,
            "quota": quota,
            "port": emulator.port,
            "protocol": config.protocol,
            "card_url": emulator.card_url,
            "faults": None
            if faults is None
            else {**dict(faults.rates()), "latency": faults.latency, "seed": faults.seed},
        }
        kind = "synthetic" if isinstance(config.corpus, SyntheticCorpus) else "bundled"
        said = (
            "none (the service's Pro quota, 15/2 a minute, on both sides: restart with --limits)"
            if limits is None
            else f"{limits.default:g} default / {limits.expensive:g} expensive requests "
            f"per {limits.period:g} s ({limits.algorithm} window)"
        )
        lines = [
            f"Magisterium emulator listening on {emulator.origin}",
            f"  protocol: A2A {config.protocol} (agent card: {emulator.card_url})",
            f"  corpus: {kind}, {plural(len(config.corpus or ()), 'document')}",
            f"  rate limits: {said}",
            f"  faults: {'none' if faults is None else faults.describe()}",
            f"  OAuth: {emulator.oauth_metadata_url} "
            f"(tokens live {duration(config.token_lifetime)})",
            "Point the client or the command line at it with:",
            # The emulator's own demo token, not a user's secret: printing it is the point.
            f"  export MAGISTERIUM_BASE_URL={emulator.base_url} MAGISTERIUM_TOKEN={emulator.token}"
            f" MAGISTERIUM_QUOTA={quota}",
            "Serving until Ctrl-C.",
        ]
        output.result(record, lambda: print("\n".join(lines), flush=True))
        with contextlib.suppress(asyncio.CancelledError):  # Ctrl-C or SIGTERM: a clean stop
            await asyncio.Event().wait()
    finally:
        await emulator.stop()
    output.note("Emulator stopped.")
    return ExitCode.OK


COMMAND = Command(
    "emulator",
    "serve the offline emulator until Ctrl-C (prints how to use it)",
    _serve,
    _arguments,
    connects=False,
)
