"""Guard the surface: ``__all__`` is what is documented, and the core stays the core.

The fixed contract is the project's public-API spec (``public-api.md``); :data:`CONTRACT`
and :data:`CONTRACT_METHODS` are the names it documents, checked against the spec itself
wherever it is present (``$MAGISTERIUM_PUBLIC_API``, default ``../shared/spec/`` beside the
checkout). The README and the guide (``docs/*.md``) document the rest. A name exported but
documented in none of them must be listed in :data:`UNDOCUMENTED` with the reason it is
public anyway.
"""

from __future__ import annotations

import ast
import builtins
import functools
import json
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

import magisterium_async
from magisterium_async import AsyncMagisterium

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "magisterium_async"
README = ROOT / "README.md"
SPEC = Path(
    os.environ.get("MAGISTERIUM_PUBLIC_API", ROOT.parent / "shared" / "spec" / "public-api.md")
)

CONTRACT = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "Answer",
        "Artifact",
        "AsyncMagisterium",
        "AuthenticationError",
        "Citation",
        "DataPart",
        "Document",
        "FilePart",
        "InternalServerError",
        "InvalidParamsError",
        "InvalidRequestError",
        "MagisteriumError",
        "Message",
        "MethodNotFoundError",
        "ParseError",
        "PlanRequiredError",
        "RateLimitError",
        "RateLimits",
        "SearchResult",
        "SharedQuota",
        "SkillNotFoundError",
        "StateError",
        "Task",
        "TaskFailedError",
        "TaskNotCancelableError",
        "TaskNotFoundError",
        "TextPart",
    }
)
"""The classes public-api.md names: importable from the package root, always."""

CONTRACT_METHODS = frozenset(
    {
        "aclose",
        "agent_card",
        "ask",
        "cancel_task",
        "fetch",
        "fetch_many",
        "get_task",
        "harvest",
        "list_tasks",
        "mass_readings",
        "saints",
        "search",
        "with_options",
        "search_many",
        "send_message",
    }
)
"""The client methods public-api.md names."""

UNDOCUMENTED: dict[str, str] = {
    "NotSupportedError": "raised by list_tasks where the server has no ListTasks "
    "(docs/protocol-versions.md)",
    "TaskPage": "what client.list_tasks returns (docs/protocol-versions.md)",
    "VersionNotSupportedError": "-32009, A2A 1.0's (docs/protocol-versions.md)",
    "AgentCapabilities": "a field type of AgentCard",
    "AgentCard": "what client.agent_card() returns (Discovery)",
    "AgentInterface": "a field type of AgentCard (docs/protocol-versions.md)",
    "AgentSkill": "a field type of AgentCard",
    "Batch": "what search_many and fetch_many return",
    "BatchItem": "what a Batch yields (.input, .result, .error)",
    "CacheError": "raised at construction for a cache= that cannot be used (docs/caching.md)",
    "CachePolicy": "the value object behind AsyncMagisterium(cache_policy=) (docs/caching.md)",
    "CacheRule": "one skill's row of CachePolicy.rules",
    "CacheStats": "the type of client.cache_stats",
    "ClientClosedError": "raised to calls waiting when the client closes",
    "Clock": "the protocol AsyncMagisterium(clock=) takes",
    "DEFAULT_BASE_URL": "the documented default of base_url",
    "DEFAULT_CACHE_POLICY": "the default of cache_policy",
    "DEFAULT_RETRY_POLICY": "the default of retry_policy",
    "DEFAULT_TIMEOUTS": "the default of timeout",
    "FileContent": "a field type of FilePart",
    "Harvest": "what client.harvest returns (.stats, .failures, .acknowledge)",
    "HarvestFailure": "an item of Harvest.failures",
    "HarvestStats": "the type of Harvest.stats",
    "OutputFileError": "raised by JsonlWriter for an output the harvest did not write",
    "OutputMark": "the type of JsonlWriter.mark and its mark= (what a harvest records)",
    "Part": "the union TextPart | DataPart | FilePart",
    "PoolStats": "the type of client.stats.default and friends",
    "SchedulerStats": "the type of client.stats",
    "TaskState": "the states of Task.status.state",
    "TaskStatus": "the type of Task.status",
    "__version__": "the package version",
    "Acknowledge": 'the literal "auto" | "manual" of client.harvest(acknowledge=)',
    "EventKind": "the type of PoolEvent.kind (what on_event= hears)",
    "HTTPRequest": "what an HTTPTransport is handed",
    "HTTPTransport": "the protocol AsyncMagisterium(transport=) takes",
    "OnError": 'the literal "record" | "raise" of client.harvest(on_error=)',
    "Priority": 'the literal "interactive" | "bulk" of with_options(priority=)',
    "ProtocolVersion": 'the literal "auto" | "0.3" | "1.0" of AsyncMagisterium(protocol=)',
    "TokenCallable": "a callable AsyncMagisterium(token=) takes",
    "TokenSource": "the type of client.token_source",
}
"""Exported, not named in the spec or README, and public on purpose: name → why."""


def _documented_names(text: str) -> set[str]:
    """Identifiers in `code spans` and fenced code blocks (their comments left out)."""
    blocks = [re.sub(r"#.*", "", b) for b in re.findall(r"```\w*\n(.*?)```", text, re.S)]
    spans = blocks + re.findall(r"`([^`\n]+)`", text)
    return {name for span in spans for name in re.findall(r"\b[A-Za-z_]\w*\b", span)}


def _spec() -> str | None:
    return SPEC.read_text(encoding="utf-8") if SPEC.is_file() else None


# Words of the wire the spec writes in code, not Python names: A2A 1.0's methods and the
# ``A2A-Version`` header.
WIRE_WORDS = frozenset({"SendMessage", "GetTask", "CancelTask", "ListTasks", "Version"})

# redis-py's clients, which the spec names as what ``shared_quota=``, ``cache=`` and
# ``credentials=`` take in place of a URL: the application's, not names we export.
REDIS_PY_NAMES = frozenset({"Redis", "RedisCluster", "Sentinel"})


def _spec_types(spec: str) -> set[str]:
    """The classes the spec names: identifiers in code with a capital and a lowercase
    letter (no environment variables), builtins and wire words left out."""
    return {
        name
        for name in _documented_names(spec)
        if re.fullmatch(r"[A-Z]\w*[a-z]\w*", name)
        and name not in dir(builtins)
        and name not in WIRE_WORDS
        and name not in REDIS_PY_NAMES
    }


def test_the_contract_snapshot_is_the_spec() -> None:
    spec = _spec()
    if spec is None:
        pytest.skip(f"the public-API spec is not at {SPEC} (set MAGISTERIUM_PUBLIC_API)")
    assert _spec_types(spec) == CONTRACT
    assert set(re.findall(r"client\.(\w+)\(", spec)) == CONTRACT_METHODS


def test_every_name_the_contract_documents_is_exported() -> None:
    missing = sorted(CONTRACT - set(magisterium_async.__all__))
    assert not missing, f"documented in public-api.md but not in __all__: {missing}"
    for name in CONTRACT:
        assert isinstance(getattr(magisterium_async, name), type), name


def test_every_client_method_the_contract_documents_exists() -> None:
    for method in CONTRACT_METHODS:
        assert callable(getattr(AsyncMagisterium, method)), method


def test_all_is_exact_and_nothing_undocumented_without_intent() -> None:
    exported = magisterium_async.__all__
    assert len(exported) == len(set(exported))
    for name in exported:
        assert hasattr(magisterium_async, name), name
    public = {n for n in vars(magisterium_async) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(magisterium_async, n)).__name__ == "module"}
    assert public - modules <= set(exported)  # no public name left out of __all__
    guide = [README, *sorted((ROOT / "docs").glob("*.md"))]  # the front page and the guide
    written = "".join(page.read_text("utf-8") for page in guide)
    documented = CONTRACT | CONTRACT_METHODS | _documented_names(written)
    undocumented = sorted(set(exported) - documented - set(UNDOCUMENTED))
    assert not undocumented, f"exported but documented nowhere (document or list): {undocumented}"
    stale = sorted(set(UNDOCUMENTED) - set(exported))
    assert not stale, f"listed in UNDOCUMENTED but not exported: {stale}"


def test_every_export_has_a_docstring() -> None:
    for name in magisterium_async.__all__:
        value = getattr(magisterium_async, name)
        # A type alias (TokenCallable) is documented where it is assigned; on Python 3.10
        # a parametrized alias passes for a type.
        if isinstance(value, type) and typing.get_origin(value) is None:
            assert value.__doc__ and value.__doc__.strip(), name


def _is_edge(module: str) -> bool:
    """The command line (``_cli``, ``_cli_*`` or a ``_cli/`` package) or the emulator."""
    top = module.split(".")[:2]
    return (
        top[0] == "magisterium_async"
        and len(top) == 2
        and (top[1] in ("_cli", "testing") or top[1].startswith("_cli_"))
    )


def test_importing_the_package_loads_neither_the_cli_nor_the_emulator() -> None:
    code = (
        "import json, sys, magisterium_async\n"
        "magisterium_async.AsyncMagisterium\n"  # the client, loaded on first use
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('magisterium_async'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = json.loads(out.stdout)
    assert "magisterium_async._client" in loaded
    assert not [m for m in loaded if _is_edge(m)]


def _core_modules() -> list[Path]:
    """Every module but the edges' and ``__main__``, subpackages included."""
    return sorted(
        path
        for path in PACKAGE.rglob("*.py")
        if not _is_edge(".".join(("magisterium_async", *path.relative_to(PACKAGE).parts)))
        and path.name != "__main__.py"
    )


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in it (lazy imports included), absolute."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "magisterium_async." * (node.level > 0) + (node.module or "")
            found.add(base.rstrip("."))
            found.update(f"{base.rstrip('.')}.{alias.name}" for alias in node.names)
    return found


def test_the_core_never_imports_the_cli_or_the_emulator() -> None:
    modules = _core_modules()
    assert PACKAGE / "_client.py" in modules and PACKAGE / "_harvest" / "_harvest.py" in modules
    for path in modules:
        edges = sorted(m for m in _imports(path) if _is_edge(m))
        assert not edges, f"{path.name} imports {edges}"


@functools.cache
def _own_aliases() -> frozenset[str]:
    """The type aliases the package defines at module level (``Name = Literal[...]``)."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign) and "TypeAlias" in ast.unparse(node.annotation):
                targets = [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id[:1].isupper():
                    value = node.value
                    if value is not None and isinstance(value, (ast.Subscript, ast.BinOp)):
                        names.add(target.id)
    return frozenset(names)


def _signature_names(owner: object) -> dict[str, str]:
    """Each package-defined type named in the public signatures of ``owner`` (an
    exported class or module) -> where it is named."""
    import inspect
    import typing

    aliases = _own_aliases()
    found: dict[str, str] = {}
    members = [
        (name, value)
        for name, value in vars(owner).items()
        if not name.startswith("_") or name == "__init__"
    ]
    for name, value in members:
        function = value.fget if isinstance(value, property) else value
        function = getattr(function, "__func__", function)
        if not inspect.isfunction(function):
            continue
        module = sys.modules[function.__module__]
        for annotation in function.__annotations__.values():
            text = annotation if isinstance(annotation, str) else repr(annotation)
            for ident in re.findall(r"\b[A-Z]\w*", text):
                target = getattr(module, ident, None)
                if target is None or isinstance(target, typing.TypeVar):
                    continue
                own_class = isinstance(target, type) and target.__module__.startswith(
                    "magisterium_async"
                )
                if own_class or ident in aliases:
                    found.setdefault(ident, f"{getattr(owner, '__name__', owner)}.{name}")
    return found


MADE_BY_THE_LIBRARY = {"HarvestRun": "Harvest(...) is made by client.harvest(), never by users"}
"""Types named only by constructors users never call: name -> why."""


def test_every_type_a_public_signature_names_is_exported() -> None:
    from magisterium_async import testing, tools

    owners: list[object] = [
        value
        for name in magisterium_async.__all__
        if isinstance(value := getattr(magisterium_async, name), type)
    ]
    named: dict[str, str] = {}
    for owner in [*owners, tools]:
        named.update(_signature_names(owner))
    missing = {
        n: where
        for n, where in named.items()
        if n not in magisterium_async.__all__ and n not in MADE_BY_THE_LIBRARY
    }
    missing = {
        n: w for n, w in missing.items() if not hasattr(testing, n) and not hasattr(tools, n)
    }
    assert not missing, f"named in a public signature but not importable from the root: {missing}"
    assert {"Priority", "TokenSource", "HTTPTransport"} <= set(named)  # the walk sees them
