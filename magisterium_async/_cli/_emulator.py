"""The ``emulator`` command: the offline emulator served until Ctrl-C.

The emulator lives in :mod:`magisterium_async.testing`; it is imported only when the
command runs. The in-process one behind ``--emulator`` is :mod:`._local_emulator`'s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import signal
from typing import TYPE_CHECKING

from magisterium_async._cli._command import Command, Invocation
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._cli._local_emulator import corpus
from magisterium_async._cli._options import positive
from magisterium_async._cli._output import Output, plural

if TYPE_CHECKING:
    from magisterium_async.testing import Emulator, EmulatorConfig

__all__ = ["COMMAND"]


def _rate(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text}")
    return value


def _token(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty or blank")
    return text


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 0 to 65535, got {text}")
    return value


def _latency(text: str) -> float | tuple[float, float]:
    low, sep, high = text.partition(",")
    if not sep:
        return _seconds(low)
    return (_seconds(low), _seconds(high))


def _arguments(parser: argparse.ArgumentParser) -> None:
    """The ``emulator`` command's own flags, in groups."""
    parser.add_argument(
        "--synthetic",
        type=positive(int),
        metavar="N",
        default=argparse.SUPPRESS,
        help="serve N synthetic documents instead of the bundled corpus",
    )
    where = parser.add_argument_group("where")
    where.add_argument(
        "--host", default="127.0.0.1", help="interface to bind (default: %(default)s)"
    )
    where.add_argument(
        "--port", type=_port, default=8765, help="port; 0 picks a free one (default: %(default)s)"
    )
    where.add_argument(
        "--token",
        type=_token,
        default="emu-token",
        help="the bearer token it accepts (default: %(default)s)",
    )
    where.add_argument(
        "--protocol",
        choices=("0.2.6", "0.3", "1.0"),
        default="0.2.6",
        help="the A2A dialect it speaks, card included (default: %(default)s, the service's)",
    )
    oauth = parser.add_argument_group("OAuth (the emulator's authorization server)")
    oauth.add_argument(
        "--token-lifetime",
        type=positive(float),
        default=3600.0,
        metavar="SECONDS",
        help="seconds an access token it issues lives (default: 3600)",
    )
    limits = parser.add_argument_group(
        "rate limits (per token; default: none, so examples run at once)"
    )
    limits.add_argument(
        "--limits",
        action="store_true",
        help="enforce the Pro plan's quota: 15 requests a minute, 2 for catholic_qa",
    )
    limits.add_argument(
        "--default-limit",
        type=positive(float),
        default=None,
        metavar="N",
        help="requests per period for every skill but catholic_qa (implies --limits; default: 15)",
    )
    limits.add_argument(
        "--expensive-limit",
        type=positive(float),
        default=None,
        metavar="N",
        help="catholic_qa requests per period (implies --limits; default: 2)",
    )
    limits.add_argument(
        "--period",
        type=positive(float),
        default=None,
        metavar="SECONDS",
        help="(implies --limits; default: 60)",
    )
    limits.add_argument(
        "--window",
        choices=("fixed", "sliding", "token_bucket"),
        default=None,
        help="how a period is counted (implies --limits; default: sliding, the strictest)",
    )
    limits.add_argument("--no-limits", action="store_true", help="lift both limits (the default)")
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
        type=_seconds,
        default=0.0,
        metavar="S",
        help="seconds catholic_qa takes to answer",
    )
    faults.add_argument(
        "--error-rate", type=_rate, default=0.0, metavar="P", help="share of HTTP 502/503 answers"
    )
    faults.add_argument(
        "--drop-rate",
        type=_rate,
        default=0.0,
        metavar="P",
        help="share of connections closed without an answer",
    )
    faults.add_argument(
        "--rate-limit-rate",
        type=_rate,
        default=0.0,
        metavar="P",
        help="share of 429s whatever the quota says (as the user's MCP calls would cause)",
    )
    faults.add_argument("--seed", type=int, default=0, help="seed of faults and --synthetic")


def _config(args: argparse.Namespace) -> EmulatorConfig:
    from magisterium_async.testing import EmulatorConfig, FaultConfig, RateLimitConfig

    tuned = (args.default_limit, args.expensive_limit, args.period, args.window)
    limited = args.limits or any(value is not None for value in tuned)
    if limited and args.no_limits:
        raise CliError("--no-limits contradicts --limits and the limit flags", ExitCode.USAGE)
    try:
        limits = None
        if limited:
            limits = RateLimitConfig(
                15.0 if args.default_limit is None else args.default_limit,
                2.0 if args.expensive_limit is None else args.expensive_limit,
                period=60.0 if args.period is None else args.period,
                algorithm=args.window or "sliding",
            )
        rates = (args.error_rate, args.drop_rate, args.rate_limit_rate)
        faults = None
        if any(rates) or args.latency:
            faults = FaultConfig(
                seed=args.seed,
                latency=args.latency,
                error_rate=args.error_rate,
                drop_rate=args.drop_rate,
                rate_limit_rate=args.rate_limit_rate,
            )
        return EmulatorConfig(
            tokens={args.token: "pro"},
            rate_limits=limits,
            faults=faults,
            qa_latency=args.qa_latency,
            corpus=corpus(args.synthetic, args.seed),
            token_lifetime=args.token_lifetime,
            protocol=args.protocol,
        )
    except (ValueError, TypeError) as exc:
        raise CliError(str(exc), ExitCode.USAGE) from None


def _describe_limits(config: EmulatorConfig) -> str:
    limits = config.rate_limits
    if limits is None:
        return "none"
    return (
        f"{limits.default:g} default / {limits.expensive:g} expensive requests "
        f"per {limits.period:g} s ({limits.algorithm} window)"
    )


def _quota(config: EmulatorConfig) -> str:
    """The emulator's limits as ``$MAGISTERIUM_QUOTA`` (``--quota``) says them, so a client
    told it paces itself to them: no 429 to wait out, and no wait the server would not ask."""
    limits = config.rate_limits
    if limits is None:
        return "unlimited"
    return f"{limits.default:g}/{limits.expensive:g}/{limits.period:g}"


def _faults(config: EmulatorConfig) -> dict[str, object] | None:
    """The faults it injects, as ``--json`` says them (``None``: none)."""
    faults = config.faults
    if faults is None or faults.describe() == "none":
        return None
    record: dict[str, object] = dict(faults.rates())
    record.update(latency=faults.latency, seed=faults.seed)
    return record


def _announce(emulator: Emulator, output: Output) -> None:
    line = {
        "base_url": emulator.base_url,
        "token": emulator.token,
        "quota": _quota(emulator.config),
        "port": emulator.port,
        "protocol": emulator.config.protocol,
        "card_url": emulator.card_url,
        "faults": _faults(emulator.config),
    }
    output.result(line, lambda: _instructions(emulator))


def _instructions(emulator: Emulator) -> None:
    from magisterium_async.testing import SyntheticCorpus

    config = emulator.config
    corpus = config.corpus

    kind = "synthetic" if isinstance(corpus, SyntheticCorpus) else "bundled"
    size = len(corpus) if corpus is not None else 0
    print(f"Magisterium emulator listening on {emulator.origin}")
    print(f"  protocol: A2A {config.protocol} (agent card: {emulator.card_url})")
    print(f"  corpus: {kind}, {plural(size, 'document')}")
    print(f"  rate limits: {_describe_limits(config)}")
    print(f"  faults: {'none' if config.faults is None else config.faults.describe()}")
    print(f"  OAuth: {emulator.oauth_metadata_url} (tokens live {config.token_lifetime:g} s)")
    print("Point the client or the command line at it with:")
    # The emulator's own demo token, not a user's secret: printing it is the point.
    print(
        f"  export MAGISTERIUM_BASE_URL={emulator.base_url} MAGISTERIUM_TOKEN={emulator.token}"
        f" MAGISTERIUM_QUOTA={_quota(config)}"
    )
    if config.rate_limits is None:
        print("  (the service's Pro quota, 15/2 a minute, on both sides: restart with --limits)")
    print("Serving until Ctrl-C.", flush=True)


async def _serve(invocation: Invocation) -> int:
    """Run the emulator until Ctrl-C or SIGTERM; exits 0 then."""
    from magisterium_async.testing import Emulator

    args = invocation.args
    config = _config(args)
    try:
        emulator = await Emulator(config, host=args.host, port=args.port).start()
    except OSError as exc:
        # The address the user named cannot be had (taken, or no such host): a usage error.
        raise CliError(
            f"cannot listen on --host {args.host} --port {args.port}: {exc.strerror or exc}",
            ExitCode.USAGE,
        ) from None
    try:
        _announce(emulator, invocation.output)
        stop = asyncio.Event()
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not on Windows
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        with contextlib.suppress(asyncio.CancelledError):
            await stop.wait()
    finally:
        await emulator.stop()
    invocation.output.note("Emulator stopped.")
    return ExitCode.OK


COMMAND = Command(
    "emulator",
    "serve the offline emulator until Ctrl-C (prints how to use it)",
    _serve,
    _arguments,
    connects=False,
)
