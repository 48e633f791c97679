"""The docs site (docs/, mkdocs.yml) covers what the package exports; the README is its front page.

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


def test_the_readme_is_a_front_page() -> None:
    readme = README.read_text("utf-8")
    assert len(readme.splitlines()) <= 300
    # Its first lines' two commands: the main job offline, then the tests.
    first = readme.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert "magisterium-async harvest --emulator" in first[0]
    assert "python -m pytest" in first[1]
    # Each docs page it names exists (named, not linked: PyPI has no files beside it).
    linked = re.findall(r"`(docs/[\w/-]+\.md)`", readme)
    assert linked and not [link for link in linked if not (ROOT / link).is_file()]


def test_every_readme_part_a_page_takes_exists_and_is_taken() -> None:
    # The getting-started page takes the README's intro, install and quick start between
    # its markers, so the two never drift apart; a marker taken nowhere, or a page taking
    # one that is gone, would leave a hole in the site.
    readme = README.read_text("utf-8")
    starts = re.findall(r"^<!-- --8<-- \[start:([\w-]+)\] -->$", readme, re.M)
    ends = re.findall(r"^<!-- --8<-- \[end:([\w-]+)\] -->$", readme, re.M)
    assert starts == ends
    included = re.findall(r'^--8<-- "README\.md:([\w-]+)"$', "".join(_pages().values()), re.M)
    assert sorted(set(starts)) == sorted(set(included))


def test_every_page_is_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text("utf-8")
    assert not [page for page in _pages() if f": {page}\n" not in nav]
