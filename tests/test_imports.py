"""Every module of the package imports, and no two modules import each other in a circle.

The graph is read from the source (each module's ``import`` statements, wherever they are
in the module, deferred ones included), so a circle hidden behind an import inside a
function is found too. Only imports between the package's own modules count; a package's
``__init__`` importing its submodules is an edge like any other, while the parent package
Python imports first is not (every module would then be in a circle with its package).
Imports under ``if TYPE_CHECKING:`` count too: they do not run, but a type that points up
is a dependency that points up.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import magisterium_async

ROOT = Path(magisterium_async.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module: top level, deferred, under ``TYPE_CHECKING``."""
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def _resolve(module: str, node: ast.ImportFrom) -> str:
    """The absolute name ``from <...> import`` names, seen from ``module``."""
    if node.level == 0:
        return node.module or ""
    is_package = MODULES[module].name == "__init__.py"
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The package's modules one import statement of ``module`` loads."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in MODULES}
    source = _resolve(module, node)
    targets = set()
    for alias in node.names:
        submodule = f"{source}.{alias.name}"
        if submodule in MODULES:  # from . import _oauth: the submodule itself
            targets.add(submodule)
        elif source in MODULES:
            targets.add(source)
    return targets - {module}


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (for type checking included)."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph[module] = set()
        for node in _imports(tree):
            graph[module] |= _targets(module, node)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports (its first module repeated at the end), or ``None``."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(module: str) -> list[str] | None:
        path.append(module)
        on_path.add(module)
        for target in sorted(graph.get(module, ())):
            if target in on_path:
                return [*path[path.index(target) :], target]
            if target not in done and (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        on_path.discard(module)
        done.add(module)
        return None

    for module in sorted(graph):
        if module not in done and (cycle := visit(module)) is not None:
            return cycle
    return None


def test_no_module_imports_itself_through_others() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_graph_sees_relative_deferred_and_submodule_imports() -> None:
    graph = import_graph()
    assert "magisterium_async._config" in graph["magisterium_async._client"]
    assert "magisterium_async._auth._oauth" in graph["magisterium_async._auth._login"]
    assert "magisterium_async._client" in graph["magisterium_async._cli._client"]  # ..
    # deferred, inside a function:
    assert "magisterium_async.testing" in graph["magisterium_async._cli._emulator"]
    # for type checking only:
    assert "magisterium_async._models" in graph["magisterium_async._errors"]


def test_a_circle_is_found_and_shown() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize(
    "module", [name for name in sorted(MODULES) if not name.endswith(".__main__")]
)
def test_every_module_imports(module: str) -> None:
    # __main__ is left out: importing it runs the command line.
    assert importlib.import_module(module).__name__ == module


@pytest.mark.parametrize(
    "code",
    [
        "import magisterium_async",
        "from magisterium_async import RateLimits, Task, MagisteriumError",
        "from magisterium_async._cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass",
        "from magisterium_async._cli import main\n"
        "try:\n    main(['search', '--no-such-option'])\nexcept SystemExit:\n    pass",
    ],
    ids=["the root", "a model and the errors", "--help", "a usage error"],
)
def test_what_needs_no_network_does_not_import_the_network_stack(code: str) -> None:
    # ``magisterium-async --help`` answers at once: aiohttp (a third of a second to import)
    # loads when a command runs, and a program importing a model does not pay for it.
    import subprocess
    import sys

    probe = f"{code}\nimport sys\nprint('aiohttp' in sys.modules)"
    run = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert run.stdout.strip().splitlines()[-1] == "False", run.stdout


def test_every_root_name_is_importable_as_the_type_checker_reads_it() -> None:
    # The root loads names on first use, from the first of its modules that holds each.
    for name in magisterium_async.__all__:
        assert getattr(magisterium_async, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        magisterium_async.Nothing  # noqa: B018
