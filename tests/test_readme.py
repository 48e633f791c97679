"""Every Python example in README.md runs as written, against the emulator.

Each block runs in a fresh interpreter with ``$MAGISTERIUM_TOKEN`` and
``$MAGISTERIUM_BASE_URL`` pointing at an emulator, so ``AsyncMagisterium()`` works as the
README says. A block that calls ``asyncio.run`` runs as a script; any other runs as a
reader reads it, after the Usage section: it may use top-level ``await`` / ``async with``,
the package's public names, and a ``client`` opened for it. A block defining
``async def test_...`` is a test for the pytest plugin: it runs under pytest with the
README's own ``pyproject.toml`` snippet.

Every block also passes ``mypy --strict`` as written (those in ``UNTYPED`` aside), checked
the same way: a script as it is, any other block as the body of an ``async def`` given the
public names, the ``client`` and the user's own objects the examples name.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from magisterium_async.testing import Emulator, EmulatorConfig

README = Path(__file__).parent.parent / "README.md"

SKIP: dict[str, str] = {}
"""A snippet of a block's code → why that block cannot run here. Empty: every block runs."""

UNTYPED: dict[str, str] = {
    "from openai import": "it needs the openai SDK and its types, which the tests do not install",
}
"""A snippet of a block's code → why mypy cannot check that block here."""

_RUNNER = """
import ast, asyncio, sys

import magisterium_async
from magisterium_async import AsyncMagisterium

source = open(sys.argv[1], encoding="utf-8").read()


async def main():
    async with AsyncMagisterium() as client:
        code = compile(source, sys.argv[2], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        names = {name: getattr(magisterium_async, name) for name in magisterium_async.__all__}
        result = eval(code, {**names, "__name__": "__readme__", "client": client})
        if asyncio.iscoroutine(result):
            await result


if "asyncio.run(" in source:
    exec(compile(source, sys.argv[2], "exec"), {"__name__": "__main__"})
else:
    asyncio.run(main())
"""

# What a user's own code would be in the plugin example.
_USER_CODE = """
async def my_code_that_fetches(client):
    return await client.fetch("10234")

"""


@dataclass(frozen=True)
class Block:
    line: int
    language: str
    code: str


def blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    return [
        Block(text[: m.start()].count("\n") + 1, m.group(1), m.group(2))
        for m in re.finditer(r"```(\w+)\n(.*?)```", text, re.S)
    ]


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


def test_the_readme_has_examples() -> None:
    assert len(PYTHON) >= 5
    assert not [snippet for snippet in SKIP if not any(snippet in b.code for b in PYTHON)]


@pytest.mark.parametrize("block", PYTHON, ids=[f"line{b.line}" for b in PYTHON])
async def test_readme_example_runs(block: Block, emulator: Emulator, tmp_path: Path) -> None:
    for snippet, reason in SKIP.items():
        if snippet in block.code:
            pytest.skip(reason)
    env = {
        **os.environ,
        "MAGISTERIUM_TOKEN": emulator.token,
        "MAGISTERIUM_BASE_URL": emulator.base_url,
    }
    if "async def test_" in block.code:
        await check_plugin_example(block, tmp_path, env)
        return
    (tmp_path / "queries.txt").write_text("grace and nature\n\nthe Eucharist\n", encoding="utf-8")
    (tmp_path / "runner.py").write_text(_RUNNER, encoding="utf-8")
    (tmp_path / "example.py").write_text(block.code, encoding="utf-8")
    where = f"README.md, block at line {block.line}"
    code, out = await run(sys.executable, "runner.py", "example.py", where, cwd=tmp_path, env=env)
    assert code == 0, f"README.md line {block.line} failed:\n{out}"
    assert "Traceback" not in out
    if "client.harvest(" in block.code:
        # The harvest must get the queries too (a generator reused would leave it none).
        [yielded] = re.findall(r"HarvestStats\(.*yielded=(\d+)", out)
        assert int(yielded) > 0, out


async def check_plugin_example(block: Block, tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "test_example.py").write_text(_USER_CODE + block.code, encoding="utf-8")
    argv = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_example.py")
    # As the README says: without asyncio_mode (or a marker) the async test does not run.
    code, out = await run(*argv, cwd=tmp_path, env=env)
    assert code != 0 and "1 passed" not in out, out
    [toml] = [b.code for b in blocks() if b.language == "toml" and "asyncio_mode" in b.code]
    (tmp_path / "pyproject.toml").write_text(toml, encoding="utf-8")
    code, out = await run(*argv, cwd=tmp_path, env=env)
    assert code == 0 and "1 passed" in out, out


# What a reader's block may use besides the public names, typed: the user's own objects
# the examples name, and the ``client`` the runner opens.
_TYPED_PRELUDE = """
from __future__ import annotations

import logging

from magisterium_async import *  # noqa: F403
from magisterium_async import AsyncMagisterium, Document

log = logging.getLogger("app")


class _Vault:
    def current_token(self) -> str:
        return "t"


my_vault = _Vault()


async def my_code_that_fetches(client: AsyncMagisterium) -> Document | None:
    return await client.fetch("10234")


async def _readme_example(client: AsyncMagisterium) -> None:
"""


def typed_module(block: Block) -> tuple[str, int]:
    """The block as mypy sees it, and the number of lines put before it.

    A script as it is; a test after the prelude; any other block inside its function.
    """
    if "asyncio.run(" in block.code:
        return block.code, 0
    if "async def test_" in block.code:
        prelude = _TYPED_PRELUDE + "    pass\n\n\n"
        return prelude + block.code, prelude.count("\n")
    return _TYPED_PRELUDE + textwrap.indent(block.code, "    "), _TYPED_PRELUDE.count("\n")


@pytest.mark.slow
def test_every_readme_example_passes_mypy_strict(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy comes with the [dev] extra")
    files = []
    starts: dict[str, int] = {}  # module → the README line of its first line
    assert not [snippet for snippet in UNTYPED if not any(snippet in b.code for b in PYTHON)]
    for block in PYTHON:
        if any(snippet in block.code for snippet in UNTYPED):
            continue
        path = tmp_path / f"readme_line{block.line}.py"
        code, before = typed_module(block)
        path.write_text(code, encoding="utf-8")
        files.append(path.name)
        starts[path.name] = block.line + 1 - before
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
        return f"README.md:{starts[match.group(1)] + int(match.group(2)) - 1}"

    lines = [
        re.sub(r"^(readme_line\d+\.py):(\d+)", located, line) for line in done.stdout.splitlines()
    ]
    assert done.returncode == 0, "\n".join(lines) or done.stderr
