"""Fault injection: one-off scripted faults, and random ones drawn under a seed.

A :class:`Fault` is what one request meets instead of (or on top of) normal service:

=================  =============================================================  =========
name               what the client sees                                           service
=================  =============================================================  =========
``latency``        the normal answer, ``seconds`` late                            runs
``http_502`` …     that HTTP status with an HTML (or given) body                  skipped
``drop``           the connection closed without an answer                        skipped¹
``truncated``      HTTP 200, ``Content-Length`` of the full body, half of it,     runs
                   then the connection closes
``malformed``      HTTP 200, ``application/json``, a body that is not JSON         runs
``rate_limit``     HTTP 429, -32003 with ``retryAfter``                           skipped
``jsonrpc_error``  HTTP 200 with that JSON-RPC error (-32603 by default)          skipped
``task_failed``    a ``failed`` task whose reason is ``reason``                   runs
``none``           normal service (a placeholder in a script)                     runs
=================  =============================================================  =========

"skipped" faults happen in front of the service: no quota is spent and no task made.
"runs" faults let the request through (quota spent, task stored) and then alter the
answer. ¹ ``Fault.drop(processed=True)`` runs the request and loses the answer.
"""

from __future__ import annotations

import random
import threading
from collections import deque
from dataclasses import dataclass
from typing import Literal

from magisterium_async.testing.emulator._config import FaultConfig

__all__ = ["Fault", "FaultInjector", "FaultKind"]

FaultKind = Literal[
    "none",
    "latency",
    "http_error",
    "drop",
    "truncated",
    "malformed",
    "rate_limit",
    "jsonrpc_error",
    "task_failed",
]

_HTML = (
    "<html>\r\n<head><title>{status} {reason}</title></head>\r\n<body>\r\n"
    "<center><h1>{status} {reason}</h1></center>\r\n<hr><center>nginx</center>\r\n"
    "</body>\r\n</html>\r\n"
)
_REASONS = {500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}
_REASONS |= {504: "Gateway Timeout"}


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault; build it with a class method (``Fault.http_502()``, ``Fault.drop()``, …)."""

    kind: FaultKind
    status: int = 200
    body: bytes | None = None
    content_type: str = "text/html"
    retry_after: float | None = None
    seconds: float = 0.0
    code: int = -32603
    message: str = "Internal error"
    reason: str = "Simulated skill failure"
    processed: bool = False

    @property
    def name(self) -> str:
        """The name counters and arrivals use: the kind, or ``http_<status>``."""
        return f"http_{self.status}" if self.kind == "http_error" else self.kind

    @property
    def skips_service(self) -> bool:
        """Whether the fault answers in front of the service, which never sees the request."""
        if self.kind == "drop":
            return not self.processed
        return self.kind in ("http_error", "rate_limit", "jsonrpc_error")

    @classmethod
    def none(cls) -> Fault:
        """Normal service: a placeholder in a script."""
        return cls("none")

    @classmethod
    def latency(cls, seconds: float) -> Fault:
        """Answer normally, ``seconds`` late."""
        if seconds < 0:
            raise ValueError("seconds must be >= 0")
        return cls("latency", seconds=seconds)

    @classmethod
    def http_error(
        cls,
        status: int,
        body: bytes | str | None = None,
        *,
        content_type: str = "text/html",
        retry_after: float | None = None,
    ) -> Fault:
        """An HTTP error from something in front of the service (default body: nginx HTML).

        ``retry_after`` adds an HTTP ``Retry-After`` header.
        """
        if not 400 <= status <= 599:
            raise ValueError("status must be an HTTP error status")
        if body is None:
            body = _HTML.format(status=status, reason=_REASONS.get(status, "Error"))
        raw = body.encode() if isinstance(body, str) else body
        return cls(
            "http_error",
            status=status,
            body=raw,
            content_type=content_type,
            retry_after=retry_after,
        )

    @classmethod
    def http_500(cls) -> Fault:
        """HTTP 500 with an HTML body."""
        return cls.http_error(500)

    @classmethod
    def http_502(cls) -> Fault:
        """HTTP 502 Bad Gateway with an HTML body, as a proxy sends it."""
        return cls.http_error(502)

    @classmethod
    def http_503(cls, retry_after: float | None = None) -> Fault:
        """HTTP 503 Service Unavailable with an HTML body (and ``Retry-After`` if given)."""
        return cls.http_error(503, retry_after=retry_after)

    @classmethod
    def http_504(cls) -> Fault:
        """HTTP 504 Gateway Timeout with an HTML body."""
        return cls.http_error(504)

    @classmethod
    def drop(cls, *, processed: bool = False) -> Fault:
        """Close the connection without answering.

        With ``processed=True`` the request runs first (quota spent, task stored), as when
        an answer is lost on the way back.
        """
        return cls("drop", processed=processed)

    @classmethod
    def truncated(cls) -> Fault:
        """Send half the body under the full ``Content-Length``, then close."""
        return cls("truncated")

    @classmethod
    def malformed(cls, body: bytes | str | None = None) -> Fault:
        """HTTP 200 ``application/json`` with a body that is not JSON (default: half the
        real answer), or with ``body``."""
        raw = body.encode() if isinstance(body, str) else body
        return cls("malformed", body=raw, content_type="application/json")

    @classmethod
    def rate_limit(cls, retry_after: float = 1.0) -> Fault:
        """HTTP 429 / -32003 with ``retryAfter``, whatever the quota says."""
        if retry_after < 0:
            raise ValueError("retry_after must be >= 0")
        return cls("rate_limit", status=429, retry_after=retry_after)

    @classmethod
    def internal_error(cls, message: str = "Internal error") -> Fault:
        """A JSON-RPC -32603 with HTTP 200."""
        return cls("jsonrpc_error", code=-32603, message=message)

    @classmethod
    def jsonrpc_error(cls, code: int, message: str) -> Fault:
        """Any JSON-RPC error with HTTP 200 (or 401/403/429 for those codes)."""
        return cls("jsonrpc_error", code=code, message=message)

    @classmethod
    def task_failed(cls, reason: str = "Simulated skill failure") -> Fault:
        """The skill raises: the task ends ``failed`` with ``reason``."""
        return cls("task_failed", reason=reason)


@dataclass(frozen=True, slots=True)
class _Scripted:
    fault: Fault
    method: str | None
    skill: str | None

    def matches(self, method: str | None, skill: str | None) -> bool:
        if self.fault.kind == "task_failed" and method != "message/send":
            return False
        return (self.method is None or self.method == method) and (
            self.skill is None or self.skill == skill
        )


class FaultInjector:
    """Decides each request's fault: the first matching scripted one, else a random draw.

    Random draws take exactly two numbers per matching request from one ``seed``-ed
    stream, so the n-th matching request always meets the same fault and latency.
    """

    def __init__(self, config: FaultConfig | None = None) -> None:
        self._config = config
        self._random = random.Random(config.seed if config else 0)
        self._script: deque[_Scripted] = deque()
        self._lock = threading.Lock()

    def script(self, *faults: Fault, method: str | None = None, skill: str | None = None) -> None:
        """Queue one-off faults for the next matching requests, in order."""
        for fault in faults:
            if not isinstance(fault, Fault):
                raise TypeError(f"expected a Fault, got {type(fault).__name__}")
        with self._lock:
            self._script.extend(_Scripted(fault, method, skill) for fault in faults)

    @property
    def pending(self) -> int:
        """Scripted faults not yet used."""
        return len(self._script)

    def clear(self) -> None:
        """Drop every scripted fault not yet used."""
        with self._lock:
            self._script.clear()

    def _scripted(self, method: str | None, skill: str | None) -> Fault | None:
        with self._lock:
            for index, entry in enumerate(self._script):
                if entry.matches(method, skill):
                    del self._script[index]
                    return entry.fault
        return None

    def claim(self, method: str) -> Fault | None:
        """The first fault scripted for exactly ``method`` (never an unfiltered one, nor a
        random draw): how the OAuth endpoints meet faults without disturbing the A2A ones."""
        with self._lock:
            for index, entry in enumerate(self._script):
                if entry.method == method:
                    del self._script[index]
                    return entry.fault
        return None

    def decide(self, method: str | None, skill: str | None) -> tuple[Fault | None, float]:
        """The fault for one request (``None``: none) and the random latency to add.

        A scripted ``latency`` or ``none`` fault comes back as is: the caller adds its
        ``seconds`` to the delay.
        """
        fault = self._scripted(method, skill) if self._script else None
        delay = 0.0
        config = self._config
        if config is not None and self._applies(config, method, skill):
            draw, spread = self._random.random(), self._random.random()
            delay = self._latency(config, spread)
            if fault is None:
                fault = self._random_fault(config, draw)
        return fault, delay

    @staticmethod
    def _applies(config: FaultConfig, method: str | None, skill: str | None) -> bool:
        return (config.methods is None or method in config.methods) and (
            config.skills is None or skill in config.skills
        )

    @staticmethod
    def _latency(config: FaultConfig, spread: float) -> float:
        if isinstance(config.latency, tuple):
            low, high = config.latency
            return low + (high - low) * spread
        return config.latency

    @staticmethod
    def _random_fault(config: FaultConfig, draw: float) -> Fault | None:
        low = 0.0
        for name, rate in config.rates():
            if draw < low + rate:
                if name == "error_rate":
                    return Fault.http_502() if draw < low + rate / 2 else Fault.http_503()
                return _BY_RATE[name](config)
            low += rate
        return None


_BY_RATE = {
    "drop_rate": lambda config: Fault.drop(),
    "truncate_rate": lambda config: Fault.truncated(),
    "malformed_rate": lambda config: Fault.malformed(),
    "rate_limit_rate": lambda config: Fault.rate_limit(config.rate_limit_retry_after),
    "internal_error_rate": lambda config: Fault.internal_error(),
    "task_failure_rate": lambda config: Fault.task_failed(),
}
