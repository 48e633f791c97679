"""Typed models: the A2A wire objects and the results of the skills.

Wire objects are msgspec structs, snake_case in Python and camelCase on the wire. Decoding
ignores fields it does not know, so a server that adds fields breaks nothing. Parts are a
tagged union on ``kind``.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import msgspec

MAX_DEPTH = 64
"""How deep a free-form JSON value (``data``, ``metadata``, ``error.data``) may nest.

The service's answers nest a few levels; deeper ones are refused as malformed, so no code
that later walks a value (``repr``, encoding it again) can hit Python's recursion limit."""

MAX_ANSWER_DEPTH = 256
"""How deep any answer may nest, anywhere in it: fields the client ignores included.

Checked on the bytes before decoding, so the bound is the same on every interpreter
(3.12 changed how deep a C decoder may recurse) and far below what any of them follows.
Far above the contract's own nesting too: a Task's free-form values start a few levels
in and stop at :data:`MAX_DEPTH`."""


class _Wire(msgspec.Struct, rename="camel", omit_defaults=True):
    """Base of the wire structs: camelCase on the wire, defaults left out when encoding."""


class TextPart(_Wire, tag_field="kind", tag="text"):
    """A part holding text: ``{"kind": "text", "text": ...}``."""

    text: str
    metadata: dict[str, Any] | None = None


class DataPart(_Wire, tag_field="kind", tag="data"):
    """A part holding structured data: ``{"kind": "data", "data": {...}}``.

    Values are kept as JSON gave them; some A2A servers send integers as floats.
    """

    data: dict[str, Any]
    metadata: dict[str, Any] | None = None


class FileContent(_Wire):
    """The file inside a :class:`FilePart`: inline ``bytes`` (base64) or a ``uri``."""

    name: str | None = None
    mime_type: str | None = None
    bytes: str | None = None
    uri: str | None = None


class FilePart(_Wire, tag_field="kind", tag="file"):
    """A part holding a file, as A2A defines it."""

    file: FileContent
    metadata: dict[str, Any] | None = None


Part = TextPart | DataPart | FilePart
"""One part of a message or an artifact."""


class Message(_Wire, tag_field="kind", tag="message"):
    """One message of a conversation: the user's request or the agent's reply."""

    role: str
    parts: list[Part]
    message_id: str
    context_id: str | None = None
    task_id: str | None = None
    metadata: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        """The text parts joined by newlines."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))


class TaskState:
    """The task states A2A defines, as plain strings (``task.status.state``)."""

    SUBMITTED = "submitted"
    WORKING = "working"
    INPUT_REQUIRED = "input-required"
    COMPLETED = "completed"
    CANCELED = "canceled"
    FAILED = "failed"
    REJECTED = "rejected"
    AUTH_REQUIRED = "auth-required"
    UNKNOWN = "unknown"


class TaskStatus(_Wire):
    """Where a task stands; ``message`` explains a failure."""

    state: str
    message: Message | None = None
    timestamp: str | None = None


class Artifact(_Wire):
    """A result a task produced: a skill-specific ``name`` and one or more parts."""

    artifact_id: str
    parts: list[Part]
    name: str | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None


class Task(_Wire, tag_field="kind", tag="task"):
    """A task as the service returned it, ``failed`` included."""

    id: str
    context_id: str
    status: TaskStatus
    artifacts: list[Artifact] = msgspec.field(default_factory=list)
    history: list[Message] = msgspec.field(default_factory=list)
    metadata: dict[str, Any] | None = None

    @property
    def state(self) -> str:
        """Shortcut for ``status.state``."""
        return self.status.state

    @property
    def failure_reason(self) -> str:
        """The text of ``status.message``, or a stand-in when the service gave none."""
        reason = self.status.message.text if self.status.message is not None else ""
        return reason or f"task ended in state {self.status.state!r} without a reason"

    def artifact(self, name: str) -> Artifact | None:
        """The first artifact called ``name``, or ``None``."""
        return next((a for a in self.artifacts if a.name == name), None)


TASK_DECODER = msgspec.json.Decoder(Task)
"""A :class:`Task`'s decoder, made once: a transport's answer, a cached one."""


class TaskPage(msgspec.Struct, frozen=True, kw_only=True):
    """One page of :meth:`AsyncMagisterium.list_tasks`: the tasks (newest first, as the
    server orders them), and ``next_page_token`` to ask for the next page (``None`` on the
    last). ``page_size`` and ``total_size`` are the server's, when it gave them."""

    tasks: list[Task]
    next_page_token: str | None = None
    page_size: int | None = None
    total_size: int | None = None


# The skills' results are frozen structs: plain values, JSON-ready (``msgspec.json.encode``,
# ``msgspec.to_builtins``) and hashable. ``extra`` holds the service's free-form JSON, which
# cannot be hashed, so the hash leaves it out: equal results still hash equal.


class Citation(msgspec.Struct, frozen=True, kw_only=True):
    """One source behind an :class:`Answer`, with the fields the service's chat API names.

    Every field may be missing; any other key the service sends is kept in ``extra``.
    Hashable (``extra`` aside), so citations can be deduplicated in a set.
    """

    cited_text: str | None = None
    cited_text_heading: str | None = None
    document_title: str | None = None
    document_index: int | None = None
    document_author: str | None = None
    document_year: int | str | None = None
    document_reference: str | None = None
    source_url: str | None = None
    extra: dict[str, Any] = msgspec.field(default_factory=dict)

    def __hash__(self) -> int:
        return hash(msgspec.structs.astuple(self)[:-1])  # every field but extra


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`AsyncMagisterium.ask` returns.

    Not hashable: it holds the :class:`Task` it came from, which is mutable.
    """

    text: str
    citations: list[Citation]
    related_questions: list[str]
    context_id: str
    task: Task


class SearchResult(msgspec.Struct, frozen=True, kw_only=True):
    """One hit of :meth:`AsyncMagisterium.search`; other keys the service sends are in ``extra``.

    Hashable by its ``id``, so hits of several searches can be collected in a set.
    """

    id: str
    url: str
    title: str
    extra: dict[str, Any] = msgspec.field(default_factory=dict)

    def __hash__(self) -> int:
        return hash(self.id)


class Document(msgspec.Struct, frozen=True, kw_only=True):
    """A document's content and metadata, from :meth:`AsyncMagisterium.fetch`.

    Hashable by its ``id``.
    """

    id: str
    title: str | None
    author: str | None
    ref: str | None
    text: str
    extra: dict[str, Any] = msgspec.field(default_factory=dict)

    def __hash__(self) -> int:
        return hash(self.id)


class Lookup(msgspec.Struct, frozen=True, kw_only=True):
    """What the lookups return (:meth:`AsyncMagisterium.saint_lookup`, ``person_lookup``,
    ``pope_lookup``, ``diocese_lookup``, ``diocese_statistics_lookup``): what the service
    sent, read into nothing, since it states neither the names nor the shapes of their
    artifacts.

    ``text`` is every text part of every artifact, joined by newlines (``""`` when there is
    none); ``data`` is every data part's object, in order (``[]`` when there is none); the
    whole :class:`Task` is in ``task``. A name the service does not know is answered in
    its own words (a text part, no data), not as an error. Not hashable: it holds its
    :class:`Task`, which is mutable.
    """

    text: str
    data: list[dict[str, Any]]
    task: Task


class AgentSkill(_Wire):
    """One skill listed on the agent card."""

    id: str
    name: str | None = None
    description: str | None = None
    tags: list[str] = msgspec.field(default_factory=list)
    examples: list[str] = msgspec.field(default_factory=list)


class AgentCapabilities(_Wire):
    """What the agent supports beyond plain request/response (``extended_agent_card``:
    A2A 1.0's; ``state_transition_history``: 0.3's)."""

    streaming: bool | None = None
    push_notifications: bool | None = None
    state_transition_history: bool | None = None
    extended_agent_card: bool | None = None


class AgentInterface(_Wire):
    """One endpoint an agent card names: A2A 1.0's ``supportedInterfaces`` entries
    (``url``, ``protocol_binding``, ``protocol_version``, ``tenant``) and 0.3's
    ``additionalInterfaces`` entries (``url``, ``transport``) alike."""

    url: str | None = None
    protocol_binding: str | None = None
    protocol_version: str | None = None
    tenant: str | None = None
    transport: str | None = None


class AgentCard(_Wire):
    """An A2A agent card, in A2A 0.2.6/0.3's shape (``url``, ``protocol_version``,
    ``preferred_transport``) or 1.0's (``supported_interfaces``)."""

    name: str
    description: str | None = None
    url: str | None = None
    version: str | None = None
    protocol_version: str | None = None
    capabilities: AgentCapabilities | None = None
    default_input_modes: list[str] = msgspec.field(default_factory=list)
    default_output_modes: list[str] = msgspec.field(default_factory=list)
    skills: list[AgentSkill] = msgspec.field(default_factory=list)
    supported_interfaces: list[AgentInterface] = msgspec.field(default_factory=list)
    preferred_transport: str | None = None
    additional_interfaces: list[AgentInterface] = msgspec.field(default_factory=list)


def deeper_than(value: object, limit: int) -> bool:
    """Whether the JSON ``value`` nests lists and objects more than ``limit`` levels deep,
    read from its encoding as :func:`json_deeper_than` reads an answer's bytes."""
    try:
        return json_deeper_than(msgspec.json.encode(value), limit)
    except RecursionError:  # deeper than the encoder follows: far past any limit here
        return True


def task_deeper_than(task: Task, limit: int) -> bool:
    """Whether any free-form value inside ``task`` nests more than ``limit`` levels deep."""
    holders: list[Message | Artifact] = [*task.history, *task.artifacts]
    if task.status.message is not None:
        holders.append(task.status.message)
    values: list[object] = [task.metadata]
    for holder in holders:
        values.append(holder.metadata)
        for part in holder.parts:
            values.append(part.metadata)
            if isinstance(part, DataPart):
                values.append(part.data)
    return deeper_than(values, limit + 1)  # the list of them is one level more


# A JSON string, escapes included; its brackets are text, not nesting.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# Each bracket's step in depth, indexed by its byte.
_STEP = tuple(1 if b in b"[{" else -1 for b in range(256))


def opening_brackets(text: bytes) -> int:
    """How many ``[`` and ``{`` bytes ``text`` holds: no value nests deeper than that."""
    return text.count(b"[") + text.count(b"{")


def json_deeper_than(text: bytes, limit: int) -> bool:
    """Whether the JSON ``text`` nests lists and objects more than ``limit`` levels anywhere.

    Read from the bytes, without decoding: unknown fields count too, nothing recurses, and
    the answer does not depend on the interpreter. Text that is not JSON may be judged
    either way; decoding it fails anyway.
    """
    if opening_brackets(text) <= limit:
        return False  # most answers: too few brackets to nest that deep
    only = _STRING.sub(b"", text).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_STEP.__getitem__, only)), default=0) > limit
