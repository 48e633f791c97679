"""Time one decoder on the fixtures; run as a script under that decoder's python.

Usage: ``python _decode_worker.py DECODER FIXTURES.json SECONDS``. Prints one JSON object:
``{"results": {fixture: {"us": ..., "loops": ...}}}`` (microseconds per decode, the best
of several repeats), or ``{"error": "..."}``.

Standalone on purpose (stdlib at the top, each decoder's imports inside it): the same file
runs in our environment and in the a2a-sdk ones. Every decoder does what its client does
with one ``message/send`` answer: parse the JSON-RPC envelope, validate the Task, and pull
out what the caller wants (the hits; the document's text and metadata; the answer's text,
citations and related questions). Each result is checked before anything is timed.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable
from typing import Any

Decoder = Callable[[str, bytes], Any]


def _magisterium() -> Decoder:
    """This SDK: ``decode_response`` (msgspec, straight to the Task) + ``read_result``."""
    from magisterium_async._http._jsonrpc import decode_response
    from magisterium_async._skills import ASK, FETCH, SEARCH, read_result

    skills: dict[str, Any] = {"search": SEARCH, "document": FETCH, "answer": ASK}

    def decode(skill: str, body: bytes) -> Any:
        task = decode_response("message/send", 1, 200, body)
        return read_result(skills[skill], task)

    return decode


def _magisterium_decode_only() -> Decoder:
    """This SDK's ``decode_response`` alone (envelope and Task), to split the cost."""
    from magisterium_async._http._jsonrpc import decode_response

    def decode(skill: str, body: bytes) -> Any:
        return decode_response("message/send", 1, 200, body)

    return decode


def _extract_pydantic(skill: str, task: Any) -> Any:
    """The a2a-sdk 0.3 Task's parts (``part.root`` is a TextPart or a DataPart) read out."""
    artifact = task.artifacts[0]
    texts = [p.root.text for p in artifact.parts if p.root.kind == "text"]
    datas = [p.root.data for p in artifact.parts if p.root.kind == "data"]
    return _read(skill, texts, datas)


def _read(skill: str, texts: list[str], datas: list[dict[str, Any]]) -> Any:
    merged: dict[str, Any] = {}
    for data in datas:
        merged.update(data)
    if skill == "search":
        return [(str(r["id"]), r["url"], r["title"]) for r in merged["results"]]
    if skill == "document":
        return ("\n".join(texts), merged)
    return ("\n".join(texts), merged.get("citations", []), merged.get("related_questions", []))


def _a2a03_validate() -> Decoder:
    """a2a-sdk 0.3's client: ``response.json()`` then ``SendMessageResponse.model_validate``."""
    from a2a.types import JSONRPCErrorResponse, SendMessageResponse

    def decode(skill: str, body: bytes) -> Any:
        response = SendMessageResponse.model_validate(json.loads(body)).root
        if isinstance(response, JSONRPCErrorResponse):
            raise RuntimeError(response.error)
        return _extract_pydantic(skill, response.result)

    return decode


def _a2a03_validate_json() -> Decoder:
    """pydantic's fastest path: ``SendMessageResponse.model_validate_json`` on the bytes."""
    from a2a.types import JSONRPCErrorResponse, SendMessageResponse

    def decode(skill: str, body: bytes) -> Any:
        response = SendMessageResponse.model_validate_json(body).root
        if isinstance(response, JSONRPCErrorResponse):
            raise RuntimeError(response.error)
        return _extract_pydantic(skill, response.result)

    return decode


def _a2a13_compat() -> Decoder:
    """a2a-sdk 1.3's v0.3 compat client: ``response.json()``, ``JSONRPC20Response``, the
    v0.3 pydantic ``Task``, then ``to_core_task`` (protobuf), as ``CompatJsonRpcTransport``
    does; data parts read back with ``MessageToDict``."""
    from a2a.compat.v0_3 import conversions
    from a2a.compat.v0_3 import types as types_v03
    from google.protobuf.json_format import MessageToDict
    from jsonrpc.jsonrpc2 import JSONRPC20Response

    def decode(skill: str, body: bytes) -> Any:
        response = JSONRPC20Response(**json.loads(body))
        if response.error:
            raise RuntimeError(response.error)
        task = conversions.to_core_task(types_v03.Task.model_validate(response.result))
        artifact = task.artifacts[0]
        texts = [p.text for p in artifact.parts if p.HasField("text")]
        datas = [MessageToDict(p.data) for p in artifact.parts if p.HasField("data")]
        return _read(skill, texts, datas)

    return decode


DECODERS: dict[str, Callable[[], Decoder]] = {
    "magisterium": _magisterium,
    "magisterium_decode_only": _magisterium_decode_only,
    "a2a03_validate": _a2a03_validate,
    "a2a03_validate_json": _a2a03_validate_json,
    "a2a13_compat": _a2a13_compat,
}


def _check(skill: str, result: Any) -> None:
    if type(result).__name__ == "Task":  # decode only: the Task must be the completed one
        if result.status.state != "completed" or not result.artifacts:
            raise RuntimeError(f"unexpected task {result!r:.200}")
    elif skill == "search":
        hits = list(result)
        if not hits or not all(str(getattr(h, "id", None) or h[0]).isdigit() for h in hits):
            raise RuntimeError(f"search decoded to {result!r:.200}")
    elif skill == "document":
        text = getattr(result, "text", None) or result[0]
        if len(text) < 40_000:
            raise RuntimeError(f"document text too short: {len(text)}")
    else:
        citations = getattr(result, "citations", None) or result[1]
        if len(citations) != 3:
            raise RuntimeError(f"answer has {len(citations)} citations, not 3")


def _time(decode: Decoder, skill: str, body: bytes, seconds: float) -> dict[str, float]:
    loops = 1
    while True:  # grow the loop until one repeat takes >= 1/10 of the budget
        started = time.perf_counter()
        for _ in range(loops):
            decode(skill, body)
        elapsed = time.perf_counter() - started
        if elapsed >= seconds / 10 or loops >= 1 << 20:
            break
        loops *= 2
    best = elapsed / loops
    deadline = time.perf_counter() + seconds
    repeats = 1
    while time.perf_counter() < deadline and repeats < 50:
        started = time.perf_counter()
        for _ in range(loops):
            decode(skill, body)
        best = min(best, (time.perf_counter() - started) / loops)
        repeats += 1
    return {"us": best * 1e6, "loops": loops, "repeats": repeats}


def main(argv: list[str]) -> int:
    name, path, seconds = argv[1], argv[2], float(argv[3])
    try:
        decode = DECODERS[name]()
        with open(path, encoding="utf-8") as file:
            fixtures = json.load(file)
        results = {}
        for fixture, entry in fixtures.items():
            skill, body = entry["skill"], entry["body"].encode()
            _check(skill, decode(skill, body))
            gc.collect()
            results[fixture] = _time(decode, skill, body, seconds)
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:500]}))
        return 1
    print(json.dumps({"results": results, "python": sys.version.split()[0]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
