"""Response bodies in the service's real shapes, captured from the emulator over HTTP.

Each fixture is the whole JSON-RPC answer to ``message/send`` (request id 1), as the
emulator sends it: a completed Task with its artifact, and the history of the user's and
the agent's messages.

- ``search_10`` / ``search_50``: ``document_search`` with 10 and 50 results;
- ``document_50kb``: ``document_fetch`` whose text part is ~50 KB (the emulator's document
  text grown to the length of a real encyclical; the rest of the Task as sent);
- ``answer``: ``catholic_qa`` with a text answer, three citations and related questions.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import msgspec

from magisterium_async.testing import Emulator, EmulatorConfig, SyntheticCorpus

__all__ = ["FIXTURES", "build_fixtures", "load_fixtures", "write_fixtures"]

FIXTURES = ("search_10", "search_50", "document_50kb", "answer")
# The skill each fixture answers, for the decoders' result parsing.
SKILL_OF = {
    "search_10": "search",
    "search_50": "search",
    "document_50kb": "document",
    "answer": "answer",
}
_QUERY = " ".join(f"topic{i}" for i in range(12))  # 12 posting lists: more than 50 hits
_DOCUMENT_BYTES = 50 * 1024


def _send(emulator: Emulator, skill: str, part: dict[str, Any]) -> bytes:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "role": "user",
                "kind": "message",
                "messageId": "b7c1e2d4-0f6a-4c1e-9d1e-3a5b7c9d1e2f",
                "parts": [part],
                "metadata": {"skillId": skill},
            }
        },
    }
    request = urllib.request.Request(
        emulator.base_url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {emulator.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return bytes(response.read())


def _grow_document(payload: bytes) -> bytes:
    envelope = msgspec.json.decode(payload)
    parts = envelope["result"]["artifacts"][0]["parts"]
    text_part = next(p for p in parts if p["kind"] == "text")
    paragraph = text_part["text"]
    grown = [paragraph]
    while sum(len(p) + 2 for p in grown) < _DOCUMENT_BYTES:
        grown.append(f"{len(grown)}. {paragraph}")
    text_part["text"] = "\n\n".join(grown)[:_DOCUMENT_BYTES]
    return msgspec.json.encode(envelope)


def _results(payload: bytes) -> int:
    envelope = msgspec.json.decode(payload)
    return len(envelope["result"]["artifacts"][0]["parts"][0]["data"]["results"])


def build_fixtures() -> dict[str, bytes]:
    """Run the emulator (in a thread, on 127.0.0.1) and capture one answer per fixture."""
    corpus = SyntheticCorpus(size=1_000_000, seed=7)
    fixtures: dict[str, bytes] = {}
    for results in (10, 50):
        config = EmulatorConfig(rate_limits=None, corpus=corpus, max_results=results)
        with Emulator(config) as emulator:
            body = _send(emulator, "document_search", {"kind": "text", "text": _QUERY})
            if _results(body) != results:
                raise RuntimeError(f"expected {results} search results, got {_results(body)}")
            fixtures[f"search_{results}"] = body
            if results == 10:
                fetched = _send(
                    emulator, "document_fetch", {"kind": "data", "data": {"id": "100042"}}
                )
                fixtures["document_50kb"] = _grow_document(fetched)
                fixtures["answer"] = _send(
                    emulator, "catholic_qa", {"kind": "text", "text": _QUERY}
                )
    answer = msgspec.json.decode(fixtures["answer"])["result"]["artifacts"][0]["parts"]
    if not any(p["kind"] == "data" and p["data"].get("citations") for p in answer):
        raise RuntimeError("the catholic_qa fixture has no citations")
    return {name: fixtures[name] for name in FIXTURES}


def write_fixtures(path: Path) -> dict[str, bytes]:
    """Build the fixtures and write them to ``path`` for the decode workers."""
    fixtures = build_fixtures()
    document = {
        name: {"skill": SKILL_OF[name], "body": body.decode()} for name, body in fixtures.items()
    }
    path.write_text(json.dumps(document))
    return fixtures


def load_fixtures(path: Path) -> dict[str, tuple[str, bytes]]:
    """``name -> (skill, body)`` from a file :func:`write_fixtures` wrote."""
    raw = json.loads(path.read_text())
    return {name: (entry["skill"], entry["body"].encode()) for name, entry in raw.items()}
