"""The docs site (docs/, mkdocs.yml) covers what the package exports and what the README says.

CI builds it with ``mkdocs build --strict``; these checks need no mkdocs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import magisterium_async
import magisterium_async.testing
import magisterium_async.tools

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def _pages() -> dict[str, str]:
    return {str(p.relative_to(DOCS)): p.read_text("utf-8") for p in DOCS.rglob("*.md")}


@pytest.mark.parametrize(
    "module",
    [magisterium_async, magisterium_async.testing, magisterium_async.tools],
    ids=lambda m: m.__name__,
)
def test_every_public_name_is_in_the_api_reference(module: object) -> None:
    reference = "".join(text for page, text in _pages().items() if page.startswith("reference"))
    documented = set(re.findall(rf"^::: {re.escape(module.__name__)}\.(\w+)$", reference, re.M))
    missing = sorted(set(module.__all__) - documented)  # type: ignore[attr-defined]
    assert not missing, f"add to docs/reference/*.md: {missing}"


def test_every_readme_section_is_on_a_docs_page() -> None:
    # The pages take the README's sections between its markers, so the two never drift
    # apart; a section without markers, or included nowhere, would be missing from the site.
    readme = README.read_text("utf-8")
    sections = re.findall(r"^## (.+)$", readme, re.M)
    starts = re.findall(r"^<!-- --8<-- \[start:([\w-]+)\] -->$", readme, re.M)
    ends = re.findall(r"^<!-- --8<-- \[end:([\w-]+)\] -->$", readme, re.M)
    assert len(starts) == len(sections) + 1, "each ## section (and the intro) needs markers"
    assert starts == ends
    included = set(re.findall(r'^--8<-- "README\.md:([\w-]+)"$', "".join(_pages().values()), re.M))
    assert set(starts) <= included, sorted(set(starts) - included)


def test_every_page_is_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text("utf-8")
    assert not [page for page in _pages() if f": {page}\n" not in nav]
