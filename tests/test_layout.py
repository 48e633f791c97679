"""The tests mirror the modules: each private module of the package, of ``_cli`` and of the
rate-limit engine has a test file of its own name, so its tests are found where it is."""

from __future__ import annotations

from pathlib import Path

import magisterium_async

PACKAGE = Path(magisterium_async.__file__).parent
TESTS = Path(__file__).parent

# Each folder of modules, and the folder of its tests.
MIRRORS = {
    PACKAGE: TESTS,
    PACKAGE / "_cli": TESTS / "cli",
    PACKAGE / "_ratelimit": TESTS / "ratelimit",
}

# Constants only: nothing to test on their own (they are read through what uses them).
EXEMPT = {PACKAGE / "_version.py", PACKAGE / "_ratelimit" / "_tuning.py"}


def missing_tests(mirrors: dict[Path, Path], exempt: set[Path]) -> list[str]:
    """The modules ``_x.py`` of ``mirrors``' folders without their ``test_x.py``."""
    missing = []
    for modules, tests in mirrors.items():
        for module in sorted(modules.glob("_*.py")):
            if module.name.startswith("__") or module in exempt:
                continue
            expected = tests / f"test{module.name}"  # _x.py -> test_x.py
            if not expected.is_file():
                module_at = f"{modules.name}/{module.name}"
                missing.append(f"{module_at} has no {tests.name}/{expected.name}")
    return missing


def test_every_module_has_a_test_file_of_its_name() -> None:
    missing = missing_tests(MIRRORS, EXEMPT)
    assert not missing, "tests do not mirror the modules:\n" + "\n".join(missing)


def test_the_folders_and_exemptions_still_exist() -> None:
    # A folder or an exempt module moved away would make the guard pass on nothing.
    assert all(folder.is_dir() for pair in MIRRORS.items() for folder in pair)
    assert all(module.is_file() for module in EXEMPT)


def test_a_module_without_its_test_file_is_named(tmp_path: Path) -> None:
    package, tests = tmp_path / "pkg", tmp_path / "tests"
    package.mkdir()
    tests.mkdir()
    for name in ("__init__.py", "__main__.py", "_done.py", "_lacking.py", "_constants.py"):
        (package / name).write_text("")
    (tests / "test_done.py").write_text("")
    found = missing_tests({package: tests}, {package / "_constants.py"})
    assert len(found) == 1 and "_lacking.py" in found[0] and "test_lacking.py" in found[0]
