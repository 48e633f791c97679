"""No test module imports another: what tests share lives in conftest.py or a helper module.

Importing a test module runs its module-level code and drags its fixtures and tests
along, so a test file is a leaf: shared constants, builders and servers go in
``tests/helpers/`` (or a helper module next to the tests, such as
``tests/interop/js_common.py``), and fixtures in ``conftest.py``. Every Python file under
``tests/`` is read with :mod:`ast`, imports inside functions included.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(TESTS.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


FILES = {_module_name(path): path for path in sorted(TESTS.rglob("*.py"))}
TEST_MODULES = {name for name, path in FILES.items() if path.name.startswith("test_")}


def imported_modules(module: str, source: str, *, is_package: bool = False) -> set[str]:
    """The absolute names of the modules (and of the names' modules) ``source`` imports.

    Arguments:
        module: the dotted name of the module ``source`` is, to resolve relative imports.
        source: its Python source.
        is_package: whether it is a package's ``__init__`` (relative imports start there).
    """
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:
                parts = module.split(".")
                parts = parts if is_package else parts[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            names.add(base)
            # from tests.auth import test_credentials: the submodule itself
            names |= {f"{base}.{alias.name}" for alias in node.names}
    return names


def imports_between_test_modules() -> list[str]:
    """Each ``file: module`` where a file under tests/ imports a test module."""
    found = []
    for module, path in FILES.items():
        source = path.read_text(encoding="utf-8")
        is_package = path.name == "__init__.py"
        for target in sorted(imported_modules(module, source, is_package=is_package)):
            if target in TEST_MODULES and target != module:
                found.append(f"{path.relative_to(TESTS.parent)}: {target}")
    return found


def test_no_test_module_imports_another() -> None:
    found = imports_between_test_modules()
    assert not found, "move what these share to tests/helpers/ or conftest.py: " + ", ".join(found)


def test_relative_absolute_and_submodule_imports_are_all_seen() -> None:
    seen = imported_modules(
        "tests.cli.test_app",
        "from .test_client import a\n"
        "from ..auth.test_store import b\n"
        "from tests.auth import test_credentials\n"
        "def f():\n"
        "    import tests.http.test_jsonrpc\n",
    )
    expected = {
        "tests.cli.test_client",
        "tests.auth.test_store",
        "tests.auth.test_credentials",
        "tests.http.test_jsonrpc",
    }
    assert expected <= seen & TEST_MODULES
    # conftest and helper modules may be imported from anywhere
    assert not imported_modules("tests.cli.test_app", "from tests.conftest import TOKEN\n") & (
        TEST_MODULES
    )
