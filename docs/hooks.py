"""mkdocs hooks: every name a page or a docstring gives in code is a link to where it is
explained, and the site does not build where one cannot be.

- A code span that names a public object (`RateLimits`, `RateLimits.pro()`,
  `client.search_many(...)`, `harvest.acknowledge(ids)`, `tools.call_tool`, a docstring's
  ``:class:`Task` `` or ``:meth:`aclose` ``) links to its entry in the API reference,
  through mkdocs-autorefs: a name the reference does not render fails the strict build.
- A code span that names a docs page (`docs/caching.md`, as the README and the
  docstrings do, since PyPI shows no files beside them) links to that page, by its title.
- The build refuses to run without a formatter for signatures (Ruff or Black):
  mkdocstrings would leave every signature on one line wider than the page.
- :class:`ClientLookups` (a Griffe extension, named in mkdocs.yml) renders the client's
  lookups, made from the skill table, as the methods they are.
"""

from __future__ import annotations

import bisect
import html
import importlib.util
import logging
import re
from functools import cache
from pathlib import Path
from typing import Any

import griffe

ROOT = Path(__file__).parent.parent
PACKAGE = "magisterium_async"
log = logging.getLogger("mkdocs.hooks.links")

# What a variable in the docs' examples holds, so that `client.stats` links to
# AsyncMagisterium.stats and `harvest.acknowledge(ids)` to Harvest.acknowledge.
VARIABLES = {
    "client": "AsyncMagisterium",
    "view": "AsyncMagisterium",
    "harvest": "Harvest",
    "emu": "testing.Emulator",
    "emulator": "testing.Emulator",
    "clock": "testing.VirtualClock",
    "transport": "testing.MockTransport",
    "writer": "JsonlWriter",
    "quota": "Quota",
    "tools": "tools",
}

MODULE_PAGES = {
    f"{PACKAGE}.tools": "reference/tools.md",
    f"{PACKAGE}.testing": "reference/testing.md",
}
"""Modules the reference gives a page of their own rather than an entry."""

_CODE = re.compile(
    r"(?P<role>:(?:class|meth|func|attr|data|exc|mod|obj):)?<code>(?P<text>[^<]*)</code>"
)
_SKIP_OPEN = re.compile(r"<(pre|a|h[1-6]|autoref)\b[^>]*>|</(pre|a|h[1-6]|autoref)>")
_HEADING_ID = re.compile(rf'<h\d id="({PACKAGE}\.[\w.]+)" class="doc doc-heading"')
_CALL = re.compile(r"(?P<name>~?[A-Za-z_][\w.]*)(?:\(.*\))?", re.S)
_PAGE = re.compile(r"docs/(?P<page>[\w/-]+\.md)(?P<anchor>#[\w-]+)?")


def on_config(config: Any) -> Any:
    if not any(importlib.util.find_spec(name) for name in ("ruff", "black")):
        raise SystemExit(
            "the API reference needs Ruff or Black to wrap its signatures "
            "(pip install -e '.[docs]' brings Ruff): without one, each stays on one line"
        )
    return config


class ClientLookups(griffe.Extension):
    """The client's lookups are made from the skill table (``saint_lookup =
    _lookup("saint_lookup")``), which Griffe reads as attributes without a docstring: each
    is rendered as the async method it is, with the docstring it has at run time."""

    def on_class_members(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        if cls.path != f"{PACKAGE}._client.AsyncMagisterium":
            return
        import magisterium_async

        made = [
            n for n, m in cls.members.items() if str(getattr(m, "value", "")).startswith("_lookup(")
        ]
        for name in made:
            member = cls.members[name]
            plain = griffe.ParameterKind.positional_or_keyword
            method = griffe.Function(
                name,
                lineno=member.lineno,
                endlineno=member.endlineno,
                parameters=griffe.Parameters(
                    griffe.Parameter("self", kind=plain),
                    griffe.Parameter("query", annotation="str", kind=plain),
                ),
                returns=griffe.ExprName("Lookup", parent=cls),
            )
            doc = getattr(magisterium_async.AsyncMagisterium, name).__doc__
            method.docstring = griffe.Docstring(doc, parent=method, parser=griffe.Parser.google)
            method.labels.add("async")
            cls.set_member(name, method)


@cache
def _reference() -> dict[str, set[str]]:
    """Every object the API reference renders (``::: X`` in docs/reference/), each with
    the members it renders: public, with a docstring, not inherited."""
    package = griffe.load(
        PACKAGE,
        search_paths=[str(ROOT)],
        allow_inspection=False,
        extensions=griffe.load_extensions(ClientLookups),
    )
    rendered: dict[str, set[str]] = {}
    for page in sorted((ROOT / "docs" / "reference").glob("*.md")):
        for path in re.findall(r"^::: ([\w.]+)$", page.read_text("utf-8"), re.M):
            obj = package[path.removeprefix(f"{PACKAGE}.")] if path != PACKAGE else package
            members = set()
            if obj.is_class:
                for name, member in obj.members.items():
                    if not name.startswith("_") and member.has_docstrings:
                        members.add(name)
            rendered[path] = members
    return rendered


@cache
def _short_names() -> dict[str, str]:
    """``RateLimits`` -> ``magisterium_async.RateLimits``; ``testing.Emulator`` and
    ``magisterium_async.testing.Emulator`` too."""
    names = {}
    for path in _reference():
        rest = path.removeprefix(f"{PACKAGE}.")
        names[path] = names[rest] = path
        if rest.startswith(("testing.", "tools.")):
            names[rest.split(".", 1)[1]] = path
    for module in MODULE_PAGES:
        names[module] = names[module.removeprefix(f"{PACKAGE}.")] = module
    return names


def resolve(text: str, context: str | None = None, role: bool = False) -> tuple[str, str] | None:
    """The reference identifier ``text`` names, and the text to show; ``None`` when it
    names nothing the reference renders. ``context``: the class whose docstring it is in
    (a docstring's ``:meth:`aclose` `` is its own class's); ``role``: it came with one."""
    match = _CALL.fullmatch(text.strip())
    if match is None:
        return None
    name, shown = match.group("name"), text
    if name.startswith("~"):  # Sphinx's way to show the last part alone
        name = name[1:]
        shown = name.rsplit(".", 1)[-1]
    reference, short = _reference(), _short_names()
    parts = name.removeprefix(f"{PACKAGE}.").split(".")
    via_variable = len(parts) > 1 and parts[0] in VARIABLES and parts[0] not in short
    if via_variable:
        parts = [*VARIABLES[parts[0]].split("."), *parts[1:]]
    # The longest head that names a rendered object, then one of its members.
    for cut in range(len(parts), 0, -1):
        head = ".".join(parts[:cut])
        if head in short:
            found, rest = short[head], parts[cut:]
            break
    else:
        # A bare method name: with a role, a member of the class whose docstring it is
        # in; written as a call (`search_many(...)`), the client's.
        owner = context if role else f"{PACKAGE}.AsyncMagisterium"
        called = role or "(" in text
        if len(parts) == 1 and called and parts[0] in reference.get(owner or "", ()):
            return f"{owner}.{parts[0]}", shown
        return None
    if found not in reference and found not in MODULE_PAGES:
        return None
    if rest and rest[0] in reference.get(found, ()):
        return f"{found}.{rest[0]}", shown  # a member; what follows it stays with it
    if rest and via_variable:
        return None  # `client.nothing`: not a member the reference renders
    return found, shown


def _link_page(path: str, anchor: str, shown: str | None, page: Any, files: Any) -> str | None:
    """A link to the docs page at ``path`` (under docs/), showing its title unless
    ``shown`` is given; ``None``, and a warning that fails the strict build, if none is."""
    target = files.get_file_from_path(path)
    if target is None:
        log.warning("%s names docs/%s, which is not a page", page.file.src_uri, path)
        return None
    url = target.url_relative_to(page.file) + anchor
    if shown is None:
        shown = target.page.title if target.page is not None and target.page.title else path
        return f'<a href="{url}">{html.escape(shown)}</a>'
    return f'<a href="{url}"><code>{html.escape(shown)}</code></a>'


def on_page_content(html_text: str, page: Any, files: Any, **kwargs: Any) -> str:
    contexts = [(m.start(), m.group(1)) for m in _HEADING_ID.finditer(html_text)]
    starts = [start for start, _ in contexts]
    # Where links cannot go: inside a code block, a link, a heading or an autoref.
    closed_spans: list[tuple[int, int]] = []
    depth, opened = 0, 0
    for tag in _SKIP_OPEN.finditer(html_text):
        if tag.group(1):
            depth += 1
            if depth == 1:
                opened = tag.start()
        elif depth:
            depth -= 1
            if depth == 0:
                closed_spans.append((opened, tag.end()))
    span_starts = [start for start, _ in closed_spans]

    def inside_skipped(at: int) -> bool:
        i = bisect.bisect_right(span_starts, at) - 1
        return i >= 0 and closed_spans[i][0] <= at < closed_spans[i][1]

    def link(match: re.Match[str]) -> str:
        role, raw = match.group("role"), match.group("text")
        text = html.unescape(raw)
        code = f"<code>{raw}</code>"
        if inside_skipped(match.start()):
            return code if role else match.group(0)
        if page_match := _PAGE.fullmatch(text):
            anchor = page_match.group("anchor") or ""
            return _link_page(page_match.group("page"), anchor, None, page, files) or code
        if role == ":mod:":
            return code
        i = bisect.bisect_right(starts, match.start()) - 1
        context = contexts[i][1] if i >= 0 else None
        # The class a member's docstring is in: a method's context is its class.
        if context is not None and context not in _reference():
            context = context.rsplit(".", 1)[0]
        found = resolve(text, context, role=role is not None)
        if found is None:
            if role and text.startswith("~"):
                return f"<code>{html.escape(text[1:].rsplit('.', 1)[-1])}</code>"
            return code
        identifier, shown = found
        if identifier in MODULE_PAGES:
            return _link_page(MODULE_PAGES[identifier], "", shown, page, files) or code
        return f'<autoref identifier="{identifier}"><code>{html.escape(shown)}</code></autoref>'

    return _CODE.sub(link, html_text)
