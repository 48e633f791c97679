"""Every Python example of the README and of the docs pages runs as written, offline.

Each block runs in a fresh interpreter, as a user would run it after the quick start's
``export``: ``$MAGISTERIUM_BASE_URL``, ``$MAGISTERIUM_TOKEN`` and ``$MAGISTERIUM_QUOTA``
point at an emulator, so ``AsyncMagisterium()`` works as written; a block that shares a
quota through Redis (``SharedQuota()``) finds a private ``redis-server`` in
``$MAGISTERIUM_REDIS_URL``, as a deployment would name its own. A block is a whole
program: a script (``asyncio.run(main())``, never a top-level ``await``), or a test module
(``async def test_...``) that runs under pytest with the docs' own ``pyproject.toml``
snippet. The tool-loop example gets a stand-in ``openai`` package
(``tests/helpers/fake_openai``) playing the model.

Every block also passes ``mypy --strict`` as written (those in ``UNTYPED`` aside).
"""

from __future__ import annotations

import ast
import asyncio
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from magisterium_async.testing import Emulator, EmulatorConfig

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FAKE_OPENAI = Path(__file__).parent / "helpers" / "fake_openai"

UNTYPED: dict[str, str] = {
    "from openai import": "it needs the openai SDK and its types, which the tests do not install",
}
"""A snippet of a block's code → why mypy cannot check that block here."""


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def needs_redis(self) -> bool:
        return "SharedQuota()" in self.code

    @property
    def is_test(self) -> bool:
        return re.search(r"^(async )?def test_", self.code, re.M) is not None


def blocks() -> list[Block]:
    found = []
    for path in PAGES:
        text = path.read_text(encoding="utf-8")
        page = str(path.relative_to(ROOT))
        for m in re.finditer(r"^```(\w+)\n(.*?)^```", text, re.S | re.M):
            found.append(Block(page, text[: m.start()].count("\n") + 1, m.group(1), m.group(2)))
    return found


PYTHON = [b for b in blocks() if b.language == "python"]


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    async with Emulator(EmulatorConfig(rate_limits=None, max_results=2)) as emu:
        yield emu


async def run(*argv: str, cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    # The limit only turns a hung example into a failure.
    out, _ = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace")


def test_the_pages_have_examples() -> None:
    pages = {block.page for block in PYTHON}
    assert "README.md" in pages and len(pages) >= 8
    assert not [snippet for snippet in UNTYPED if not any(snippet in b.code for b in PYTHON)]


@pytest.mark.parametrize("block", PYTHON, ids=[b.where for b in PYTHON])
async def test_example_runs_as_written(
    block: Block, emulator: Emulator, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    env = {
        **os.environ,
        "MAGISTERIUM_TOKEN": emulator.token,
        "MAGISTERIUM_BASE_URL": emulator.base_url,
        "MAGISTERIUM_QUOTA": "unlimited",
        "PYTHONPATH": os.pathsep.join(
            [str(FAKE_OPENAI), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
    }
    if block.needs_redis:
        env["MAGISTERIUM_REDIS_URL"] = request.getfixturevalue("redis_server").url
    if block.is_test:
        await check_test_module(block, tmp_path, env)
        return
    try:
        ast.parse(block.code)
    except SyntaxError as exc:
        pytest.fail(
            f"{block.where} is not a whole program ({exc.msg}, its line {exc.lineno}): "
            "wrap the awaits in `async def main()` and end with `asyncio.run(main())`"
        )
    (tmp_path / "example.py").write_text(block.code, encoding="utf-8")
    code, out = await run(sys.executable, "example.py", cwd=tmp_path, env=env)
    assert code == 0, f"{block.where} failed:\n{out}"
    assert "Traceback" not in out, out
    if "client.harvest(" in block.code:
        # The harvest must get the queries too (a generator reused would leave it none).
        [yielded] = re.findall(r"HarvestStats\(.*yielded=(\d+)", out)
        assert int(yielded) > 0, out
    if "from openai import" in block.code:
        assert "grace is a gift" in out, out  # the model got the tool's results


async def check_test_module(block: Block, tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "test_example.py").write_text(block.code, encoding="utf-8")
    argv = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_example.py")
    tests = len(re.findall(r"^(?:async )?def test_", block.code, re.M))
    if "magisterium_client" in block.code:
        # As the testing page says: without asyncio_mode (or a marker) the test does not run.
        code, out = await run(*argv, cwd=tmp_path, env=env)
        assert code != 0 and "passed" not in out, out
    [toml] = [b.code for b in blocks() if b.language == "toml" and "asyncio_mode" in b.code]
    (tmp_path / "pyproject.toml").write_text(toml, encoding="utf-8")
    code, out = await run(*argv, cwd=tmp_path, env=env)
    assert code == 0 and f"{tests} passed" in out, f"{block.where}:\n{out}"


@pytest.mark.slow
def test_every_example_passes_mypy_strict(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy comes with the [dev] extra")
    files: dict[str, Block] = {}
    for i, block in enumerate(PYTHON):
        if any(snippet in block.code for snippet in UNTYPED):
            continue
        name = f"example{i}.py"
        (tmp_path / name).write_text(block.code, encoding="utf-8")
        files[name] = block
    # One run over all the blocks, each its own module; its own cache, so that parallel
    # runs never share one.
    argv = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache")]
    done = subprocess.run(
        [*argv, "--no-error-summary", *files],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )

    def located(match: re.Match[str]) -> str:
        block = files[match.group(1)]
        return f"{block.page}:{block.line + int(match.group(2))}"

    lines = [re.sub(r"^(example\d+\.py):(\d+)", located, line) for line in done.stdout.splitlines()]
    assert done.returncode == 0, "\n".join(lines) or done.stderr
