"""The docs site (docs/, mkdocs.yml) covers what the package exports; the README is its
front page; its pages fit a 1280-pixel screen and a newcomer's twenty minutes.

CI builds it with ``mkdocs build --strict``; the checks of the built site build it
themselves (and skip without mkdocs), the others need none.
"""

from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

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


# Pages that fit the screen and a reader's time (issue #51) ------------------------------

GUIDE_PAGES = sorted(p for p in DOCS.glob("*.md"))
"""The guide: every page of docs/ but the API reference (built from the docstrings)."""
WIDEST_CODE_LINE = 76
"""Columns of code a page shows whole at 1280 pixels, beside the copy button."""
LONGEST_PAGE = 2_500
"""Words of prose (outside code and tables) one guide page may hold."""
GUIDE_WORDS = 15_500
"""Words of prose the whole guide may hold: about today's (15,000), where it was 17,700
before the guide was cut down to what a reader needs."""


def _expanded(page: Path) -> str:
    """The page as the site shows it: the README's parts it takes put in."""
    readme = README.read_text("utf-8")

    def part(match: re.Match[str]) -> str:
        start, end = f"<!-- --8<-- [start:{match[1]}] -->", f"<!-- --8<-- [end:{match[1]}] -->"
        return readme.split(start, 1)[1].split(end, 1)[0]

    return re.sub(r'^--8<-- "README\.md:([\w-]+)"$', part, page.read_text("utf-8"), flags=re.M)


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"^```\w*\n(.*?)^```", text, re.S | re.M)


def _prose_words(text: str) -> int:
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    lines = [line for line in prose.splitlines() if not line.lstrip().startswith("|")]
    return len(" ".join(lines).split())


def test_every_code_line_of_the_guide_fits_the_page() -> None:
    lines = [
        (page.name, line)
        for page in GUIDE_PAGES
        for block in _code_blocks(_expanded(page))
        for line in block.splitlines()
    ]
    wide = [f"{name}: {line}" for name, line in lines if len(line) > WIDEST_CODE_LINE]
    assert len(lines) > 500  # the pattern still finds the code
    assert not wide, f"wider than {WIDEST_CODE_LINE} columns:\n" + "\n".join(wide)


def test_no_guide_page_takes_long_to_read() -> None:
    words = {page.name: _prose_words(_expanded(page)) for page in GUIDE_PAGES}
    long = {name: n for name, n in words.items() if n > LONGEST_PAGE}
    assert not long, f"over {LONGEST_PAGE} words of prose: {long}"
    assert sum(words.values()) <= GUIDE_WORDS, f"the guide has grown: {words}"


def test_the_common_tasks_come_first() -> None:
    nav = re.findall(r"^\s*- [^:\n]+: ([\w/-]+\.md)$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert nav[:2] == ["index.md", "tasks.md"]


def test_every_common_task_shows_its_example_cost_and_where_to_read_more() -> None:
    tasks = (DOCS / "tasks.md").read_text("utf-8").split("\n## ")[1:]
    assert len(tasks) >= 7
    for task in tasks:
        title = task.splitlines()[0]
        assert re.search(r"^```python\n", task, re.M), f"{title}: no example"
        assert "**At the Pro quota**" in task, f"{title}: no cost at the Pro quota"
        more = task.split("**At the Pro quota**", 1)[1]
        assert re.search(r"More:\s+\[[^]]+\]\([\w-]+\.md(#[\w-]+)?\)", more), f"{title}: no link"


# The pictures: drawn by docs/pictures.py from what the code and the benchmarks do now ----


def _pictures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_pictures", DOCS / "pictures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _drawn_from(svg: str) -> object:
    """The figures a picture carries (its ``dc:description``)."""
    text = (DOCS / "img" / svg).read_text("utf-8")
    return json.loads(html.unescape(re.search(r"<dc:description>(.*?)</", text, re.S)[1]))  # type: ignore[index]


def test_the_quota_picture_shows_what_the_engine_does_now() -> None:
    run = _pictures().quota_run()
    stale = "run `python docs/pictures.py` to draw it again, and say what it shows"
    assert _drawn_from("quota-run.svg") == json.loads(json.dumps(run)), stale
    # What its caption says is what the run did: a pause, a lower rate, the step up.
    caption = (DOCS / "rate-limits.md").read_text("utf-8")
    refused = sum(w["refused"] for w in run["windows"])
    lowest = min(rate for _, rate in run["rates"])
    assert run["pauses"] and run["rates"][-1][1] == 15
    assert f"refused {refused} times" in caption, stale
    assert f"keeps to the {lowest:g} left" in caption and f"tries {lowest + 1:g}" in caption
    assert f"waits {run['person'][1]:.1f} s" in caption, stale


def test_the_benchmark_picture_shows_the_last_results() -> None:
    figures = _pictures().benchmark_figures()
    assert _drawn_from("benchmarks.svg") == json.loads(json.dumps(figures)), (
        "benchmarks/results changed: run `python docs/pictures.py` to draw it again"
    )


# The site as built: every name a link, every signature wrapped ---------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs", reason="the site needs the [docs] extra")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
    )
    # --strict: a link, an anchor or a reference the hook made that leads nowhere fails.
    assert done.returncode == 0, done.stderr
    return out


def _article(page: Path) -> str:
    return page.read_text("utf-8").split("<article", 1)[1].split("</article>", 1)[0]


@pytest.mark.slow
def test_every_signature_is_wrapped_to_fit(site: Path) -> None:
    signatures = [
        html.unescape(re.sub(r"<[^>]+>", "", sig))
        for page in (site / "reference").rglob("index.html")
        for sig in re.findall(
            r'class="doc-signature highlight"><pre>(.*?)</pre>', page.read_text(), re.S
        )
    ]
    assert len(signatures) > 200
    wide = [line for sig in signatures for line in sig.splitlines() if len(line) > WIDEST_CODE_LINE]
    assert not wide, f"signature lines wider than the page: {wide}"


@pytest.mark.slow
def test_every_public_name_in_code_is_a_link(site: Path) -> None:
    names = {
        *magisterium_async.__all__,
        *magisterium_async.testing.__all__,
        *magisterium_async.tools.__all__,
    }
    not_linked = []
    for page in sorted(site.rglob("index.html")):
        if page.parent.name in ("search", "assets"):
            continue
        body = re.sub(r"<(pre|a|h[1-6])\b.*?</\1>", "", _article(page), flags=re.S)
        for code in re.findall(r"<code>([^<]*)</code>", body):
            text = html.unescape(code)
            if re.split(r"[.(\[ ]", text, maxsplit=1)[0] in names or text.startswith("client."):
                not_linked.append(f"{page.parent.relative_to(site)}: {text}")
    assert not not_linked, "named in code but not linked:\n" + "\n".join(not_linked)


@pytest.mark.slow
def test_pages_named_in_code_are_links(site: Path) -> None:
    named = [
        f"{page.parent.relative_to(site)}: {code}"
        for page in site.rglob("index.html")
        for code in re.findall(r"<code>(docs/[\w/-]+\.md[^<]*)</code>", page.read_text("utf-8"))
    ]
    assert not named, named


_OVERFLOW_PROBE = """<script>
addEventListener("load", () => {
  const wide = [...document.querySelectorAll("article pre > code, article table")]
    .filter((el) => el.scrollWidth > el.clientWidth + 1)
    .map((el) => el.textContent.trim().slice(0, 60));
  const out = document.createElement("output");
  out.id = "overflow";
  out.textContent = JSON.stringify(wide);
  document.body.append(out);
});
</script>"""


@pytest.mark.slow
def test_nothing_scrolls_sideways_in_a_browser(site: Path, tmp_path: Path) -> None:
    """Each page as Chromium lays it out at 1280 pixels: no code block and no table
    wider than the column it sits in."""
    chromium = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
    if chromium is None:
        pytest.skip("no headless Chromium here")
    copy = tmp_path / "site"
    shutil.copytree(site, copy)  # with its stylesheets, so that it lays out as served
    wide = {}
    for page in sorted(p for p in copy.rglob("index.html") if p.parent.name != "search"):
        page.write_text(page.read_text("utf-8").replace("</body>", _OVERFLOW_PROBE + "</body>"))
        dom = subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--window-size=1280,1000",
                "--virtual-time-budget=3000",
                "--dump-dom",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        found = re.search(r'<output id="overflow">(.*?)</output>', dom, re.S)
        assert found is not None, f"{page}: the probe did not run"
        if cut := json.loads(html.unescape(found[1])):
            wide[str(page.parent.relative_to(copy))] = cut
    assert not wide, f"wider than the page at 1280 pixels: {wide}"


@pytest.mark.slow
def test_every_method_of_the_client_has_a_reference_entry(site: Path) -> None:
    # Methods made at import time (the lookups, from the skill table) included.
    page = (site / "reference" / "client" / "index.html").read_text("utf-8")
    client = vars(magisterium_async.AsyncMagisterium)
    methods = [name for name, v in client.items() if not name.startswith("_") and callable(v)]
    missing = [m for m in methods if f'id="magisterium_async.AsyncMagisterium.{m}"' not in page]
    assert len(methods) > 20 and not missing, f"not in the reference: {missing}"
