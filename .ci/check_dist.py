"""What PyPI gets: check the built sdist and wheel in DIST (python .ci/check_dist.py DIST).

`twine check --strict` checks that the long description renders; this checks what it does
not: the LICENSE in both, the metadata's classifiers and license, links that work on PyPI,
and extras that keep the linters out of [test].
"""

from __future__ import annotations

import re
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

PYTHONS = ("3.10", "3.11", "3.12", "3.13")


def main(dist: Path) -> list[str]:
    [wheel] = dist.glob("*.whl")
    [sdist] = dist.glob("*.tar.gz")
    problems: list[str] = []
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        licenses = [n for n in names if re.fullmatch(r"[^/]+\.dist-info/licenses/LICENSE", n)]
        if not licenses or b"MIT License" not in archive.read(licenses[0]):
            problems.append(f"{wheel.name}: no MIT LICENSE in .dist-info/licenses/")
        [metadata_name] = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(metadata_name).decode("utf-8"))
    with tarfile.open(sdist) as archive:
        if not any(n.endswith("/LICENSE") and n.count("/") == 1 for n in archive.getnames()):
            problems.append(f"{sdist.name}: no LICENSE at the top")

    classifiers = set(metadata.get_all("Classifier") or [])
    for version in PYTHONS:
        if f"Programming Language :: Python :: {version}" not in classifiers:
            problems.append(f"no classifier for Python {version}")
    if metadata.get("License-Expression") != "MIT":
        problems.append(f"License-Expression is {metadata.get('License-Expression')!r}, not MIT")
    if metadata.get("Requires-Python") != f">={PYTHONS[0]}":
        problems.append(f"Requires-Python is {metadata.get('Requires-Python')!r}")
    for requirement in metadata.get_all("Requires-Dist") or []:
        if re.match(r"(ruff|mypy)\b", requirement) and "extra == 'test'" in requirement:
            problems.append(f"[test] installs a linter: {requirement}")

    description = metadata.get_payload()
    assert isinstance(description, str)
    if "pip install magisterium-async" not in description:
        problems.append("the long description does not say pip install magisterium-async")
    # PyPI has no files beside the description and drops heading ids: only absolute links.
    for link in re.findall(r"\]\(([^)\s]+)\)|src=\"([^\"]+)\"", description):
        target = link[0] or link[1]
        if not re.match(r"https?://", target):
            problems.append(f"the long description links to {target!r}, which breaks on PyPI")
    return problems


if __name__ == "__main__":
    found = main(Path(sys.argv[1]))
    for problem in found:
        print(problem, file=sys.stderr)
    print(f"check_dist: {'FAILED' if found else 'ok'}")
    sys.exit(1 if found else 0)
