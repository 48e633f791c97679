"""A skill's usual answer, decoded straight into its result in one pass.

The long way (:func:`~._transport.decode_response`, then :func:`~._skills.read_result`)
decodes any answer into a :class:`Task`, every value a Python dict or list, and then reads
the result out of it with checks written in Python: for a search, that reading costs about
as much as the decoding. A skill whose answers have one usual shape names a struct for it
here, and the transport decodes the whole answer into that struct, msgspec checking every
value on the way. Whatever the struct refuses (another state, another part, a hit with a
key it does not know, a value of another type) goes the long way, unchanged: so the short
way only ever yields what the long way would have, which ``tests/test_usual.py`` checks
answer by generated answer.

The structs mirror the :mod:`._models` ones field for field (same names, types, defaults
and tags), narrowing only where the usual answer is narrower.
"""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, Protocol, TypeVar

import msgspec

from magisterium_async._models import (
    MAX_DEPTH,
    Message,
    SearchResult,
    TaskState,
    TaskStatus,
    _Wire,
    json_deeper_than,
    opening_brackets,
)
from magisterium_async._telemetry import Answered

__all__ = ["SearchAnswer", "Usual", "decode_usual"]

Out = TypeVar("Out", covariant=True)
U = TypeVar("U")


class Usual(Answered, Protocol[Out]):
    """A task in a skill's usual shape: what a span records of it, and the result."""

    def result(self) -> Out:
        """The skill's result, as :func:`~._skills.read_result` would have read it."""
        ...


class _Hit(msgspec.Struct, forbid_unknown_fields=True):
    """A hit exactly as the service sends it: any other key goes the long way (to ``extra``)."""

    id: Annotated[str, msgspec.Meta(min_length=1)]
    url: str
    title: str


class _Hits(msgspec.Struct):
    results: list[_Hit]


class _HitsPart(_Wire):
    # A field, not a tag: msgspec lets a lone tagged struct's tag be missing, and the long
    # way's union of parts refuses a part without its kind.
    kind: Literal["data"]
    data: _Hits
    metadata: dict[str, Any] | None = None


class _HitsArtifact(_Wire):
    artifact_id: str
    parts: list[_HitsPart]
    name: str | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None


_SEARCH_ARTIFACT = "search_results"


class SearchAnswer(_Wire, tag_field="kind", tag="task"):
    """A completed ``document_search`` task whose every artifact holds only hits.

    The first ``search_results`` artifact's first part holds the results, as
    :func:`~._artifacts.parse_search` reads them.
    """

    id: str
    context_id: str
    status: TaskStatus
    artifacts: list[_HitsArtifact] = msgspec.field(default_factory=list)
    history: list[Message] = msgspec.field(default_factory=list)
    metadata: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        # Raised inside decoding, this is a ValidationError: the answer goes the long way.
        if self.status.state != TaskState.COMPLETED or self._hits() is None:
            raise ValueError("not a search's usual answer")

    @property
    def state(self) -> str:
        """Shortcut for ``status.state``."""
        return self.status.state

    def _hits(self) -> list[_Hit] | None:
        for artifact in self.artifacts:
            if artifact.name == _SEARCH_ARTIFACT:
                return artifact.parts[0].data.results if artifact.parts else None
        return None

    def result(self) -> list[SearchResult]:
        """The hits, as :class:`SearchResult` (none has ``extra``: the shape has no room)."""
        hits = self._hits()
        assert hits is not None  # checked when decoded
        return [SearchResult(id=h.id, url=h.url, title=h.title) for h in hits]


class _Envelope(msgspec.Struct, Generic[U], forbid_unknown_fields=True):
    """A strict JSON-RPC 2.0 result: no ``error`` beside it, nothing else."""

    jsonrpc: Literal["2.0"]
    id: int
    result: U


_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {}
_REFUSED = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


def decode_usual(shape: type[U], request_id: int, payload: bytes) -> U | None:
    """The result of ``payload`` (an HTTP 200's body) if it is a strict JSON-RPC answer to
    ``request_id`` in ``shape``; ``None`` for anything else, which goes the long way."""
    brackets = opening_brackets(payload)
    # The long way refuses a free-form value nested deeper than MAX_DEPTH: an answer
    # that nests no deeper anywhere holds none.
    if brackets > MAX_DEPTH and json_deeper_than(payload, MAX_DEPTH, brackets):
        return None
    decoder = _DECODERS.get(shape)
    if decoder is None:
        decoder = _DECODERS[shape] = msgspec.json.Decoder(_Envelope[shape])  # type: ignore[valid-type]
    try:
        envelope: _Envelope[U] = decoder.decode(payload)
    except _REFUSED:
        return None
    return envelope.result if envelope.id == request_id else None
