"""Docstrings name modules that exist: a ``:mod:`` reference to a module moved or renamed
sends the next reader nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "magisterium_async"
MOD_REF = re.compile(r":mod:`~?([.\w]+)`")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(reference: str, module: str, is_package: bool) -> str:
    """``reference`` as an absolute module name, read from ``module``."""
    if not reference.startswith("."):
        return reference
    dots = len(reference) - len(reference.lstrip("."))
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (dots - 1)]
    rest = reference.lstrip(".")
    return ".".join([*base, rest] if rest else base)


def _exists(name: str) -> bool:
    if not name.startswith("magisterium_async"):
        return True  # another library's module
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _references() -> list[tuple[str, str]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        is_package = path.name == "__init__.py"
        for reference in MOD_REF.findall(path.read_text(encoding="utf-8")):
            found.append((module, _resolve(reference, module, is_package)))
    return found


def test_docstrings_name_modules_at_all() -> None:
    assert len(_references()) > 10  # the pattern still finds what it looks for


@pytest.mark.parametrize(("module", "named"), _references())
def test_every_module_a_docstring_names_exists(module: str, named: str) -> None:
    assert _exists(named), f"{module} names :mod:`{named}`, which does not exist"
