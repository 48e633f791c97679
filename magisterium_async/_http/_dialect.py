"""The two JSON-RPC dialects of A2A the client speaks, and which one an agent card offers.

A :class:`Dialect` is a small value: A2A 0.3's (the service's today: ``message/send``,
``kind``-tagged parts, ``"completed"``) or 1.0's (``SendMessage``, parts by field,
``TASK_STATE_COMPLETED``, the ``A2A-Version: 1.0`` header on every request), with the
endpoint and tenant an agent card named for it. It turns the client's operations (named
by their 0.3 methods: ``message/send``, ``tasks/get``, ``tasks/cancel``, and
``tasks/list`` for 1.0's ``ListTasks``) into the dialect's method and params, and its
results back into the client's models (see :mod:`._v1`).
The transport speaks whichever it is handed.

:func:`offered` reads which dialect an agent card offers (either card shape); which one
a client speaks is the negotiation's (see :mod:`._card`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from magisterium_async._config import PROTOCOLS, ProtocolVersion
from magisterium_async._events import OnEvent, log_event, notice
from magisterium_async._http import _v1
from magisterium_async._http._base import check_base_url
from magisterium_async._models import AgentCard, AgentInterface, Task, TaskPage

__all__ = [
    "PROTOCOLS",
    "V03",
    "V10",
    "Dialect",
    "ProtocolVersion",
    "offered",
]


_METHODS_V1 = {
    "message/send": "SendMessage",
    "tasks/get": "GetTask",
    "tasks/cancel": "CancelTask",
    "tasks/list": "ListTasks",
}


@dataclass(frozen=True)
class Dialect:
    """One A2A JSON-RPC dialect, as spoken to one endpoint.

    - ``version``: ``"0.3"`` (also the service's 0.2.6: the same JSON-RPC) or ``"1.0"``;
    - ``url``: the endpoint the agent card named for it (``None``: the client's
      ``base_url``);
    - ``tenant``: the tenant the card's 1.0 interface names, sent in every request's
      params;
    - ``extensions``: URIs of A2A extensions asked for, sent as ``A2A-Extensions`` (1.0)
      or ``X-A2A-Extensions`` (0.3).
    """

    version: Literal["0.3", "1.0"]
    url: str | None = None
    tenant: str | None = None
    extensions: tuple[str, ...] = ()
    headers: Mapping[str, str] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        headers: dict[str, str] = {}
        if self.version == "1.0":
            headers["A2A-Version"] = "1.0"
        if self.extensions:
            name = "A2A-Extensions" if self.version == "1.0" else "X-A2A-Extensions"
            headers[name] = ", ".join(self.extensions)
        object.__setattr__(self, "headers", headers)

    @property
    def offers_list(self) -> bool:
        """Whether ``tasks/list`` (1.0's ``ListTasks``) exists in this dialect."""
        return self.version == "1.0"

    def method(self, operation: str) -> str:
        """The dialect's name of ``operation`` (named by its 0.3 method)."""
        if self.version == "0.3":
            return operation
        return _METHODS_V1.get(operation, operation)

    def params(self, operation: str, params: Any) -> Any:
        """``params`` as the dialect sends them: as built for 0.3, translated for 1.0."""
        if self.version == "0.3":
            return params
        message = getattr(params, "message", None)
        out: dict[str, Any] = (
            {"message": _v1.message_json(message)} if message is not None else dict(params)
        )
        if self.tenant:
            out["tenant"] = self.tenant
        return out

    def decode(self, operation: str, raw: bytes) -> Task | TaskPage:
        """A 1.0 result of ``operation`` (:class:`_v1.ResultError` when it is not one)."""
        if operation == "message/send":
            return _v1.decode_send(raw)
        if operation == "tasks/list":
            return _v1.decode_page(raw)
        return _v1.decode_task(raw)

    def with_extensions(self, extensions: Sequence[str]) -> Dialect:
        """This dialect asking for ``extensions``."""
        return Dialect(self.version, self.url, self.tenant, tuple(extensions))


V03 = Dialect("0.3")
V10 = Dialect("1.0")


def _major(version: str | None) -> int | None:
    head = (version or "").strip().split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _is_jsonrpc(interface: AgentInterface) -> bool:
    binding = interface.protocol_binding or interface.transport or ""
    return binding.upper() == "JSONRPC"


def _same_origin(url: str, base_url: str) -> bool:
    a, b = urlsplit(url), urlsplit(base_url)
    return (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)


def _endpoint(url: str | None, base_url: str, emit: OnEvent) -> str | None:
    """The card's endpoint if the client may send the token there (the base URL's origin,
    over https or to loopback), else ``None`` (keep the base URL)."""
    if not url or url.rstrip("/") == base_url.rstrip("/"):
        return None
    try:
        url = check_base_url(url)
    except (TypeError, ValueError) as exc:
        emit(notice("warning", "transport", f"agent card: endpoint {url} not used: {exc}"))
        return None
    if not _same_origin(url, base_url):
        # The card is public and unauthenticated: never let it send the token elsewhere.
        said = f"agent card: endpoint {url} is on another origin than {base_url}; not used"
        emit(notice("warning", "transport", said))
        return None
    return url


def offered(card: AgentCard, base_url: str, emit: OnEvent = log_event) -> Dialect:
    """The dialect ``card`` offers: A2A 1.0 where it names a 1.0 JSON-RPC interface
    (``supportedInterfaces``; or a top-level ``protocolVersion`` of 1.x), with that
    interface's URL when it is on ``base_url``'s origin (an endpoint not used is told to
    ``emit``); else 0.3 (the 0.2.6 and 0.3 cards, and any card that says nothing)."""
    ones = [
        i for i in card.supported_interfaces if _is_jsonrpc(i) and _major(i.protocol_version) == 1
    ]
    ones.sort(key=lambda i: (i.protocol_version or "").strip() not in ("1.0", "1.0.0"))
    if ones:
        chosen = ones[0]
        return Dialect("1.0", _endpoint(chosen.url, base_url, emit), chosen.tenant or None)
    if not card.supported_interfaces and _major(card.protocol_version) == 1:
        return Dialect("1.0", _endpoint(card.url, base_url, emit))
    return V03
